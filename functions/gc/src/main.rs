//! The `gc` Lambda function: DynamoDB stream records of image records removed by TTL.

use imgest_shared::handlers::{BatchResponse, gc};
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_shared::telemetry::init("info");
    let (_, service) = imgest_shared::app::service_from_env().await?;
    let service = &service;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            Ok::<BatchResponse, lambda_runtime::Error>(gc::handle(service, event.payload).await)
        },
    ))
    .await
}
