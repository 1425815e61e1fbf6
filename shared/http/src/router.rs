//! Routes and shared state.

use std::sync::Arc;

use axum::Router;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post, put};
use serde::Serialize;
use tracing::{Instrument, error, info};
use utoipa::ToSchema;

use super::error::{AnsweredKind, ErrorBody};
use super::json::FileUrls;
use super::routes::{self, Op, Route};
use super::{
    ApiError, auth, browse, crawl, erasures, files, images, offers, openapi, page, scrape, similar,
    uploads, webhooks,
};
use crate::auth::Authenticator;
use crate::local_guard::{self, LocalGuard};
use imgest_core::domain::random::secure_hex;
use imgest_crawl::Crawler;
use imgest_flows::Service;

#[derive(Clone)]
pub struct ApiState {
    pub service: Arc<Service>,
    /// The crawl routes' flows (`POST /v1/crawl`, `GET /v1/offers/{id}/crawl`).
    pub crawler: Arc<Crawler>,
    pub urls: FileUrls,
    /// Who checks callers of the `/v1` routes.
    pub auth: Authenticator,
    /// An open local runner's guard against web pages (see `local_guard`).
    pub local_guard: Option<LocalGuard>,
}

impl ApiState {
    /// `files_url` is the URL that file keys are appended to.
    pub fn new(
        service: Arc<Service>,
        crawler: Arc<Crawler>,
        files_url: &str,
        auth: Authenticator,
    ) -> Self {
        Self {
            service,
            crawler,
            urls: FileUrls::new(files_url),
            auth,
            local_guard: None,
        }
    }

    /// With an open local runner's guard against web pages.
    pub fn with_local_guard(mut self, guard: LocalGuard) -> Self {
        self.local_guard = Some(guard);
        self
    }
}

/// Who serves the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// The API function behind API Gateway: files are served by the bucket's CDN, presigned
    /// uploads go to S3.
    Lambda,
    /// The local runner, which also serves its files (`GET /files/{key}`) and is the target of
    /// its presigned uploads (`PUT /v1/uploads/{id}/body`).
    LocalRunner,
}

/// The API router, as `edge` serves it: the operations of [`routes`](crate::routes) it
/// serves, each behind its scopes (a caller the state's [`Authenticator`] accepted, holding one
/// of them, else 403 `forbidden`). `/healthz`, the OpenAPI document (`/v1/openapi.json`), the
/// local files and the local page need no credential. Past the scopes, each route's extractor
/// decides what the caller may touch: [`Uploader`](crate::auth::Uploader) (whose uploads),
/// [`Partner`](crate::auth::Partner) (which client's offers and crawls: `imgest:offers` with a
/// client), [`Observer`](crate::auth::Observer), [`Operator`](crate::auth::Operator).
pub fn router(state: ApiState, edge: Edge) -> Router {
    routes(edge)
        .into_iter()
        .fold(Router::new(), |router, (route, methods)| {
            router.route(route.path, methods)
        })
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(state.clone(), auth::authenticate))
        .layer(from_fn_with_state(state.clone(), local_guard::guard))
        .layer(from_fn(request_span))
        .with_state(state)
}

/// Every route `edge` serves, with its handler behind its scopes: the one list the router is
/// built from.
pub(super) fn routes(edge: Edge) -> Vec<(Route, MethodRouter<ApiState>)> {
    routes::served(edge == Edge::LocalRunner)
        .map(|route| {
            let methods = handler(route.op);
            let methods = if route.scopes.is_empty() {
                methods
            } else {
                methods.route_layer(from_fn_with_state(route.scopes, auth::require_scopes))
            };
            (route, methods)
        })
        .collect()
}

/// The handler of each operation (its method is the route's).
fn handler(op: Op) -> MethodRouter<ApiState> {
    match op {
        Op::Health => get(healthz),
        Op::OpenApi => get(openapi::document),
        // Upload handlers enforce IMGEST_MAX_BODY themselves, while streaming.
        Op::UploadImage => post(images::upload).layer(DefaultBodyLimit::disable()),
        Op::KnownImages => post(images::known).layer(DefaultBodyLimit::max(images::KNOWN_MAX_BODY)),
        Op::GetImage => get(images::get),
        Op::SimilarImages => get(similar::get),
        Op::EraseImage => delete(erasures::erase_upload),
        Op::CreateUpload => post(uploads::create),
        Op::GetUpload => get(uploads::get),
        Op::PutUploadBody => put(uploads::put_body).layer(DefaultBodyLimit::disable()),
        Op::SetOfferPhotos => put(offers::put_photos),
        Op::GetOfferPhotos => get(offers::get_photos),
        Op::DeleteOffer => delete(offers::delete),
        Op::Crawl => post(crawl::post),
        Op::GetCrawl => get(crawl::get),
        Op::ListCrawls => get(crawl::list),
        Op::Files => get(files::get),
        Op::Metrics => get(scrape::get),
        Op::BrowseImages => get(browse::list),
        Op::PurgeImage => post(erasures::purge).layer(DefaultBodyLimit::max(4096)),
        Op::ErasureStatus => get(erasures::status),
        Op::RegisterWebhook => put(webhooks::register).layer(DefaultBodyLimit::max(4096)),
        Op::GetWebhook => get(webhooks::get),
        Op::RemoveWebhook => delete(webhooks::remove),
        Op::RotateWebhookSecret => post(webhooks::rotate).layer(DefaultBodyLimit::max(4096)),
        Op::Page => get(page::index),
        Op::PageAsset => get(page::asset),
    }
}

/// Gives every request a fresh, unguessable id (a caller's own `x-request-id` is logged beside
/// it), logs within a span carrying it, logs the outcome, and answers with the id. A 5xx
/// answer's body says only its kind and the id: the details are in the log, under that id.
async fn request_span(request: Request, next: Next) -> Response {
    let id = secure_hex::<8>();
    let theirs = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or_default()
        .to_owned();
    // The caller's subject and client are recorded once authenticated (never the token).
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        client_request_id = %theirs,
        method = %request.method(),
        path = %request.uri().path(),
        sub = tracing::field::Empty,
        client = tracing::field::Empty,
    );
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if status.is_server_error() {
        let kind = response
            .extensions()
            .get::<AnsweredKind>()
            .map_or("internal", |k| k.0);
        span.in_scope(|| error!(status = status.as_u16(), kind, ms, "request failed"));
        let body = ErrorBody::new(
            kind,
            format!("the request failed on the server; its id is {id}"),
            Some(id.clone()),
        );
        let headers = std::mem::take(response.headers_mut());
        response = (status, axum::Json(body)).into_response();
        for name in [axum::http::header::RETRY_AFTER] {
            if let Some(value) = headers.get(&name) {
                response.headers_mut().insert(name, value.clone());
            }
        }
    } else {
        span.in_scope(|| info!(status = status.as_u16(), ms, "request finished"));
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", v);
    }
    // On AWS, one request is one invocation: its metrics leave with it.
    imgest_core::telemetry::metrics::flush();
    response
}

/// The health check's answer.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"status": "ok"}))]
pub(super) struct Health {
    /// Always `ok`: the process serves requests.
    #[schema(value_type = String)]
    status: &'static str,
}

/// Health check
///
/// Answers while the process serves requests (it checks no storage). No credential.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "meta",
    operation_id = "healthz",
    responses((status = 200, description = "Serving.", body = Health)),
)]
pub(super) async fn healthz() -> axum::Json<Health> {
    axum::Json(Health { status: "ok" })
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "route_not_found",
        format!("no route for {}", uri.path()),
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    )
}
