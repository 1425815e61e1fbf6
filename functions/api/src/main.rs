//! The `api` Lambda function: the HTTP API router behind API Gateway (HTTP API, payload v2).

use std::sync::Arc;

use imgest_shared::api::{ApiState, router};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    imgest_shared::telemetry::init("info");
    let (settings, service) = imgest_shared::app::service_from_env().await?;
    let app = router(
        ApiState::new(Arc::new(service), &settings.public_base_url()),
        false,
    );
    lambda_http::run(app).await
}
