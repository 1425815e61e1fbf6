//! Presigned uploads: `POST /v1/uploads`, `GET /v1/uploads/{upload_id}`, and (local runner only)
//! `PUT /v1/uploads/{upload_id}/body`, where the local "presigned" URL points. Any uploader;
//! an upload is its starter's (another caller's reads as not found).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::body::read_upload;
use super::json::ImageJson;
use super::openapi::{ErrorBody, UploadIdParam};
use super::{ApiError, ApiState};
use axum::http::header::CONTENT_TYPE;

use crate::auth::Uploader;
use imgest_core::domain::{ImageRecord, UploadId};
use imgest_core::ports::{UploadRecord, UploadState};
use imgest_flows::FlowError;
use imgest_flows::presigned::UPLOAD_CONTENT_TYPE;

/// The `POST /v1/uploads` body. Public (through [`crate`]) so that the fuzz targets parse
/// a body as the route does.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"size": 48213}))]
pub struct CreateUpload {
    /// The exact size of the body the client will PUT, in bytes (1 to `IMGEST_MAX_BODY`).
    #[schema(minimum = 1)]
    pub size: u64,
}

/// Where and how to send an upload's body.
#[derive(Debug, Serialize, ToSchema)]
pub struct TicketJson {
    #[schema(
        pattern = "^[0-9a-f]{32}$",
        example = "9f86d081884c7d659a2feaa0c55ad015"
    )]
    upload_id: String,
    /// Always `PUT`.
    #[schema(value_type = String, example = "PUT")]
    method: &'static str,
    /// The presigned URL (S3 on AWS; `PUT /v1/uploads/{upload_id}/body` on the local runner).
    upload_url: String,
    /// Headers the PUT must carry (the URL is signed for this exact length).
    headers: TicketHeaders,
    /// When the URL stops working (RFC 3339).
    #[schema(example = "2025-06-01T12:15:00Z")]
    expires_at: String,
}

/// The headers an upload's PUT must carry.
#[derive(Debug, Serialize, ToSchema)]
pub struct TicketHeaders {
    /// The size given when the upload was created, in decimal.
    #[serde(rename = "content-length")]
    #[schema(example = "48213")]
    content_length: String,
    /// Always `application/octet-stream`.
    #[serde(rename = "content-type")]
    #[schema(value_type = String, example = "application/octet-stream")]
    content_type: &'static str,
}

/// A presigned upload's state: `pending` until its body arrived and was processed, then
/// `done` (with the image) or `failed` (with why).
#[derive(Debug, Serialize, ToSchema)]
pub struct UploadJson {
    #[schema(pattern = "^[0-9a-f]{32}$")]
    upload_id: String,
    state: UploadStateName,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<ImageJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<UploadErrorJson>,
}

/// Where a presigned upload is.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UploadStateName {
    Pending,
    Done,
    Failed,
}

/// Why an upload's body was not a usable photo: the kind an upload through `POST /v1/images`
/// would have answered, and the id under which the processing logged what happened (for the
/// operator: the message itself may name storage, so it is not shown).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"kind": "corrupt_image", "request_id": "5f0c2a9e7b3d4a61"}))]
pub struct UploadErrorJson {
    kind: String,
    request_id: String,
}

fn upload_id(raw: &str) -> Result<UploadId, ApiError> {
    Ok(UploadId::parse(raw).map_err(FlowError::from)?)
}

fn status_json(state: &ApiState, record: &UploadRecord, image: Option<&ImageRecord>) -> UploadJson {
    let (name, error) = match &record.state {
        UploadState::Pending => (UploadStateName::Pending, None),
        UploadState::Done { .. } => (UploadStateName::Done, None),
        UploadState::Failed { kind, request_id } => (
            UploadStateName::Failed,
            Some(UploadErrorJson {
                kind: kind.clone(),
                request_id: request_id.clone(),
            }),
        ),
    };
    let deduplicated = match &record.state {
        UploadState::Done { deduplicated, .. } => Some(*deduplicated),
        _ => None,
    };
    UploadJson {
        upload_id: record.id.to_string(),
        state: name,
        image: image.map(|i| state.urls.image(i, deduplicated, None)),
        error,
    }
}

