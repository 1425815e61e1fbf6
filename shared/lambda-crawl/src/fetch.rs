//! The `fetch` function (one per tier, each on its tier's queue): SQS messages that each carry
//! one fetch task. Retries and tier moves are sent as new messages, so a message is done once
//! its attempt is. The batch asks the rate limiter once per client, settles the photos it
//! processed together (one crawl write per offer), and shares what it learned about its hosts
//! before the invocation ends. A long wait that arrives before it is due is sent on first
//! ([`chain`](imgest_lambda::chain)) and does not run.

use aws_lambda_events::event::sqs::SqsEvent;

use imgest_crawl::messages::FetchTask;
use imgest_crawl::{Crawler, tier_queue};
use imgest_lambda::batch::{BatchResponse, ItemError, run_batch_then};

pub async fn handle(crawler: &Crawler, event: SqsEvent) -> BatchResponse {
    // Every task's place in the rate limiter's shared request is announced before any runs:
    // the batch asks the limiter once per client, however its tasks straggle on the way.
    let queue = tier_queue(crawler.settings().fetch_tier);
    let service = crawler.service();
    let items = imgest_lambda::sqs_items(event, &crawler.settings().senders);
    let arrived = imgest_lambda::chain::arrive(service, &queue, items).await;
    let work = arrived
        .due
        .iter()
        .map(|item| {
            let task = serde_json::from_str::<FetchTask>(&item.body)
                .map_err(|e| ItemError::unusable(format!("not a fetch task: {e}")));
            let place = task.as_ref().ok().map(|t| crawler.announce_fetch(t));
            (item.id.clone(), (task, place))
        })
        .collect();
    // Photos processed here are settled together, as the process function settles its batch.
    let outcomes =
        run_batch_then(
            work,
            |(task, mut place)| async move {
                Ok(crawler.run_batched_fetch(task?, place.as_mut()).await?)
            },
            |processed| async move { Ok(crawler.settle_downloads(processed).await?) },
        )
        .await;
    // The instance may be frozen until its next invocation: what it learned goes out now.
    crawler.flush_learning().await;
    arrived
        .settle(outcomes, &imgest_lambda::dead_letters(service, &queue))
        .await
}
