//! The durable task queue port: unique keys, run-at times, attempts, leases and a dead-letter
//! list with reasons (SQLite locally; SQS with DynamoDB on AWS).

use std::time::Duration;

use async_trait::async_trait;

use super::{Reason, RedriveKinds, StoreError};
use crate::domain::Timestamp;

/// Whether `enqueue` added a task or replaced a pending one with the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    New,
    /// A task with that key was waiting or running: its payload and run-at time were replaced
    /// (a running one will run again: its lease no longer acknowledges it).
    Replaced,
}

/// A leased task. Until the lease ends, nobody else receives it; `ack`, `retry` and
/// `dead_letter` work only while the lease is still the holder's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub queue: String,
    pub key: String,
    pub payload: String,
    /// Deliveries so far, this one included.
    pub attempts: u32,
    pub receipt: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Due now and not leased.
    pub ready: u64,
    /// Due later.
    pub delayed: u64,
    /// Leased by a worker.
    pub in_flight: u64,
    pub dead: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub key: String,
    pub payload: String,
    pub attempts: u32,
    pub reason: Reason,
    pub failed_at: Timestamp,
}

#[async_trait]
pub trait TaskQueue: Send + Sync {
    /// Adds a task due at `run_at`, or replaces the pending task with the same `key` (queues are
    /// sets: a key is never queued twice).
    async fn enqueue(
        &self,
        queue: &str,
        key: &str,
        payload: &str,
        run_at: Timestamp,
    ) -> Result<Enqueued, StoreError>;

    /// Leases up to `max` tasks due at `now` (earliest run-at first) for `visibility`; a task
    /// whose lease ends unacknowledged is delivered again.
    async fn receive(
        &self,
        queue: &str,
        now: Timestamp,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<Delivery>, StoreError>;

    /// Ends every lease on `queue`: its leased tasks are due again at once (their receipts no
    /// longer acknowledge them); returns how many. For a worker starting on a queue whose
    /// previous worker died holding leases (the local runner killed), so their tasks need not
    /// wait out the leases. A worker still running beside it may then see a task twice, which
    /// every consumer tolerates: delivery is at least once.
    async fn release_leases(&self, queue: &str) -> Result<u64, StoreError>;

    /// Removes a finished task; false if the lease was lost (expired or the task replaced).
    async fn ack(&self, delivery: &Delivery) -> Result<bool, StoreError>;

    /// Ends the lease and makes the task due again at `run_at`.
    async fn retry(&self, delivery: &Delivery, run_at: Timestamp) -> Result<bool, StoreError>;

    /// Moves the task to the dead-letter list with `reason`.
    async fn dead_letter(
        &self,
        delivery: &Delivery,
        reason: &Reason,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Adds a dead letter to `queue`'s list for a message that was given up on where it was
    /// received (the message sender's dead letters: the Lambda handlers' way), not a leased
    /// task.
    async fn add_dead_letter(&self, queue: &str, letter: &DeadLetter) -> Result<(), StoreError>;

    async fn counts(&self, queue: &str, now: Timestamp) -> Result<QueueCounts, StoreError>;

    /// The newest dead letters first.
    async fn dead_letters(&self, queue: &str, limit: usize) -> Result<Vec<DeadLetter>, StoreError>;

    /// Puts up to `max` dead letters that `kinds` takes (the oldest first) back on their
    /// queue, due at `now`, with their attempts reset; returns how many. A dead letter whose
    /// key is queued again meanwhile is dropped: the queued task supersedes it.
    async fn redrive(
        &self,
        queue: &str,
        max: usize,
        kinds: &RedriveKinds,
        now: Timestamp,
    ) -> Result<u64, StoreError>;
}
