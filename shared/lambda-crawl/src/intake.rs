//! The `intake` function: SQS messages that each carry one crawl request (the same JSON as
//! `POST /v1/crawl`). A request is taken in only when SQS's `SenderId` names a sender that
//! `IMGEST_INTAKE_SENDERS` lets act for its client (or a listed redriver resends a message
//! such a sender sent); any other goes to the dead letters as `forbidden`, naming the sender
//! the decision was about, with nothing read or written.

use aws_lambda_events::event::sqs::SqsEvent;

use imgest_crawl::Crawler;
use imgest_crawl::messages::CrawlRequest;
use imgest_flows::queues::INTAKE_QUEUE;
use imgest_lambda::batch::{BatchResponse, ItemError, run_batch};

pub async fn handle(crawler: &Crawler, event: SqsEvent) -> BatchResponse {
    let items = imgest_lambda::sqs_items(event, &crawler.settings().senders);
    // Each message is intaken under its id: delivered again, it is the same crawl.
    let work = items
        .iter()
        .map(|item| {
            (
                item.id.clone(),
                (item.id.as_str(), item.body.as_str(), item.sender.as_deref()),
            )
        })
        .collect();
    let outcomes = run_batch(work, |(id, body, sender)| async move {
        let request: CrawlRequest = serde_json::from_str(body)
            .map_err(|e| ItemError::unusable(format!("not a crawl request: {e}")))?;
        crawler.intake_message(request, id, sender).await?;
        Ok(())
    })
    .await;
    let service = crawler.service();
    outcomes
        .settle(&items, &imgest_lambda::dead_letters(service, INTAKE_QUEUE))
        .await
}
