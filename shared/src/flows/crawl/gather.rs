//! Requests made at about the same moment, made once together. The downloads of one SQS batch
//! (or of a local pool), and the URLs of one intake, reach the same steps at about the same
//! time; a step that writes to a shared service (a rate-limit request, a queue send) costs one
//! request per caller when each makes its own. Here the first caller for a key waits a moment
//! ([`GATHER`]), then makes one request for everyone who joined, and shares out the answers.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::ports::StoreError;

/// How long the first caller waits for others to join: short against a download, long enough
/// for the callers of one batch that reach the step in the same few milliseconds.
pub(super) const GATHER: Duration = Duration::from_millis(10);

type Joined<Req, Resp> = (Req, oneshot::Sender<Resp>);

/// Callers waiting for their key's shared request, by key.
pub(super) struct Gather<Req, Resp> {
    pending: Mutex<HashMap<String, Vec<Joined<Req, Resp>>>>,
    window: Duration,
}

impl<Req, Resp> Default for Gather<Req, Resp> {
    fn default() -> Self {
        Self::with_window(GATHER)
    }
}

impl<Req, Resp> Gather<Req, Resp> {
    /// Gathers for `window` instead of [`GATHER`].
    pub fn with_window(window: Duration) -> Self {
        Self {
            pending: Mutex::new(HashMap::new()),
            window,
        }
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
        let (tx, rx) = oneshot::channel();
        let leads = {
            let mut pending = self.lock();
            let joined = pending.entry(key.to_owned()).or_default();
            joined.push((request, tx));
            joined.len() == 1
        };
        if leads {
            // Whatever happens to this call, later callers must not join a request nobody makes.
            let guard = Leader {
                gather: self,
                key,
                taken: false,
            };
            tokio::time::sleep(self.window).await;
            let (requests, answer_to): (Vec<Req>, Vec<oneshot::Sender<Resp>>) =
                guard.take().into_iter().unzip();
            let answers = run(requests).await;
            for (tx, answer) in answer_to.into_iter().zip(answers) {
                let _ = tx.send(answer);
            }
        }
        rx.await.ok()
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
}
