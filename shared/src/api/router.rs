//! Routes and shared state.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, Uri};
use axum::routing::{get, post, put};
use serde_json::json;

use super::json::FileUrls;
use super::{ApiError, files, images, offers};
use crate::flows::Service;

#[derive(Clone)]
pub struct ApiState {
    pub service: Arc<Service>,
    pub urls: FileUrls,
}

impl ApiState {
    /// `public_base_url` is where `/files/...` URLs point.
    pub fn new(service: Arc<Service>, public_base_url: &str) -> Self {
        Self {
            service,
            urls: FileUrls::new(public_base_url),
        }
    }
}

/// The API router. `serve_files` adds `GET /files/{key}` (the local runner serves its files).
pub fn router(state: ApiState, serve_files: bool) -> Router {
    let mut router = Router::new()
        .route("/healthz", get(healthz))
        // The upload handler enforces IMGEST_MAX_BODY itself, while streaming.
        .route(
            "/v1/images",
            post(images::upload).layer(DefaultBodyLimit::disable()),
        )
        .route("/v1/images/{image_id}", get(images::get))
        .route(
            "/v1/offers/{offer_id}/photos",
            put(offers::put_photos).get(offers::get_photos),
        )
        .route(
            "/v1/offers/{offer_id}",
            axum::routing::delete(offers::delete),
        );
    if serve_files {
        router = router.route("/files/{*key}", get(files::get));
    }
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn healthz() -> axum::Json<serde_json::Value> {
    axum::Json(json!({"status": "ok"}))
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "route_not_found",
        format!("no route for {}", uri.path()),
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    )
}
