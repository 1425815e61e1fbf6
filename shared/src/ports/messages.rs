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

#[async_trait]
pub trait MessageSender: Send + Sync {
    /// Sends the messages to the queue with this logical name (`StoreError::NotFound` for a
    /// name the sender does not know). Batches as the backend allows.
    async fn send(&self, queue: &str, messages: &[OutgoingMessage]) -> Result<(), StoreError>;

    /// How many messages the queue holds, by state, and how many were dead-lettered
    /// (approximate on SQS, as its attributes are).
    async fn counts(&self, queue: &str) -> Result<QueueCounts, StoreError>;
}
