//! The image record: one per distinct content, however many offers link it.

use serde::{Deserialize, Serialize};

use super::{Generation, ImageId, Timestamp, VariantName};

/// The format detected from the original bytes (never from a Content-Type or a file name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceFormat {
    Jpeg,
    Png,
    Webp,
    Gif,
}

impl SourceFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Jpeg => "jpeg",
            Self::Png => "png",
            Self::Webp => "webp",
            Self::Gif => "gif",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "jpeg" => Some(Self::Jpeg),
            "png" => Some(Self::Png),
            "webp" => Some(Self::Webp),
            "gif" => Some(Self::Gif),
            _ => None,
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            Self::Jpeg => "image/jpeg",
            Self::Png => "image/png",
            Self::Webp => "image/webp",
            Self::Gif => "image/gif",
        }
    }
}

/// One stored rendition of an image (always JPEG).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredVariant {
    pub name: VariantName,
    pub width: u32,
    pub height: u32,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ImageState {
    /// Claimed by an uploader that is decoding and writing files; nobody else processes these
    /// bytes until the claim completes or expires (a crashed worker's claim is taken over).
    Processing { claim_expires_at: Timestamp },
    /// Files are written; the record may be linked and served.
    Ready {
        format: SourceFormat,
        /// Width and height after EXIF orientation.
        width: u32,
        height: u32,
        original_bytes: u64,
        variants: Vec<StoredVariant>,
    },
}

/// An image record. Invariant: a `Ready` record's files all exist (files are written before the
/// record becomes ready, and the record is deleted before its files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    pub id: ImageId,
    pub generation: Generation,
    pub state: ImageState,
    pub created_at: Timestamp,
    /// Refreshed by every use: upload, re-upload, link, unlink.
    pub last_update: Timestamp,
    /// How many offers link this image.
    pub link_count: u32,
    /// When an unlinked image may be garbage-collected (`None` while any offer links it).
    pub expires_at: Option<Timestamp>,
}

impl ImageRecord {
    pub fn is_ready(&self) -> bool {
        matches!(self.state, ImageState::Ready { .. })
    }

    /// Expired records may still be present (DynamoDB deletes them lazily); reads treat them
    /// as gone.
    pub fn is_expired(&self, now: Timestamp) -> bool {
        match (&self.state, self.expires_at) {
            (ImageState::Processing { claim_expires_at }, _) => *claim_expires_at <= now,
            (ImageState::Ready { .. }, Some(t)) => self.link_count == 0 && t <= now,
            (ImageState::Ready { .. }, None) => false,
        }
    }

    /// Ready and not expired: what the API may serve and offers may link.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.is_ready() && !self.is_expired(now)
    }
}
