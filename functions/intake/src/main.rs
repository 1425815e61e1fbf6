//! The `intake` Lambda function: crawl requests (an offer's photo URLs) from the intake queue,
//! and the crawls the fetch and process functions settled, from the settle queue, to finish.

use aws_lambda_events::event::sqs::SqsEvent;
use imgest_crawl::{Processing, SETTLE_QUEUE};
use imgest_lambda::BatchResponse;
use imgest_lambda::cloudwatch::flushed;
use imgest_lambda_crawl::{intake, settle};
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_lambda::init("info")?;
    let (settings, service) = imgest_lambda::service_from_env().await?;
    // The crawls it finishes were settled by functions that decode partners' bytes.
    let crawler = imgest_lambda_crawl::crawler(&settings, service, Processing::Handoff)
        .verifying_settled_crawls();
    let settle_queue = imgest_lambda::queue_name(&settings, SETTLE_QUEUE).unwrap_or_default();
    let (crawler, settle_queue) = (&crawler, settle_queue.as_str());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        // Only a batch from the settle queue is read as settled crawls: what partners send to
        // the intake queue is always a crawl request.
        let handled = async move {
            if !settle_queue.is_empty() && imgest_lambda::from_queue(&event.payload, settle_queue) {
                settle::handle(crawler, event.payload).await
            } else {
                intake::handle(crawler, event.payload).await
            }
        };
        Ok::<BatchResponse, lambda_runtime::Error>(flushed(handled).await)
    }))
    .await
}
