//! The HTTP API: one axum router, served by the local runner and (through lambda_http) by the
//! API Lambda function. JSON under `/v1`, every route behind a bearer token (`auth`); every
//! error is `{"error": {"kind", "message"}}`.

mod auth;
mod body;
mod crawl;
mod error;
mod files;
mod images;
mod json;
mod offers;
mod router;
mod uploads;

pub use error::ApiError;
pub use json::{ImageJson, OfferJson, VariantJson};
pub use router::{ApiState, Edge, router};
