//! The `backfill` function. Its schedule (every minute) enumerates the running backfill onto the
//! `backfill` queue for at most [`ENUMERATE_BUDGET`], tasks due at the rate limit; its SQS
//! trigger, under its own concurrency quota, re-processes the queued images. One binary for
//! both: the event says which.

use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;

use super::batch::{BatchResponse, Failure, ItemError, Outcomes};
use imgest_core::domain::ImageId;
use imgest_flows::backfill::{BACKFILL_QUEUE, StepReport};
use imgest_flows::{FlowError, Service};
use imgest_settings::QueueSenders;

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

/// A batch of tasks. A failure that may pass is retried (up to the queue's receive limit); one
/// that never will, a body that is not an image id, and a task still failing on its last
/// receive go to the backfill queue's dead letters with their reasons, where
/// `imgest backfill status` counts them. Only the stack's roles (the function's own
/// enumeration) may queue a task: any other sender's is `forbidden`.
pub async fn tasks(service: &Service, senders: &QueueSenders, event: SqsEvent) -> BatchResponse {
    let items = super::sqs_items(event, senders);
    let mut results = Vec::new();
    let mut ids = Vec::new();
    let mut message_ids = Vec::new();
    for item in &items {
        if let Err(refused) = item.from_the_stack() {
            results.push((item.id.clone(), Some(Failure::from(&refused))));
            continue;
        }
        match ImageId::parse(item.body.trim()) {
            Ok(id) => {
                ids.push(id);
                message_ids.push(item.id.clone());
            }
            Err(e) => results.push((
                item.id.clone(),
                Some(Failure::from(&ItemError::unusable(format!(
                    "not an image id: {e}"
                )))),
            )),
        }
    }
    match service.backfill_tasks(&ids).await {
        Ok(outcomes) => {
            for (message_id, outcome) in message_ids.into_iter().zip(outcomes) {
                let failure = outcome.err().map(|e| Failure::from(&ItemError::from(e)));
                results.push((message_id, failure));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "backfill batch failed");
            let failure = Failure::from(&ItemError::from(e));
            for message_id in message_ids {
                results.push((message_id, Some(failure.clone())));
            }
        }
    }
    let outcomes: Outcomes = results.into_iter().collect();
    outcomes
        .settle(&items, &super::dead_letters(service, BACKFILL_QUEUE))
        .await
}
