//! Partial batch failures: run every item of a batch concurrently, each in its own span, and
//! report only the items that may succeed on a retry. Items that can never succeed are logged
//! with their reason and acknowledged, so a poison message does not block its batch.

use std::future::Future;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use tracing::{Instrument, error, warn};

use imgest_flows::FlowError;

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
    /// The item can never be processed (bad payload): logged and dropped.
    #[error("unusable item: {0}")]
    Unusable(String),
    #[error(transparent)]
    Flow(#[from] FlowError),
}

impl ItemError {
    fn is_retryable(&self) -> bool {
        match self {
            Self::Unusable(_) => false,
            Self::Flow(e) => e.is_retryable(),
        }
    }
}

/// Runs `handle` on every `(id, item)` concurrently and reports the retryable failures by id.
pub async fn run_batch<T, F, Fut>(items: Vec<(String, T)>, handle: F) -> BatchResponse
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
) -> BatchResponse
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
    let mut response = BatchResponse::default();
    let (mut left_ids, mut left) = (Vec::new(), Vec::new());
    for (id, result) in join_all(runs).await {
        match result {
            Ok(Some(rest)) => {
                left_ids.push(id);
                left.push(rest);
            }
            Ok(None) => {}
            Err(e) => report(&mut response, id, &e),
        }
    }
    if !left.is_empty()
        && let Err(e) = finish(left).await
    {
        for id in left_ids {
            report(&mut response, id, &e);
        }
    }
    response
}

/// Logs a failed item, and reports it for a retry if one may help.
fn report(response: &mut BatchResponse, id: String, e: &ItemError) {
    if e.is_retryable() {
        warn!(message_id = %id, error = %e, "item failed; it will be retried");
        response.batch_item_failures.push(BatchItemFailure {
            item_identifier: id,
        });
    } else {
        error!(message_id = %id, error = %e, "item dropped: it can never succeed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use imgest_core::ports::StoreError;

    #[tokio::test]
    async fn only_retryable_failures_are_reported() {
        let items = vec![
            ("good".to_owned(), 0),
            ("poison".to_owned(), 1),
            ("busy".to_owned(), 2),
        ];
        let response = run_batch(items, |n| async move {
            match n {
                0 => Ok(()),
                1 => Err(ItemError::Unusable("not json".into())),
                _ => Err(ItemError::Flow(FlowError::Store(StoreError::Unavailable {
                    message: "throttled".into(),
                    source: None,
                }))),
            }
        })
        .await;
        assert_eq!(
            response.batch_item_failures,
            vec![BatchItemFailure {
                item_identifier: "busy".into()
            }]
        );
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
                Err(ItemError::Flow(FlowError::Store(StoreError::Unavailable {
                    message: "throttled".into(),
                    source: None,
                })))
            },
        )
        .await;
        let failed: Vec<&str> = failing
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(failed, ["a", "c"]);
        let fine = run_batch_then(items, |n| async move { Ok(n) }, |_| async { Ok(()) }).await;
        assert!(fine.batch_item_failures.is_empty());
    }
}
