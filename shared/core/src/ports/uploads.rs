//! Presigned uploads: large photos go straight to object storage (Lambda's request payload
//! limit is 6 MB), and a record tracks each upload until its photo is processed.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::domain::{BlobKey, ImageId, Owner, Timestamp, UploadId};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum UploadState {
    /// Waiting for the body (or for processing to start).
    Pending,
    Done {
        image_id: ImageId,
        deduplicated: bool,
    },
    /// The body was not a usable photo; `kind` is the stable error kind, `request_id` the id
    /// under which the processing logged what happened (its message may name storage, so it
    /// is not shown to the uploader).
    Failed {
        kind: String,
        #[serde(default)]
        request_id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadRecord {
    pub id: UploadId,
    /// The exact body size the client declared (the upload URL accepts only that).
    pub size: u64,
    pub state: UploadState,
    pub created_at: Timestamp,
    /// After this the record may be deleted (TTL on AWS).
    pub expires_at: Timestamp,
    /// Who started it (`None` in open mode): another caller reads it as absent.
    pub owner: Option<Owner>,
}

#[async_trait]
pub trait UploadRecords: Send + Sync {
    /// Creates the record; `StoreError::Conflict` if the id exists.
    async fn create_upload(&self, record: &UploadRecord) -> Result<(), StoreError>;

    async fn get_upload(&self, id: &UploadId) -> Result<Option<UploadRecord>, StoreError>;

    /// Sets the final state (idempotent: the same state may be set again);
    /// `StoreError::NotFound` if there is no such upload.
    async fn finish_upload(&self, id: &UploadId, state: &UploadState) -> Result<(), StoreError>;
}

#[async_trait]
pub trait UploadUrls: Send + Sync {
    /// A URL that accepts one HTTP PUT of exactly `size` bytes with `Content-Type:
    /// content_type` to `key`, valid for `expires_in`.
    async fn presign_put(
        &self,
        key: &BlobKey,
        size: u64,
        content_type: &str,
        expires_in: Duration,
    ) -> Result<String, StoreError>;
}
