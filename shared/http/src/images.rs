//! `POST /v1/images`, `POST /v1/images/known` and `GET /v1/images/{image_id}`: any uploader
//! (`imgest:upload` or `imgest:offers`); uploads and prechecks count against the caller's
//! `IMGEST_UPLOAD_RPM`.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::body::read_upload;
use super::json::ImageJson;
use super::openapi::{ErrorBody, UploadForm};
use super::{ApiError, ApiState};
use crate::auth::Uploader;
use imgest_core::domain::{ContentHash, ImageId, Owner};
use imgest_flows::FlowError;

/// Upload a photo
///
/// The body is the photo's bytes (JPEG, PNG, WebP, GIF or AVIF; any `Content-Type` but
/// `multipart/form-data`), or a `multipart/form-data` form whose part named `file` is the
/// photo. The same bytes uploaded again answer the stored image (200, `deduplicated`)
/// without processing them again. Counts against the caller's `IMGEST_UPLOAD_RPM`.
#[utoipa::path(
    post,
    path = "/v1/images",
    tag = "images",
    operation_id = "upload_image",
    request_body(
        description = "The photo: raw bytes, or a multipart form with a `file` part. At most `IMGEST_MAX_BODY` bytes.",
        content(
            ("application/octet-stream"),
            ("image/jpeg"),
            ("image/png"),
            ("image/webp"),
            ("image/gif"),
            (inline(UploadForm) = "multipart/form-data"),
        ),
    ),
    responses(
        (status = 201, description = "A new photo, processed: its variants are ready.", body = ImageJson,
            example = json!({"image_id": "3b5d5c3712955042212316173ccf37be", "deduplicated": false, "width": 4032, "height": 3024, "format": "jpeg",
                "variants": {"thumb": {"url": "https://cdn.example.com/public/3b/3b5d5c3712955042212316173ccf37be/1a2b3c4d/thumb.jpg", "width": 320, "height": 240, "format": "jpeg"}}})),
        (status = 200, description = "These bytes were uploaded before: the stored image (`deduplicated`: true).", body = ImageJson),
        (status = 400, description = "`empty_body`, `invalid_request` (Content-Length is not a number), `invalid_multipart`, `missing_file` (no `file` part), `body_read_error`.", body = ErrorBody,
            example = json!({"error": {"kind": "empty_body", "message": "the body is empty"}})),
        (status = 409, description = "`hash_collision`: these bytes have the MD5 (the image id) of a stored photo but another SHA-256; nothing is stored or linked.", body = ErrorBody),
        (status = 410, description = "`erased`: an operator erased these bytes and blocked them; they are not stored again.", body = ErrorBody),
        (status = 413, description = "`too_large`: more than `IMGEST_MAX_BODY` bytes.", body = ErrorBody),
        (status = 415, description = "`unsupported_format`: not a JPEG, PNG, WebP, GIF or AVIF (HEIC: the message says to send a JPEG), or a feature of one imgest does not read.", body = ErrorBody),
        (status = 422, description = "`corrupt_image`, `too_many_pixels`.", body = ErrorBody),
        (status = 429, description = "`too_many_requests`: the caller's upload rate, or too many photos being processed; see `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "`still_processing` (the same photo is being processed by another request, waited for `IMGEST_DEDUP_WAIT` at most), `storage_unavailable`, `conflict`: try again; see `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn upload(
    State(state): State<ApiState>,
    caller: Uploader,
    request: Request,
) -> Result<(StatusCode, Json<ImageJson>), ApiError> {
    state.service.admit_upload(caller.owner.as_ref()).await?;
    let limit = state.service.max_body();
    let body = read_upload(request, limit, &state.service).await?;
    let _memory = body.memory;
    // The caller is filed as an uploader before the upload claims the image (`flows::erase`).
    let owner = caller.owner.clone().unwrap_or_else(Owner::open);
    state.service.note_uploader(&owner, &body.id).await?;
    let outcome = state.service.upload(body.id, body.body).await?;
    let status = if outcome.deduplicated {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let mut json = state
        .urls
        .image(&outcome.record, Some(outcome.deduplicated), None);
    if state.service.reports_similar() && !outcome.deduplicated {
        let found = state
            .service
            .report_similar(&outcome.record, caller.client.as_ref())
            .await?;
        json.near_duplicates = Some(found.into_iter().map(Into::into).collect());
    }
    Ok((status, Json(json)))
}

/// Get an image
///
/// The image's size, format, variants, and how many offers link it.
#[utoipa::path(
    get,
    path = "/v1/images/{image_id}",
    tag = "images",
    operation_id = "get_image",
    params(("image_id" = String, Path, description = "The image's id: the lowercase hex MD5 of its original bytes.",
        pattern = "^[0-9a-f]{32}$", example = "3b5d5c3712955042212316173ccf37be")),
    responses(
        (status = 200, description = "The image.", body = ImageJson),
        (status = 400, description = "`invalid_image_id`.", body = ErrorBody),
        (status = 404, description = "`image_not_found`: never uploaded, or expired.", body = ErrorBody),
    ),
)]
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

/// The most ids one precheck asks about (a listing form's photos, with room to spare).
pub const KNOWN_MAX_IDS: usize = 100;
/// The precheck's largest body: [`KNOWN_MAX_IDS`] photos and their JSON, with room for spaces.
pub const KNOWN_MAX_BODY: usize = 24 * 1024;

/// The `POST /v1/images/known` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"images": [{"image_id": "3b5d5c3712955042212316173ccf37be", "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}]}))]
pub struct KnownRequest {
    /// The photos, at most 100.
    #[schema(inline, max_items = 100)]
    images: Vec<KnownPhoto>,
}

/// One photo of a precheck: both hashes of its bytes, as the client computed them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KnownPhoto {
    /// Lowercase hex MD5 of the bytes.
    image_id: String,
    /// Lowercase hex SHA-256 of the bytes: a stored image is known only if its own agrees.
    sha256: String,
}

/// The images of a precheck that are stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct KnownImages {
    /// The stored ones among the asked ids, in the order asked, each refreshed as an upload of
    /// its bytes would refresh it; an id missing here is to be uploaded.
    known: Vec<ImageJson>,
}

/// Ask which photos are already stored
///
/// Before uploading, a client hashes each photo (MD5 and SHA-256 of its bytes, lowercase hex)
/// and asks which are stored: each of those is refreshed as an upload of the same bytes would
/// refresh it (so it cannot expire in between) and answered with its variants, and need not be
/// sent. A stored image is known only if its SHA-256 is the one asked about too (an MD5 is
/// easy to collide); one stored before strong hashes were recorded is not known (its upload
/// checks it). The others are uploaded as usual. Counts once against the caller's
/// `IMGEST_UPLOAD_RPM`.
#[utoipa::path(
    post,
    path = "/v1/images/known",
    tag = "images",
    operation_id = "known_images",
    request_body = KnownRequest,
    responses(
        (status = 200, description = "The stored images among those asked, in the order asked.", body = KnownImages,
            example = json!({"known": [{"image_id": "3b5d5c3712955042212316173ccf37be", "deduplicated": true, "width": 4032, "height": 3024, "format": "jpeg",
                "variants": {"thumb": {"url": "https://cdn.example.com/public/3b/3b5d5c3712955042212316173ccf37be/1a2b3c4d/thumb.jpg", "width": 320, "height": 240, "format": "jpeg"}}}]})),
        (status = 400, description = "`invalid_body` (not the JSON above, the form of old clients `{\"image_ids\": […]}` included, a SHA-256 that is not 64 lowercase hex characters, or more than 100 photos), `invalid_image_id`.", body = ErrorBody),
        (status = 413, description = "`too_large`: a body of more than 24 KiB.", body = ErrorBody),
        (status = 429, description = "`too_many_requests`: the caller's upload rate; see `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn known(
    State(state): State<ApiState>,
    caller: Uploader,
    body: Result<Json<KnownRequest>, JsonRejection>,
) -> Result<Json<KnownImages>, ApiError> {
    let Json(body) = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("a precheck body is at most {KNOWN_MAX_BODY} bytes"),
            )
        } else if e.body_text().contains("image_ids") {
            ApiError::bad_request(
                "invalid_body",
                "the precheck takes {\"images\": [{\"image_id\": MD5, \"sha256\": SHA-256}]}: \
                 both hashes of each photo (an MD5 alone is easy to collide)",
            )
        } else {
            ApiError::bad_request("invalid_body", e.body_text())
        }
    })?;
    if body.images.len() > KNOWN_MAX_IDS {
        return Err(ApiError::bad_request(
            "invalid_body",
            format!(
                "at most {KNOWN_MAX_IDS} photos per precheck, got {}",
                body.images.len()
            ),
        ));
    }
    let mut ids = Vec::with_capacity(body.images.len());
    for photo in &body.images {
        let id = ImageId::parse(&photo.image_id).map_err(FlowError::from)?;
        let sha256 = ContentHash::parse(&photo.sha256)
            .map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))?;
        ids.push((id, sha256));
    }
    state.service.admit_upload(caller.owner.as_ref()).await?;
    let owner = caller.owner.clone().unwrap_or_else(Owner::open);
    let records = state.service.known_images(&owner, &ids).await?;
    let known = records
        .iter()
        .map(|record| state.urls.image(record, Some(true), None))
        .collect();
    Ok(Json(KnownImages { known }))
}
