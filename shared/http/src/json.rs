//! The JSON shapes the API returns. Each derives its OpenAPI schema (`ToSchema`) next to its
//! serde derive, so the document (`api::openapi`) describes what is serialised.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use imgest_core::domain::{BlobKey, ImageRecord, ImageState, ThumbHash};
use imgest_crawl::messages::ReportedDuplicate;
use imgest_flows::offers::OfferPhotos;

/// One resized copy of a photo, in its variant's format.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({"url": "https://cdn.example.com/public/3b/3b5d5c3712955042212316173ccf37be/1a2b3c4d/thumb.jpg", "width": 320, "height": 240, "format": "jpeg"}))]
pub struct VariantJson {
    /// Where the file is served (public, immutable: cache it forever).
    pub url: String,
    pub width: u32,
    pub height: u32,
    /// The file's format (`IMGEST_VARIANTS` says each variant's).
    #[schema(value_type = String, example = "jpeg")]
    pub format: &'static str,
}

/// An image: its id, its size and format once processed, and its variants by name.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ImageJson {
    #[schema(
        pattern = "^[0-9a-f]{32}$",
        example = "3b5d5c3712955042212316173ccf37be"
    )]
    pub image_id: String,
    /// On an upload: whether the same bytes were uploaded before (nothing was processed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deduplicated: Option<bool>,
    /// 0 while the image is still being processed.
    pub width: u32,
    /// 0 while the image is still being processed.
    pub height: u32,
    /// The original's format; `unknown` while the image is still being processed.
    #[schema(value_type = String, example = "jpeg")]
    pub format: &'static str,
    /// By variant name (empty while the image is still being processed).
    pub variants: BTreeMap<String, VariantJson>,
    /// The photo's placeholder: a ThumbHash in base64, to paint (blurred, at the photo's
    /// aspect ratio) before a variant loads. Absent while the image is being processed, and on
    /// images stored before placeholders were made until a backfill adds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "3OcRJYB4d3h/iIeHeEh3eIhw+j2w")]
    pub thumbhash: Option<String>,
    /// How many offers link the image (on `GET /v1/images/{id}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offers: Option<u32>,
    /// On the upload of a new photo with `IMGEST_SIMILAR=report`: its near-duplicates that
    /// other clients' offers link, nearest first (for a moderation step; ids and distances
    /// only). Empty when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub near_duplicates: Option<Vec<ReportedDuplicate>>,
}

/// One photo of an offer, in the offer's order.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PhotoJson {
    #[schema(pattern = "^[0-9a-f]{32}$")]
    pub image_id: String,
    pub variants: BTreeMap<String, VariantJson>,
    /// The photo's placeholder (see [`ImageJson`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thumbhash: Option<String>,
}

/// An offer's photos.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OfferJson {
    #[schema(example = "car-1")]
    pub offer_id: String,
    pub photos: Vec<PhotoJson>,
}

/// Builds public file URLs from blob keys.
#[derive(Debug, Clone)]
pub struct FileUrls {
    base: String,
}

impl FileUrls {
    /// `base` is the URL that keys are appended to: the local runner's `{url}/files`, or on AWS
    /// the CDN in front of the bucket.
    pub fn new(base: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
        }
    }

    pub fn url(&self, key: &BlobKey) -> String {
        format!("{}/{}", self.base, key)
    }

    pub fn variants(&self, record: &ImageRecord) -> BTreeMap<String, VariantJson> {
        match &record.state {
            ImageState::Ready { variants, .. } => variants
                .iter()
                .map(|v| {
                    let key = BlobKey::variant(&record.id, &record.generation, &v.name, v.format);
                    (
                        v.name.to_string(),
                        VariantJson {
                            url: self.url(&key),
                            width: v.width,
                            height: v.height,
                            format: v.format.as_str(),
                        },
                    )
                })
                .collect(),
            ImageState::Processing { .. } => BTreeMap::new(),
        }
    }

    pub fn image(
        &self,
        record: &ImageRecord,
        deduplicated: Option<bool>,
        offers: Option<u32>,
    ) -> ImageJson {
        let (width, height, format) = match &record.state {
            ImageState::Ready {
                width,
                height,
                format,
                ..
            } => (*width, *height, format.as_str()),
            ImageState::Processing { .. } => (0, 0, "unknown"),
        };
        ImageJson {
            image_id: record.id.to_string(),
            deduplicated,
            width,
            height,
            format,
            variants: self.variants(record),
            thumbhash: record.thumbhash().map(ThumbHash::to_base64),
            offers,
            near_duplicates: None,
        }
    }

    pub fn offer(&self, offer: &OfferPhotos) -> OfferJson {
        OfferJson {
            offer_id: offer.offer_id.to_string(),
            photos: offer
                .photos
                .iter()
                .map(|r| PhotoJson {
                    image_id: r.id.to_string(),
                    variants: self.variants(r),
                    thumbhash: r.thumbhash().map(ThumbHash::to_base64),
                })
                .collect(),
        }
    }
}
