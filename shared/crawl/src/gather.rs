//! Requests made at about the same moment, made once together. The downloads of one SQS batch
//! (or of a local pool), and the URLs of one intake, reach the same steps at about the same
//! time; a step that writes to a shared service (a rate-limit request, a queue send) costs one
//! request per caller when each makes its own. Here the first caller for a key waits a moment
//! ([`GATHER`]), then makes one request for everyone who joined, and shares out the answers.
//!
//! "About the same time" depends on how long the steps before took, so a batch whose callers
//! straggle would make several requests. A batch that knows who will ask announces them
//! ([`Gather::expect`]): the first caller then also waits for the announced callers that have not
//! joined yet (each joins, or gives up its place when it will not ask soon), up to
//! [`EXPECT_WAIT`]: one request per key per batch, however the steps before went.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use imgest_core::ports::StoreError;

/// How long the first caller waits for others to join: short against a download, long enough
/// for the callers of one batch that reach the step in the same few milliseconds.
pub(super) const GATHER: Duration = Duration::from_millis(10);

/// How long the first caller waits at most for announced callers that have not joined.
pub(super) const EXPECT_WAIT: Duration = Duration::from_millis(200);

type Joined<Req, Resp> = (Req, oneshot::Sender<Resp>);

/// Callers waiting for their key's shared request, by key.
pub(super) struct Gather<Req, Resp> {
    pending: Mutex<HashMap<String, Vec<Joined<Req, Resp>>>>,
    /// Announced callers that have neither joined nor given up their place, by key.
    expected: Mutex<HashMap<String, usize>>,
    /// Told whenever an announced caller joins or gives up its place.
    arrivals: Notify,
    window: Duration,
    expect_wait: Duration,
}

impl<Req, Resp> Default for Gather<Req, Resp> {
    fn default() -> Self {
        Self::with_window(GATHER)
    }
}

/// An announced caller's place ([`Gather::expect`]): taken by its [`ask`](Gather::ask), or given
/// up ([`give_up`](Self::give_up), or dropped) when it will not ask soon.
pub struct Expected<'a> {
    expected: &'a Mutex<HashMap<String, usize>>,
    arrivals: &'a Notify,
    key: String,
    open: bool,
}

impl Expected<'_> {
    /// The caller will not ask soon (or at all): the first caller stops waiting for it.
    pub fn give_up(&mut self) {
        if std::mem::take(&mut self.open) {
            let mut expected = self.expected.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = expected.get_mut(&self.key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    expected.remove(&self.key);
                }
            }
            drop(expected);
            self.arrivals.notify_waiters();
        }
    }
}

impl Drop for Expected<'_> {
    fn drop(&mut self) {
        self.give_up();
    }
}

impl<Req, Resp> Gather<Req, Resp> {
    /// Gathers for `window` instead of [`GATHER`].
    pub fn with_window(window: Duration) -> Self {
        Self::with_waits(window, EXPECT_WAIT)
    }

    /// Gathers for `window`, and waits up to `expect_wait` for announced callers.
    pub fn with_waits(window: Duration, expect_wait: Duration) -> Self {
        Self {
            pending: Mutex::new(HashMap::new()),
            expected: Mutex::new(HashMap::new()),
            arrivals: Notify::new(),
            window,
            expect_wait,
        }
    }

    /// Announces a caller for `key` that will ask soon: a shared request waits for it (up to
    /// [`EXPECT_WAIT`]) until it joins or gives up its place.
    pub fn expect(&self, key: &str) -> Expected<'_> {
        *self
            .expected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.to_owned())
            .or_default() += 1;
        Expected {
            expected: &self.expected,
            arrivals: &self.arrivals,
            key: key.to_owned(),
            open: true,
        }
    }

    /// Whether announced callers of `key` have not joined yet.
    fn awaiting(&self, key: &str) -> bool {
        self.expected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .is_some_and(|n| *n > 0)
    }

    /// [`ask`](Self::ask) by an announced caller, which takes its place.
    pub async fn ask_expected<F, Fut>(
        &self,
        key: &str,
        request: Req,
        place: Option<&mut Expected<'_>>,
        run: F,
    ) -> Option<Resp>
    where
        F: FnOnce(Vec<Req>) -> Fut,
        Fut: Future<Output = Vec<Resp>>,
    {
        let (tx, rx) = oneshot::channel();
        let leads = {
            let mut pending = self.lock();
            let joined = pending.entry(key.to_owned()).or_default();
            joined.push((request, tx));
            joined.len() == 1
        };
        if let Some(place) = place {
            place.give_up();
        }
        if leads {
            // Whatever happens to this call, later callers must not join a request nobody makes.
            let guard = Leader {
                gather: self,
                key,
                taken: false,
            };
            tokio::time::sleep(self.window).await;
            let _ = tokio::time::timeout(self.expect_wait, async {
                loop {
                    let arrived = self.arrivals.notified();
                    if !self.awaiting(key) {
                        break;
                    }
                    arrived.await;
                }
            })
            .await;
            let (requests, answer_to): (Vec<Req>, Vec<oneshot::Sender<Resp>>) =
                guard.take().into_iter().unzip();
            let answers = run(requests).await;
            for (tx, answer) in answer_to.into_iter().zip(answers) {
                let _ = tx.send(answer);
            }
        }
        rx.await.ok()
    }

    /// `request`'s answer, made together with every other request for `key` within the
    /// window ([`GATHER`] unless set otherwise): by the first caller's `run`, which gets the requests in the order they
    /// joined and returns one answer each, in that order. `None` if the shared request was
    /// abandoned (its caller was cancelled, or `run` answered too few).
    pub async fn ask<F, Fut>(&self, key: &str, request: Req, run: F) -> Option<Resp>
    where
        F: FnOnce(Vec<Req>) -> Fut,
        Fut: Future<Output = Vec<Resp>>,
    {
        self.ask_expected(key, request, None, run).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Joined<Req, Resp>>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The first caller's hold on its key's entry: taking the requests (or being dropped) closes
/// the entry, so the next caller starts a new shared request.
struct Leader<'a, Req, Resp> {
    gather: &'a Gather<Req, Resp>,
    key: &'a str,
    taken: bool,
}

