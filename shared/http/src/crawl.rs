//! `POST /v1/crawl` (an offer's photo URLs, the same JSON as the intake queue's messages) and
//! `GET /v1/offers/{offer_id}/crawl` (its latest crawl, per URL): partners (`imgest:offers`),
//! for their own client only (the body's `client_id` must be the token's).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::openapi::{ErrorBody, OfferIdParam};
use super::{ApiError, ApiState};
use crate::auth::{AuthError, Partner};
use imgest_core::domain::{OfferId, OfferKey};
use imgest_crawl::messages::{CrawlRequest, CrawlResult, CrawlState};
use imgest_flows::FlowError;

/// The answer to `POST /v1/crawl`: the crawl's state right away (`done` when nothing needed
/// downloading).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"offer_id": "car-1", "state": "pending"}))]
pub struct CrawlAccepted {
    #[schema(value_type = String)]
    offer_id: OfferId,
    state: CrawlState,
}

/// Crawl an offer's photos
///
/// Downloads the offer's photo URLs (those not already known unchanged), processes new
/// photos, and links them to the offer in the request's order; follow it with
/// `GET /v1/offers/{offer_id}/crawl`. The body's `client_id` must be the token's.
#[utoipa::path(
    post,
    path = "/v1/crawl",
    tag = "crawls",
    operation_id = "crawl_offer",
    request_body = CrawlRequest,
    responses(
        (status = 202, description = "Accepted: the crawl's state.", body = CrawlAccepted),
        (status = 400, description = "`invalid_body` (not the JSON above, or an invalid `client_id` or `offer_id`).", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token lacks `imgest:offers` or an `imgest_client_id` claim, or the body's `client_id` is not the token's.", body = ErrorBody),
        (status = 422, description = "`too_many_photos`: more URLs than an offer may have.", body = ErrorBody),
    ),
)]
pub async fn post(
    State(state): State<ApiState>,
    partner: Partner,
    body: Result<Json<CrawlRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<CrawlAccepted>), ApiError> {
    let Json(request) = body.map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
    // The client is the token's: its rate budget, results and offers. Open mode takes the
    // body's at its word.
    if let Some(client) = partner.tenant.client()
        && *client != request.client_id
    {
        return Err(AuthError::Forbidden(format!(
            "this token crawls for client {client}, not {}",
            request.client_id
        ))
        .into());
    }
    let offer = request.offer_id.clone();
    let crawl_state = state.crawler.intake(&partner.tenant, request).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(CrawlAccepted {
            offer_id: offer,
            state: crawl_state,
        }),
    ))
}

/// Get an offer's latest crawl
///
/// Per URL, in the request's order: `pending`, `ok` (with the image id) or `failed` (with why).
#[utoipa::path(
    get,
    path = "/v1/offers/{offer_id}/crawl",
    tag = "crawls",
    operation_id = "get_crawl",
    params(OfferIdParam),
    responses(
        (status = 200, description = "The crawl.", body = CrawlResult,
            example = json!({"client_id": "acme", "offer_id": "car-1", "state": "done", "photos": [
                {"url": "https://img.example.com/car-1/front.jpg", "status": "ok", "image_id": "3b5d5c3712955042212316173ccf37be"},
                {"url": "https://img.example.com/car-1/gone.jpg", "status": "failed", "error": {"kind": "not_found", "http_status": 404, "attempts": 1}}]})),
        (status = 400, description = "`invalid_offer_id`.", body = ErrorBody),
        (status = 404, description = "`crawl_not_found`: never crawled, or the result expired.", body = ErrorBody),
    ),
)]
pub async fn get(
    State(state): State<ApiState>,
    partner: Partner,
    Path(raw_offer): Path<String>,
) -> Result<Json<CrawlResult>, ApiError> {
    let offer = OfferId::parse(&raw_offer).map_err(FlowError::from)?;
    let key = OfferKey::new(partner.tenant, offer.clone());
    match state.crawler.crawl_status(&key).await? {
        Some(result) => Ok(Json(result)),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "crawl_not_found",
            format!("offer {offer} has no crawl (never crawled, or expired)"),
        )),
    }
}
