//! The `fetch` Lambda function: one download attempt per fetch task, from the queue of the
//! tier in `IMGEST_FETCH_TIER` (one deployment of this binary per tier). A new photo is
//! processed here when the function's memory holds its decode, else handed to the process
//! function.

use aws_lambda_events::event::sqs::SqsEvent;
use imgest_crawl::Processing;
use imgest_lambda::BatchResponse;
use imgest_lambda::cloudwatch::flushed;
use imgest_lambda_crawl::fetch;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_lambda::init("info")?;
    // Crawls that settle here are finished by the intake function (this one may not link
    // offers nor send results).
    let (settings, service) =
        imgest_lambda::decoding_service_from_env(imgest_pipeline::configure::imaging).await?;
    let crawler = imgest_lambda_crawl::crawler(&settings, service, Processing::InlineWhenItFits)
        .finishing_elsewhere();
    // The downloader (its TLS roots) is built in the init phase, with the CPU Lambda gives
    // it, rather than during the first download; the other functions never build it.
    crawler.downloader()?;
    let crawler = &crawler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let handled = fetch::handle(crawler, event.payload);
        Ok::<BatchResponse, lambda_runtime::Error>(flushed(handled).await)
    }))
    .await
}
