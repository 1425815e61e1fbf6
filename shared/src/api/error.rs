//! API errors: a status and a stable `error.kind` for every failure.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tracing::error;

use crate::flows::FlowError;
use crate::pipeline::PipelineError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
        }
    }

    pub fn bad_request(kind: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, kind, message)
    }

    pub fn too_large(size: Option<u64>, limit: u64) -> Self {
        let message = match size {
            Some(size) => format!("the body is {size} bytes, more than the limit of {limit}"),
            None => format!("the body is more than the limit of {limit} bytes"),
        };
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }
}

impl From<FlowError> for ApiError {
    fn from(e: FlowError) -> Self {
        let status = match &e {
            FlowError::EmptyBody | FlowError::InvalidId(_) => StatusCode::BAD_REQUEST,
            FlowError::Image(PipelineError::TooLarge { .. }) => StatusCode::PAYLOAD_TOO_LARGE,
            FlowError::Image(PipelineError::UnsupportedFormat(_)) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            FlowError::Image(PipelineError::Watermark(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            FlowError::Image(_) => StatusCode::UNPROCESSABLE_ENTITY,
            FlowError::ImageNotFound(_)
            | FlowError::OfferNotFound(_)
            | FlowError::UploadNotFound(_) => StatusCode::NOT_FOUND,
            FlowError::UploadExpired(_) => StatusCode::GONE,
            FlowError::UploadAlreadyReceived(_) => StatusCode::CONFLICT,
            FlowError::SizeMismatch { .. } => StatusCode::BAD_REQUEST,
            FlowError::UnknownImage(_)
            | FlowError::DuplicateImage(_)
            | FlowError::TooManyPhotos { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            FlowError::Overloaded => StatusCode::TOO_MANY_REQUESTS,
            FlowError::StillProcessing(_) => StatusCode::SERVICE_UNAVAILABLE,
            FlowError::Store(s) if s.is_retryable() => StatusCode::SERVICE_UNAVAILABLE,
            FlowError::Store(_) | FlowError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status.is_server_error() {
            error!(kind = e.kind(), error = %e, "request failed");
        }
        Self::new(status, e.kind(), e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({"error": {"kind": self.kind, "message": self.message}}));
        let mut response = (self.status, body).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE
            || self.status == StatusCode::TOO_MANY_REQUESTS
        {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}
