//! The `ttl-cleanup` Lambda function: the table's stream, filtered to image records removed by
//! DynamoDB's TTL; deletes the files of each removed generation.

use imgest_aws::dynamodb;
use imgest_lambda::cloudwatch::flushed;
use imgest_lambda::{BatchResponse, ttl_cleanup};
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_lambda::init("info")?;
    let (_, service) = imgest_lambda::service_from_env().await?;
    let service = &service;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let removals = dynamodb::removed_images(&event.payload);
            let handled = ttl_cleanup::handle(service, removals);
            Ok::<BatchResponse, lambda_runtime::Error>(flushed(handled).await)
        },
    ))
    .await
}