/// Start a presigned upload
///
/// For browsers that send the photo straight to storage: answers a URL that accepts one `PUT`
/// of exactly `size` bytes; the photo is processed when it arrives (follow it with
/// `GET /v1/uploads/{upload_id}`). Counts against the caller's `IMGEST_UPLOAD_RPM`.
#[utoipa::path(
    post,
    path = "/v1/uploads",
    tag = "uploads",
    operation_id = "create_upload",
    request_body = CreateUpload,
    responses(
        (status = 201, description = "Where to PUT the body.", body = TicketJson,
            example = json!({"upload_id": "9f86d081884c7d659a2feaa0c55ad015", "method": "PUT",
                "upload_url": "http://127.0.0.1:8080/v1/uploads/9f86d081884c7d659a2feaa0c55ad015/body",
                "headers": {"content-length": "48213", "content-type": "application/octet-stream"},
                "expires_at": "2025-06-01T12:15:00Z"})),
        (status = 400, description = "`invalid_body` (not the JSON above), `empty_body` (`size` 0).", body = ErrorBody),
        (status = 413, description = "`too_large`: `size` is more than `IMGEST_MAX_BODY`.", body = ErrorBody),
        (status = 429, description = "`too_many_requests`: the caller's upload rate; see `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn create(
    State(state): State<ApiState>,
    caller: Uploader,
    body: Result<Json<CreateUpload>, JsonRejection>,
) -> Result<(StatusCode, Json<TicketJson>), ApiError> {
    let Json(body) = body.map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
    state.service.admit_upload(caller.owner.as_ref()).await?;
    let ticket = state
        .service
        .create_upload(body.size, caller.owner.as_ref())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(TicketJson {
            upload_id: ticket.upload_id.to_string(),
            method: "PUT",
            upload_url: ticket.url,
            headers: TicketHeaders {
                content_length: ticket.size.to_string(),
                content_type: UPLOAD_CONTENT_TYPE,
            },
            expires_at: ticket.expires_at.to_string(),
        }),
    ))
}

/// Get a presigned upload's state
///
/// Only its starter sees it (anyone else: `upload_not_found`).
#[utoipa::path(
    get,
    path = "/v1/uploads/{upload_id}",
    tag = "uploads",
    operation_id = "get_upload",
    params(UploadIdParam),
    responses(
        (status = 200, description = "The upload.", body = UploadJson,
            example = json!({"upload_id": "9f86d081884c7d659a2feaa0c55ad015", "state": "pending"})),
        (status = 400, description = "`invalid_upload_id`.", body = ErrorBody),
        (status = 404, description = "`upload_not_found`: never created, another caller's, or expired.", body = ErrorBody),
    ),
)]
pub async fn get(
    State(state): State<ApiState>,
    caller: Uploader,
    Path(raw): Path<String>,
) -> Result<Json<UploadJson>, ApiError> {
    let id = upload_id(&raw)?;
    let (record, image) = state
        .service
        .upload_status(&id, caller.owner.as_ref())
        .await?;
    Ok(Json(status_json(&state, &record, image.as_ref())))
}

/// Send a presigned upload's body (local runner only)
///
/// Where the local runner's presigned URLs point (on AWS they point at S3): the photo's bytes,
/// exactly the `size` the upload was created with, with `Content-Type:
/// application/octet-stream`. The photo is processed before the answer.
#[utoipa::path(
    put,
    path = "/v1/uploads/{upload_id}/body",
    tags = ["uploads", "local runner"],
    operation_id = "put_upload_body",
    params(UploadIdParam),
    request_body(content(("application/octet-stream")), description = "The photo's bytes."),
    responses(
        (status = 200, description = "The upload, `done` or `failed` (a body that is not a usable photo).", body = UploadJson),
        (status = 400, description = "`invalid_upload_id`, `invalid_request` (another Content-Type, or a Content-Length that is not a number), `size_mismatch`, `body_read_error`.", body = ErrorBody),
        (status = 404, description = "`upload_not_found`.", body = ErrorBody),
        (status = 409, description = "`upload_already_received`.", body = ErrorBody),
        (status = 410, description = "`upload_expired`: create a new upload.", body = ErrorBody),
        (status = 413, description = "`too_large`: more than `IMGEST_MAX_BODY` bytes.", body = ErrorBody),
        (status = 429, description = "`too_many_requests`: too many photos being processed; see `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "`still_processing` (the same photo is being processed by another request), `storage_unavailable`, `conflict`: try again; see `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn put_body(
    State(state): State<ApiState>,
    caller: Uploader,
    Path(raw): Path<String>,
    request: Request,
) -> Result<Json<UploadJson>, ApiError> {
    let id = upload_id(&raw)?;
    // As S3 does with the presigned URL's signature: the PUT must say what it was signed for.
    let content_type = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type != UPLOAD_CONTENT_TYPE {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("an upload's PUT must carry Content-Type: {UPLOAD_CONTENT_TYPE}"),
        ));
    }
    let limit = state.service.max_body();
    let body = read_upload(request, limit, &state.service).await?;
    let _memory = body.memory;
    let record = state
        .service
        .receive_upload_body(&id, caller.owner.as_ref(), body.body.into_bytes())
        .await?;
    let image = match &record.state {
        UploadState::Done { image_id, .. } => Some(state.service.image(image_id).await?),
        _ => None,
    };
    Ok(Json(status_json(&state, &record, image.as_ref())))
}
