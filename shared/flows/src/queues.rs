//! What the local task queue holds: each queue's tasks by state, its priority and tier, and
//! the dead letters with their reasons (`imgest queue`). Live work (downloads, processing)
//! comes before backfill: a backfill batch waits while live tasks are due. The queues' names
//! are here too, so the flows that send to them (results of erasures) need no crawl.

use serde::Serialize;

use super::backfill::BACKFILL_QUEUE;
use super::{FlowError, Service};
use imgest_core::ports::{DeadMessage, Letter, QueueCounts, RedriveKinds, StoreError, TaskQueue};

/// The queue results are sent to.
pub const RESULTS_QUEUE: &str = "results";

/// The queue downloaded photos are sent to (AWS: the process function's).
pub const PROCESS_QUEUE: &str = "process";

/// The queue crawls whose URLs all settled are handed to when they may not be finished where
/// they settled (AWS: from the fetch and process functions to the intake function).
pub const SETTLE_QUEUE: &str = "settle";

/// The queue of webhook deliveries (AWS: the webhooks function's).
pub const WEBHOOK_QUEUE: &str = "webhooks";

/// The queue of a tier's fetch tasks (`fetch-0` is the fastest tier).
pub fn tier_queue(tier: usize) -> String {
    format!("fetch-{tier}")
}

/// The attribute naming a result's client (what results' subscriptions filter on).
pub const CLIENT_ATTRIBUTE: &str = "client_id";

