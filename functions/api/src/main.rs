//! The `api` Lambda function: the HTTP API router behind API Gateway (HTTP API, payload v2).

use std::sync::Arc;

use imgest_crawl::{Crawler, Processing};
use imgest_http::auth::Authenticator;
use imgest_http::{ApiState, Edge, router};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    imgest_lambda::init("info")?;
    let (settings, service) =
        imgest_lambda::decoding_service_from_env(imgest_pipeline::configure::imaging).await?;
    let service = Arc::new(service);
    // `POST /v1/crawl` runs intake here: fetch tasks go to the tier queues.
    let crawler = Crawler::new(service.clone(), settings.crawl.clone(), Processing::Handoff);
    // API Gateway's JWT authorizer checked the token; the claims come with the request.
    let auth = Authenticator::for_lambda(&settings.auth)?;
    let state = ApiState::new(
        service,
        Arc::new(crawler),
        &settings.public_base_url(),
        auth,
    );
    lambda_http::run(router(state, Edge::Lambda)).await
}
