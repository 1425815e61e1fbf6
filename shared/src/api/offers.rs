//! `PUT`/`GET /v1/offers/{offer_id}/photos` and `DELETE /v1/offers/{offer_id}`: partners
//! (`imgest:offers`), in their own client's namespace (another client's offer is not found).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;

use super::json::OfferJson;
use super::{ApiError, ApiState};
use crate::auth::Partner;
use crate::domain::{IdError, ImageId, OfferId, OfferKey};
use crate::flows::FlowError;

/// The `PUT /v1/offers/{offer_id}/photos` body. Public (through [`crate::api`]) so that the
/// fuzz targets parse a body as the route does: serde, then [`ids`](Self::ids).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPhotos {
    image_ids: Vec<String>,
}

impl SetPhotos {
    /// The photos' image ids, checked, in the body's order.
    pub fn ids(&self) -> Result<Vec<ImageId>, IdError> {
        self.image_ids.iter().map(|s| ImageId::parse(s)).collect()
    }
}

/// The offer the path names, in the caller's namespace.
fn offer_key(partner: Partner, raw: &str) -> Result<OfferKey, ApiError> {
    let id = OfferId::parse(raw).map_err(FlowError::from)?;
    Ok(OfferKey::new(partner.tenant, id))
}

pub async fn put_photos(
    State(state): State<ApiState>,
    partner: Partner,
    Path(raw_offer): Path<String>,
    body: Result<Json<SetPhotos>, JsonRejection>,
) -> Result<Json<OfferJson>, ApiError> {
    let offer = offer_key(partner, &raw_offer)?;
    let Json(body) = body.map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
    let ids = body.ids().map_err(FlowError::from)?;
    let photos = state.service.set_offer_photos(&offer, &ids).await?;
    forget_crawl(&state, &offer).await?;
    Ok(Json(state.urls.offer(&photos)))
}

pub async fn get_photos(
    State(state): State<ApiState>,
    partner: Partner,
    Path(raw_offer): Path<String>,
) -> Result<Json<OfferJson>, ApiError> {
    let offer = offer_key(partner, &raw_offer)?;
    let photos = state.service.offer_photos(&offer).await?;
    Ok(Json(state.urls.offer(&photos)))
}

pub async fn delete(
    State(state): State<ApiState>,
    partner: Partner,
    Path(raw_offer): Path<String>,
) -> Result<StatusCode, ApiError> {
    let offer = offer_key(partner, &raw_offer)?;
    state.service.delete_offer(&offer).await?;
    forget_crawl(&state, &offer).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Photos set by hand replace what the last crawl linked: the next crawl of the offer must
/// not skip it as unchanged.
async fn forget_crawl(state: &ApiState, offer: &OfferKey) -> Result<(), ApiError> {
    state.crawler.forget_settled_crawl(offer).await?;
    Ok(())
}
