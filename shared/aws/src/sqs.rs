//! [`SqsSender`]: the message sender port on SQS.
//!
//! Messages due within SQS's maximum delivery delay (15 minutes) are sent with
//! `SendMessageBatch`, ten (and at most 256 KiB) per call, with `DelaySeconds` rounded up so a
//! message is never delivered early. Entries SQS reports as failed by its own fault are sent
//! again a few times before the call gives up with `Unavailable`; an entry refused as the
//! sender's fault (too large, invalid characters) fails at once with `Backend`.
//!
//! A message delayed longer (a day-long `Retry-After`) is a long wait, in one of two ways
//! ([`LongWaits`](imgest_core::backend::LongWaits)):
//! - through Step Functions ([`StepFunctionsDelay`], the template's default): one execution of
//!   the delayed-send state machine per message, which waits, then sends it (to the fetch
//!   queues; other queues' long waits, the webhook deliveries' retries, are chained);
//! - chained: sent with the longest delay SQS allows and the instant it is due in its
//!   [`DUE_ATTRIBUTE`]; its queue's handler sends it on with the rest of its wait when it
//!   arrives early (`imgest_lambda::chain`), a hop every 15 minutes, until it is due. A wait
//!   costs a few queue requests per hop, nothing per second, and no quota of open executions
//!   bounds how many wait at once.
//!
//! Either way the handlers of the queues sent long waits read a chained message's due instant,
//! so a stack switched from one to the other drains the waits already under way.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::types::{MessageAttributeValue, QueueAttributeName, SendMessageBatchRequestEntry};

use super::sfn::StepFunctionsDelay;
use super::sns::{SnsTopics, is_topic};
use crate::sdk_error::sdk_error;
use imgest_core::backend::MAX_SQS_DELAY;
use imgest_core::ports::{
    BlobStore, Clock, DeadMessage, Letter, MessageSender, OutgoingMessage, QueueCounts,
    RedriveKinds, StoreError, Subscriber, SystemClock,
};

/// The message attribute of a chained message: when it is due, in milliseconds since the Unix
/// epoch. A message that carries it may arrive before then, and is sent on until it is due.
pub const DUE_ATTRIBUTE: &str = "imgest.due";
/// The longest delay a message may be sent with (a chain of 672 hops, or an execution's
/// week): every wait the flows schedule is shorter (the longest, a `Retry-After`, is capped at
/// a day), so a longer one is a bug, refused rather than left waiting for months.
pub const MAX_CHAINED_DELAY: Duration = Duration::from_secs(7 * 86_400);

/// `SendMessageBatch` takes at most this many entries...
pub const BATCH_ENTRIES: usize = 10;
/// ...and at most this many bytes of bodies in all.
const BATCH_BYTES: usize = 256 * 1024;
/// Executions of the delayed-send state machine started at once for one send.
const EXECUTIONS_AT_ONCE: usize = 16;
/// `SendMessageBatch` calls in flight at once for one send. A backfill's enumerator queues its
/// rounds through one send each, half of every minute: at ten times seed 001's peak it must
/// queue some 20,700 tasks a second, and 16 calls at once (a round trip each) carried about
/// 4,800 (docs/capacity.md, "Maintenance"). At most 128 × 256 KB of bodies in flight.
pub const BATCHES_AT_ONCE: usize = 128;
/// Sends of one batch's failed entries, the first included.
const BATCH_ATTEMPTS: u32 = 4;
/// The wait before the first resend of failed entries (doubled each time, plus jitter).
const RESEND_BACKOFF: Duration = Duration::from_millis(100);

/// Sends to SQS queues by logical name. Cheap to clone.
#[derive(Clone)]
pub struct SqsSender {
    pub(super) client: aws_sdk_sqs::Client,
    /// Logical queue name → queue URL (a queue's dead-letter queue may be listed as
    /// `{name}.dead`).
    queues: HashMap<String, String>,
    /// Dead-letter queue URLs found through their queues' redrive policies, by logical name.
    pub(super) found_dead: Arc<Mutex<HashMap<String, String>>>,
    /// Publishes to the logical queues that are SNS topics (their entry is the topic's ARN).
    topics: Option<SnsTopics>,
    /// Messages delayed longer than this are long waits.
    max_sqs_delay: Duration,
    /// Long waits through the delayed-send state machine; `None`: chained.
    step_functions: Option<StepFunctionsDelay>,
    /// What a chained message's due instant is counted from (the flows' clock, so that its
    /// handler, reading the same clock, agrees on when it is due).
    clock: Arc<dyn Clock>,
    /// Where a dead letter too large for a message keeps its body
    /// ([`MAX_LETTER_BYTES`](super::sqs_dead_letters::MAX_LETTER_BYTES)).
    pub(super) letter_bodies: Option<Arc<dyn BlobStore>>,
}

