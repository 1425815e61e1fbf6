//! The image record: one per distinct content, however many offers link it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    BlobKey, ContentHash, Generation, ImageId, OriginalMetadata, OutputFormat, Signature,
    ThumbHash, Timestamp, VariantName, VariantSetVersion,
};

/// The format detected from the original bytes (never from a Content-Type or a file name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceFormat {
    Jpeg,
    Png,
    Webp,
    Gif,
    Avif,
}

impl SourceFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Jpeg => "jpeg",
            Self::Png => "png",
            Self::Webp => "webp",
            Self::Gif => "gif",
            Self::Avif => "avif",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "jpeg" => Some(Self::Jpeg),
            "png" => Some(Self::Png),
            "webp" => Some(Self::Webp),
            "gif" => Some(Self::Gif),
            "avif" => Some(Self::Avif),
            _ => None,
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            Self::Jpeg => "image/jpeg",
            Self::Png => "image/png",
            Self::Webp => "image/webp",
            Self::Gif => "image/gif",
            Self::Avif => "image/avif",
        }
    }
}

/// One stored rendition of an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredVariant {
    pub name: VariantName,
    pub width: u32,
    pub height: u32,
    pub bytes: u64,
    /// Not written for JPEG (records written before variants had formats are JPEG).
    #[serde(default, skip_serializing_if = "OutputFormat::is_jpeg")]
    pub format: OutputFormat,
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
        /// The variant set the files were made with (`None`: written before versions were
        /// recorded). Reads serve the variants listed, whatever the version.
        variant_set: Option<VariantSetVersion>,
        /// SHA-256 of the original bytes, checked on every dedup hit (`None`: written before
        /// it was recorded; the first hit adopts it from the original).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<ContentHash>,
        /// What the stored original kept of the photo's metadata (`None`: stored as sent,
        /// before originals were stripped).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        original_metadata: Option<OriginalMetadata>,
        /// The photo's placeholder, made from its smallest variant's pixels (`None`: made
        /// before placeholders were; a backfill adds it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thumbhash: Option<ThumbHash>,
        /// The photo's perceptual signature, for near-duplicates (`None`: made before
        /// signatures were, a backfill adds it; or no variant to make it of).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<Box<Signature>>,
    },
}

/// The files of the generation a re-processed record replaced: kept for readers that still
/// hold their URLs (a page rendered a moment ago, a CDN) until `kept_until`, then swept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviousFiles {
    pub generation: Generation,
    pub kept_until: Timestamp,
}

/// An image record. Invariant: a `Ready` record's files all exist (files are written before the
/// record becomes ready, and the record is deleted before its files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    pub id: ImageId,
    pub generation: Generation,
    pub state: ImageState,
    pub created_at: Timestamp,
    /// Refreshed by every use: upload, re-upload (at most once per [`refresh_granularity`]),
    /// link, unlink.
    pub last_update: Timestamp,
    /// How many offers link this image.
    pub link_count: u32,
    /// When an unlinked image may be garbage-collected (`None` while any offer links it).
    pub expires_at: Option<Timestamp>,
    /// The generation this one replaced, while its files are still kept.
    pub previous: Option<PreviousFiles>,
}

impl ImageRecord {
    /// The keys of every file a ready record owns: its generation's original and the variants
    /// it lists (a claim: the original only; it may have written any subset of its files).
    pub fn file_keys(&self) -> Vec<BlobKey> {
        let mut keys = vec![BlobKey::original(&self.id, &self.generation)];
        if let ImageState::Ready { variants, .. } = &self.state {
            keys.extend(
                variants
                    .iter()
                    .map(|v| BlobKey::variant(&self.id, &self.generation, &v.name, v.format)),
            );
        }
        keys
    }

    /// The variant set version of a ready record's files.
    pub fn variant_set(&self) -> Option<&VariantSetVersion> {
        match &self.state {
            ImageState::Ready { variant_set, .. } => variant_set.as_ref(),
            ImageState::Processing { .. } => None,
        }
    }

    /// The SHA-256 of the original, if recorded.
    pub fn sha256(&self) -> Option<&ContentHash> {
        match &self.state {
            ImageState::Ready { sha256, .. } => sha256.as_ref(),
            ImageState::Processing { .. } => None,
        }
    }

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

    /// A ready record's placeholder (`None`: made before placeholders were, or not ready).
    pub fn thumbhash(&self) -> Option<&ThumbHash> {
        match &self.state {
            ImageState::Ready { thumbhash, .. } => thumbhash.as_ref(),
            ImageState::Processing { .. } => None,
        }
    }

