//! Partial batch failures and dead letters: every item of a batch runs concurrently, each in
//! its own span; an item that may succeed on a retry is reported back to its trigger, and an
//! item that never will (it is unusable, its sender may not ask for it, or it failed on its
//! queue's last receive) goes to its queue's dead letters with its reason, counted, and is
//! acknowledged: a poison message neither blocks its batch nor vanishes.

use std::future::Future;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use tracing::{Instrument, error, warn};

use imgest_core::ports::{Letter, Reason};
use imgest_flows::{FlowError, Service};

/// The response shape both SQS and DynamoDB stream triggers read
/// (`{"batchItemFailures": [{"itemIdentifier": "..."}]}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchResponse {
    pub batch_item_failures: Vec<BatchItemFailure>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchItemFailure {
    pub item_identifier: String,
}

/// Why an item failed, and whether a retry may help.
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    /// The item can never succeed, whatever is retried: given up on at once with this reason
    /// (its kind is stable: `unusable`, `forbidden`, or another refusal's own).
    #[error("{0}")]
    NeverSucceeds(Reason),
    /// A flow's failure: retried while it is retryable, given up on with its kind otherwise.
    #[error(transparent)]
    Flow(#[from] FlowError),
}

impl ItemError {
    /// An item that cannot be read as what its queue carries.
    pub fn unusable(message: impl Into<String>) -> Self {
        Self::NeverSucceeds(Reason::new(Reason::UNUSABLE, message))
    }

    /// An item whose sender may not ask for what it asks.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::NeverSucceeds(Reason::new(Reason::FORBIDDEN, message))
    }

    fn is_retryable(&self) -> bool {
        match self {
            Self::NeverSucceeds(_) => false,
            Self::Flow(e) => e.is_retryable(),
        }
    }

    /// Why the item is given up on: its kind and its message.
    pub fn reason(&self) -> Reason {
        match self {
            Self::NeverSucceeds(reason) => reason.clone(),
            Self::Flow(e) => Reason::new(e.kind(), e.to_string()),
        }
    }
}

/// One message of an SQS batch, as the handlers take it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SqsItem {
    pub id: String,
    pub body: String,
    /// Receives so far, this one included (`ApproximateReceiveCount`).
    pub receives: u32,
    /// Who sent it, as far as SQS proves it: the principal of its `SenderId` (an IAM user's
    /// id, or a role's id without its session), or the original sender a listed redriver's
    /// message names ([`QueueSenders::sender_of`](imgest_settings::QueueSenders::sender_of)).
    /// Every decision about the message uses this one, and its dead letter names it.
    pub sender: Option<String>,
    /// Whether that sender is one of the stack's roles: the message is one function's to
    /// another, and its `imgest.*` attributes were read. A message from anyone else keeps
    /// none of them.
    pub from_stack: bool,
    /// When a chained message is due (`imgest.due`), which may be after this receive
    /// ([`chain`](crate::chain)); read from the stack's messages only.
    pub due: Option<imgest_core::domain::Timestamp>,
}

impl SqsItem {
    /// Refuses the message unless the stack's own roles sent it: what an internal queue
    /// (fetch, process, settle, backfill) carries is believed only from them.
    pub fn from_the_stack(&self) -> Result<(), ItemError> {
        if self.from_stack {
            Ok(())
        } else {
            Err(self.not_from_the_stack())
        }
    }

    /// Why a message the stack's roles did not send is refused on an internal queue.
    pub fn not_from_the_stack(&self) -> ItemError {
        ItemError::forbidden(format!(
            "sender {} is not one of the stack's roles (IMGEST_STACK_ROLES): an internal queue takes only the functions' own messages",
            self.sender.as_deref().unwrap_or("(none named)")
        ))
    }
}

/// Why an item failed, as the batch keeps it (one failure of a shared step fails several
/// items alike).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: Reason,
    pub retryable: bool,
}

impl From<&ItemError> for Failure {
    fn from(e: &ItemError) -> Self {
        Self {
            reason: e.reason(),
            retryable: e.is_retryable(),
        }
    }
}

/// What each item of a batch ended with, by its id: `None` for success.
#[derive(Debug, Default)]
pub struct Outcomes(Vec<(String, Option<Failure>)>);

