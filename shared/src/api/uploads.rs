//! Presigned uploads: `POST /v1/uploads`, `GET /v1/uploads/{upload_id}`, and (local runner only)
//! `PUT /v1/uploads/{upload_id}/body`, where the local "presigned" URL points. Any uploader;
//! an upload is its starter's (another caller's reads as not found).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::body::read_upload;
use super::json::ImageJson;
use super::{ApiError, ApiState};
use axum::http::header::CONTENT_TYPE;

use crate::auth::Uploader;
use crate::domain::{ImageRecord, UploadId};
use crate::flows::FlowError;
use crate::flows::presigned::UPLOAD_CONTENT_TYPE;
use crate::ports::{UploadRecord, UploadState};

/// The `POST /v1/uploads` body. Public (through [`crate::api`]) so that the fuzz targets parse
/// a body as the route does.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateUpload {
    /// The exact size of the body the client will PUT.
    pub size: u64,
}

#[derive(Debug, Serialize)]
pub struct TicketJson {
    upload_id: String,
    method: &'static str,
    upload_url: String,
    /// Headers the PUT must carry (the URL is signed for this exact length).
    headers: Value,
    expires_at: String,
}

#[derive(Debug, Serialize)]
pub struct UploadJson {
    upload_id: String,
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<ImageJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

fn upload_id(raw: &str) -> Result<UploadId, ApiError> {
    Ok(UploadId::parse(raw).map_err(FlowError::from)?)
}

fn status_json(state: &ApiState, record: &UploadRecord, image: Option<&ImageRecord>) -> UploadJson {
    let (name, error) = match &record.state {
        UploadState::Pending => ("pending", None),
        UploadState::Done { .. } => ("done", None),
        UploadState::Failed { kind, message } => {
            ("failed", Some(json!({"kind": kind, "message": message})))
        }
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
            headers: json!({
                "content-length": ticket.size.to_string(),
                "content-type": UPLOAD_CONTENT_TYPE,
            }),
            expires_at: ticket.expires_at.to_string(),
        }),
    ))
}

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
    let limit = state.service.pipeline().config().max_body;
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
