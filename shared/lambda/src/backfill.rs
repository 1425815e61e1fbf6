//! The `backfill` function. Its schedule (every minute) enumerates the running backfill onto the
//! `backfill` queue for at most [`ENUMERATE_BUDGET`], tasks due at the rate limit; its SQS
//! trigger, under its own concurrency quota, re-processes the queued images. One binary for
//! both: the event says which.

use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;

use super::batch::{BatchItemFailure, BatchResponse};
use imgest_core::domain::ImageId;
use imgest_flows::backfill::StepReport;
use imgest_flows::{FlowError, Service};

/// How long a scheduled invocation enumerates: well inside the minute between two, so runs do
/// not overlap.
pub const ENUMERATE_BUDGET: Duration = Duration::from_secs(30);

/// What invoked the function.
#[derive(Debug)]
pub enum Event {
    /// A batch of the `backfill` queue.
    Tasks(SqsEvent),
    /// The schedule (any event that is not an SQS batch).
    Schedule,
}

impl Event {
    pub fn of(payload: serde_json::Value) -> Result<Self, serde_json::Error> {
        // Only its queue and its schedule invoke the function; a schedule event has no Records.
        if payload.get("Records").is_some() {
            serde_json::from_value(payload).map(Self::Tasks)
        } else {
            Ok(Self::Schedule)
        }
    }
}

/// The schedule: one bounded stretch of enumeration.
pub async fn enumerate(service: &Service) -> Result<StepReport, FlowError> {
    service.backfill_enumerate(ENUMERATE_BUDGET).await
}

/// A batch of tasks. Every failure is reported for a retry, permanent ones too: after the
/// queue's receive limit they land on its dead-letter queue, where `imgest backfill status`
/// counts them. A body that is not an image id can never succeed and is dropped.
pub async fn tasks(service: &Service, event: SqsEvent) -> BatchResponse {
    let mut response = BatchResponse::default();
    let mut ids = Vec::new();
    let mut message_ids = Vec::new();
    for (message_id, body) in super::sqs_items(event) {
        match ImageId::parse(body.trim()) {
            Ok(id) => {
                ids.push(id);
                message_ids.push(message_id);
            }
            Err(e) => {
                tracing::error!(message_id, error = %e, "backfill task dropped: not an image id")
            }
        }
    }
    match service.backfill_tasks(&ids).await {
        Ok(outcomes) => {
            for (message_id, outcome) in message_ids.into_iter().zip(outcomes) {
                if let Err(e) = outcome {
                    tracing::warn!(message_id, error = %e, kind = e.kind(), "backfill task failed");
                    response.batch_item_failures.push(BatchItemFailure {
                        item_identifier: message_id,
                    });
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "backfill batch failed; it will be retried");
            response.batch_item_failures = message_ids
                .into_iter()
                .map(|item_identifier| BatchItemFailure { item_identifier })
                .collect();
        }
    }
    response
}
