//! `PUT`/`GET /v1/offers/{offer_id}/photos` and `DELETE /v1/offers/{offer_id}`: partners
//! (`imgest:offers`), in their own client's namespace (another client's offer is not found).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;

use super::json::OfferJson;
use super::openapi::{ErrorBody, OfferIdParam};
use super::{ApiError, ApiState};
use crate::auth::Partner;
use imgest_core::domain::{IdError, ImageId, OfferId, OfferKey};
use imgest_flows::FlowError;

/// The `PUT /v1/offers/{offer_id}/photos` body. Public (through [`crate`]) so that the
/// fuzz targets parse a body as the route does: serde, then [`ids`](Self::ids).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"image_ids": ["3b5d5c3712955042212316173ccf37be"]}))]
pub struct SetPhotos {
    /// The offer's photos, in order: images uploaded before, each at most once (an empty
    /// list unlinks them all).
    #[schema(inline, value_type = Vec<String>)]
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

/// Set an offer's photos
///
/// Links the offer to these images, in this order, replacing what it linked (by hand or by
/// its last crawl); images no offer links any more become orphans that GC deletes later.
#[utoipa::path(
    put,
    path = "/v1/offers/{offer_id}/photos",
    tag = "offers",
    operation_id = "set_offer_photos",
    params(OfferIdParam),
    request_body = SetPhotos,
    responses(
        (status = 200, description = "The offer's photos now.", body = OfferJson),
        (status = 400, description = "`invalid_offer_id`, `invalid_body` (not the JSON above), `invalid_image_id`.", body = ErrorBody),
        (status = 422, description = "`unknown_image` (upload it first), `duplicate_image`, `too_many_photos`.", body = ErrorBody),
    ),
)]
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

/// Get an offer's photos
#[utoipa::path(
    get,
    path = "/v1/offers/{offer_id}/photos",
    tag = "offers",
    operation_id = "get_offer_photos",
    params(OfferIdParam),
    responses(
        (status = 200, description = "The offer's photos, in order.", body = OfferJson,
            example = json!({"offer_id": "car-1", "photos": [{"image_id": "3b5d5c3712955042212316173ccf37be",
                "variants": {"thumb": {"url": "https://cdn.example.com/public/3b/3b5d5c3712955042212316173ccf37be/1a2b3c4d/thumb.jpg", "width": 320, "height": 240, "format": "jpeg"}}}]})),
        (status = 400, description = "`invalid_offer_id`.", body = ErrorBody),
        (status = 404, description = "`offer_not_found`: the offer has no photos set.", body = ErrorBody),
    ),
)]
pub async fn get_photos(
    State(state): State<ApiState>,
    partner: Partner,
    Path(raw_offer): Path<String>,
) -> Result<Json<OfferJson>, ApiError> {
    let offer = offer_key(partner, &raw_offer)?;
    let photos = state.service.offer_photos(&offer).await?;
    Ok(Json(state.urls.offer(&photos)))
}

/// Delete an offer
///
/// Unlinks all its photos (and forgets its last crawl).
#[utoipa::path(
    delete,
    path = "/v1/offers/{offer_id}",
    tag = "offers",
    operation_id = "delete_offer",
    params(OfferIdParam),
    responses(
        (status = 204, description = "Deleted (or there was nothing to delete)."),
        (status = 400, description = "`invalid_offer_id`.", body = ErrorBody),
    ),
)]
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
