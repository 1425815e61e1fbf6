//! `POST /v1/crawl` (an offer's photo URLs, the same JSON as the intake queue's messages) and
//! `GET /v1/offers/{offer_id}/crawl` (its latest crawl, per URL): partners (`imgest:offers`),
//! for their own client only (the body's `client_id` must be the token's).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::json;

use super::{ApiError, ApiState};
use crate::auth::{AuthError, Partner};
use crate::domain::{OfferId, OfferKey};
use crate::flows::FlowError;
use crate::flows::crawl::messages::{CrawlRequest, CrawlResult};

pub async fn post(
    State(state): State<ApiState>,
    partner: Partner,
    body: Result<Json<CrawlRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
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
        Json(json!({"offer_id": offer, "state": crawl_state})),
    ))
}

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