    /// A ready record's perceptual signature (`None`: made before signatures were, or not
    /// ready).
    pub fn signature(&self) -> Option<&Signature> {
        match &self.state {
            ImageState::Ready { signature, .. } => signature.as_deref(),
            ImageState::Processing { .. } => None,
        }
    }

    /// What a ready record's stored original kept of the photo's metadata (`None`: stored as
    /// sent, or not ready).
    pub fn original_metadata(&self) -> Option<OriginalMetadata> {
        match &self.state {
            ImageState::Ready {
                original_metadata, ..
            } => *original_metadata,
            ImageState::Processing { .. } => None,
        }
    }

    /// Ready and not expired: what the API may serve and offers may link.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.is_ready() && !self.is_expired(now)
    }

    /// Ready, and refreshed less than [`refresh_granularity`] before `now`: a re-upload now
    /// would move its `last_update` and orphan expiry by less than that, so it is not written
    /// again. Such a record cannot expire for almost a whole `orphan_ttl`.
    pub fn is_freshly_refreshed(&self, now: Timestamp, orphan_ttl: Duration) -> bool {
        let granularity = refresh_granularity(orphan_ttl);
        let expiry_holds = match self.expires_at {
            None => self.link_count > 0,
            Some(t) => self.link_count == 0 && t >= now.plus(orphan_ttl).minus(granularity),
        };
        self.is_ready() && expiry_holds && self.last_update.plus(granularity) > now
    }
}

/// How stale a ready record's refresh may be before a re-upload writes it again: a thousandth
/// of the orphan window, at most a minute. Repeated uploads of the same bytes (a form sent
/// twice, a bulk tool's retries) then cost a read, not a write each; the orphan window is
/// shortened by at most this much.
pub fn refresh_granularity(orphan_ttl: Duration) -> Duration {
    (orphan_ttl / 1000).min(Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Generation;

    const TTL: Duration = Duration::from_secs(3600);

    fn ready(
        last_update: Timestamp,
        link_count: u32,
        expires_at: Option<Timestamp>,
    ) -> ImageRecord {
        ImageRecord {
            id: ImageId::of_bytes(b"x"),
            generation: Generation::random(),
            state: ImageState::Ready {
                format: SourceFormat::Jpeg,
                width: 1,
                height: 1,
                original_bytes: 1,
                variants: Vec::new(),
                variant_set: None,
                sha256: None,
                original_metadata: None,
                thumbhash: None,
                signature: None,
            },
            created_at: last_update,
            last_update,
            link_count,
            expires_at,
            previous: None,
        }
    }

    #[test]
    fn a_refresh_holds_for_a_thousandth_of_the_orphan_window_at_most_a_minute() {
        assert_eq!(refresh_granularity(TTL), Duration::from_millis(3600));
        assert_eq!(
            refresh_granularity(Duration::from_secs(14 * 86_400)),
            Duration::from_secs(60)
        );
        let t = Timestamp::from_millis(1_000_000);
        let g = refresh_granularity(TTL);
        let orphan = ready(t, 0, Some(t.plus(TTL)));
        assert!(orphan.is_freshly_refreshed(t, TTL));
        assert!(orphan.is_freshly_refreshed(t.plus(g).minus(Duration::from_millis(1)), TTL));
        assert!(!orphan.is_freshly_refreshed(t.plus(g), TTL));
        let linked = ready(t, 2, None);
        assert!(linked.is_freshly_refreshed(t, TTL));
    }

    #[test]
    fn a_record_whose_expiry_a_refresh_would_move_far_is_not_fresh() {
        let t = Timestamp::from_millis(1_000_000);
        // Unlinked a moment ago under a shorter window: a refresh gives it a longer expiry.
        assert!(!ready(t, 0, Some(t.plus(TTL / 2))).is_freshly_refreshed(t, TTL));
        // Inconsistent states are written again, never trusted.
        assert!(!ready(t, 0, None).is_freshly_refreshed(t, TTL));
        assert!(!ready(t, 1, Some(t.plus(TTL))).is_freshly_refreshed(t, TTL));
        let mut claim = ready(t, 0, None);
        claim.state = ImageState::Processing {
            claim_expires_at: t.plus(TTL),
        };
        assert!(!claim.is_freshly_refreshed(t, TTL));
    }
}