/// Which work a queue holds, in the order it is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Downloads and processing a partner or a seller waits for.
    Live,
    /// Results waiting to be read by the marketplace (`imgest results`).
    Results,
    /// Results on their way to their clients' webhook endpoints.
    Webhooks,
    /// Re-processing of stored photos: served only while no live task is due.
    Backfill,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueRow {
    pub queue: String,
    pub priority: Priority,
    /// The download tier of a fetch queue.
    pub tier: Option<usize>,
    pub ready: u64,
    pub delayed: u64,
    pub in_flight: u64,
    pub dead: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetterRow {
    pub queue: String,
    pub key: String,
    pub attempts: u32,
    pub reason: String,
    pub failed_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueOverview {
    pub queues: Vec<QueueRow>,
    /// The newest dead letters of every queue, newest first.
    pub dead_letters: Vec<DeadLetterRow>,
}

impl Service {
    /// The embedded task queue (backfill and `imgest queue` run where it is).
    pub(crate) fn task_queue(&self) -> Result<&std::sync::Arc<dyn TaskQueue>, FlowError> {
        self.ports.queue.as_ref().ok_or_else(|| {
            FlowError::Internal("the task queue is the embedded backend's (SQS on AWS)".into())
        })
    }

    /// Every queue of this configuration, served first to last.
    fn known_queues(&self) -> Vec<(String, Priority, Option<usize>)> {
        let mut queues: Vec<_> = (0..self.policy.fetch_tiers)
            .map(|tier| (tier_queue(tier), Priority::Live, Some(tier)))
            .collect();
        queues.push((PROCESS_QUEUE.to_owned(), Priority::Live, None));
        queues.push((RESULTS_QUEUE.to_owned(), Priority::Results, None));
        queues.push((WEBHOOK_QUEUE.to_owned(), Priority::Webhooks, None));
        queues.push((BACKFILL_QUEUE.to_owned(), Priority::Backfill, None));
        queues
    }

    /// Each queue's tasks by state, and up to `dead_letters` of the newest dead letters.
    pub async fn queue_overview(&self, dead_letters: usize) -> Result<QueueOverview, FlowError> {
        let queue = self.task_queue()?;
        let now = self.ports.clock.now();
        let mut overview = QueueOverview {
            queues: Vec::new(),
            dead_letters: Vec::new(),
        };
        for (name, priority, tier) in self.known_queues() {
            let QueueCounts {
                ready,
                delayed,
                in_flight,
                dead,
            } = queue.counts(&name, now).await?;
            overview.queues.push(QueueRow {
                queue: name.clone(),
                priority,
                tier,
                ready,
                delayed,
                in_flight,
                dead,
            });
            if dead_letters > 0 {
                for letter in queue.dead_letters(&name, dead_letters).await? {
                    overview.dead_letters.push(DeadLetterRow {
                        queue: name.clone(),
                        key: letter.key,
                        attempts: letter.attempts,
                        reason: letter.reason.to_string(),
                        failed_at_ms: letter.failed_at.as_millis(),
                    });
                }
            }
        }
        overview
            .dead_letters
            .sort_by_key(|d| std::cmp::Reverse(d.failed_at_ms));
        overview.dead_letters.truncate(dead_letters);
        Ok(overview)
    }

    /// Live tasks due now and not yet taken: while there are any, backfill waits.
    pub async fn live_backlog(&self) -> Result<u64, FlowError> {
        let queue = self.task_queue()?;
        let now = self.ports.clock.now();
        let mut due = 0;
        for (name, priority, _) in self.known_queues() {
            if priority == Priority::Live {
                due += queue.counts(&name, now).await?.ready;
            }
        }
        Ok(due)
    }

    /// The queues whose dead letters `imgest dlq` handles: every queue of this configuration
    /// that has a dead-letter list (the results queue is the marketplace's to read), and on
    /// AWS the intake queue.
    pub fn dead_letter_queues(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .known_queues()
            .into_iter()
            .filter(|(_, priority, _)| *priority != Priority::Results)
            .map(|(name, _, _)| name)
            .collect();
        if self.ports.queue.is_none() {
            names.insert(0, INTAKE_QUEUE.to_owned());
        }
        names
    }

    /// Up to `limit` dead letters of each of `queues`, by queue. A queue without a
    /// dead-letter list (or not configured) is left out.
    pub async fn dead_letters(
        &self,
        queues: &[String],
        limit: usize,
    ) -> Result<Vec<(String, Vec<DeadMessage>)>, FlowError> {
        let mut out = Vec::new();
        for queue in queues {
            match self.ports.messages.dead_letters(queue, limit).await {
                Ok(letters) => out.push((queue.clone(), letters)),
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }

    /// `queue`'s dead letters by the kind of their failure, in the order each kind first
    /// appears, newest letter first. `None` on AWS: counting them would mean receiving every
    /// message of the dead-letter queue (`imgest dlq list` shows each one's reason).
    pub async fn failure_kinds(
        &self,
        queue: &str,
    ) -> Result<Option<Vec<(String, u64)>>, FlowError> {
        let Some(tasks) = &self.ports.queue else {
            return Ok(None);
        };
        let mut kinds: Vec<(String, u64)> = Vec::new();
        for letter in tasks.dead_letters(queue, DEAD_LETTERS_READ).await? {
            let kind = letter.reason.kind;
            match kinds.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => kinds.push((kind, 1)),
            }
        }
        Ok(Some(kinds))
    }

    /// Puts `letters`, given up on where `queue` delivered them, on that queue's dead letters
    /// with their reasons; each is logged (with its kind) and counted.
    pub async fn dead_letter(&self, queue: &str, letters: &[Letter]) -> Result<(), FlowError> {
        self.ports.messages.dead_letter(queue, letters).await?;
        self.counters
            .messages_dead_lettered
            .increment(letters.len() as u64);
        for letter in letters {
            tracing::error!(
                queue,
                message_id = %letter.message_id,
                kind = %letter.reason.kind,
                reason = %letter.reason.message,
                attempts = letter.attempts,
                "message given up on: sent to the dead letters"
            );
        }
        Ok(())
    }

    /// Moves up to `max` of `queue`'s dead letters back onto it, every kind but `forbidden`;
    /// how many were moved.
    pub async fn redrive(&self, queue: &str, max: usize) -> Result<u64, FlowError> {
        self.redrive_kinds(queue, max, &RedriveKinds::Routine).await
    }

    /// Moves up to `max` of `queue`'s dead letters that `kinds` takes back onto it; how many
    /// were moved.
    pub async fn redrive_kinds(
        &self,
        queue: &str,
        max: usize,
        kinds: &RedriveKinds,
    ) -> Result<u64, FlowError> {
        let moved = self.ports.messages.redrive(queue, max, kinds).await?;
        tracing::info!(queue, moved, ?kinds, "dead letters redriven");
        Ok(moved)
    }
}

/// Dead letters read per queue to count failures by kind.
const DEAD_LETTERS_READ: usize = 10_000;

/// The AWS intake queue's logical name (in `IMGEST_QUEUES`): partners' crawl requests.
pub const INTAKE_QUEUE: &str = "intake";
