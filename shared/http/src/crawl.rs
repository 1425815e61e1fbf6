//! `POST /v1/crawl` (an offer's photo URLs, the same JSON as the intake queue's messages),
//! `GET /v1/offers/{offer_id}/crawl` (its latest crawl, per URL) and `GET /v1/crawls` (the
//! client's results in the order they were filed, from a cursor): partners (`imgest:offers`),
//! for their own client only (the body's `client_id` must be the token's).

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::openapi::{ErrorBody, OfferIdParam};
use super::{ApiError, ApiState};
use crate::auth::{AuthError, Partner};
use imgest_core::domain::{ClientId, OfferId, OfferKey};
use imgest_crawl::feed::{self, FeedCursor, FeedError, FeedPage};
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

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FeedQuery {
    /// The previous page's `next`; absent: from the oldest result kept (7 days).
    #[param(max_length = 128)]
    after: Option<String>,
    /// Results per page: 1 to 500, 100 when absent.
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// Whose results, in open mode only (no identity); a token's client is its own.
    client_id: Option<String>,
}

/// List the client's crawl results
///
/// Every result sent to the client (on AWS, through its results subscription), in the order
/// they were filed, from a cursor the caller keeps: for a consumer that was down, or instead of
/// a subscription. A result appears here 30 s after it settled, and is kept 7 days; one sent
/// twice appears twice (drop a `crawl_id` you have).
#[utoipa::path(
    get,
    path = "/v1/crawls",
    tag = "crawls",
    operation_id = "list_crawls",
    params(FeedQuery),
    responses(
        (status = 200, description = "A page of results, and the cursor of the next.", body = FeedPage,
            example = json!({"results": [{"client_id": "acme", "offer_id": "car-1", "crawl_id": "9f2c4e1a0b7d3c58", "state": "done",
                "settled_at": "2024-03-12T14:05:40.118Z", "photos": [
                {"url": "https://img.example.com/car-1/front.jpg", "status": "ok", "image_id": "3b5d5c3712955042212316173ccf37be"}]}],
                "next": "MTcxMDI1MjM0MDExOC45ZjJjNGUxYTBiN2QzYzU4", "more": false})),
        (status = 400, description = "`invalid_query`: an unknown parameter, `limit` not 1 to 500, a cursor this API did not give, or (in open mode) no `client_id`.", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token lacks `imgest:offers` or an `imgest_client_id` claim, or `client_id` is not the token's.", body = ErrorBody),
        (status = 410, description = "`cursor_expired`: the cursor is older than the results kept (7 days); start again without one.", body = ErrorBody),
    ),
)]
pub async fn list(
    State(state): State<ApiState>,
    partner: Partner,
    query: Result<Query<FeedQuery>, QueryRejection>,
) -> Result<Json<FeedPage>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    let named = query
        .client_id
        .as_deref()
        .map(ClientId::parse)
        .transpose()
        .map_err(FlowError::from)?;
    let client = match (partner.tenant.client(), named) {
        (Some(own), Some(named)) if *own != named => {
            return Err(AuthError::Forbidden(format!(
                "this token reads the results of client {own}, not {named}"
            ))
            .into());
        }
        (Some(own), _) => own.clone(),
        (None, Some(named)) => named,
        (None, None) => {
            return Err(ApiError::bad_request(
                "invalid_query",
                "client_id is required without an identity (open mode)",
            ));
        }
    };
    let after = query
        .after
        .as_deref()
        .map(FeedCursor::parse)
        .transpose()
        .map_err(feed_error)?;
    let limit = query.limit.unwrap_or(feed::DEFAULT_PAGE);
    let page = state
        .crawler
        .feed_page(&client, after.as_ref(), limit)
        .await
        .map_err(feed_error)?;
    Ok(Json(page))
}

fn feed_error(e: FeedError) -> ApiError {
    match e {
        FeedError::BadCursor(_) | FeedError::BadLimit(_) => {
            ApiError::bad_request("invalid_query", e.to_string())
        }
        FeedError::Expired => ApiError::new(StatusCode::GONE, "cursor_expired", e.to_string()),
        FeedError::Flow(e) => e.into(),
    }
}
