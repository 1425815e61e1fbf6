//! The `webhooks` Lambda function: results delivered to their clients' webhook endpoints, from
//! the webhooks queue.

use aws_lambda_events::event::sqs::SqsEvent;
use imgest_crawl::Processing;
use imgest_lambda::BatchResponse;
use imgest_lambda::cloudwatch::flushed;
use imgest_lambda_crawl::webhooks;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_lambda::init("info")?;
    let (settings, service) = imgest_lambda::service_from_env().await?;
    // It never downloads nor decodes: the processing mode is never used.
    let crawler = imgest_lambda_crawl::crawler(&settings, service, Processing::Handoff);
    let crawler = &crawler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<BatchResponse, lambda_runtime::Error>(
            flushed(webhooks::handle(crawler, event.payload)).await,
        )
    }))
    .await
}
