//! Presigned uploads, for photos too large for a request body through API Gateway (6 MB
//! payload limit): the client asks for an upload URL, PUTs the body straight to storage under
//! `incoming/{upload_id}`, and polls the upload's state. Processing starts on the storage
//! notification (AWS) or right after the PUT (local runner) and runs the same upload flow.

use bytes::Bytes;
use tracing::{info, warn};

use super::{FlowError, Service};
use imgest_core::domain::random::secure_hex;
use imgest_core::domain::{BlobKey, ImageId, ImageRecord, Owner, Timestamp, UploadId};
use imgest_core::imaging::PipelineError;
use imgest_core::ports::{StoreError, UploadRecord, UploadState};

/// What the client needs to upload the body.
#[derive(Debug, Clone)]
pub struct UploadTicket {
    pub upload_id: UploadId,
    /// Accepts one `PUT` of exactly `size` bytes until `expires_at`.
    pub url: String,
    pub size: u64,
    pub expires_at: Timestamp,
}

/// How long an upload's record is kept after its URL expires, so clients can read the result.
const RESULT_RETENTION: std::time::Duration = std::time::Duration::from_secs(86_400);

/// The `Content-Type` an upload's PUT must carry (the URL is signed for it): the format is
/// sniffed from the bytes, so nothing the client could say about it is kept.
pub const UPLOAD_CONTENT_TYPE: &str = "application/octet-stream";

impl Service {
    /// Creates an upload of `size` bytes for `owner` (`None` in open mode) and its presigned
    /// URL.
    pub async fn create_upload(
        &self,
        size: u64,
        owner: Option<&Owner>,
    ) -> Result<UploadTicket, FlowError> {
        let limit = self.max_body();
        if size == 0 {
            return Err(FlowError::EmptyBody);
        }
        if size > limit {
            return Err(FlowError::Image(PipelineError::TooLarge { size, limit }));
        }
        let now = self.ports.clock.now();
        let url_ttl = self.policy.upload_url_ttl;
        let record = UploadRecord {
            id: UploadId::random(),
            size,
            state: UploadState::Pending,
            created_at: now,
            expires_at: now.plus(url_ttl).plus(RESULT_RETENTION),
            owner: owner.cloned(),
        };
        self.ports.uploads.create_upload(&record).await?;
        let url = self
            .ports
            .upload_urls
            .presign_put(
                &BlobKey::incoming(&record.id),
                size,
                UPLOAD_CONTENT_TYPE,
                url_ttl,
            )
            .await?;
        Ok(UploadTicket {
            upload_id: record.id,
            url,
            size,
            expires_at: now.plus(url_ttl),
        })
    }

    /// The local runner's upload URL: stores the body and processes it at once.
    pub async fn receive_upload_body(
        &self,
        id: &UploadId,
        caller: Option<&Owner>,
        body: Bytes,
    ) -> Result<UploadRecord, FlowError> {
        let record = self.upload_record(id, caller).await?;
        if record.state != UploadState::Pending {
            return Err(FlowError::UploadAlreadyReceived(id.clone()));
        }
        let now = self.ports.clock.now();
        if now > record.created_at.plus(self.policy.upload_url_ttl) {
            return Err(FlowError::UploadExpired(id.clone()));
        }
        if body.len() as u64 != record.size {
            return Err(FlowError::SizeMismatch {
                declared: record.size,
                received: body.len() as u64,
            });
        }
        self.ports
            .blobs
            .put(&BlobKey::incoming(id), body, "application/octet-stream")
            .await?;
        self.process_incoming(id).await
    }

