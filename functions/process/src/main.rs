//! The `process` Lambda function: S3 notifications of presigned uploads and of crawled photos the
//! fetch functions downloaded, via SQS.

use aws_lambda_events::event::sqs::SqsEvent;
use imgest_crawl::Processing;
use imgest_lambda::BatchResponse;
use imgest_lambda::cloudwatch::flushed;
use imgest_lambda_crawl::process;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_lambda::init("info")?;
    // Crawls that settle here are finished by the intake function (this one may not link
    // offers nor send results).
    let (settings, service) =
        imgest_lambda::decoding_service_from_env(imgest_pipeline::configure::imaging).await?;
    let crawler =
        imgest_lambda_crawl::crawler(&settings, service, Processing::Handoff).finishing_elsewhere();
    let crawler = &crawler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let handled = process::handle(crawler, event.payload);
        Ok::<BatchResponse, lambda_runtime::Error>(flushed(handled).await)
    }))
    .await
}
