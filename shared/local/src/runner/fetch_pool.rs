//! The download workers: one pool per timeout tier, each taking fetch tasks
//! from its tier's queue in the embedded task queue. Separate pools are the local form of the
//! per-tier queues and concurrency limits on AWS: slow hosts fill the slow pools and never
//! hold up the fast one.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{error, warn};

use super::pool::Pool;
use imgest_core::ports::{Delivery, Reason, TaskQueue};
use imgest_crawl::messages::FetchTask;
use imgest_crawl::{Crawler, tier_queue};

/// How often an idle pool looks for due tasks.
const IDLE_POLL: Duration = Duration::from_millis(20);
/// A task's lease beyond its tier's deadline (host slot waits, processing the photo).
const LEASE_MARGIN: Duration = Duration::from_secs(300);
/// Storage failures put the task back this far ahead...
const STORE_RETRY: Duration = Duration::from_secs(1);
/// ...this many times, then it goes to the dead letters (with the error) for an operator.
const MAX_DELIVERIES: u32 = 10;

/// Runs every tier's pool until `stop` turns true; returns when the running tasks are done.
pub async fn run(crawler: Arc<Crawler>, queue: Arc<dyn TaskQueue>, stop: watch::Receiver<bool>) {
    let pools: Vec<_> = (0..crawler.settings().tiers.len())
        .map(|tier| tokio::spawn(run_tier(crawler.clone(), queue.clone(), tier, stop.clone())))
        .collect();
    for pool in pools {
        if let Err(e) = pool.await {
            error!(error = %e, "a download pool stopped abnormally");
        }
    }
}

async fn run_tier(
    crawler: Arc<Crawler>,
    queue: Arc<dyn TaskQueue>,
    tier: usize,
    stop: watch::Receiver<bool>,
) {
    let pool = Pool {
        queue: tier_queue(tier),
        workers: crawler.settings().workers[tier],
        lease: crawler.settings().tiers[tier] + LEASE_MARGIN,
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
    let task = match serde_json::from_str::<FetchTask>(&delivery.payload) {
        Ok(t) => t,
        Err(e) => {
            let now = crawler.service().ports().clock.now();
            let reason = Reason::new(Reason::UNUSABLE, format!("not a fetch task: {e}"));
            if let Err(e) = queue.dead_letter(&delivery, &reason, now).await {
                warn!(error = %e, "cannot dead-letter a bad fetch task");
            }
            return;
        }
    };
    let outcome = crawler.run_fetch(task).await;
    let result = match outcome {
        Ok(()) => queue.ack(&delivery).await,
        Err(e) if delivery.attempts >= MAX_DELIVERIES => {
            error!(error = %e, key = %delivery.key, "fetch task failed every time; dead-lettered");
            let now = crawler.service().ports().clock.now();
            let reason = Reason::new(e.kind(), e.to_string());
            queue.dead_letter(&delivery, &reason, now).await
        }
        Err(e) => {
            warn!(error = %e, key = %delivery.key, "fetch task failed; retrying");
            let at = crawler.service().ports().clock.now().plus(STORE_RETRY);
            queue.retry(&delivery, at).await
        }
    };
    if let Err(e) = result {
        warn!(error = %e, key = %delivery.key, "cannot settle a fetch task in the queue");
    }
}
