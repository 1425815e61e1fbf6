//! The JSON shapes the API returns.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::{BlobKey, ImageRecord, ImageState};
use crate::flows::offers::OfferPhotos;

#[derive(Debug, Clone, Serialize)]
pub struct VariantJson {
    pub url: String,
    pub width: u32,
    pub height: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImageJson {
    pub image_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deduplicated: Option<bool>,
    pub width: u32,
    pub height: u32,
    pub format: &'static str,
    pub variants: BTreeMap<String, VariantJson>,
    /// How many offers link the image (on `GET /v1/images/{id}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offers: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhotoJson {
    pub image_id: String,
    pub variants: BTreeMap<String, VariantJson>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OfferJson {
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
                    let key = BlobKey::variant(&record.id, &record.generation, &v.name);
                    (
                        v.name.to_string(),
                        VariantJson {
                            url: self.url(&key),
                            width: v.width,
                            height: v.height,
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
            offers,
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
                })
                .collect(),
        }
    }
}
