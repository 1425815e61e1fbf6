//! `POST /v1/images` and `GET /v1/images/{image_id}`: any uploader (`imgest:upload` or
//! `imgest:offers`); uploads count against the caller's `IMGEST_UPLOAD_RPM`.

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;

use super::body::read_upload;
use super::json::ImageJson;
use super::{ApiError, ApiState};
use crate::auth::Uploader;
use crate::domain::ImageId;
use crate::flows::FlowError;

pub async fn upload(
    State(state): State<ApiState>,
    caller: Uploader,
    request: Request,
) -> Result<(StatusCode, Json<ImageJson>), ApiError> {
    state.service.admit_upload(caller.owner.as_ref()).await?;
    let limit = state.service.pipeline().config().max_body;
    let body = read_upload(request, limit, &state.service).await?;
    let _memory = body.memory;
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
    _: Uploader,
    Path(image_id): Path<String>,
) -> Result<Json<ImageJson>, ApiError> {
    let id = ImageId::parse(&image_id).map_err(FlowError::from)?;
    let record = state.service.image(&id).await?;
    let offers = record.link_count;
    Ok(Json(state.urls.image(&record, None, Some(offers))))
}
