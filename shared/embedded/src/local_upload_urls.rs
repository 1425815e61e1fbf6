//! `UploadUrls` for the local runner: the "presigned" URL points at the runner itself
//! (`PUT /v1/uploads/{id}/body`), so clients use one contract locally and on AWS. The upload
//! id's 128 random bits are the capability; the handler enforces the declared size.

use std::time::Duration;

use async_trait::async_trait;

use imgest_core::domain::BlobKey;
use imgest_core::ports::{StoreError, UploadUrls};

#[derive(Debug, Clone)]
pub struct LocalUploadUrls {
    base: String,
}

impl LocalUploadUrls {
    /// `base` is the runner's public base URL, e.g. `http://127.0.0.1:8080`.
    pub fn new(base: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
        }
    }
}

#[async_trait]
impl UploadUrls for LocalUploadUrls {
    async fn presign_put(
        &self,
        key: &BlobKey,
        _size: u64,
        _content_type: &str,
        _expires_in: Duration,
    ) -> Result<String, StoreError> {
        let upload = key
            .incoming_upload()
            .ok_or_else(|| StoreError::corrupt(format!("{key} is not an incoming upload key")))?;
        Ok(format!("{}/v1/uploads/{upload}/body", self.base))
    }
}
