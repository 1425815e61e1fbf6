//! The page a person uses (`GET /` and its assets under `/page/`), served by the local runner:
//! plain HTML, CSS and JS compiled into the binary (no build step), which call the documented
//! API like any client. Open to anyone: the page holds no data; what it shows comes from API
//! calls made with the visitor's own token.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::openapi::ErrorBody;

/// The page's files: name, content type, bytes.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "page.js",
        "text/javascript; charset=utf-8",
        include_str!("page/page.js"),
    ),
    (
        "page.css",
        "text/css; charset=utf-8",
        include_str!("page/page.css"),
    ),
    (
        "spark-md5.min.js",
        "text/javascript; charset=utf-8",
        include_str!("page/spark-md5.min.js"),
    ),
    (
        "thumbhash.js",
        "text/javascript; charset=utf-8",
        include_str!("page/thumbhash.js"),
    ),
];

/// What the page may load and call: only this origin, but the photos' previews, which come
/// from wherever `IMGEST_PUBLIC_URL` says files are served.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' http: https: blob: data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The page (local runner only)
///
/// Drop photos (each is hashed in the browser, checked with `POST /v1/images/known`, and
/// uploaded only if not stored), arrange them into an offer and save it, see an offer's crawl.
/// Open to anyone; its API calls carry the token the page was opened with (`/#token=...`).
#[utoipa::path(
    get,
    path = "/",
    tag = "local runner",
    operation_id = "get_page",
    responses((status = 200, description = "The page.", content_type = "text/html", body = String)),
)]
pub async fn index() -> Response {
    with_type("text/html; charset=utf-8", include_str!("page/index.html"))
}

/// The page's scripts and styles (local runner only)
#[utoipa::path(
    get,
    path = "/page/{file}",
    tag = "local runner",
    operation_id = "get_page_asset",
    params(("file" = String, Path, description = "`page.js`, `page.css`, `spark-md5.min.js` or `thumbhash.js`.", example = "page.js")),
    responses(
        (status = 200, description = "The file.", content(("text/javascript"), ("text/css"))),
        (status = 404, description = "`file_not_found`.", body = ErrorBody),
    ),
)]
pub async fn asset(Path(name): Path<String>) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|(file, _, _)| *file == name)
        .map(|(_, content_type, body)| with_type(content_type, body))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "file_not_found",
                format!("the page has no file {name}"),
            )
        })
}

fn with_type(content_type: &'static str, body: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // A new binary may serve new files under the same names: always ask again.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
