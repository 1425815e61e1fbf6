//! The dead letters of an SQS queue: sent there with their reasons by the handlers that gave
//! up on them, listed, and moved back (`imgest dlq`).
//!
//! A queue's dead-letter queue is `{name}.dead` in `IMGEST_QUEUES`, else the one its redrive
//! policy names (found once). A dead-letter queue may serve several queues (the crawl's
//! does), and holds two kinds of message, told apart by SQS's own record, never by what a
//! message says of itself:
//!
//! - a handler's letter, sent there by one of the stack's functions (only they may send to a
//!   dead-letter queue: its policy), with its reason and origin in attributes ([`KIND`],
//!   [`REASON`], [`QUEUE`], [`SENDER`], ...), believed as written;
//! - a message SQS moved on its own after its receive limit (the function stopped on every
//!   attempt): its origin is SQS's `DeadLetterQueueSourceArn`, its sender SQS's `SenderId`,
//!   and its own attributes, a partner's words, are neither shown nor redriven.
//!
//! A message with neither mark is no queue's: it is neither listed nor moved.
//!
//! A letter must fit in its queue's message size with its attributes: a body too large for
//! that ([`MAX_LETTER_BYTES`]) is kept in storage (`dead-letters/{queue}/{message_id}`) and
//! the letter names its key ([`BODY_KEY`]); a redrive sends the body again and deletes it.

use std::collections::{HashMap, HashSet};

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName, QueueAttributeName,
};
use bytes::Bytes;

use super::sqs::{SqsSender, lock};
use crate::sdk_error::sdk_error;
use imgest_core::domain::BlobKey;
use imgest_core::ports::{
    DeadMessage, Letter, MessageSender, OutgoingMessage, Reason, RedriveKinds, StoreError,
};

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
/// ...who sent it first, as the decision about it took it, for a redrive to vouch for.
pub const SENDER: &str = "imgest.sender";
/// ...where its body is kept when the letter would not fit in a message
/// ([`MAX_LETTER_BYTES`]).
pub const BODY_KEY: &str = "imgest.body_key";

/// The largest letter sent, body and attributes counted as SQS counts them: SQS's smallest
/// maximum message size (256 KiB, every queue's default before 2025), less room for the
/// attributes SQS adds nothing to. A larger body is kept in storage.
pub const MAX_LETTER_BYTES: usize = 256 * 1024;

/// A queue's dead-letter queue.
pub(super) struct DeadLetterQueue {
    pub url: String,
    /// The ARN of the queue whose dead letters are wanted.
    pub source_arn: String,
}

