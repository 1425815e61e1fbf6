//! Receiving an upload body: size limit checked against Content-Length first and again while
//! streaming, and MD5 computed as the bytes arrive (no second pass over the body). The chunks
//! are kept as they came: joining them is a copy that a dedup hit never needs.

use axum::body::Body;
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use md5::{Digest, Md5};

use super::ApiError;
use imgest_core::budget::Reservation;
use imgest_core::domain::ImageId;
use imgest_flows::Service;
use imgest_flows::upload::UploadBody;

/// An upload body with its content id.
pub struct HashedBody {
    pub id: ImageId,
    pub body: UploadBody,
    /// The body's room in the memory budget: keep it as long as the body.
    pub memory: Option<Reservation>,
}

/// Reads the upload from a raw body, or from the `file` part of a multipart/form-data body,
/// once the memory budget has room for it (its Content-Length, else the limit): the body's
/// reservation is held by the returned body.
pub async fn read_upload(
    request: Request,
    limit: u64,
    service: &Service,
) -> Result<HashedBody, ApiError> {
    let declared = content_length(request.headers())?;
    if let Some(len) = declared
        && len > limit
    {
        return Err(ApiError::too_large(Some(len), limit));
    }
    let memory = service.reserve_body(declared.unwrap_or(limit)).await?;
    let mut body = read_upload_body(request, limit).await?;
    body.memory = Some(memory);
    Ok(body)
}

async fn read_upload_body(request: Request, limit: u64) -> Result<HashedBody, ApiError> {
    if is_multipart(request.headers()) {
        let mut multipart = Multipart::from_request(request, &())
            .await
            .map_err(|e| ApiError::bad_request("invalid_multipart", e.body_text()))?;
        while let Some(field) = multipart
            .next_field()
            .await
            .map_err(|e| ApiError::bad_request("invalid_multipart", e.body_text()))?
        {
            if field.name() == Some("file") {
                return hash_stream(field, limit).await;
            }
        }
        return Err(ApiError::bad_request(
            "missing_file",
            "the multipart body has no part named \"file\"",
        ));
    }
    hash_stream(request.into_body().into_data_stream(), limit).await
}

fn content_length(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    match headers.get(header::CONTENT_LENGTH) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Some)
            .ok_or_else(|| {
                ApiError::bad_request("invalid_request", "Content-Length is not a number")
            }),
    }
}

fn is_multipart(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        })
}

/// Collects a byte stream, hashing it, and stops as soon as it exceeds `limit`.
async fn hash_stream<S, E>(stream: S, limit: u64) -> Result<HashedBody, ApiError>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::fmt::Display,
{
    let mut stream = std::pin::pin!(stream);
    let mut hasher = Md5::new();
    let mut body = UploadBody::default();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::bad_request("body_read_error", format!("reading the body failed: {e}"))
        })?;
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(ApiError::too_large(None, limit));
        }
        hasher.update(&chunk);
        body.push(chunk);
    }
    Ok(HashedBody {
        id: ImageId::from_md5(hasher.finalize().into()),
        body,
        memory: None,
    })
}

/// A body for a small in-memory response.
pub fn bytes_body(bytes: Bytes) -> Body {
    Body::from(bytes)
}