impl std::fmt::Debug for SqsSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsSender")
            .field("queues", &self.queues)
            .field("max_sqs_delay", &self.max_sqs_delay)
            .finish_non_exhaustive()
    }
}

impl SqsSender {
    /// A sender to the queues in `queues` (logical name → queue URL), counting chained
    /// messages' due instants from the system clock.
    pub fn new(client: aws_sdk_sqs::Client, queues: HashMap<String, String>) -> Self {
        Self {
            client,
            queues,
            found_dead: Arc::default(),
            topics: None,
            max_sqs_delay: MAX_SQS_DELAY,
            step_functions: None,
            clock: Arc::new(SystemClock),
            letter_bodies: None,
        }
    }

    /// Keeps the bodies of dead letters too large for a message in `store` (and reads them
    /// back for a redrive).
    pub fn with_letter_bodies(mut self, store: Arc<dyn BlobStore>) -> Self {
        self.letter_bodies = Some(store);
        self
    }

    /// Counts chained messages' due instants from `clock` (the one their handlers read).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Publishes to the logical queues whose entry is an SNS topic's ARN through `topics`
    /// (without, sending to them fails).
    pub fn with_topics(mut self, topics: SnsTopics) -> Self {
        self.topics = Some(topics);
        self
    }

    /// Sends long waits through the delayed-send state machine instead of chaining them.
    pub fn with_step_functions(mut self, delay: StepFunctionsDelay) -> Self {
        self.step_functions = Some(delay);
        self
    }

    /// Makes messages delayed longer than `max` long waits (default and upper bound:
    /// [`MAX_SQS_DELAY`]; tests use a small one).
    pub fn with_max_sqs_delay(mut self, max: Duration) -> Self {
        self.max_sqs_delay = max.min(MAX_SQS_DELAY);
        self
    }

    pub fn max_sqs_delay(&self) -> Duration {
        self.max_sqs_delay
    }

    /// Sends `messages` (each due within SQS's delay) to the queue at `queue_url` (`queue`
    /// names it in errors), in batches.
    pub(super) async fn send_to_url(
        &self,
        queue: &str,
        queue_url: &str,
        messages: &[OutgoingMessage],
    ) -> Result<(), StoreError> {
        let messages: Vec<&OutgoingMessage> = messages.iter().collect();
        self.send_now(queue, queue_url, &messages).await
    }

