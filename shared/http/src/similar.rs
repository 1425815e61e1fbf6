//! `GET /v1/images/{image_id}/similar`: a stored photo's near-duplicates, among the images the
//! caller may see (`imgest:operator`: all; `imgest:offers`: its client's offers' and its own
//! uploads; `imgest:upload`: its own uploads).

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use utoipa::ToSchema;

use super::openapi::ErrorBody;
use super::{ApiError, ApiState};
use crate::auth::Viewer;
use imgest_core::domain::ImageId;
use imgest_flows::FlowError;
use imgest_flows::similar::{NearDuplicate, Scope};

/// A photo's near-duplicates.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"image_id": "3b5d5c3712955042212316173ccf37be", "searched": true,
    "matches": [{"image_id": "9e107d9d372bb6826bd81d3542a419d6", "distance": 12, "signal": "whole", "mirrored": false}]}))]
pub struct SimilarJson {
    pub image_id: String,
    /// Whether the photo has a signature to look up with (`false`: stored before signatures
    /// were and not backfilled yet, or too flat for one to mean anything).
    pub searched: bool,
    /// Nearest first, at most 50.
    pub matches: Vec<NearDuplicateJson>,
}

/// One near-duplicate.
#[derive(Debug, Serialize, ToSchema)]
pub struct NearDuplicateJson {
    pub image_id: String,
    /// PDQ bits apart, 0 to 31 (0: the same picture); for `cropped`, the agreeing points'
    /// descriptors' mean bits apart (of 64, at most 6).
    pub distance: u32,
    /// `whole` (the photos as they are), `trimmed` (one of them with a flat border, padding or
    /// a frame, trimmed), `inner` (only their inner parts, the outer tenth of each side left
    /// out, are near: a watermark or a caption near an edge) or `cropped` (no hash is near;
    /// their points agree: one is a crop of the other).
    pub signal: &'static str,
    /// Whether one is the other's mirror image.
    pub mirrored: bool,
}

impl From<NearDuplicate> for NearDuplicateJson {
    fn from(m: NearDuplicate) -> Self {
        Self {
            image_id: m.image_id.to_string(),
            distance: m.distance,
            signal: m.signal.as_str(),
            mirrored: m.mirrored,
        }
    }
}

/// Find an image's near-duplicates
///
/// Stored photos that are the same picture re-encoded, resized, watermarked, brightened,
/// mirrored or padded (PDQ hashes within 31 bits), or cropped (their points agree; crops come
/// after the hashes' matches). Only images the caller may see are
/// answered; the index holds photos stored while `IMGEST_SIMILAR` is `index` or `report` (and
/// those a backfill filed).
#[utoipa::path(
    get,
    path = "/v1/images/{image_id}/similar",
    tag = "images",
    operation_id = "similar_images",
    params(("image_id" = String, Path, description = "The image's id: the lowercase hex MD5 of its original bytes.",
        pattern = "^[0-9a-f]{32}$", example = "3b5d5c3712955042212316173ccf37be")),
    responses(
        (status = 200, description = "Its near-duplicates the caller may see.", body = SimilarJson),
        (status = 400, description = "`invalid_image_id`.", body = ErrorBody),
        (status = 404, description = "`image_not_found`: never uploaded, or expired.", body = ErrorBody),
    ),
)]
pub async fn get(
    State(state): State<ApiState>,
    viewer: Viewer,
    Path(image_id): Path<String>,
) -> Result<Json<SimilarJson>, ApiError> {
    let id = ImageId::parse(&image_id).map_err(FlowError::from)?;
    let scope = match viewer {
        Viewer::All => Scope::All,
        Viewer::Own { owner, client } => Scope::Caller {
            client,
            owner: Some(owner),
        },
    };
    let found = state.service.similar(&id, &scope).await?;
    Ok(Json(SimilarJson {
        image_id: id.to_string(),
        searched: found.searched,
        matches: found.matches.into_iter().map(Into::into).collect(),
    }))
}
