//! The `MessageSender` contract: what is sent to a named queue arrives on that queue, whole,
//! with its body unchanged, and not before its delay.
//!
//! The checks read the queue back through the fixture's [`QueueReader`], polling until a
//! deadline (long polling where the backend has it), never sleeping to let a message arrive.
//! Each check tags its bodies with a fresh id and takes only messages with that tag (others
//! are put back), so checks can share one queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{SenderPorts, secs, unique_name};
use imgest_core::ports::{
    Clock, Letter, OutgoingMessage, Reason, RedriveKinds, StoreError, TaskQueue,
};

contract_suite!($ message_sender_contract_tests, message_sender, SenderPorts;
    sent_messages_arrive_on_the_named_queue_with_their_bodies_unchanged,
    a_batch_of_more_than_ten_arrives_whole,
    a_message_delayed_by_a_minute_is_not_delivered_right_away_but_one_sent_with_it_is,
    an_unknown_queue_name_is_not_found_and_sends_nothing,
    dead_letters_keep_their_reasons_and_a_redrive_sends_them_back,
);

/// Reads a queue back, for tests (the application receives in its own way: Lambda's SQS
/// triggers, the local workers).
#[async_trait]
pub trait QueueReader: Send + Sync {
    /// One receive: the messages whose body starts with `tag` that are on the queue, deleted
    /// from it, as their bodies. Waits up to `wait` for messages when there are none (long
    /// polling) and may return early, empty. Messages without the tag that it receives
    /// meanwhile are put back at once for their own readers. Panics if the backend fails.
    async fn take(&self, tag: &str, wait: Duration) -> Vec<String>;
}

/// Reads a queue of a [`TaskQueue`] (where the local `QueueSender` sends): receive, then ack
/// (or retry at once, for other tags' messages), at the times of `clock`.
pub struct TaskQueueReader {
    queue: Arc<dyn TaskQueue>,
    name: String,
    clock: Arc<dyn Clock>,
}

impl TaskQueueReader {
    /// Reads the queue `name` of `queue`, with the clock the sender uses.
    pub fn new(queue: Arc<dyn TaskQueue>, name: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        Self {
            queue,
            name: name.into(),
            clock,
        }
    }
}

/// How often [`TaskQueueReader`] asks an empty queue again (it has no long polling).
const TASK_QUEUE_POLL: Duration = Duration::from_millis(20);

#[async_trait]
impl QueueReader for TaskQueueReader {
    async fn take(&self, tag: &str, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        loop {
            let now = self.clock.now();
            let deliveries = self
                .queue
                .receive(&self.name, now, 100, secs(30))
                .await
                .unwrap();
            let mut mine = Vec::new();
            for delivery in deliveries {
                if delivery.payload.starts_with(tag) {
                    assert!(self.queue.ack(&delivery).await.unwrap(), "lost a lease");
                    mine.push(delivery.payload);
                } else {
                    self.queue.retry(&delivery, now).await.unwrap();
                }
            }
            if !mine.is_empty() || Instant::now() >= deadline {
                return mine;
            }
            tokio::time::sleep(
                TASK_QUEUE_POLL.min(deadline.saturating_duration_since(Instant::now())),
            )
            .await;
        }
    }
}

/// How long a check waits at most for messages that must arrive.
const ARRIVAL: Duration = secs(30);
/// After the last expected message arrived, one more receive waits this long for anything
/// that must not arrive (a message that should have been delayed, or never sent).
const SETTLE: Duration = secs(2);

fn now_message(body: String) -> OutgoingMessage {
    OutgoingMessage::now(body)
}

/// The tagged messages that arrive until `done` holds for them (or [`ARRIVAL`] passed), in
/// order of arrival.
async fn take_until(
    reader: &dyn QueueReader,
    tag: &str,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + ARRIVAL;
    let mut got = Vec::new();
    while !done(&got) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        got.extend(reader.take(tag, left.min(secs(5))).await);
    }
    got
}

