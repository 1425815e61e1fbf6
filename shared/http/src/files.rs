//! `GET /files/{key}`: serves the public files (variants) locally, to anyone; on AWS a CDN in
//! front of the bucket's `public/` prefix serves them. Originals and bodies waiting for
//! processing are never served: they read as not found.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::body::bytes_body;
use super::openapi::ErrorBody;
use super::{ApiError, ApiState};
use imgest_core::domain::{BlobKey, OutputFormat};
use imgest_core::ports::StoreError;

/// Get a public file (local runner only)
///
/// A variant's bytes, at the URL an image's `variants` give (on AWS a CDN serves them). Open
/// to anyone; keys never change content.
#[utoipa::path(
    get,
    path = "/files/{key}",
    tag = "local runner",
    operation_id = "get_file",
    params(("key" = String, Path, description = "The file's key (it has slashes: `public/...`).",
        example = "public/3b/3b5d5c3712955042212316173ccf37be/1a2b3c4d/thumb.jpg")),
    responses(
        (status = 200, description = "The file.", content(
            ("image/jpeg"),
            ("application/octet-stream"),
        )),
        (status = 404, description = "`file_not_found` (originals and bodies waiting for processing are never served).", body = ErrorBody,
            example = json!({"error": {"kind": "file_not_found", "message": "no file public/x"}})),
    ),
)]
pub async fn get(
    State(state): State<ApiState>,
    Path(raw_key): Path<String>,
) -> Result<Response, ApiError> {
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "file_not_found",
            format!("no file {raw_key}"),
        )
    };
    let key = BlobKey::parse(&raw_key)
        .filter(BlobKey::is_public)
        .ok_or_else(not_found)?;
    let bytes = match state.service.ports().blobs.get(&key).await {
        Ok(b) => b,
        Err(StoreError::NotFound(_)) => return Err(not_found()),
        Err(e) => return Err(imgest_flows::FlowError::Store(e).into()),
    };
    let content_type = key
        .as_str()
        .rsplit_once('.')
        .and_then(|(_, extension)| OutputFormat::from_extension(extension))
        .map_or("application/octet-stream", OutputFormat::mime);
    let mut response = (StatusCode::OK, bytes_body(bytes)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Keys carry the content hash and a generation: a key's bytes never change.
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    Ok(response)
}