    /// Sends the batches [`BATCHES_AT_ONCE`] at a time: a backfill round or a large intake
    /// queues thousands of messages, a round trip each batch. Every batch is tried; the first
    /// failure is the call's (the others may have been sent: a retry sends them again, which
    /// SQS's at-least-once delivery allows for).
    async fn send_now(
        &self,
        queue: &str,
        queue_url: &str,
        messages: &[&OutgoingMessage],
    ) -> Result<(), StoreError> {
        let mut failed = None;
        for group in batches(messages).chunks(BATCHES_AT_ONCE) {
            let sends = group
                .iter()
                .map(|batch| self.send_batch(queue, queue_url, batch));
            for sent in futures_util::future::join_all(sends).await {
                if let Err(e) = sent {
                    failed.get_or_insert(e);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// One `SendMessageBatch`, resending the entries that failed on SQS's side.
    async fn send_batch(
        &self,
        queue: &str,
        queue_url: &str,
        batch: &[&OutgoingMessage],
    ) -> Result<(), StoreError> {
        let mut pending: Vec<usize> = (0..batch.len()).collect();
        let mut backoff = RESEND_BACKOFF;
        let mut last_failure = String::new();
        for attempt in 1..=BATCH_ATTEMPTS {
            let entries = pending
                .iter()
                .map(|&i| {
                    let attributes = string_attributes(&batch[i].attributes)?;
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(&batch[i].body)
                        .delay_seconds(delay_seconds(batch[i].delay))
                        .set_message_attributes(attributes)
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::backend("building a SendMessageBatch request", e))?;
            let out = self
                .client
                .send_message_batch()
                .queue_url(queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| sdk_error(format!("sending to queue {queue:?}"), e))?;
            if let Some(refused) = out.failed().iter().find(|f| f.sender_fault()) {
                return Err(StoreError::Backend {
                    message: format!(
                        "sending to queue {queue:?}: SQS refused a message: {}: {}",
                        refused.code(),
                        refused.message().unwrap_or("")
                    ),
                    source: None,
                });
            }
            let sent: HashSet<&str> = out.successful().iter().map(|s| s.id()).collect();
            pending.retain(|i| !sent.contains(i.to_string().as_str()));
            if pending.is_empty() {
                return Ok(());
            }
            if let Some(failed) = out.failed().first() {
                last_failure = format!("{}: {}", failed.code(), failed.message().unwrap_or(""));
            }
            if attempt < BATCH_ATTEMPTS {
                let half = u64::try_from(backoff.as_millis() / 2).unwrap_or(0);
                let jitter = Duration::from_millis(fastrand::u64(..=half));
                tokio::time::sleep(backoff + jitter).await;
                backoff *= 2;
            }
        }
        Err(StoreError::Unavailable {
            message: format!(
                "sending to queue {queue:?}: {} of {} messages still failed after {BATCH_ATTEMPTS} attempts (last: {last_failure})",
                pending.len(),
                batch.len()
            ),
            source: None,
        })
    }
}

#[async_trait]
impl MessageSender for SqsSender {
    async fn send(&self, queue: &str, messages: &[OutgoingMessage]) -> Result<(), StoreError> {
        let queue_url = self.url(queue)?;
        if is_topic(queue_url) {
            let Some(topics) = &self.topics else {
                return Err(StoreError::Backend {
                    message: format!(
                        "{queue:?} is an SNS topic, and this sender publishes to none"
                    ),
                    source: None,
                });
            };
            if messages.is_empty() {
                return Ok(());
            }
            return topics.publish(queue, queue_url, messages).await;
        }
        if let Some(sfn) = self
            .step_functions
            .as_ref()
            .filter(|_| StepFunctionsDelay::serves(queue))
        {
            return self.send_waiting_in(sfn, queue, queue_url, messages).await;
        }
        let chained = self.chained(queue, messages)?;
        let messages: Vec<&OutgoingMessage> = chained.iter().map(AsRef::as_ref).collect();
        self.send_now(queue, queue_url, &messages).await
    }

    async fn dead_letter(&self, queue: &str, letters: &[Letter]) -> Result<(), StoreError> {
        self.send_dead_letters(queue, letters).await
    }

    /// From the queue's attributes; `dead` from its dead-letter queue's (named by its redrive
    /// policy), 0 when it has none.
    async fn counts(&self, queue: &str) -> Result<QueueCounts, StoreError> {
        let url = self.url(queue)?;
        if is_topic(url) {
            return Err(StoreError::NotFound(format!(
                "{queue:?} is an SNS topic: its subscribers' queues hold its messages"
            )));
        }
        let attributes = self.attributes(url).await?;
        let number = |name: QueueAttributeName| -> u64 {
            attributes
                .get(&name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let mut counts = QueueCounts {
            ready: number(QueueAttributeName::ApproximateNumberOfMessages),
            delayed: number(QueueAttributeName::ApproximateNumberOfMessagesDelayed),
            in_flight: number(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
            dead: 0,
        };
        if let Some(dead) = self.dead_letter_queue(queue, &attributes).await? {
            counts.dead = self
                .attributes(&dead.url)
                .await?
                .get(&QueueAttributeName::ApproximateNumberOfMessages)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        }
        Ok(counts)
    }

    async fn dead_letters(
        &self,
        queue: &str,
        limit: usize,
    ) -> Result<Vec<DeadMessage>, StoreError> {
        self.list_dead_letters(queue, limit).await
    }

    async fn redrive(
        &self,
        queue: &str,
        max: usize,
        kinds: &RedriveKinds,
    ) -> Result<u64, StoreError> {
        self.redrive_dead_letters(queue, max, kinds).await
    }

    async fn subscribers(&self, queue: &str) -> Result<Option<Vec<Subscriber>>, StoreError> {
        let target = self.url(queue)?;
        match (&self.topics, is_topic(target)) {
            (Some(topics), true) => topics.subscribers(target).await.map(Some),
            _ => Ok(None),
        }
    }
}

impl SqsSender {
    /// Sends the messages due within SQS's delay, then starts an execution of `sfn` for each
    /// long wait. A wait beyond [`MAX_CHAINED_DELAY`] is refused before anything is sent.
    async fn send_waiting_in(
        &self,
        sfn: &StepFunctionsDelay,
        queue: &str,
        queue_url: &str,
        messages: &[OutgoingMessage],
    ) -> Result<(), StoreError> {
        let (direct, long): (Vec<&OutgoingMessage>, Vec<&OutgoingMessage>) =
            messages.iter().partition(|m| m.delay <= self.max_sqs_delay);
        if let Some(m) = long.iter().find(|m| m.delay > MAX_CHAINED_DELAY) {
            return Err(beyond_the_longest_wait(queue, m.delay));
        }
        self.send_now(queue, queue_url, &direct).await?;
        for chunk in long.chunks(EXECUTIONS_AT_ONCE) {
            let mut starts = Vec::with_capacity(chunk.len());
            for m in chunk {
                starts.push(sfn.start(queue, &m.body, ceil_secs(m.delay)));
            }
            futures_util::future::try_join_all(starts).await?;
        }
        Ok(())
    }

    /// `messages` as SQS takes them: one delayed beyond [`max_sqs_delay`](Self::max_sqs_delay)
    /// goes with that delay and its due instant in [`DUE_ATTRIBUTE`]. A delay beyond
    /// [`MAX_CHAINED_DELAY`] is refused before anything is sent.
    fn chained<'a>(
        &self,
        queue: &str,
        messages: &'a [OutgoingMessage],
    ) -> Result<Vec<Cow<'a, OutgoingMessage>>, StoreError> {
        let now = self.clock.now();
        messages
            .iter()
            .map(|m| {
                if m.delay <= self.max_sqs_delay {
                    return Ok(Cow::Borrowed(m));
                }
                if m.delay > MAX_CHAINED_DELAY {
                    return Err(beyond_the_longest_wait(queue, m.delay));
                }
                let due = now.plus(m.delay);
                let mut hop = OutgoingMessage::delayed(m.body.clone(), self.max_sqs_delay);
                hop.attributes = m
                    .attributes
                    .iter()
                    .filter(|(name, _)| name != DUE_ATTRIBUTE)
                    .cloned()
                    .chain([(DUE_ATTRIBUTE.to_owned(), due.as_millis().to_string())])
                    .collect();
                Ok(Cow::Owned(hop))
            })
            .collect()
    }

    /// The URL of a logical queue.
    pub(super) fn url(&self, queue: &str) -> Result<&str, StoreError> {
        self.queues
            .get(queue)
            .map(String::as_str)
            .ok_or_else(|| StoreError::NotFound(format!("unknown queue {queue:?}")))
    }

    pub(super) async fn attributes(
        &self,
        queue_url: &str,
    ) -> Result<HashMap<QueueAttributeName, String>, StoreError> {
        Ok(self
            .client
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::RedrivePolicy)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| sdk_error(format!("reading the attributes of queue {queue_url:?}"), e))?
            .attributes
            .unwrap_or_default())
    }
}

/// SQS message attributes of type `String` (`None` for none). An empty value is left out: SQS
/// refuses them.
pub(super) fn string_attributes(
    attributes: &[(String, String)],
) -> Result<Option<HashMap<String, MessageAttributeValue>>, aws_sdk_sqs::error::BuildError> {
    if attributes.is_empty() {
        return Ok(None);
    }
    let mut out = HashMap::new();
    for (name, value) in attributes.iter().filter(|(_, v)| !v.is_empty()) {
        let value = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value)
            .build()?;
        out.insert(name.clone(), value);
    }
    Ok(Some(out))
}

/// The locked map of dead-letter queues found so far.
pub(super) fn lock(
    found: &Mutex<HashMap<String, String>>,
) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
    // A panic while holding the map leaves it consistent (one insert at a time).
    found.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A delay longer than any the flows schedule, refused before anything is sent.
fn beyond_the_longest_wait(queue: &str, delay: Duration) -> StoreError {
    StoreError::Backend {
        message: format!(
            "sending to queue {queue:?}: a message is delayed {}s, beyond the longest wait a chain or an execution carries ({}s)",
            delay.as_secs(),
            MAX_CHAINED_DELAY.as_secs()
        ),
        source: None,
    }
}

/// Whole seconds, rounded up: a message is never delivered before its delay.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// SQS's `DelaySeconds` for a delay within [`MAX_SQS_DELAY`].
fn delay_seconds(d: Duration) -> i32 {
    i32::try_from(ceil_secs(d.min(MAX_SQS_DELAY))).unwrap_or(900)
}

/// Consecutive runs of at most [`BATCH_ENTRIES`] messages and (unless one message alone is
/// larger) [`BATCH_BYTES`] of bodies and attributes.
fn batches<'a>(messages: &'a [&'a OutgoingMessage]) -> Vec<&'a [&'a OutgoingMessage]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, m) in messages.iter().enumerate() {
        // Attributes count towards SQS's limit as their names, types and values.
        let len = m.body.len()
            + m.attributes
                .iter()
                .map(|(n, v)| n.len() + "String".len() + v.len())
                .sum::<usize>();
        if i > start && (i - start == BATCH_ENTRIES || bytes + len > BATCH_BYTES) {
            out.push(&messages[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += len;
    }
    if start < messages.len() {
        out.push(&messages[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use imgest_core::domain::Timestamp;

    fn msg(len: usize) -> OutgoingMessage {
        OutgoingMessage::now("x".repeat(len))
    }

    #[test]
    fn delays_round_up_to_whole_seconds() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(2000)), 2);
        assert_eq!(ceil_secs(Duration::from_millis(2001)), 3);
        assert_eq!(delay_seconds(Duration::from_secs(900)), 900);
        assert_eq!(delay_seconds(Duration::from_secs(5000)), 900);
    }

    #[test]
    fn batches_hold_ten_messages_and_256_kib_at_most() {
        let small: Vec<_> = (0..23).map(|_| msg(10)).collect();
        let refs: Vec<_> = small.iter().collect();
        let sizes: Vec<_> = batches(&refs).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [10, 10, 3]);

        let big: Vec<_> = [100_000, 100_000, 100_000, 300_000, 10]
            .into_iter()
            .map(msg)
            .collect();
        let refs: Vec<_> = big.iter().collect();
        let sizes: Vec<_> = batches(&refs).iter().map(|b| b.len()).collect();
        // Two 100 kB bodies fit, a third does not; an oversized body goes alone (SQS decides).
        assert_eq!(sizes, [2, 1, 1, 1]);

        assert!(batches(&[]).is_empty());
    }

    /// A client that is never reached by these tests (no endpoint answers at port 9).
    fn offline_sender() -> SqsSender {
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("eu-west-1"))
            .endpoint_url("http://127.0.0.1:9")
            .build();
        let client = aws_sdk_sqs::Client::from_conf(config);
        let queues = HashMap::from([(
            "jobs".to_owned(),
            "http://127.0.0.1:9/123456789012/jobs".to_owned(),
        )]);
        SqsSender::new(client, queues)
    }

    #[tokio::test]
    async fn unknown_queues_and_delays_beyond_a_chain_are_refused_up_front() {
        let sender = offline_sender();
        let messages = [msg(3)];
        assert!(matches!(
            sender.send("nope", &messages).await,
            Err(StoreError::NotFound(_))
        ));
        let too_late = [
            msg(3),
            OutgoingMessage::delayed("late", MAX_CHAINED_DELAY + Duration::from_secs(1)),
        ];
        match sender.send("jobs", &too_late).await {
            Err(StoreError::Backend { message, .. }) => {
                assert!(
                    message.contains("longest wait a chain or an execution carries"),
                    "{message}"
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // Nothing to send is nothing to do.
        sender.send("jobs", &[]).await.unwrap();
    }

    #[test]
    fn a_long_delay_goes_as_sqs_longest_with_its_due_instant() {
        let clock = Arc::new(imgest_core::ports::ManualClock::new(
            Timestamp::from_millis(1_000_000),
        ));
        let sender = offline_sender().with_clock(clock);
        let mut redriven = OutgoingMessage::delayed("b", Duration::from_secs(3600));
        redriven.attributes = vec![
            ("imgest.sender".into(), "AROA:fetch".into()),
            (DUE_ATTRIBUTE.into(), "1".into()),
        ];
        let messages = [
            OutgoingMessage::delayed("a", Duration::from_secs(900)),
            redriven,
            OutgoingMessage::delayed("c", MAX_CHAINED_DELAY),
        ];
        let sent = sender.chained("jobs", &messages).unwrap();
        assert!(
            matches!(sent[0], Cow::Borrowed(_)),
            "within SQS's delay: as is"
        );
        assert_eq!(sent[1].delay, MAX_SQS_DELAY);
        assert_eq!(sent[1].body, "b");
        // Its other attributes kept; an earlier hop's due instant replaced.
        assert_eq!(
            sent[1].attributes,
            [
                ("imgest.sender".to_owned(), "AROA:fetch".to_owned()),
                (
                    DUE_ATTRIBUTE.to_owned(),
                    (1_000_000 + 3_600_000).to_string()
                ),
            ]
        );
        assert_eq!(sent[2].delay, MAX_SQS_DELAY);
    }

    #[test]
    fn the_threshold_never_exceeds_what_sqs_allows() {
        let sender = offline_sender();
        assert_eq!(sender.max_sqs_delay(), MAX_SQS_DELAY);
        let sender = sender.with_max_sqs_delay(Duration::from_secs(3600));
        assert_eq!(sender.max_sqs_delay(), MAX_SQS_DELAY);
        let sender = sender.with_max_sqs_delay(Duration::from_secs(1));
        assert_eq!(sender.max_sqs_delay(), Duration::from_secs(1));
    }
}
