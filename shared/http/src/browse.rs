//! `GET /v1/operator/images`: the local runner's browse of every stored image, or only the
//! orphans, for the page's "Images" view. Images are shared by content across clients, so only
//! the operator (`imgest:operator`) may list them. Local runner only: on AWS the API function
//! is not granted the table scan this needs (`imgest stats` counts them instead).

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::json::ImageJson;
use super::openapi::ErrorBody;
use super::{ApiError, ApiState};
use crate::auth::Operator;
use imgest_core::ports::StoreError;
use imgest_flows::FlowError;
use imgest_flows::browse::Browse;

/// Images per page by default, and at most.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 200;
/// The longest cursor taken back (ours are the store's position, an image id or a DynamoDB key
/// of a few dozen characters, in URL-safe base64: safe to paste into a query string as is).
const MAX_CURSOR: usize = 512;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct BrowseQuery {
    /// `true`: only the images no offer links (kept until their orphan window ends).
    #[serde(default)]
    orphans: bool,
    /// The previous page's `next_cursor`; absent for the first page.
    #[param(max_length = 512)]
    cursor: Option<String>,
    /// Images per page: 1 to 200, 50 when absent.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<usize>,
}

/// A stored image, with what the operator needs to judge it.
#[derive(Debug, Serialize, ToSchema)]
pub struct BrowsedImage {
    #[serde(flatten)]
    image: ImageJson,
    /// When its bytes were first stored (RFC 3339).
    created_at: String,
    /// Its last use: upload, re-upload, link or unlink (RFC 3339).
    last_update: String,
    /// When it may be garbage-collected, if no offer links it by then (RFC 3339); absent while
    /// an offer links it.
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
}

/// One page of images.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImagePage {
    /// In image id order.
    images: Vec<BrowsedImage>,
    /// Ask again with this as `cursor` for the next page (URL-safe: it goes into the query as
    /// is); absent at the end. A page may hold fewer images than `limit` (even none) and still
    /// have a next one.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// Browse the stored images (local runner only)
///
/// Every live image, or only the orphans, in pages, each with its variants, how many offers
/// link it and when an orphan may be collected. For the operator: images are shared by
/// content across clients.
#[utoipa::path(
    get,
    path = "/v1/operator/images",
    tag = "local runner",
    operation_id = "browse_images",
    params(BrowseQuery),
    responses(
        (status = 200, description = "A page of images.", body = ImagePage,
            example = json!({"images": [{"image_id": "3b5d5c3712955042212316173ccf37be", "width": 4032, "height": 3024, "format": "jpeg",
                "variants": {"thumb": {"url": "http://127.0.0.1:8080/files/public/3b/3b5d5c3712955042212316173ccf37be/1a2b3c4d/thumb.jpg", "width": 320, "height": 240, "format": "jpeg"}},
                "offers": 0, "created_at": "2026-11-20T10:00:00.000Z", "last_update": "2026-11-20T10:05:00.000Z", "expires_at": "2026-11-27T10:05:00.000Z"}],
                "next_cursor": "M2I1ZDVjMzcxMjk1NTA0MjIxMjMxNjE3M2NjZjM3YmU"})),
        (status = 400, description = "`invalid_query`: an unknown parameter, `orphans` not `true` or `false`, `limit` not 1 to 200, or a cursor longer than 512 characters or not one this API gave out.", body = ErrorBody,
            example = json!({"error": {"kind": "invalid_query", "message": "limit is 1 to 200"}})),
    ),
)]
pub async fn list(
    State(state): State<ApiState>,
    _: Operator,
    query: Result<Query<BrowseQuery>, QueryRejection>,
) -> Result<Json<ImagePage>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("limit is 1 to {MAX_LIMIT}"),
        ));
    }
    if query.cursor.as_ref().is_some_and(|c| c.len() > MAX_CURSOR) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("a cursor is at most {MAX_CURSOR} characters"),
        ));
    }
    let cursor = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let filter = if query.orphans {
        Browse::Orphans
    } else {
        Browse::All
    };
    let page = state
        .service
        .browse_images(filter, cursor.as_deref(), limit)
        .await
        .map_err(|e| match e {
            FlowError::Store(StoreError::BadCursor(_)) => {
                ApiError::bad_request("invalid_query", "the cursor is not one this API gave out")
            }
            other => other.into(),
        })?;
    let images = page
        .images
        .iter()
        .map(|record| BrowsedImage {
            image: state.urls.image(record, None, Some(record.link_count)),
            created_at: record.created_at.to_string(),
            last_update: record.last_update.to_string(),
            expires_at: record.expires_at.map(|t| t.to_string()),
        })
        .collect();
    Ok(Json(ImagePage {
        images,
        next_cursor: page.next.map(|c| URL_SAFE_NO_PAD.encode(c)),
    }))
}

const NOT_OURS: &str = "the cursor is not one this API gave out";

/// The store's position in a cursor this API gave out.
fn decode_cursor(cursor: &str) -> Result<String, ApiError> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| ApiError::bad_request("invalid_query", NOT_OURS))
}