    /// Processes an uploaded body: runs the upload flow and records the outcome. Idempotent
    /// (a redelivered notification for a finished upload returns its record). Retryable
    /// failures leave the upload pending so the caller's retry finishes it.
    pub async fn process_incoming(&self, id: &UploadId) -> Result<UploadRecord, FlowError> {
        let key = BlobKey::incoming(id);
        let mut record = self.upload_record(id, None).await?;
        if record.state != UploadState::Pending {
            // A notification delivered again finds nothing; a second PUT to a URL that was
            // used already finds its body, which is removed unprocessed.
            self.ports.blobs.delete(&[key]).await?;
            return Ok(record);
        }
        let limit = self.max_body();
        // Held until the body is dropped, at the end of this call.
        let _memory = self.reserve_body(record.size.min(limit)).await?;
        let body = match self.ports.blobs.get(&key).await {
            Ok(body) => body,
            // Pending, and no body: it expired under incoming/ (a message redriven late). The
            // upload fails as `body_gone`, for its client to see, and so does the message.
            Err(StoreError::NotFound(_)) => {
                let gone = FlowError::BodyGone(format!(
                    "upload {id}: its body is gone from storage (it expired before it was processed); upload the photo again"
                ));
                self.ports
                    .uploads
                    .finish_upload(id, &failed(id, &gone))
                    .await?;
                return Err(gone);
            }
            Err(e) => return Err(e.into()),
        };
        let state = if body.len() as u64 > limit {
            failed(
                id,
                &FlowError::Image(PipelineError::TooLarge {
                    size: body.len() as u64,
                    limit,
                }),
            )
        } else if body.len() as u64 != record.size {
            failed(
                id,
                &FlowError::SizeMismatch {
                    declared: record.size,
                    received: body.len() as u64,
                },
            )
        } else {
            let image_id = ImageId::of_bytes(&body);
            // Its uploader is filed before the claim (see `erase`).
            let owner = record.owner.clone().unwrap_or_else(Owner::open);
            self.note_uploader(&owner, &image_id).await?;
            match self.upload_queued(image_id, body).await {
                Ok(outcome) => UploadState::Done {
                    image_id: outcome.record.id,
                    deduplicated: outcome.deduplicated,
                },
                Err(e) if e.is_retryable() => return Err(e),
                Err(e) => failed(id, &e),
            }
        };
        self.ports.uploads.finish_upload(id, &state).await?;
        // The body is no longer needed: the original is kept under the image's own key.
        self.ports.blobs.delete(&[key]).await?;
        info!(upload_id = %id, ?state, "presigned upload processed");
        record.state = state;
        Ok(record)
    }

    /// The upload's record and, once done, its image; another caller's upload reads as absent.
    pub async fn upload_status(
        &self,
        id: &UploadId,
        caller: Option<&Owner>,
    ) -> Result<(UploadRecord, Option<ImageRecord>), FlowError> {
        let record = self.upload_record(id, caller).await?;
        let image = match &record.state {
            UploadState::Done { image_id, .. } => Some(self.image(image_id).await?),
            _ => None,
        };
        Ok((record, image))
    }

    /// The upload's record, if `caller` may see it: in open mode (`None`) every upload, else
    /// only its own (an upload of another caller, or one started in open mode, is absent).
    async fn upload_record(
        &self,
        id: &UploadId,
        caller: Option<&Owner>,
    ) -> Result<UploadRecord, FlowError> {
        match self.ports.uploads.get_upload(id).await {
            Ok(Some(r)) if caller.is_none() || caller == r.owner.as_ref() => Ok(r),
            Ok(_) | Err(StoreError::NotFound(_)) => Err(FlowError::UploadNotFound(id.clone())),
            Err(e) => Err(e.into()),
        }
    }
}

/// A failed upload's state: its kind, and the id under which what happened is logged here
/// (the uploader sees the kind and the id, never the message).
fn failed(id: &UploadId, e: &FlowError) -> UploadState {
    let request_id = secure_hex::<8>();
    warn!(upload_id = %id, request_id, kind = e.kind(), error = %e, "presigned upload failed");
    UploadState::Failed {
        kind: e.kind().to_owned(),
        request_id,
    }
}
