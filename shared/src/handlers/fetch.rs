//! The `fetch` function (one per tier, each on its tier's queue): SQS messages that each carry
//! one fetch task. Retries and tier moves are sent as new messages, so a message is done once
//! its attempt is. What the batch taught about its hosts is shared before the invocation ends.

use aws_lambda_events::event::sqs::SqsEvent;

use super::batch::{BatchResponse, ItemError, run_batch};
use crate::flows::crawl::Crawler;
use crate::flows::crawl::messages::FetchTask;

pub async fn handle(crawler: &Crawler, event: SqsEvent) -> BatchResponse {
    let items = super::sqs_items(event);
    let response = run_batch(items, |body| async move {
        let task: FetchTask = serde_json::from_str(&body)
            .map_err(|e| ItemError::Unusable(format!("not a fetch task: {e}")))?;
        crawler.run_fetch(task).await?;
        Ok(())
    })
    .await;
    // The instance may be frozen until its next invocation: what it learned goes out now.
    crawler.flush_learning().await;
    response
}
