//! The `process` Lambda function: S3 notifications of presigned uploads, via SQS.

use aws_lambda_events::event::sqs::SqsEvent;
use imgest_shared::handlers::{BatchResponse, process};
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_shared::telemetry::init("info");
    let (_, service) = imgest_shared::app::service_from_env().await?;
    let service = &service;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<BatchResponse, lambda_runtime::Error>(process::handle(service, event.payload).await)
    }))
    .await
}
