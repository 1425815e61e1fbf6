//! The `intake` function: SQS messages that each carry one crawl request (the same JSON as
//! `POST /v1/crawl`).

use aws_lambda_events::event::sqs::SqsEvent;

use super::batch::{BatchResponse, ItemError, run_batch};
use imgest_flows::crawl::Crawler;
use imgest_flows::crawl::messages::CrawlRequest;

pub async fn handle(crawler: &Crawler, event: SqsEvent) -> BatchResponse {
    // Each message is intaken under its id: delivered again, it is the same crawl.
    let items = super::sqs_items(event)
        .into_iter()
        .map(|(id, body)| (id.clone(), (id, body)))
        .collect();
    run_batch(items, |(id, body)| async move {
        let request: CrawlRequest = serde_json::from_str(&body)
            .map_err(|e| ItemError::Unusable(format!("not a crawl request: {e}")))?;
        crawler.intake_message(request, &id).await?;
        Ok(())
    })
    .await
}
