//! `GET /metrics`, for a scraper: the stages' counts and timings and the flows' counters as
//! Prometheus text, served by the local runner (on AWS they leave as CloudWatch
//! embedded-metric-format lines instead). Closed like the `/v1` routes: a scraper's token needs
//! the `imgest:metrics` scope.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::openapi::ErrorBody;
use crate::auth::Observer;
use imgest_core::telemetry::metrics::exposition;

/// Where the metrics are served.
pub const PATH: &str = "/metrics";

/// Get the metrics (local runner only)
///
/// Every stage's runs (`imgest_stage_total`, by `stage`, `outcome` and, for downloads,
/// `tier`) and, at `IMGEST_METRICS=timings`, their durations (`imgest_stage_seconds`, a
/// histogram), and the flows' event counters (`imgest_uploads_new_total`,
/// `imgest_download_attempts_total`, …), in Prometheus's text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "local runner",
    operation_id = "get_metrics",
    responses(
        (status = 200, description = "The metrics, in Prometheus's text format.", content_type = "text/plain",
            body = String,
            example = "imgest_stage_total{stage=\"decode\",outcome=\"ok\"} 12\n"),
        (status = 404, description = "`metrics_off`: the runner records no metrics (`IMGEST_METRICS=off`).", body = ErrorBody,
            example = json!({"error": {"kind": "metrics_off", "message": "this runner records no metrics (IMGEST_METRICS=off)"}})),
    ),
)]
pub async fn get(_: Observer) -> Result<Response, ApiError> {
    let text = exposition().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "metrics_off",
            "this runner records no metrics (IMGEST_METRICS=off)",
        )
    })?;
    let mut response = (StatusCode::OK, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(response)
}
