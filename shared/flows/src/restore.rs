//! Restoring a collected photo: GC (or the sweep, or a mistake) deleted an image's record and
//! files, and the versioned bucket still keeps its original's deleted version (S3 keeps it
//! behind a delete marker for the template's `DeletedOriginalsRetentionDays`). Bringing the
//! bytes back is not enough: a file without a record is garbage to the sweep and serves
//! nothing. So a restore reads the most recently deleted original of the image, checks that it
//! is the image's content (its MD5 is the id: a kept version under the image's key that is not
//! its bytes is skipped), and stores it again as an upload would: a new generation's original
//! and variants, then the record (files first, record second), an orphan with a fresh window.
//! Nothing deleted is undeleted in place (no version is removed or copied over), and a restore
//! of an image that has a live record does nothing.
//!
//! The embedded store keeps no deleted files: there a restore finds nothing.

use serde::Serialize;
use tracing::{info, warn};

use super::{FlowError, Service};
use imgest_core::domain::{ImageId, ImageState, ORIGINALS_PREFIX, Timestamp};
use imgest_core::ports::DeletedBlob;

/// Kept versions looked at per restore, at most (an image has an original per generation).
const VERSIONS_READ: usize = 16;

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Restored {
    /// The image has a live record: nothing to restore.
    Live,
    /// No deleted original of the image is kept: it was never stored, it was deleted longer
    /// ago than the bucket keeps versions, it was erased, or the store keeps no versions.
    NothingKept,
    /// Stored again from the original deleted at `deleted_at` (its key `from`): a new record
    /// with its variants, under `generation`.
    Restored {
        from: String,
        deleted_at: Timestamp,
        generation: String,
        variants: Vec<String>,
    },
}

impl Service {
    /// Restores image `id` from its most recently deleted original that the store keeps (see
    /// the module doc).
    pub async fn restore(&self, id: &ImageId) -> Result<Restored, FlowError> {
        let now = self.ports.clock.now();
        if let Some(record) = self.ports.images.get(id).await?
            && record.is_live(now)
            && matches!(record.state, ImageState::Ready { .. })
        {
            return Ok(Restored::Live);
        }
        let Some((kept, bytes)) = self.kept_original(id).await? else {
            return Ok(Restored::NothingKept);
        };
        let outcome = self.upload(id.clone(), bytes).await?;
        let variants = match &outcome.record.state {
            ImageState::Ready { variants, .. } => {
                variants.iter().map(|v| v.name.to_string()).collect()
            }
            _ => Vec::new(),
        };
        info!(image_id = %id, from = %kept.key, generation = %outcome.record.generation, "image restored from its deleted original");
        Ok(Restored::Restored {
            from: kept.key.to_string(),
            deleted_at: kept.deleted_at,
            generation: outcome.record.generation.to_string(),
            variants,
        })
    }

    /// The most recently deleted original of `id` that the store keeps and whose bytes are
    /// the image's (under the originals' area, and the bare shard of the layout before it).
    async fn kept_original(
        &self,
        id: &ImageId,
    ) -> Result<Option<(DeletedBlob, bytes::Bytes)>, FlowError> {
        let mut kept = Vec::new();
        for prefix in [
            format!("{ORIGINALS_PREFIX}{}/{id}/", id.shard()),
            format!("{}/{id}/", id.shard()),
        ] {
            kept.extend(self.ports.blobs.deleted(&prefix, VERSIONS_READ).await?);
        }
        kept.retain(|b| b.key.as_str().ends_with("/original"));
        kept.sort_by_key(|b| std::cmp::Reverse(b.deleted_at));
        for blob in kept {
            let bytes = self.ports.blobs.get_deleted(&blob).await?;
            if ImageId::of_bytes(&bytes) == *id {
                return Ok(Some((blob, bytes)));
            }
            warn!(image_id = %id, key = %blob.key, "a kept version under the image's key is not its bytes; skipped");
        }
        Ok(None)
    }
}
