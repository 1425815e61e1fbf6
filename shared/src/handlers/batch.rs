//! Partial batch failures: run every item of a batch concurrently, each in its own span, and
//! report only the items that may succeed on a retry. Items that can never succeed are logged
//! with their reason and acknowledged, so a poison message does not block its batch.

use std::future::Future;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use tracing::{Instrument, error, warn};

use crate::flows::FlowError;

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
    let runs = items.into_iter().map(|(id, item)| {
        let span = tracing::info_span!("item", message_id = %id);
        let fut = handle(item);
        async move { (id, fut.await) }.instrument(span)
    });
    let mut response = BatchResponse::default();
    for (id, result) in join_all(runs).await {
        match result {
            Ok(()) => {}
            Err(e) if e.is_retryable() => {
                warn!(message_id = %id, error = %e, "item failed; it will be retried");
                response.batch_item_failures.push(BatchItemFailure {
                    item_identifier: id,
                });
            }
            Err(e) => error!(message_id = %id, error = %e, "item dropped: it can never succeed"),
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::StoreError;

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
}
