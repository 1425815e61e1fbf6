//! Rate-limit permits asked for together. The downloads of one SQS batch (or of a local
//! pool) start at about the same moment, mostly for the same client; each asking the shared
//! limiter on its own costs one conditional write per download, and the writes contend for
//! the same item (losers re-read and write again). Here the first asker waits a moment
//! ([`GATHER`]), then asks once for everyone who joined, and shares out what it got.
//!
//! The limits are the limiter's: the grants are recorded at the moment of the one request and
//! each download leaves right after it, as it would have on its own.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::domain::Timestamp;
use crate::ports::{Grant, RateLimiter, StoreError};

/// How long the first asker waits for others to join: short against a download, long enough
/// for a batch's downloads whose records were read in the same few milliseconds.
pub(super) const GATHER: Duration = Duration::from_millis(10);

type Waiter = oneshot::Sender<Result<Grant, StoreError>>;

/// Askers waiting for a client's shared request, by client.
#[derive(Default)]
pub(super) struct GrantBatcher {
    pending: Mutex<HashMap<String, Vec<Waiter>>>,
}

/// What a rate-limit request needs besides the client.
pub(super) struct Limit<'a> {
    pub limiter: &'a dyn RateLimiter,
    pub limit: u32,
    pub window: Duration,
}

impl GrantBatcher {
    /// One permit for `client` (or none, with when to come back), asked for together with
    /// every other caller for the same client within [`GATHER`]; `now` is read when the shared
    /// request is made.
    pub async fn acquire(
        &self,
        client: &str,
        limit: Limit<'_>,
        now: impl Fn() -> Timestamp,
    ) -> Result<Grant, StoreError> {
        let (tx, rx) = oneshot::channel();
        let leads = {
            let mut pending = self.lock();
            let waiters = pending.entry(client.to_owned()).or_default();
            waiters.push(tx);
            waiters.len() == 1
        };
        if leads {
            // Whatever happens to this call, later callers must not join a request nobody makes.
            let guard = Leader {
                batcher: self,
                client,
                taken: false,
            };
            tokio::time::sleep(GATHER).await;
            let waiters = guard.take();
            let wanted = u32::try_from(waiters.len()).unwrap_or(u32::MAX);
            let result = limit
                .limiter
                .acquire(client, wanted, limit.limit, limit.window, now())
                .await;
            share(waiters, result);
        }
        rx.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable {
                message: "the shared rate-limit request was abandoned".into(),
                source: None,
            })
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Waiter>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The first asker's hold on its client's entry: taking the waiters (or being dropped)
/// closes the entry, so the next caller starts a new request.
struct Leader<'a> {
    batcher: &'a GrantBatcher,
    client: &'a str,
    taken: bool,
}

impl Leader<'_> {
    /// Closes the entry and returns its waiters. Once taken, the client's entry belongs to the
    /// next request, which this one must never touch again.
    fn take(mut self) -> Vec<Waiter> {
        self.taken = true;
        self.batcher.lock().remove(self.client).unwrap_or_default()
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.taken {
            // Dropping the senders tells the waiters the request was abandoned.
            self.batcher.lock().remove(self.client);
        }
    }
}

/// Gives the first `granted` waiters a permit each and the rest the limiter's retry time.
fn share(waiters: Vec<Waiter>, result: Result<Grant, StoreError>) {
    match result {
        Ok(grant) => {
            for (i, waiter) in waiters.into_iter().enumerate() {
                let one = if (i as u64) < u64::from(grant.granted) {
                    Grant {
                        granted: 1,
                        retry_at: None,
                    }
                } else {
                    Grant {
                        granted: 0,
                        retry_at: grant.retry_at,
                    }
                };
                let _ = waiter.send(Ok(one));
            }
        }
        Err(e) => {
            for waiter in waiters {
                let _ = waiter.send(Err(same_kind(&e)));
            }
        }
    }
}