/// How long a message taken for a move stays hidden: long enough to send and delete it, and
/// to look through the rest of the queue (skipped letters stay hidden until the redrive ends,
/// so that each receive brings new ones).
const MOVE_VISIBILITY_SECS: i32 = 120;

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
        let mut messages = Vec::with_capacity(letters.len());
        for letter in letters {
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
            if message_bytes(&message) > MAX_LETTER_BYTES {
                message = self.keep_body_aside(queue, letter, message).await?;
            }
            messages.push(message);
        }
        self.send_to_url(&format!("{queue} (dead letters)"), &url, &messages)
            .await
    }

    /// A letter too large for a message, with its body kept in storage and its key in
    /// [`BODY_KEY`] instead.
    async fn keep_body_aside(
        &self,
        queue: &str,
        letter: &Letter,
        mut message: OutgoingMessage,
    ) -> Result<OutgoingMessage, StoreError> {
        let Some(store) = &self.letter_bodies else {
            return Err(StoreError::Backend {
                message: format!(
                    "a dead letter of queue {queue:?} is {} bytes, more than a message holds, and this sender keeps no bodies aside",
                    letter.body.len()
                ),
                source: None,
            });
        };
        let key =
            BlobKey::dead_letter(queue, &letter.message_id).ok_or_else(|| StoreError::Backend {
                message: format!(
                    "message id {:?} of queue {queue:?} makes no storage key",
                    letter.message_id
                ),
                source: None,
            })?;
        store
            .put(
                &key,
                Bytes::from(letter.body.clone()),
                "application/octet-stream",
            )
            .await?;
        message.body = format!(
            "(a body of {} bytes, kept under {})",
            letter.body.len(),
            key.as_str()
        );
        Ok(message.with_attribute(BODY_KEY, key.as_str()))
    }

    /// Up to `max` (at most ten) messages of the dead-letter queue, hidden for `visibility`
    /// seconds, with their attributes and SQS's record of where they came from.
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
            .message_system_attribute_names(MessageSystemAttributeName::SenderId)
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
                let letter = DeadLetterMessage::of(&m);
                if !letter.is_from(queue, &dead) || out.len() >= limit {
                    continue;
                }
                out.push(letter.shown(id, &m));
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
        kinds: &RedriveKinds,
    ) -> Result<u64, StoreError> {
        let dead = self.dead_letter_queue_of(queue).await?;
        let mut moved = 0u64;
        let mut seen = HashSet::new();
        // Letters left where they are (another queue's, a kind not asked for) stay hidden
        // while the redrive looks through the rest, then are made visible again.
        let mut skipped: Vec<String> = Vec::new();
        let result = async {
            while (moved as usize) < max {
                let messages = self.take(&dead, 10, MOVE_VISIBILITY_SECS).await?;
                let mut ours = Vec::new();
                let mut new = false;
                for m in messages {
                    let Some(handle) = m.receipt_handle.clone() else {
                        continue;
                    };
                    new |= seen.insert(m.message_id.clone().unwrap_or_default());
                    let letter = DeadLetterMessage::of(&m);
                    if ours.len() + moved as usize >= max
                        || !letter.is_from(queue, &dead)
                        || !kinds.takes(letter.kind())
                    {
                        skipped.push(handle);
                        continue;
                    }
                    ours.push((m, letter));
                }
                if !new {
                    break;
                }
                if ours.is_empty() {
                    continue;
                }
                self.move_back(queue, &dead, &ours).await?;
                moved += ours.len() as u64;
            }
            Ok::<(), StoreError>(())
        }
        .await;
        for handle in &skipped {
            // Best effort: a letter not released now is visible again after its timeout.
            let _ = self
                .client
                .change_message_visibility()
                .queue_url(&dead.url)
                .receipt_handle(handle)
                .visibility_timeout(0)
                .send()
                .await;
        }
        result.map(|()| moved)
    }

    /// Sends `letters` back onto `queue`, then deletes them from the dead-letter queue (a
    /// failure in between leaves a duplicate, which every handler takes, never a loss), and
    /// the bodies kept aside for them.
    async fn move_back(
        &self,
        queue: &str,
        dead: &DeadLetterQueue,
        letters: &[(Message, DeadLetterMessage)],
    ) -> Result<(), StoreError> {
        let mut outgoing = Vec::with_capacity(letters.len());
        let mut kept = Vec::new();
        for (m, letter) in letters {
            let body = match letter.body_key() {
                Some(key) => {
                    let store = self.letter_bodies.as_ref().ok_or_else(|| StoreError::Backend {
                        message: format!(
                            "a dead letter of queue {queue:?} keeps its body under {}, and this sender reads no bodies",
                            key.as_str()
                        ),
                        source: None,
                    })?;
                    let bytes = store.get(&key).await?;
                    kept.push(key);
                    String::from_utf8_lossy(&bytes).into_owned()
                }
                None => m.body.clone().unwrap_or_default(),
            };
            let mut message = OutgoingMessage::now(body);
            message.attributes = letter.redriven_attributes();
            outgoing.push(message);
        }
        MessageSender::send(self, queue, &outgoing).await?;
        let entries: Vec<DeleteMessageBatchRequestEntry> = letters
            .iter()
            .enumerate()
            .filter_map(|(i, (m, _))| {
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
        if let Some(store) = &self.letter_bodies
            && !kept.is_empty()
        {
            store.delete(&kept).await?;
        }
        Ok(())
    }
}

/// The size SQS counts for a message: its body, and each attribute's name, type and value.
fn message_bytes(message: &OutgoingMessage) -> usize {
    message.body.len()
        + message
            .attributes
            .iter()
            .map(|(name, value)| name.len() + "String".len() + value.len())
            .sum::<usize>()
}

/// A message of a dead-letter queue, read by SQS's record of how it got there.
enum DeadLetterMessage {
    /// Sent there by one of the stack's functions: its attributes are its reason and origin.
    Handler(HashMap<String, String>),
    /// Moved there by SQS after its receive limit: from the queue `source_arn`, sent by
    /// `sender` (SQS's `SenderId`); nothing it says of itself is read.
    Moved {
        source_arn: String,
        sender: Option<String>,
    },
    /// Neither: no queue's.
    Unmarked,
}

impl DeadLetterMessage {
    fn of(m: &Message) -> Self {
        let system = |name| m.attributes.as_ref().and_then(|a| a.get(&name)).cloned();
        if let Some(source_arn) = system(MessageSystemAttributeName::DeadLetterQueueSourceArn) {
            return Self::Moved {
                source_arn,
                sender: system(MessageSystemAttributeName::SenderId),
            };
        }
        let ours = imgest_attributes(m);
        if ours.contains_key(QUEUE) {
            Self::Handler(ours)
        } else {
            Self::Unmarked
        }
    }

    /// Whether the letter is `queue`'s: a moved message by SQS's record of its source, a
    /// handler's letter by the queue it names.
    fn is_from(&self, queue: &str, dead: &DeadLetterQueue) -> bool {
        match self {
            Self::Handler(attributes) => attributes.get(QUEUE).is_some_and(|q| q == queue),
            Self::Moved { source_arn, .. } => *source_arn == dead.source_arn,
            Self::Unmarked => false,
        }
    }

    /// Its reason's kind (`None` for a message SQS moved).
    fn kind(&self) -> Option<&str> {
        match self {
            Self::Handler(attributes) => attributes.get(KIND).map(String::as_str),
            Self::Moved { .. } | Self::Unmarked => None,
        }
    }

    /// Where a handler's letter keeps its body, if it was too large for a message.
    fn body_key(&self) -> Option<BlobKey> {
        match self {
            Self::Handler(attributes) => attributes.get(BODY_KEY).and_then(|k| BlobKey::parse(k)),
            Self::Moved { .. } | Self::Unmarked => None,
        }
    }

    /// The sender it names: a handler's letter the one its handler decided on, a moved
    /// message SQS's `SenderId` (without a role's session).
    fn sender(&self) -> Option<String> {
        match self {
            Self::Handler(attributes) => attributes.get(SENDER).cloned(),
            Self::Moved { sender, .. } => sender
                .as_deref()
                .map(|s| s.split(':').next().unwrap_or(s).to_owned()),
            Self::Unmarked => None,
        }
    }

    /// The attributes it goes back with: its original sender, for a listed redriver to vouch
    /// for. Nothing else: the queue's handler decides anew, and a moved message's own words
    /// are not repeated.
    fn redriven_attributes(&self) -> Vec<(String, String)> {
        self.sender()
            .map(|sender| (SENDER.to_owned(), sender))
            .into_iter()
            .collect()
    }

    /// The letter as `imgest dlq` shows it.
    fn shown(&self, id: String, m: &Message) -> DeadMessage {
        let system = |name| m.attributes.as_ref().and_then(|a| a.get(&name)).cloned();
        let (reason, attempts, at) = match self {
            Self::Handler(attributes) => (
                attributes.get(KIND).map(|kind| {
                    Reason::new(kind, attributes.get(REASON).cloned().unwrap_or_default())
                }),
                attributes.get(ATTEMPTS).cloned(),
                attributes.get(FAILED_AT).cloned(),
            ),
            Self::Moved { .. } | Self::Unmarked => (None, None, None),
        };
        DeadMessage {
            id,
            body: m.body.clone().unwrap_or_default(),
            reason,
            attempts: attempts
                .or_else(|| system(MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|n| n.parse().ok()),
            sent_at_ms: at
                .or_else(|| system(MessageSystemAttributeName::SentTimestamp))
                .and_then(|t| t.parse().ok()),
            sender: self.sender(),
        }
    }
}

/// A message's `imgest.*` string attributes.
fn imgest_attributes(message: &Message) -> HashMap<String, String> {
    message
        .message_attributes
        .iter()
        .flatten()
        .filter(|(name, _)| name.starts_with("imgest."))
        .filter_map(|(name, value)| Some((name.clone(), value.string_value.clone()?)))
        .collect()
}
