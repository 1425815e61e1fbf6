//! `PUT`/`GET /v1/offers/{offer_id}/photos` and `DELETE /v1/offers/{offer_id}`.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;

use super::json::OfferJson;
use super::{ApiError, ApiState};
use crate::domain::{ImageId, OfferId};
use crate::flows::FlowError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPhotos {
    image_ids: Vec<String>,
}

fn offer_id(raw: &str) -> Result<OfferId, ApiError> {
    Ok(OfferId::parse(raw).map_err(FlowError::from)?)
}

pub async fn put_photos(
    State(state): State<ApiState>,
    Path(raw_offer): Path<String>,
    body: Result<Json<SetPhotos>, JsonRejection>,
) -> Result<Json<OfferJson>, ApiError> {
    let offer = offer_id(&raw_offer)?;
    let Json(body) = body.map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
    let ids = body
        .image_ids
        .iter()
        .map(|s| ImageId::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(FlowError::from)?;
    let photos = state.service.set_offer_photos(&offer, &ids).await?;
    forget_crawl(&state, &offer).await?;
    Ok(Json(state.urls.offer(&photos)))
}

pub async fn get_photos(
    State(state): State<ApiState>,
    Path(raw_offer): Path<String>,
) -> Result<Json<OfferJson>, ApiError> {
    let offer = offer_id(&raw_offer)?;
    let photos = state.service.offer_photos(&offer).await?;
    Ok(Json(state.urls.offer(&photos)))
}

pub async fn delete(
    State(state): State<ApiState>,
    Path(raw_offer): Path<String>,
) -> Result<StatusCode, ApiError> {
    let offer = offer_id(&raw_offer)?;
    state.service.delete_offer(&offer).await?;
    forget_crawl(&state, &offer).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Photos set by hand replace what the last crawl linked: the next crawl of the offer must
/// not skip it as unchanged.
async fn forget_crawl(state: &ApiState, offer: &OfferId) -> Result<(), ApiError> {
    state.crawler.forget_settled_crawl(offer).await?;
    Ok(())
}
