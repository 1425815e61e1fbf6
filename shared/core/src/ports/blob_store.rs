//! The blob store port: where original bytes and variant files live (S3, a directory).

use async_trait::async_trait;
use bytes::Bytes;

use super::StoreError;
use crate::domain::{BlobKey, Timestamp};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobMeta {
    pub key: BlobKey,
    pub size: u64,
    pub last_modified: Timestamp,
}

/// What [`BlobStore::erase`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Erased {
    /// Current objects.
    pub objects: u64,
    /// Earlier versions and deletion markers (a versioned bucket's; a directory keeps none).
    pub versions: u64,
}

/// Which current objects an erasure keeps, by their metadata.
pub type KeepCurrent<'a> = &'a (dyn Fn(&BlobMeta) -> bool + Send + Sync);

/// One page of a listing; `next` is the cursor for the following page, if any.
#[derive(Debug, Clone, Default)]
pub struct BlobPage {
    pub blobs: Vec<BlobMeta>,
    pub next: Option<BlobKey>,
}

/// An object that was deleted and whose last version a versioned store still keeps (S3 keeps
/// it behind a delete marker for a while: the template's `DeletedOriginalsRetentionDays`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletedBlob {
    pub key: BlobKey,
    /// The store's id of the kept version.
    pub version: String,
    pub size: u64,
    /// When it was deleted.
    pub deleted_at: Timestamp,
}

#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Writes the whole object atomically: a reader sees the old object, no object or the whole
    /// new one, never a part. Overwrites an existing object, except a
    /// [write-once](BlobKey::is_write_once) one (an original): a write of a key that exists
    /// succeeds and changes nothing (the first body stays; a write retried after a lost answer
    /// is the common case).
    async fn put(&self, key: &BlobKey, body: Bytes, content_type: &str) -> Result<(), StoreError>;

    /// The whole object, or `StoreError::NotFound`.
    async fn get(&self, key: &BlobKey) -> Result<Bytes, StoreError>;

    /// Deletes the objects; keys that do not exist are not an error.
    async fn delete(&self, keys: &[BlobKey]) -> Result<(), StoreError>;

    /// Deletes everything the store keeps under `prefix`: every current object that `keep` does
    /// not keep, and every earlier version and deletion marker of every key (S3's noncurrent
    /// versions in a versioned bucket), so that nothing of what was there can be read back.
    /// Pages through the prefix; never holds more than a page. The erasure path's alone: on
    /// AWS only its role may delete versions.
    ///
    /// This default is for a store that keeps no versions (a directory): its objects, listed
    /// and deleted a page at a time.
    async fn erase(&self, prefix: &str, keep: KeepCurrent<'_>) -> Result<Erased, StoreError> {
        let mut erased = Erased::default();
        let mut after: Option<BlobKey> = None;
        loop {
            let page = self.list(prefix, after.as_ref(), 1000).await?;
            let doomed: Vec<BlobKey> = page
                .blobs
                .iter()
                .filter(|b| !keep(b))
                .map(|b| b.key.clone())
                .collect();
            self.delete(&doomed).await?;
            erased.objects += doomed.len() as u64;
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(erased),
            }
        }
    }

    /// Objects whose key starts with `prefix`, in key order, starting after `after`, at most
    /// `limit` (at least one) per page. Never loads more than a page into memory.
    async fn list(
        &self,
        prefix: &str,
        after: Option<&BlobKey>,
        limit: usize,
    ) -> Result<BlobPage, StoreError>;

    /// The objects under `prefix` that were deleted and whose last version the store still
    /// keeps, most recently deleted first, at most `limit`. A store that keeps no versions
    /// (the directory) has none.
    async fn deleted(&self, prefix: &str, limit: usize) -> Result<Vec<DeletedBlob>, StoreError> {
        let _ = (prefix, limit);
        Ok(Vec::new())
    }

    /// The bytes of a deleted object's kept version (one [`deleted`](Self::deleted) listed),
    /// or `StoreError::NotFound` once it is gone.
    async fn get_deleted(&self, blob: &DeletedBlob) -> Result<Bytes, StoreError> {
        Err(StoreError::NotFound(format!(
            "no kept version of {} (this store keeps none)",
            blob.key
        )))
    }
}
