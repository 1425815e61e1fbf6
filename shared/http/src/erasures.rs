//! Erasure: `DELETE /v1/images/{image_id}` takes back the caller's upload (any uploader,
//! `imgest:upload` or `imgest:offers`, for their own uploads: the token's subject); the
//! operator's `POST /v1/operator/erasures` purges content from every offer and blocks it, and
//! `GET /v1/operator/erasures/{image_id}` reads its receipts (`imgest:operator`, local runner
//! only: on AWS the operator's CLI, `imgest erase`, does the same). The flows: `flows::erase`.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::openapi::ErrorBody;
use super::{ApiError, ApiState};
use crate::auth::{Operator, Uploader};
use imgest_core::domain::{ImageId, Owner};
use imgest_flows::FlowError;
use imgest_flows::erase::{Erasure, ErasureStatus};

/// The longest reason an operator may give (kept in the receipt and told to clients).
const MAX_REASON: usize = 500;

/// What became of an erasure.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErasureJson {
    image_id: String,
    /// `erased`: the image is gone (record, files, every version; the CDN told). `kept`: the
    /// caller's claim is gone, but the content stays for other references (`uploaders`: other
    /// sellers' uploads, `offers`: offers that link it); with `awaiting`, it is erased as soon
    /// as the last offer drops it.
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    uploaders: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    offers: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    awaiting: bool,
    /// The receipt, once the files are gone (on AWS once they are: `imgest erase --status`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    receipt: Option<serde_json::Value>,
}

impl ErasureJson {
    fn of(id: &ImageId, erasure: Erasure) -> (StatusCode, Self) {
        let json = |status, uploaders, offers, awaiting, receipt| Self {
            image_id: id.to_string(),
            status,
            uploaders,
            offers,
            awaiting,
            receipt,
        };
        match erasure {
            Erasure::Erased { receipt } => (
                StatusCode::OK,
                json(
                    "erased",
                    None,
                    None,
                    false,
                    receipt.and_then(|r| serde_json::to_value(r).ok()),
                ),
            ),
            Erasure::Kept {
                uploaders,
                offers,
                awaiting,
            } => (
                StatusCode::OK,
                json("kept", Some(uploaders), Some(offers), awaiting, None),
            ),
        }
    }
}

/// Erase my upload of an image
///
/// Takes back the caller's upload of the image (the token's subject must have uploaded it
/// within the orphan window). When nothing else references the content (no other seller's
/// upload of the same bytes, no offer of any client), it is erased now: its record, every file
/// and every stored version, and the CDN is told; its URLs answer 404. Otherwise the answer
/// says it is kept for the other references, and it is erased as soon as the last one goes.
#[utoipa::path(
    delete,
    path = "/v1/images/{image_id}",
    tag = "images",
    operation_id = "erase_image",
    params(("image_id" = String, Path, description = "The image's id: the lowercase hex MD5 of its original bytes.",
        pattern = "^[0-9a-f]{32}$")),
    responses(
        (status = 200, description = "Erased, or kept for other references.", body = ErasureJson,
            example = json!({"image_id": "3b5d5c3712955042212316173ccf37be", "status": "kept", "uploaders": 1, "offers": 0})),
        (status = 400, description = "`invalid_image_id`.", body = ErrorBody),
        (status = 404, description = "`not_uploaded`: the caller has no upload of this image to erase.", body = ErrorBody),
        (status = 503, description = "`still_processing` (the photo is being processed: try again), `storage_unavailable`, `conflict`; see `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn erase_upload(
    State(state): State<ApiState>,
    caller: Uploader,
    Path(image_id): Path<String>,
) -> Result<(StatusCode, Json<ErasureJson>), ApiError> {
    let id = ImageId::parse(&image_id).map_err(FlowError::from)?;
    let owner = caller.owner.unwrap_or_else(Owner::open);
    let erasure = state.service.erase_upload(&owner, &id).await?;
    let (status, json) = ErasureJson::of(&id, erasure);
    Ok((status, Json(json)))
}

/// The `POST /v1/operator/erasures` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    image_id: String,
    /// Refuse the same bytes from now on (`410 erased` to uploads and crawls).
    #[serde(default)]
    block: bool,
    /// Why (kept in the receipt, told to the clients whose offers lose the photo).
    #[serde(default)]
    #[schema(max_length = 500)]
    reason: Option<String>,
}

/// Purge content (local runner only)
///
/// Removes the image from every offer of every client (each client gets a result message
/// saying its offer lost a photo, and why) and every seller's upload, then erases it: record,
/// files, every stored version, the CDN told. With `block`, the same bytes are refused from
/// then on. The receipt says what went.
#[utoipa::path(
    post,
    path = "/v1/operator/erasures",
    tag = "local runner",
    operation_id = "purge_image",
    request_body = PurgeRequest,
    responses(
        (status = 200, description = "Erased.", body = ErasureJson),
        (status = 400, description = "`invalid_body`, `invalid_image_id`.", body = ErrorBody),
        (status = 503, description = "`still_processing`, `storage_unavailable`, `conflict`: try again; see `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn purge(
    State(state): State<ApiState>,
    _: Operator,
    body: Result<Json<PurgeRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<ErasureJson>), ApiError> {
    let Json(body) = body.map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
    let id = ImageId::parse(&body.image_id).map_err(FlowError::from)?;
    if body.reason.as_ref().is_some_and(|r| r.len() > MAX_REASON) {
        return Err(ApiError::bad_request(
            "invalid_body",
            format!("a reason is at most {MAX_REASON} bytes"),
        ));
    }
    let erasure = state.service.purge(&id, body.block, body.reason).await?;
    let (status, json) = ErasureJson::of(&id, erasure);
    Ok((status, Json(json)))
}

/// An image's erasures (local runner only)
///
/// Its receipts (what each erasure removed and when: ids and counts), whether files are still
/// to be erased, whether a seller's erasure waits for offers to drop it, whether its bytes are
/// blocked.
#[utoipa::path(
    get,
    path = "/v1/operator/erasures/{image_id}",
    tag = "local runner",
    operation_id = "erasure_status",
    params(("image_id" = String, Path, description = "The image's id.", pattern = "^[0-9a-f]{32}$")),
    responses(
        (status = 200, description = "What is known of its erasures.", body = Object),
        (status = 400, description = "`invalid_image_id`.", body = ErrorBody),
    ),
)]
pub async fn status(
    State(state): State<ApiState>,
    _: Operator,
    Path(image_id): Path<String>,
) -> Result<Json<ErasureStatus>, ApiError> {
    let id = ImageId::parse(&image_id).map_err(FlowError::from)?;
    Ok(Json(state.service.erasure_status(&id).await?))
}