/// The tagged messages that arrive until `want` of them have (or [`ARRIVAL`] passed).
async fn take_count(reader: &dyn QueueReader, tag: &str, want: usize) -> Vec<String> {
    take_until(reader, tag, |got| got.len() >= want).await
}

fn sorted(mut bodies: Vec<String>) -> Vec<String> {
    bodies.sort();
    bodies
}

/// Bodies as a failure message shows them: long ones cut short, with their length.
fn shown(bodies: &[String]) -> Vec<String> {
    bodies
        .iter()
        .map(|b| match b.char_indices().nth(80) {
            Some((end, _)) => format!("{}… ({} bytes)", &b[..end], b.len()),
            None => b.clone(),
        })
        .collect()
}

/// The same bodies, in any order.
fn assert_same_bodies(got: Vec<String>, expected: Vec<String>) {
    let (got, expected) = (sorted(got), sorted(expected));
    assert!(
        got == expected,
        "received {:#?}\nexpected {:#?}",
        shown(&got),
        shown(&expected)
    );
}

pub async fn sent_messages_arrive_on_the_named_queue_with_their_bodies_unchanged(
    ports: SenderPorts,
) {
    let tag = unique_name("bodies");
    let bodies = vec![
        format!("{tag} plain ASCII"),
        format!("{tag} Grüße aus Köln – 東京の写真 📷 ½ €"),
        format!("{tag} {{\"json\": \"with \\\"quotes\\\", <angles> & ampersands\"}}"),
        format!("{tag} line one\nline two\r\n\ttabbed  double  spaces "),
        // Identical messages stay two messages.
        format!("{tag} twice"),
        format!("{tag} twice"),
        format!("{tag} {}", "long body ".repeat(10_000)),
    ];
    let messages: Vec<_> = bodies.iter().cloned().map(now_message).collect();
    // In two sends, and a send of nothing in between.
    ports
        .sender
        .send(&ports.queue, &messages[..2])
        .await
        .unwrap();
    ports.sender.send(&ports.queue, &[]).await.unwrap();
    ports
        .sender
        .send(&ports.queue, &messages[2..])
        .await
        .unwrap();
    let got = take_count(ports.reader.as_ref(), &tag, bodies.len()).await;
    assert_same_bodies(got, bodies);
}

pub async fn a_batch_of_more_than_ten_arrives_whole(ports: SenderPorts) {
    let tag = unique_name("batch");
    // More than two of SQS's batches of ten, the last one short.
    let bodies: Vec<String> = (0..25).map(|i| format!("{tag} message {i:02}")).collect();
    let messages: Vec<_> = bodies.iter().cloned().map(now_message).collect();
    ports.sender.send(&ports.queue, &messages).await.unwrap();
    let got = take_count(ports.reader.as_ref(), &tag, bodies.len()).await;
    assert_same_bodies(got, bodies);
}

pub async fn a_message_delayed_by_a_minute_is_not_delivered_right_away_but_one_sent_with_it_is(
    ports: SenderPorts,
) {
    let tag = unique_name("delay");
    let later = format!("{tag} in a minute");
    let now = format!("{tag} now");
    ports
        .sender
        .send(
            &ports.queue,
            &[
                OutgoingMessage::delayed(later.clone(), Duration::from_secs(60)),
                now_message(now.clone()),
            ],
        )
        .await
        .unwrap();
    let reader = ports.reader.as_ref();
    let mut got = take_until(reader, &tag, |got| got.contains(&now)).await;
    got.extend(reader.take(&tag, SETTLE).await);
    assert_eq!(
        got,
        [now],
        "only the undelayed message is delivered right away"
    );
}

