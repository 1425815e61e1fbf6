//! The dead letters of an SQS queue: found through its redrive policy, listed, and moved back
//! (`imgest dlq`). A dead-letter queue may serve several queues (the crawl's does): SQS marks
//! each message with the queue it came from (`DeadLetterQueueSourceArn`), and only this
//! queue's are listed and moved. A message without the mark (an emulator's) counts as this
//! queue's.

use std::collections::{HashMap, HashSet};

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName, QueueAttributeName,
};

use super::sqs::SqsSender;
use crate::sdk_error::sdk_error;
use imgest_core::ports::{DeadMessage, OutgoingMessage, StoreError};

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
        let source_arn = attributes
            .get(&QueueAttributeName::QueueArn)
            .cloned()
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

    /// Up to `max` (at most ten) messages of the dead-letter queue, hidden for `visibility`
    /// seconds.
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
                if !is_from(&m, &dead) || out.len() >= limit {
                    continue;
                }
                let attribute = |name| m.attributes.as_ref().and_then(|a| a.get(&name)).cloned();
                out.push(DeadMessage {
                    id,
                    body: m.body.clone().unwrap_or_default(),
                    reason: None,
                    attempts: None,
                    sent_at_ms: attribute(MessageSystemAttributeName::SentTimestamp)
                        .and_then(|t| t.parse().ok()),
                });
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
                messages.into_iter().partition(|m| is_from(m, &dead));
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
            // idempotent), never a loss.
            let outgoing: Vec<OutgoingMessage> = ours
                .iter()
                .map(|m| OutgoingMessage {
                    body: m.body.clone().unwrap_or_default(),
                    delay: std::time::Duration::ZERO,
                })
                .collect();
            imgest_core::ports::MessageSender::send(self, queue, &outgoing).await?;
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

/// Whether a dead letter came from `dead`'s source queue (unmarked ones count as its own).
fn is_from(message: &Message, dead: &DeadLetterQueue) -> bool {
    message
        .attributes
        .as_ref()
        .and_then(|a| a.get(&MessageSystemAttributeName::DeadLetterQueueSourceArn))
        .is_none_or(|source| *source == dead.source_arn)
}
