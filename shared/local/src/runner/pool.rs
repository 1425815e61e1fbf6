//! A pool of workers on one queue of the embedded task queue: what the fetch pools and the
//! webhook workers share. It leases as many due tasks as it has free workers, hands each to the
//! queue's handler, polls again when there were none, and stops taking tasks when told to,
//! returning once the tasks under way are done.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tracing::{info, warn};

use imgest_core::ports::{Delivery, TaskQueue};
use imgest_crawl::Crawler;

/// How the pool on one queue runs.
pub(super) struct Pool {
    pub queue: String,
    pub workers: usize,
    /// How long a task is leased: its handler's longest run and a margin.
    pub lease: Duration,
    /// How often an idle pool looks for due tasks.
    pub idle_poll: Duration,
}

impl Pool {
    /// Runs `handle` on each task of the pool's queue until `stop` turns true. First it takes
    /// over the tasks a runner that died (killed, crashed) left leased: they run now rather
    /// than when their leases would end, minutes later.
    pub async fn run<H, Fut>(
        self,
        crawler: Arc<Crawler>,
        queue: Arc<dyn TaskQueue>,
        mut stop: watch::Receiver<bool>,
        handle: H,
    ) where
        H: Fn(Arc<Crawler>, Arc<dyn TaskQueue>, Delivery) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        match queue.release_leases(&self.queue).await {
            Ok(0) => {}
            Ok(n) => {
                info!(queue = %self.queue, tasks = n, "took over the tasks a stopped runner left leased")
            }
            Err(e) => {
                warn!(queue = %self.queue, error = %e, "could not release stale leases; their tasks wait for the leases to end")
            }
        }
        let slots = Arc::new(Semaphore::new(self.workers));
        while !*stop.borrow() {
            let free = slots.available_permits();
            if free == 0 {
                // Wait for a running task to finish (or for the stop signal).
                tokio::select! {
                    permit = slots.clone().acquire_owned() => drop(permit),
                    _ = stop.changed() => {}
                }
                continue;
            }
            let now = crawler.service().ports().clock.now();
            let deliveries = match queue.receive(&self.queue, now, free, self.lease).await {
                Ok(d) => d,
                Err(e) => {
                    warn!(queue = %self.queue, error = %e, "cannot read the queue");
                    Vec::new()
                }
            };
            if deliveries.is_empty() {
                tokio::select! {
                    _ = tokio::time::sleep(self.idle_poll) => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
            for delivery in deliveries {
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let task = handle(crawler.clone(), queue.clone(), delivery);
                tokio::spawn(async move {
                    task.await;
                    drop(permit);
                });
            }
        }
        // Let the tasks under way finish before returning.
        let _ = slots.acquire_many(self.workers as u32).await;
    }
}
