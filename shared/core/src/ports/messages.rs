//! Sending work to named queues: SQS on AWS (Step Functions for delays beyond SQS's 15 minutes),
//! the embedded task queue locally.

use std::time::Duration;

use async_trait::async_trait;

use super::{QueueCounts, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    pub body: String,
    /// Delivered no earlier than this from now.
    pub delay: Duration,
}

/// A message its queue gave up on (every attempt failed), as its dead-letter list holds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeadMessage {
    /// The task's key (locally) or the message id (SQS).
    pub id: String,
    pub body: String,
    /// Why it failed, where the queue keeps it (locally; on AWS the function's log says).
    pub reason: Option<String>,
    pub attempts: Option<u32>,
    /// When it failed (locally) or was first sent (SQS), in ms since the epoch.
    pub sent_at_ms: Option<i64>,
}

#[async_trait]
pub trait MessageSender: Send + Sync {
    /// Sends the messages to the queue with this logical name (`StoreError::NotFound` for a
    /// name the sender does not know). Batches as the backend allows.
    async fn send(&self, queue: &str, messages: &[OutgoingMessage]) -> Result<(), StoreError>;

    /// How many messages the queue holds, by state, and how many were dead-lettered
    /// (approximate on SQS, as its attributes are).
    async fn counts(&self, queue: &str) -> Result<QueueCounts, StoreError>;

    /// Up to `limit` of the queue's dead letters (locally the newest first).
    async fn dead_letters(&self, queue: &str, limit: usize)
    -> Result<Vec<DeadMessage>, StoreError>;

    /// Moves up to `max` dead letters back onto the queue, due now; returns how many. A
    /// handler must expect a redriven message to be one it has seen (they are all idempotent).
    async fn redrive(&self, queue: &str, max: usize) -> Result<u64, StoreError>;
}
