//! `GET /files/{key}`: serves the public files (variants) locally, to anyone; on AWS a CDN in
//! front of the bucket's `public/` prefix serves them. Originals and bodies waiting for
//! processing are never served: they read as not found.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::body::bytes_body;
use super::{ApiError, ApiState};
use crate::domain::BlobKey;
use crate::ports::StoreError;

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
        Err(e) => return Err(crate::flows::FlowError::Store(e).into()),
    };
    let content_type = if key.as_str().ends_with(".jpg") {
        "image/jpeg"
    } else {
        "application/octet-stream"
    };
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