pub async fn an_unknown_queue_name_is_not_found_and_sends_nothing(ports: SenderPorts) {
    let tag = unique_name("unknown");
    let stray = format!("{tag} stray");
    let batch = [now_message(stray.clone())];
    match &ports.unknown_queue {
        Some(unknown) => {
            let r = ports.sender.send(unknown, &batch).await;
            assert!(matches!(r, Err(StoreError::NotFound(_))), "{r:?}");
            // Even with nothing to send.
            let r = ports.sender.send(unknown, &[]).await;
            assert!(matches!(r, Err(StoreError::NotFound(_))), "{r:?}");
        }
        // A sender that knows every name: another name is another queue.
        None => ports
            .sender
            .send(&unique_name("other"), &batch)
            .await
            .unwrap(),
    }
    // A message sent afterwards arrives alone: the stray one reached the named queue neither
    // before it nor with it.
    let marker = format!("{tag} marker");
    ports
        .sender
        .send(&ports.queue, &[now_message(marker.clone())])
        .await
        .unwrap();
    let reader = ports.reader.as_ref();
    let mut got = take_until(reader, &tag, |got| got.contains(&marker)).await;
    got.extend(reader.take(&tag, SETTLE).await);
    assert_eq!(got, [marker]);
}

pub async fn dead_letters_keep_their_reasons_and_a_redrive_sends_them_back(ports: SenderPorts) {
    let tag = unique_name("dead");
    let letter = |n: &str, reason: Reason| Letter {
        body: format!("{tag} {n}"),
        reason,
        attempts: 3,
        message_id: format!("message-{n}"),
        sender: Some("AIDASENDER".into()),
    };
    let letters = [
        letter(
            "one",
            Reason::new(Reason::UNUSABLE, "not a crawl request: expected value"),
        ),
        letter(
            "two",
            Reason::new(
                Reason::FORBIDDEN,
                "sender AIDASENDER may not act for client x",
            ),
        ),
    ];
    ports
        .sender
        .dead_letter(&ports.queue, &letters)
        .await
        .unwrap();
    ports.sender.dead_letter(&ports.queue, &[]).await.unwrap();
    // Dead letters are not delivered.
    assert!(ports.reader.take(&tag, SETTLE).await.is_empty());
    let mut listed: Vec<_> = ports
        .sender
        .dead_letters(&ports.queue, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.body.starts_with(&tag))
        .map(|l| (l.body, l.reason, l.attempts))
        .collect();
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    let expected: Vec<_> = letters
        .iter()
        .map(|l| (l.body.clone(), Some(l.reason.clone()), Some(3)))
        .collect();
    assert_eq!(listed, expected);
    assert!(ports.sender.counts(&ports.queue).await.unwrap().dead >= 2);

    // A routine redrive leaves the letter refused for its sender; asked for by its kind, it
    // goes back too.
    let routine = ports
        .sender
        .redrive(&ports.queue, 1000, &RedriveKinds::Routine)
        .await
        .unwrap();
    assert!(routine >= 1, "{routine}");
    let back = take_count(ports.reader.as_ref(), &tag, 1).await;
    assert_same_bodies(back, vec![letters[0].body.clone()]);
    assert!(ports.reader.take(&tag, SETTLE).await.is_empty());
    let still: Vec<String> = ports
        .sender
        .dead_letters(&ports.queue, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.body.starts_with(&tag))
        .map(|l| l.body)
        .collect();
    assert_eq!(still, [letters[1].body.clone()]);
    let forbidden = RedriveKinds::Only(vec![Reason::FORBIDDEN.to_owned()]);
    assert!(
        ports
            .sender
            .redrive(&ports.queue, 1000, &forbidden)
            .await
            .unwrap()
            >= 1
    );
    let back = take_count(ports.reader.as_ref(), &tag, 1).await;
    assert_same_bodies(back, vec![letters[1].body.clone()]);
    assert!(
        ports
            .sender
            .dead_letters(&ports.queue, 1000)
            .await
            .unwrap()
            .iter()
            .all(|l| !l.body.starts_with(&tag))
    );
}
