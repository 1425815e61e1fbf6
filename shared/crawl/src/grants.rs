//! Rate-limit permits asked for together. The downloads of one SQS batch (or of a local
//! pool) start at about the same moment, mostly for the same client; each asking the shared
//! limiter on its own costs one conditional write per download, and the writes contend for
//! the same item (losers re-read and write again). Here they are gathered
//! ([`Gather`](super::gather::Gather)): one request for everyone who asked within a moment,
//! shared out.
//!
//! The limits are the limiter's: the grants are recorded at the moment of the one request and
//! each download leaves right after it, as it would have on its own.

use std::time::Duration;

use super::gather::{Expected, Gather, abandoned, same_kind};
use imgest_core::domain::Timestamp;
use imgest_core::ports::{Grant, RateLimiter, StoreError};

/// Askers waiting for a client's shared request, by client.
#[derive(Default)]
pub(super) struct GrantBatcher {
    gather: Gather<(), Result<Grant, StoreError>>,
}

/// What a rate-limit request needs besides the client.
pub(super) struct Limit<'a> {
    pub limiter: &'a dyn RateLimiter,
    pub limit: u32,
    pub window: Duration,
}

impl GrantBatcher {
    /// One permit for `client` (or none, with when to come back), asked for together with
    /// every other caller for the same client within [`GATHER`](super::gather::GATHER); `now`
    /// is read when the shared request is made.
    pub async fn acquire(
        &self,
        client: &str,
        limit: Limit<'_>,
        now: impl Fn() -> Timestamp,
        place: Option<&mut Expected<'_>>,
    ) -> Result<Grant, StoreError> {
        self.gather
            .ask_expected(client, (), place, |asks| async move {
                let wanted = u32::try_from(asks.len()).unwrap_or(u32::MAX);
                let result = limit
                    .limiter
                    .acquire(client, wanted, limit.limit, limit.window, now())
                    .await;
                share(asks.len(), result)
            })
            .await
            .unwrap_or_else(|| Err(abandoned("rate-limit request")))
    }
}

impl GrantBatcher {
    /// Announces a download for `client` that will ask soon (one of a batch's): the shared
    /// request waits for it, so a batch asks once per client however its downloads straggle.
    pub fn expect(&self, client: &str) -> Expected<'_> {
        self.gather.expect(client)
    }
}

/// For `asks` askers: the first `granted` get a permit each and the rest the limiter's retry
/// time.
fn share(asks: usize, result: Result<Grant, StoreError>) -> Vec<Result<Grant, StoreError>> {
    (0..asks)
        .map(|i| match &result {
            Ok(grant) if (i as u64) < u64::from(grant.granted) => Ok(Grant {
                granted: 1,
                retry_at: None,
            }),
            Ok(grant) => Ok(Grant {
                granted: 0,
                retry_at: grant.retry_at,
            }),
            Err(e) => Err(same_kind("rate-limit request", e)),
        })
        .collect()
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
            .acquire("shop", limit, || Timestamp::from_millis(1_000), None)
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