/// Where the items an SQS handler gives up on go.
pub struct DeadLetters<'a> {
    pub service: &'a Service,
    /// The logical queue the batch came from.
    pub queue: &'a str,
    /// The queue's receive limit (its redrive policy's `maxReceiveCount`): an item still
    /// failing on that receive is given up on here, with its reason, rather than moved by SQS
    /// without one.
    pub max_receives: u32,
}

/// Runs `handle` on every `(id, item)` concurrently.
pub async fn run_batch<T, F, Fut>(items: Vec<(String, T)>, handle: F) -> Outcomes
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = Result<(), ItemError>>,
{
    run_batch_then(
        items,
        |item| {
            let fut = handle(item);
            async move { fut.await.map(|()| None::<()>) }
        },
        |_| async { Ok(()) },
    )
    .await
}

/// [`run_batch`] with a second step done once for the whole batch: `handle` returns what an
/// item leaves for it, and `finish` gets all of that at once, for work that costs less done
/// together (one write per offer instead of one per photo). If `finish` fails, every item that
/// left something for it fails with it.
pub async fn run_batch_then<T, U, F, Fut, G, GFut>(
    items: Vec<(String, T)>,
    handle: F,
    finish: G,
) -> Outcomes
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = Result<Option<U>, ItemError>>,
    G: FnOnce(Vec<U>) -> GFut,
    GFut: Future<Output = Result<(), ItemError>>,
{
    let runs = items.into_iter().map(|(id, item)| {
        let span = tracing::info_span!("item", message_id = %id);
        let fut = handle(item);
        async move { (id, fut.await) }.instrument(span)
    });
    let mut outcomes = Vec::new();
    let (mut left_ids, mut left) = (Vec::new(), Vec::new());
    for (id, result) in join_all(runs).await {
        match result {
            Ok(Some(rest)) => {
                left_ids.push(id);
                left.push(rest);
            }
            Ok(None) => outcomes.push((id, None)),
            Err(e) => outcomes.push((id, Some(Failure::from(&e)))),
        }
    }
    if !left.is_empty() {
        let failure = finish(left).await.err().map(|e| Failure::from(&e));
        outcomes.extend(left_ids.into_iter().map(|id| (id, failure.clone())));
    }
    Outcomes(outcomes)
}

impl FromIterator<(String, Option<Failure>)> for Outcomes {
    /// Each item's outcome as its handler decided it (`None` for success).
    fn from_iter<I: IntoIterator<Item = (String, Option<Failure>)>>(outcomes: I) -> Self {
        Self(outcomes.into_iter().collect())
    }
}

impl Outcomes {
    /// These outcomes and `failures` (items that failed before they ran).
    pub fn with_refused(mut self, failures: impl IntoIterator<Item = (String, Failure)>) -> Self {
        self.0.extend(
            failures
                .into_iter()
                .map(|(id, failure)| (id, Some(failure))),
        );
        self
    }

    /// The items that failed, by id.
    pub fn failed(&self) -> impl Iterator<Item = (&str, &Failure)> {
        self.0
            .iter()
            .filter_map(|(id, f)| f.as_ref().map(|f| (id.as_str(), f)))
    }

    fn into_failed(self) -> impl Iterator<Item = (String, Failure)> {
        self.0.into_iter().filter_map(|(id, f)| f.map(|f| (id, f)))
    }

    /// For a trigger without dead letters (the TTL cleanup's stream): retryable failures are
    /// reported, the others logged and dropped (the stream's own failure destination keeps
    /// what its retries could not do).
    pub fn retry_failures(self) -> BatchResponse {
        let mut response = BatchResponse::default();
        for (id, failure) in self.into_failed() {
            let Failure { reason, retryable } = failure;
            if retryable {
                warn!(message_id = %id, kind = %reason.kind, error = %reason.message, "item failed; it will be retried");
                response.batch_item_failures.push(BatchItemFailure {
                    item_identifier: id,
                });
            } else {
                error!(message_id = %id, kind = %reason.kind, error = %reason.message, "item dropped: it can never succeed");
            }
        }
        response
    }

