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

// The JSON bodies the routes parse (the crawl's are in `flows::crawl::messages`), public for
// the fuzz targets.
pub use offers::SetPhotos;
pub use uploads::CreateUpload;
