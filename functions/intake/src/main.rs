//! The `intake` Lambda function: crawl requests (an offer's photo URLs) from the intake queue.

use aws_lambda_events::event::sqs::SqsEvent;
use imgest_flows::crawl::Processing;
use imgest_lambda::cloudwatch::flushed;
use imgest_lambda::{BatchResponse, intake};
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_lambda::init("info")?;
    let crawler = imgest_lambda::crawler_from_env(Processing::Handoff).await?;
    let crawler = &crawler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let handled = intake::handle(crawler, event.payload);
        Ok::<BatchResponse, lambda_runtime::Error>(flushed(handled).await)
    }))
    .await
}