/// An error of the same kind (and so the same retry decision) for each waiter.
fn same_kind(e: &StoreError) -> StoreError {
    let message = format!("rate-limit request: {e}");
    match e {
        StoreError::NotFound(_) => StoreError::NotFound(message),
        StoreError::Conflict(_) => StoreError::Conflict(message),
        StoreError::Unavailable { .. } => StoreError::Unavailable {
            message,
            source: None,
        },
        StoreError::Backend { .. } => StoreError::Backend {
            message,
            source: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use async_trait::async_trait;

    use super::*;

    /// Grants up to `left` permits in total and counts the requests.
    struct Budget {
        left: AtomicU32,
        requests: AtomicU32,
    }

    #[async_trait]
    impl RateLimiter for Budget {
        async fn acquire(
            &self,
            _client: &str,
            wanted: u32,
            _limit: u32,
            _window: Duration,
            now: Timestamp,
        ) -> Result<Grant, StoreError> {
            self.requests.fetch_add(1, Ordering::SeqCst);
            let granted = wanted.min(self.left.load(Ordering::SeqCst));
            self.left.fetch_sub(granted, Ordering::SeqCst);
            Ok(Grant {
                granted,
                retry_at: (granted < wanted).then(|| now.plus(Duration::from_secs(1))),
            })
        }
    }

    fn budget(permits: u32) -> Budget {
        Budget {
            left: AtomicU32::new(permits),
            requests: AtomicU32::new(0),
        }
    }

    /// One permit for the test's client, in a 60-second window, at a fixed time.
    async fn ask(
        batcher: &GrantBatcher,
        limiter: &dyn RateLimiter,
        limit: u32,
    ) -> Result<Grant, StoreError> {
        let window = Duration::from_secs(60);
        let limit = Limit {
            limiter,
            limit,
            window,
        };
        batcher
            .acquire("shop", limit, || Timestamp::from_millis(1_000))
            .await
    }

    #[tokio::test]
    async fn concurrent_askers_share_one_request_and_never_more_permits_than_granted() {
        let budget = Arc::new(budget(3));
        let batcher = GrantBatcher::default();
        let ask = || ask(&batcher, budget.as_ref(), 3);
        let grants = futures_util::future::join_all((0..5).map(|_| ask())).await;
        let grants: Vec<Grant> = grants
            .into_iter()
            .map(|g| g.unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert_eq!(budget.requests.load(Ordering::SeqCst), 1);
        assert_eq!(grants.iter().map(|g| g.granted).sum::<u32>(), 3);
        assert!(
            grants
                .iter()
                .filter(|g| g.granted == 0)
                .all(|g| g.retry_at == Some(Timestamp::from_millis(2_000)))
        );

        // A later asker starts a new request.
        let later = ask().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(later.granted, 0);
        assert_eq!(budget.requests.load(Ordering::SeqCst), 2);
    }

    /// Lets the test hold a request inside the limiter.
    struct Gated {
        entered: tokio::sync::Notify,
        open: tokio::sync::Semaphore,
        budget: Budget,
    }

    #[async_trait]
    impl RateLimiter for Gated {
        async fn acquire(
            &self,
            client: &str,
            wanted: u32,
            limit: u32,
            window: Duration,
            now: Timestamp,
        ) -> Result<Grant, StoreError> {
            self.entered.notify_one();
            let _permit = self.open.acquire().await;
            self.budget
                .acquire(client, wanted, limit, window, now)
                .await
        }
    }

    #[tokio::test]
    async fn a_request_that_finishes_leaves_the_next_one_alone() {
        let gated = Gated {
            entered: tokio::sync::Notify::new(),
            open: tokio::sync::Semaphore::new(0),
            budget: budget(10),
        };
        let batcher = GrantBatcher::default();
        let ask = || ask(&batcher, &gated, 10);
        // The first request goes into the limiter and waits there.
        let first = ask();
        tokio::pin!(first);
        tokio::select! {
            biased;
            _ = &mut first => panic!("the limiter is still closed"),
            () = gated.entered.notified() => {}
        }
        // A second one starts gathering (polled once: it joins a new entry)...
        let second = ask();
        tokio::pin!(second);
        tokio::select! {
            biased;
            _ = &mut second => panic!("the limiter is still closed"),
            () = std::future::ready(()) => {}
        }
        // ...while the first finishes: that must not close the second's entry.
        gated.open.add_permits(1);
        let first = first.await;
        gated.open.add_permits(1);
        let second = second.await;
        assert_eq!(first.map(|g| g.granted).ok(), Some(1));
        assert_eq!(second.map(|g| g.granted).ok(), Some(1));
        assert_eq!(gated.budget.requests.load(Ordering::SeqCst), 2);
    }
}
