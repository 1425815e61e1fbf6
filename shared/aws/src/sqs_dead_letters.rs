//! The dead letters of an SQS queue: sent there with their reasons by the handlers that gave
//! up on them, listed, and moved back (`imgest dlq`).
//!
//! A queue's dead-letter queue is `{name}.dead` in `IMGEST_QUEUES`, else the one its redrive
//! policy names (found once). A dead-letter queue may serve several queues (the crawl's
//! does): SQS marks each message it moves with the queue it came from
//! (`DeadLetterQueueSourceArn`), a handler marks its letters with `imgest.queue`, and only
//! this queue's are listed and moved. A message with neither mark (an emulator's) counts as
//! this queue's.
//!
//! A letter's reason is kept in message attributes ([`KIND`], [`REASON`], ...), which SQS
//! keeps when it moves a message and which a redrive copies: a letter that SQS moves again on
//! its own (the function stopped on every attempt) still says why it failed before.

use std::collections::{HashMap, HashSet};

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName, QueueAttributeName,
};

use super::sqs::{SqsSender, lock};
use crate::sdk_error::sdk_error;
use imgest_core::ports::{DeadMessage, Letter, MessageSender, OutgoingMessage, Reason, StoreError};

/// The attribute holding a letter's reason's kind.
pub const KIND: &str = "imgest.kind";
/// ...its reason in words.
pub const REASON: &str = "imgest.reason";
/// ...the logical queue it was given up on (a dead-letter queue may serve several).
pub const QUEUE: &str = "imgest.queue";
/// ...the receives it had.
pub const ATTEMPTS: &str = "imgest.attempts";
/// ...its message id on that queue.
pub const MESSAGE_ID: &str = "imgest.message_id";
/// ...when it was given up on (ms since the epoch).
pub const FAILED_AT: &str = "imgest.failed_at";
/// ...who sent it first (the intake queue's `SenderId`), for a redrive to vouch for.
pub const SENDER: &str = "imgest.sender";

/// A queue's dead-letter queue.
pub(super) struct DeadLetterQueue {
    pub url: String,
    /// The ARN of the queue whose dead letters are wanted.
    pub source_arn: String,
}

/// How long a message taken for a move stays hidden: long enough to send and delete it.
const MOVE_VISIBILITY_SECS: i32 = 60;

impl SqsSender {
    /// The dead-letter queue named by `queue`'s redrive policy (`attributes` are `queue`'s).
    pub(super) async fn dead_letter_queue(
        &self,
        queue: &str,
        attributes: &HashMap<QueueAttributeName, String>,
    ) -> Result<Option<DeadLetterQueue>, StoreError> {
        let source_arn = attributes
            .get(&QueueAttributeName::QueueArn)
            .cloned()
            .unwrap_or_default();
        if let Ok(url) = self.url(&format!("{queue}.dead")) {
            return Ok(Some(DeadLetterQueue {
                url: url.to_owned(),
                source_arn,
            }));
        }
        let arn = attributes
            .get(&QueueAttributeName::RedrivePolicy)
            .and_then(|policy| serde_json::from_str::<serde_json::Value>(policy).ok())
            .and_then(|policy| policy["deadLetterTargetArn"].as_str().map(str::to_owned));
        let Some(arn) = arn else {
            return Ok(None);
        };
        // arn:aws:sqs:{region}:{account}:{name}
        let mut parts = arn.rsplitn(3, ':');
        let (Some(name), Some(account)) = (parts.next(), parts.next()) else {
            return Err(StoreError::Backend {
                message: format!("queue {queue:?} names an unreadable dead-letter queue {arn:?}"),
                source: None,
            });
        };
        let url = self
            .client
            .get_queue_url()
            .queue_name(name)
            .queue_owner_aws_account_id(account)
            .send()
            .await
            .map_err(|e| sdk_error(format!("finding the dead-letter queue {arn:?}"), e))?
            .queue_url
            .unwrap_or_default();
        Ok(Some(DeadLetterQueue { url, source_arn }))
    }

    async fn dead_letter_queue_of(&self, queue: &str) -> Result<DeadLetterQueue, StoreError> {
        let attributes = self.attributes(self.url(queue)?).await?;
        self.dead_letter_queue(queue, &attributes)
            .await?
            .ok_or_else(|| {
                StoreError::NotFound(format!("queue {queue:?} has no dead-letter queue"))
            })
    }

    /// The URL of `queue`'s dead-letter queue: listed, or found once through its redrive
    /// policy.
    async fn dead_letter_url(&self, queue: &str) -> Result<String, StoreError> {
        if let Ok(url) = self.url(&format!("{queue}.dead")) {
            return Ok(url.to_owned());
        }
        if let Some(url) = lock(&self.found_dead).get(queue) {
            return Ok(url.clone());
        }
        let url = self.dead_letter_queue_of(queue).await?.url;
        lock(&self.found_dead).insert(queue.to_owned(), url.clone());
        Ok(url)
    }

    pub(super) async fn send_dead_letters(
        &self,
        queue: &str,
        letters: &[Letter],
    ) -> Result<(), StoreError> {
        if letters.is_empty() {
            return Ok(());
        }
        let url = self.dead_letter_url(queue).await?;
        let failed_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let messages: Vec<OutgoingMessage> = letters
            .iter()
            .map(|letter| {
                let mut message = OutgoingMessage::now(letter.body.clone())
                    .with_attribute(KIND, &letter.reason.kind)
                    .with_attribute(REASON, &letter.reason.message)
                    .with_attribute(QUEUE, queue)
                    .with_attribute(ATTEMPTS, letter.attempts.to_string())
                    .with_attribute(MESSAGE_ID, &letter.message_id)
                    .with_attribute(FAILED_AT, failed_at.to_string());
                if let Some(sender) = &letter.sender {
                    message = message.with_attribute(SENDER, sender);
                }
                message
            })
            .collect();
        self.send_to_url(&format!("{queue} (dead letters)"), &url, &messages)
            .await
    }

