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