impl<Req, Resp> Leader<'_, Req, Resp> {
    /// Closes the entry and returns its requests. Once taken, the key's entry belongs to the
    /// next shared request, which this one must never touch again.
    fn take(mut self) -> Vec<Joined<Req, Resp>> {
        self.taken = true;
        self.gather.lock().remove(self.key).unwrap_or_default()
    }
}

impl<Req, Resp> Drop for Leader<'_, Req, Resp> {
    fn drop(&mut self) {
        if !self.taken {
            // Dropping the senders tells the callers the request was abandoned.
            self.gather.lock().remove(self.key);
        }
    }
}

/// The error a caller gets when its shared request was abandoned (retryable).
pub(super) fn abandoned(what: &str) -> StoreError {
    StoreError::Unavailable {
        message: format!("the shared {what} was abandoned"),
        source: None,
    }
}

/// An error of the same kind (and so the same retry decision) for each caller of a shared
/// request that failed.
pub(super) fn same_kind(what: &str, e: &StoreError) -> StoreError {
    let message = format!("{what}: {e}");
    match e {
        StoreError::NotFound(_) => StoreError::NotFound(message),
        StoreError::Conflict(_) => StoreError::Conflict(message),
        StoreError::BadCursor(_) => StoreError::BadCursor(message),
        StoreError::TooLarge { bytes, .. } => StoreError::TooLarge {
            what: message,
            bytes: *bytes,
        },
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

    use super::*;

    #[tokio::test]
    async fn callers_within_the_window_share_one_request_and_get_their_own_answers() {
        let gather: Arc<Gather<u32, u32>> = Arc::default();
        let runs = Arc::new(AtomicU32::new(0));
        let ask = |n: u32| {
            let (gather, runs) = (gather.clone(), runs.clone());
            async move {
                gather
                    .ask("k", n, |all: Vec<u32>| async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        all.iter().map(|x| x * 10).collect()
                    })
                    .await
            }
        };
        let answers = futures_util::future::join_all((1..=4).map(ask)).await;
        assert_eq!(answers, [Some(10), Some(20), Some(30), Some(40)]);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        // The entry closed with the request: the next caller starts a new one.
        assert_eq!(ask(5).await, Some(50));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_abandoned_request_answers_none_and_the_next_one_works() {
        let gather: Gather<u32, u32> = Gather::default();
        assert_eq!(
            gather.ask("k", 1, |_| async { Vec::<u32>::new() }).await,
            None
        );
        {
            // A leader polled once (it is gathering), then cancelled.
            let cancelled = gather.ask("k", 2, |_| async { vec![2] });
            tokio::pin!(cancelled);
            tokio::select! {
                biased;
                _ = &mut cancelled => panic!("the leader is still gathering"),
                () = std::future::ready(()) => {}
            }
        }
        assert_eq!(gather.ask("k", 3, |_| async { vec![3] }).await, Some(3));
    }

    async fn within<F: Future>(f: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(60), f)
            .await
            .expect("a shared request waited for a caller that gave its place up")
    }

    #[tokio::test]
    async fn announced_callers_that_straggle_share_one_request_and_a_place_given_up_ends_the_wait()
    {
        // Announced callers are waited for as long as it takes here: a wait that did not end
        // would hang the test (and fail it at the timeout below).
        let gather: Arc<Gather<u32, u32>> =
            Arc::new(Gather::with_waits(GATHER, Duration::from_secs(3600)));
        let runs = Arc::new(AtomicU32::new(0));
        let ask = |n: u32, late: Duration| {
            let (gather, runs) = (gather.clone(), runs.clone());
            async move {
                let mut place = gather.expect("k");
                tokio::time::sleep(late).await;
                gather
                    .ask_expected("k", n, Some(&mut place), |all: Vec<u32>| async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        all.iter().map(|x| x * 10).collect()
                    })
                    .await
            }
        };
        // Three callers, the last 50 ms after the first: far outside the 10 ms window.
        let late = [0, 30, 50].map(Duration::from_millis);
        let all = (1..=3).zip(late).map(|(n, l)| ask(n, l));
        let answers = within(futures_util::future::join_all(all)).await;
        assert_eq!(answers, [Some(10), Some(20), Some(30)]);
        assert_eq!(runs.load(Ordering::SeqCst), 1);

        // An announced caller that gives its place up does not hold the first one.
        let quitter = async {
            let mut place = gather.expect("k");
            tokio::time::sleep(Duration::from_millis(20)).await;
            place.give_up();
        };
        let (answer, ()) = within(async { tokio::join!(ask(4, Duration::ZERO), quitter) }).await;
        assert_eq!(answer, Some(40));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
}
