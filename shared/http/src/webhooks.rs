//! The operator's webhook routes (`imgest:operator`, local runner only: on AWS the operator's
//! CLI, `imgest webhook`, does the same): a client's endpoint registered, read, its secret
//! rotated, removed. Deliveries: `imgest_crawl::webhooks`.

use std::time::Duration;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;

use super::openapi::ErrorBody;
use super::{ApiError, ApiState};
use crate::auth::Operator;
use imgest_core::domain::ClientId;
use imgest_crawl::webhooks::{WebhookError, WebhookView};
use imgest_flows::FlowError;

/// The `PUT /v1/operator/webhooks/{client_id}` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookRequest {
    /// https (http only where private networks are allowed), resolving to public addresses.
    #[schema(max_length = 2048)]
    url: String,
    /// The secret to sign with (`whsec_` and 24 to 64 bytes in base64); a new one if absent
    /// on a new registration, the current ones kept if absent on a move.
    #[serde(default)]
    #[schema(max_length = 100)]
    secret: Option<String>,
}

/// The `POST /v1/operator/webhooks/{client_id}/rotate` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateRequest {
    /// How long the secrets it had go on signing beside the new one (`24h` if absent; at
    /// most `7d`).
    #[serde(default)]
    overlap: Option<String>,
}

/// Register a client's webhook endpoint (local runner only)
///
/// Each result of the client's crawls is POSTed there, signed as the Standard Webhooks
/// specification says (`webhook-id`: the crawl id, the same on every attempt;
/// `webhook-timestamp`; `webhook-signature`), retried for 3 days, then dead-lettered. Moving
/// an endpoint keeps its secrets; registering again re-enables one a 410 disabled.
#[utoipa::path(
    put,
    path = "/v1/operator/webhooks/{client_id}",
    tag = "local runner",
    operation_id = "register_webhook",
    params(("client_id" = String, Path, description = "The client.")),
    request_body = WebhookRequest,
    responses(
        (status = 200, description = "The endpoint, with the secrets that sign now.", body = WebhookView),
        (status = 400, description = "`invalid_body`, `invalid_id`.", body = ErrorBody),
        (status = 422, description = "`invalid_endpoint`: not https, credentials, a port not allowed, a name that does not resolve; `forbidden_endpoint`: it resolves to a private, loopback or metadata address; `invalid_secret`.", body = ErrorBody),
    ),
)]
pub async fn register(
    State(state): State<ApiState>,
    _: Operator,
    Path(client): Path<String>,
    body: Result<Json<WebhookRequest>, JsonRejection>,
) -> Result<Json<WebhookView>, ApiError> {
    let client = ClientId::parse(&client).map_err(FlowError::from)?;
    let Json(body) = body.map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
    let view = state
        .crawler
        .register_webhook(&client, &body.url, body.secret.as_deref())
        .await
        .map_err(webhook_error)?;
    Ok(Json(view))
}

/// A client's webhook endpoint (local runner only)
#[utoipa::path(
    get,
    path = "/v1/operator/webhooks/{client_id}",
    tag = "local runner",
    operation_id = "get_webhook",
    params(("client_id" = String, Path, description = "The client.")),
    responses(
        (status = 200, description = "The endpoint, with the secrets that sign now.", body = WebhookView),
        (status = 400, description = "`invalid_id`.", body = ErrorBody),
        (status = 404, description = "`webhook_not_found`.", body = ErrorBody),
    ),
)]
pub async fn get(
    State(state): State<ApiState>,
    _: Operator,
    Path(client): Path<String>,
) -> Result<Json<WebhookView>, ApiError> {
    let client = ClientId::parse(&client).map_err(FlowError::from)?;
    match state
        .crawler
        .webhook(&client)
        .await
        .map_err(webhook_error)?
    {
        Some(view) => Ok(Json(view)),
        None => Err(webhook_error(WebhookError::NotRegistered(client))),
    }
}

/// Remove a client's webhook endpoint (local runner only)
///
/// Nothing more is delivered; the client's results stay in its feed (`GET /v1/crawls`).
#[utoipa::path(
    delete,
    path = "/v1/operator/webhooks/{client_id}",
    tag = "local runner",
    operation_id = "remove_webhook",
    params(("client_id" = String, Path, description = "The client.")),
    responses(
        (status = 204, description = "Removed."),
        (status = 400, description = "`invalid_id`.", body = ErrorBody),
        (status = 404, description = "`webhook_not_found`.", body = ErrorBody),
    ),
)]
pub async fn remove(
    State(state): State<ApiState>,
    _: Operator,
    Path(client): Path<String>,
) -> Result<StatusCode, ApiError> {
    let client = ClientId::parse(&client).map_err(FlowError::from)?;
    if state
        .crawler
        .remove_webhook(&client)
        .await
        .map_err(webhook_error)?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(webhook_error(WebhookError::NotRegistered(client)))
    }
}

/// Rotate a client's webhook secret (local runner only)
///
/// A new secret signs from now on; the ones it had sign beside it for `overlap`, so the
/// partner verifies with either while it changes over.
#[utoipa::path(
    post,
    path = "/v1/operator/webhooks/{client_id}/rotate",
    tag = "local runner",
    operation_id = "rotate_webhook_secret",
    params(("client_id" = String, Path, description = "The client.")),
    request_body = RotateRequest,
    responses(
        (status = 200, description = "The endpoint, with the secrets that sign now (the new one first).", body = WebhookView),
        (status = 400, description = "`invalid_body`, `invalid_id`.", body = ErrorBody),
        (status = 404, description = "`webhook_not_found`.", body = ErrorBody),
    ),
)]
pub async fn rotate(
    State(state): State<ApiState>,
    _: Operator,
    Path(client): Path<String>,
    body: Result<Json<RotateRequest>, JsonRejection>,
) -> Result<Json<WebhookView>, ApiError> {
    let client = ClientId::parse(&client).map_err(FlowError::from)?;
    let Json(body) = body.map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
    let overlap = match body.overlap.as_deref() {
        None => Duration::from_secs(86_400),
        Some(text) => humantime::parse_duration(text)
            .map_err(|e| ApiError::bad_request("invalid_body", format!("overlap {text:?}: {e}")))?,
    };
    let view = state
        .crawler
        .rotate_webhook_secret(&client, overlap)
        .await
        .map_err(webhook_error)?;
    Ok(Json(view))
}

fn webhook_error(e: WebhookError) -> ApiError {
    let message = e.to_string();
    let unprocessable =
        |kind| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, kind, message.clone());
    match e {
        WebhookError::Flow(flow) => flow.into(),
        WebhookError::BadUrl(_) => unprocessable("invalid_endpoint"),
        WebhookError::ForbiddenEndpoint(_) => unprocessable("forbidden_endpoint"),
        WebhookError::BadSecret(_) => unprocessable("invalid_secret"),
        WebhookError::BadOverlap(_) => ApiError::bad_request("invalid_body", message),
        WebhookError::NotRegistered(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "webhook_not_found", message)
        }
    }
}
