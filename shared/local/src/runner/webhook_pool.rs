//! The webhook workers: deliveries taken from the embedded task queue's `webhooks` queue, the
//! local form of the webhooks function. A delivery's retry is a new task due later (sent by the
//! delivery itself); one given up on goes to the queue's dead letters with its reason, where
//! `imgest dlq --queue webhooks` lists and redrives it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{error, warn};

use super::pool::Pool;
use imgest_core::ports::{Delivery, Reason, TaskQueue};
use imgest_crawl::Crawler;
use imgest_crawl::webhooks::{Outcome, WEBHOOK_QUEUE, WebhookMessage};

/// How often an idle pool looks for due deliveries.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// Deliveries at once, whatever their endpoints (each endpoint's own limit is
/// `IMGEST_WEBHOOK_CONCURRENCY`).
const WORKERS: usize = 16;
/// A delivery's lease beyond its endpoint's timeout (the store's reads and writes, a wait for
/// its endpoint's slot).
const LEASE_MARGIN: Duration = Duration::from_secs(120);
/// Storage failures put the delivery back this far ahead...
const STORE_RETRY: Duration = Duration::from_secs(1);
/// ...this many times, then it goes to the dead letters (with the error) for an operator.
const MAX_DELIVERIES: u32 = 10;

/// Delivers until `stop` turns true; returns when the deliveries under way are done.
pub async fn run(crawler: Arc<Crawler>, queue: Arc<dyn TaskQueue>, stop: watch::Receiver<bool>) {
    let pool = Pool {
        queue: WEBHOOK_QUEUE.to_owned(),
        workers: WORKERS,
        lease: crawler.settings().webhook_timeout + LEASE_MARGIN,
        idle_poll: IDLE_POLL,
    };
    pool.run(
        crawler,
        queue,
        stop,
        |crawler, queue, delivery| async move {
            handle(&crawler, queue.as_ref(), delivery).await;
        },
    )
    .await;
}

async fn handle(crawler: &Crawler, queue: &dyn TaskQueue, delivery: Delivery) {
    let now = || crawler.service().ports().clock.now();
    let message = match serde_json::from_str::<WebhookMessage>(&delivery.payload) {
        Ok(m) => m,
        Err(e) => {
            let reason = Reason::new(Reason::UNUSABLE, format!("not a webhook delivery: {e}"));
            if let Err(e) = queue.dead_letter(&delivery, &reason, now()).await {
                warn!(error = %e, "cannot dead-letter a bad webhook delivery");
            }
            return;
        }
    };
    let result = match crawler.deliver_webhook(&message.webhook).await {
        Ok(Outcome::GaveUp(reason)) => {
            warn!(client_id = %message.webhook.client, crawl_id = %message.webhook.crawl_id, kind = %reason.kind, reason = %reason.message, "webhook delivery given up on; dead-lettered");
            queue.dead_letter(&delivery, &reason, now()).await
        }
        Ok(_) => queue.ack(&delivery).await,
        Err(e) if delivery.attempts >= MAX_DELIVERIES => {
            error!(error = %e, key = %delivery.key, "webhook delivery failed every time; dead-lettered");
            queue
                .dead_letter(&delivery, &Reason::new(e.kind(), e.to_string()), now())
                .await
        }
        Err(e) => {
            warn!(error = %e, key = %delivery.key, "webhook delivery failed; retrying");
            queue.retry(&delivery, now().plus(STORE_RETRY)).await
        }
    };
    if let Err(e) = result {
        warn!(error = %e, key = %delivery.key, "cannot settle a webhook delivery in the queue");
    }
}
