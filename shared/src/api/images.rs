//! `POST /v1/images` and `GET /v1/images/{image_id}`.

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;

use super::body::read_upload;
use super::json::ImageJson;
use super::{ApiError, ApiState};
use crate::domain::ImageId;
use crate::flows::FlowError;

pub async fn upload(
    State(state): State<ApiState>,
    request: Request,
) -> Result<(StatusCode, Json<ImageJson>), ApiError> {
    let limit = state.service.pipeline().config().max_body;
    let body = read_upload(request, limit).await?;
    let outcome = state.service.upload(body.id, body.body).await?;
    let status = if outcome.deduplicated {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((
        status,
        Json(
            state
                .urls
                .image(&outcome.record, Some(outcome.deduplicated), None),
        ),
    ))
}

pub async fn get(
    State(state): State<ApiState>,
    Path(image_id): Path<String>,
) -> Result<Json<ImageJson>, ApiError> {
    let id = ImageId::parse(&image_id).map_err(FlowError::from)?;
    let record = state.service.image(&id).await?;
    let offers = record.link_count;
    Ok(Json(state.urls.image(&record, None, Some(offers))))
}