    /// Up to `max` (at most ten) messages of the dead-letter queue, hidden for `visibility`
    /// seconds, with their attributes.
    async fn take(
        &self,
        dead: &DeadLetterQueue,
        max: usize,
        visibility: i32,
    ) -> Result<Vec<Message>, StoreError> {
        let out = self
            .client
            .receive_message()
            .queue_url(&dead.url)
            .max_number_of_messages(i32::try_from(max.clamp(1, 10)).unwrap_or(10))
            .visibility_timeout(visibility)
            .message_system_attribute_names(MessageSystemAttributeName::DeadLetterQueueSourceArn)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| sdk_error(format!("reading the dead-letter queue {:?}", dead.url), e))?;
        Ok(out.messages.unwrap_or_default())
    }

    pub(super) async fn list_dead_letters(
        &self,
        queue: &str,
        limit: usize,
    ) -> Result<Vec<DeadMessage>, StoreError> {
        let dead = self.dead_letter_queue_of(queue).await?;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        // Peeked (hidden for no time), so a listing never delays a redrive; receives go on
        // while they bring messages not seen yet.
        while out.len() < limit {
            let messages = self.take(&dead, 10, 0).await?;
            let mut new = false;
            for m in messages {
                let id = m.message_id.clone().unwrap_or_default();
                if !seen.insert(id.clone()) {
                    continue;
                }
                new = true;
                if !is_from(&m, queue, &dead) || out.len() >= limit {
                    continue;
                }
                out.push(dead_message(id, &m));
            }
            if !new {
                break;
            }
        }
        Ok(out)
    }

    pub(super) async fn redrive_dead_letters(
        &self,
        queue: &str,
        max: usize,
    ) -> Result<u64, StoreError> {
        let dead = self.dead_letter_queue_of(queue).await?;
        let mut moved = 0u64;
        while (moved as usize) < max {
            // No more than the rest to move: a message taken is hidden until moved.
            let messages = self
                .take(&dead, max - moved as usize, MOVE_VISIBILITY_SECS)
                .await?;
            let (ours, others): (Vec<Message>, Vec<Message>) =
                messages.into_iter().partition(|m| is_from(m, queue, &dead));
            // Another queue's dead letters are made visible again at once.
            for m in &others {
                if let Some(handle) = &m.receipt_handle {
                    self.client
                        .change_message_visibility()
                        .queue_url(&dead.url)
                        .receipt_handle(handle)
                        .visibility_timeout(0)
                        .send()
                        .await
                        .map_err(|e| sdk_error("releasing another queue's dead letter", e))?;
                }
            }
            if ours.is_empty() {
                break;
            }
            // Sent before deleted: a failure in between leaves a duplicate (every handler is
            // idempotent), never a loss. The letter's attributes go with it.
            let outgoing: Vec<OutgoingMessage> = ours
                .iter()
                .map(|m| {
                    let mut message = OutgoingMessage::now(m.body.clone().unwrap_or_default());
                    message.attributes = imgest_attributes(m);
                    message
                })
                .collect();
            MessageSender::send(self, queue, &outgoing).await?;
            let entries: Vec<DeleteMessageBatchRequestEntry> = ours
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(m.receipt_handle.clone().unwrap_or_default())
                        .build()
                        .ok()
                })
                .collect();
            self.client
                .delete_message_batch()
                .queue_url(&dead.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| sdk_error("deleting redriven dead letters", e))?;
            moved += ours.len() as u64;
        }
        Ok(moved)
    }
}

/// A message's `imgest.*` string attributes.
fn imgest_attributes(message: &Message) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = message
        .message_attributes
        .iter()
        .flatten()
        .filter(|(name, _)| name.starts_with("imgest."))
        .filter_map(|(name, value)| Some((name.clone(), value.string_value.clone()?)))
        .collect();
    out.sort();
    out
}

/// A message of a dead-letter queue as `imgest dlq` shows it.
fn dead_message(id: String, m: &Message) -> DeadMessage {
    let system = |name| m.attributes.as_ref().and_then(|a| a.get(&name)).cloned();
    let ours = |name: &str| {
        m.message_attributes
            .as_ref()
            .and_then(|a| a.get(name))
            .and_then(|v| v.string_value.clone())
    };
    let reason = ours(KIND).map(|kind| Reason::new(kind, ours(REASON).unwrap_or_default()));
    DeadMessage {
        id,
        body: m.body.clone().unwrap_or_default(),
        reason,
        attempts: ours(ATTEMPTS)
            .or_else(|| system(MessageSystemAttributeName::ApproximateReceiveCount))
            .and_then(|n| n.parse().ok()),
        sent_at_ms: ours(FAILED_AT)
            .or_else(|| system(MessageSystemAttributeName::SentTimestamp))
            .and_then(|t| t.parse().ok()),
        sender: ours(SENDER),
    }
}

/// Whether a dead letter is `queue`'s: a handler's letter says so (`imgest.queue`), a message
/// SQS moved names its source queue; one with neither mark counts as `dead`'s source's.
fn is_from(message: &Message, queue: &str, dead: &DeadLetterQueue) -> bool {
    let marked = message
        .message_attributes
        .as_ref()
        .and_then(|a| a.get(QUEUE))
        .and_then(|v| v.string_value.as_deref());
    if let Some(marked) = marked {
        return marked == queue;
    }
    message
        .attributes
        .as_ref()
        .and_then(|a| a.get(&MessageSystemAttributeName::DeadLetterQueueSourceArn))
        .is_none_or(|source| *source == dead.source_arn)
}