    /// For an SQS batch (`items` as received): retryable failures are reported for a retry
    /// unless this was their last receive; those, and every item that never succeeds, go to
    /// the queue's dead letters with their reasons. If that send fails, they are reported for
    /// a retry instead (SQS moves them itself after its receive limit: never lost).
    pub async fn settle(self, items: &[SqsItem], dead: &DeadLetters<'_>) -> BatchResponse {
        let mut response = BatchResponse::default();
        let mut letters = Vec::new();
        for (id, failure) in self.into_failed() {
            let Failure {
                mut reason,
                retryable,
            } = failure;
            let item = items.iter().find(|i| i.id == id);
            let receives = item.map_or(0, |i| i.receives);
            if retryable && receives < dead.max_receives {
                warn!(message_id = %id, kind = %reason.kind, error = %reason.message, receives, "item failed; it will be retried");
                response.batch_item_failures.push(BatchItemFailure {
                    item_identifier: id,
                });
                continue;
            }
            if retryable {
                reason = Reason::new(
                    reason.kind,
                    format!("{} (still failing on receive {receives})", reason.message),
                );
            }
            letters.push(Letter {
                body: item.map(|i| i.body.clone()).unwrap_or_default(),
                reason,
                attempts: receives,
                message_id: id,
                sender: item.and_then(|i| i.sender.clone()),
            });
        }
        if letters.is_empty() {
            return response;
        }
        if let Err(e) = dead.service.dead_letter(dead.queue, &letters).await {
            error!(queue = dead.queue, error = %e, letters = letters.len(), "cannot send to the dead letters; the items will be retried");
            response
                .batch_item_failures
                .extend(letters.into_iter().map(|l| BatchItemFailure {
                    item_identifier: l.message_id,
                }));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use async_trait::async_trait;

    use super::*;
    use imgest_core::ports::{
        DeadMessage, MessageSender, OutgoingMessage, QueueCounts, StoreError, SystemClock,
    };
    use imgest_settings::Settings;

    /// A service on a fresh embedded store in `dir`; its dead letters fail to send when
    /// `broken`.
    async fn service(dir: &std::path::Path, broken: bool) -> Service {
        let vars = HashMap::from([("IMGEST_DATA_DIR".to_owned(), dir.display().to_string())]);
        let settings = Settings::from_map(&vars).unwrap();
        let mut ports = imgest_embedded::ports(dir, "http://127.0.0.1", Arc::new(SystemClock))
            .await
            .unwrap();
        if broken {
            ports.messages = Arc::new(Broken);
        }
        imgest_flows::configure::service(ports, &settings)
    }

    /// A sender whose dead letters cannot be sent.
    struct Broken;

    #[async_trait]
    impl MessageSender for Broken {
        async fn send(&self, _: &str, _: &[OutgoingMessage]) -> Result<(), StoreError> {
            Ok(())
        }
        async fn dead_letter(&self, _: &str, _: &[Letter]) -> Result<(), StoreError> {
            Err(StoreError::Unavailable {
                message: "throttled".into(),
                source: None,
            })
        }
        async fn counts(&self, _: &str) -> Result<QueueCounts, StoreError> {
            Ok(QueueCounts::default())
        }
        async fn dead_letters(&self, _: &str, _: usize) -> Result<Vec<DeadMessage>, StoreError> {
            Ok(Vec::new())
        }
        async fn redrive(
            &self,
            _: &str,
            _: usize,
            _: &imgest_core::ports::RedriveKinds,
        ) -> Result<u64, StoreError> {
            Ok(0)
        }
    }

    fn item(id: &str, receives: u32) -> SqsItem {
        SqsItem {
            id: id.into(),
            body: format!("body of {id}"),
            receives,
            sender: Some("AIDASENDER".into()),
            from_stack: false,
            due: None,
        }
    }

    /// A poison item, a retryable failure before and on its last receive, and a success.
    async fn mixed_batch() -> Outcomes {
        let work = vec![
            ("poison".to_owned(), 0),
            ("busy".to_owned(), 1),
            ("busy-last".to_owned(), 1),
            ("fine".to_owned(), 2),
        ];
        run_batch(work, |n| async move {
            match n {
                0 => Err(ItemError::unusable("not json")),
                1 => Err(unavailable()),
                _ => Ok(()),
            }
        })
        .await
    }

    #[tokio::test]
    async fn items_that_never_succeed_and_last_receives_are_dead_lettered_with_their_reasons() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path(), false).await;
        let items = [
            item("poison", 1),
            item("busy", 2),
            item("busy-last", 3),
            item("fine", 1),
        ];
        let dead = DeadLetters {
            service: &service,
            queue: "jobs",
            max_receives: 3,
        };
        let response = mixed_batch().await.settle(&items, &dead).await;
        let retried: Vec<&str> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(retried, ["busy"]);
        let mut letters = service
            .dead_letters(&["jobs".to_owned()], 10)
            .await
            .unwrap()
            .remove(0)
            .1;
        letters.sort_by(|a, b| a.body.cmp(&b.body));
        let got: Vec<(&str, &str, Option<u32>)> = letters
            .iter()
            .map(|l| {
                let reason = l.reason.as_ref().unwrap();
                (l.body.as_str(), reason.kind.as_str(), l.attempts)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("body of busy-last", "storage_unavailable", Some(3)),
                ("body of poison", "unusable", Some(1)),
            ]
        );
        assert!(
            letters[0]
                .reason
                .as_ref()
                .unwrap()
                .message
                .contains("receive 3")
        );
        assert_eq!(service.counts().messages_dead_lettered, 2);
    }

