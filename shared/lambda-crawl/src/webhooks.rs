//! The `webhooks` function: SQS messages that each name one result to deliver to its client's
//! endpoint (`{"webhook": {"client_id", "crawl_id", "filed_ms", ...}}`), each one attempt or a
//! wait while its endpoint cools; a retry is sent as a new message (a wait beyond SQS's 15
//! minutes goes as a chain of hops, [`chain`](imgest_lambda::chain)), a delivery given up on
//! goes to the dead letters with its reason. Only the stack's own messages are taken (the
//! queue's policy; another sender's go to the dead letters as `forbidden`): what a message
//! names is read from the store, never believed from the message.

use aws_lambda_events::event::sqs::SqsEvent;

use imgest_crawl::Crawler;
use imgest_crawl::webhooks::{Outcome, WEBHOOK_QUEUE, WebhookMessage};
use imgest_lambda::batch::{BatchResponse, ItemError, run_batch};

pub async fn handle(crawler: &Crawler, event: SqsEvent) -> BatchResponse {
    let service = crawler.service();
    let items = imgest_lambda::sqs_items(event, &crawler.settings().senders);
    let arrived = imgest_lambda::chain::arrive(service, WEBHOOK_QUEUE, items).await;
    let work = arrived
        .due
        .iter()
        .map(|item| (item.id.clone(), item))
        .collect();
    let outcomes = run_batch(work, |item| async move {
        let message: WebhookMessage = serde_json::from_str(&item.body)
            .map_err(|e| ItemError::unusable(format!("not a webhook delivery: {e}")))?;
        match crawler.deliver_webhook(&message.webhook).await? {
            Outcome::GaveUp(reason) => Err(ItemError::NeverSucceeds(reason)),
            Outcome::Delivered { .. } | Outcome::Rescheduled { .. } | Outcome::Dropped => Ok(()),
        }
    })
    .await;
    arrived
        .settle(
            outcomes,
            &imgest_lambda::dead_letters(service, WEBHOOK_QUEUE),
        )
        .await
}
