//! The HTTP API: one axum router, served by the local runner and (through lambda_http) by the
//! API Lambda function. JSON under `/v1`, every route behind a bearer token (`auth`) but the
//! OpenAPI document (`openapi`, at `GET /v1/openapi.json`); every error is
//! `{"error": {"kind", "message"}}` (5xx answers add `request_id`). The routes, their methods
//! and their scopes are declared once, in [`routes`].

pub mod auth;
mod body;
mod browse;
mod crawl;
mod erasures;
mod error;
mod files;
mod images;
mod json;
pub mod local_guard;
mod offers;
mod openapi;
mod page;
mod router;
pub mod routes;
mod scrape;
mod similar;
mod uploads;
mod webhooks;

pub use error::{ApiError, UNAUTHENTICATED};
pub use json::{ImageJson, OfferJson, VariantJson};
pub use openapi::{PATH as OPENAPI_PATH, document_json as openapi_json};
pub use router::{ApiState, Edge, router};

// The JSON bodies the routes parse (the crawl's are in `imgest_crawl::messages`), public for
// the fuzz targets.
pub use offers::SetPhotos;
pub use uploads::CreateUpload;