    #[tokio::test]
    async fn items_whose_dead_letters_cannot_be_sent_are_retried_instead() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path(), true).await;
        let items = [
            item("poison", 1),
            item("busy", 1),
            item("busy-last", 5),
            item("fine", 1),
        ];
        let dead = DeadLetters {
            service: &service,
            queue: "jobs",
            max_receives: 5,
        };
        let response = mixed_batch().await.settle(&items, &dead).await;
        let mut retried: Vec<&str> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        retried.sort_unstable();
        assert_eq!(retried, ["busy", "busy-last", "poison"]);
        assert_eq!(service.counts().messages_dead_lettered, 0);
    }

    fn unavailable() -> ItemError {
        ItemError::Flow(FlowError::Store(StoreError::Unavailable {
            message: "throttled".into(),
            source: None,
        }))
    }

    fn failed(outcomes: &Outcomes) -> Vec<(String, bool, String)> {
        let mut out: Vec<_> = outcomes
            .failed()
            .map(|(id, f)| (id.to_owned(), f.retryable, f.reason.kind.clone()))
            .collect();
        out.sort();
        out
    }

    #[tokio::test]
    async fn each_failure_keeps_its_kind_and_its_retry_class() {
        let items = vec![
            ("good".to_owned(), 0),
            ("poison".to_owned(), 1),
            ("busy".to_owned(), 2),
            ("stranger".to_owned(), 3),
        ];
        let outcomes = run_batch(items, |n| async move {
            match n {
                0 => Ok(()),
                1 => Err(ItemError::unusable("not json")),
                2 => Err(unavailable()),
                _ => Err(ItemError::forbidden("sender x may not act for client y")),
            }
        })
        .await;
        assert_eq!(
            failed(&outcomes),
            [
                ("busy".into(), true, "storage_unavailable".into()),
                ("poison".into(), false, "unusable".into()),
                ("stranger".into(), false, "forbidden".into()),
            ]
        );
        let response = outcomes.retry_failures();
        let json = serde_json::to_value(&response).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"batchItemFailures": [{"itemIdentifier": "busy"}]})
        );
    }

    #[tokio::test]
    async fn a_failed_second_step_fails_every_item_that_left_something_for_it() {
        let items = vec![
            ("a".to_owned(), Some(1)),
            ("b".to_owned(), None),
            ("c".to_owned(), Some(3)),
        ];
        let failing = run_batch_then(
            items.clone(),
            |n| async move { Ok(n) },
            |left: Vec<i32>| async move {
                assert_eq!(left, [1, 3], "everything left, in one call");
                Err(unavailable())
            },
        )
        .await;
        let failed: Vec<String> = failed(&failing).into_iter().map(|f| f.0).collect();
        assert_eq!(failed, ["a", "c"]);
        let refused = run_batch_then(
            items.clone(),
            |n| async move { Ok(n) },
            |_: Vec<i32>| async move { Err(ItemError::unusable("no")) },
        )
        .await;
        assert!(refused.failed().all(|(_, f)| !f.retryable));
        assert_eq!(refused.failed().count(), 2);
        let fine = run_batch_then(items, |n| async move { Ok(n) }, |_| async { Ok(()) }).await;
        assert_eq!(fine.failed().count(), 0);
    }
}
