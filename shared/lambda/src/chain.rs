//! Long waits on arrival. A chained message delayed beyond SQS's 15 minutes (a retry after a
//! day-long `Retry-After` with `LongWaits=sqs-chain`, or a webhook delivery's late retry) is
//! sent with SQS's longest delay and the instant it is due
//! ([`DUE_ATTRIBUTE`](imgest_aws::sqs::DUE_ATTRIBUTE)), so it arrives early, once per hop. The
//! fetch and webhook handlers (their queues are the only ones sent such waits) pass their
//! batch through [`send_on_early`] first: each early message is sent on with the rest of its
//! wait, which acknowledges this receive, and only the due ones run. With
//! `LongWaits=step-functions` a fetch queue's long wait comes from the delayed-send state
//! machine when it is due, without a due instant; the chains sent before a switch still drain
//! here.
//!
//! A due instant is believed only from the stack's own messages (`imgest_lambda::sqs_items`
//! reads none from anyone else), and each message's hop is decided on its own: one whose due
//! instant is further away than any wait the flows schedule
//! ([`MAX_CHAINED_DELAY`](imgest_aws::sqs::MAX_CHAINED_DELAY)) is given up on alone, with its
//! reason, and the batch's other hops go on.

use imgest_aws::sqs::MAX_CHAINED_DELAY;
use imgest_core::domain::Timestamp;
use imgest_core::ports::OutgoingMessage;
use imgest_flows::Service;
use tracing::{error, info, warn};

use super::batch::{
    BatchItemFailure, BatchResponse, DeadLetters, Failure, ItemError, Outcomes, SqsItem,
};

/// A batch once its early messages are sent on.
#[derive(Debug, Default)]
pub struct Arrived {
    /// The messages that are due, to run now.
    pub due: Vec<SqsItem>,
    /// The early messages that could not be sent on this time: reported for a retry (SQS
    /// delivers them again after their visibility timeout; nothing is lost).
    pub unsent: Vec<BatchItemFailure>,
    /// The early messages that can never be sent on (a due instant out of bounds, a hop SQS
    /// refuses as the sender's fault), each with why: for the dead letters.
    pub refused: Vec<(SqsItem, ItemError)>,
}

/// Sends each message of `items` that is not yet due back to `queue` with the rest of its
/// wait, and returns the others, by the service's clock (the one the senders counted the due
/// instants from). The hops go in one send; if that fails, each is sent on its own, so that
/// one bad hop fails alone.
pub async fn send_on_early(service: &Service, queue: &str, items: Vec<SqsItem>) -> Arrived {
    let now = service.ports().clock.now();
    let mut arrived = Arrived::default();
    let mut early = Vec::new();
    for item in items {
        match item.due.filter(|due| *due > now) {
            None => arrived.due.push(item),
            Some(due) if due.since(now) > MAX_CHAINED_DELAY => {
                let refused = ItemError::unusable(format!(
                    "due at {} ms, {} s from now: beyond the longest wait a chain carries ({} s)",
                    due.as_millis(),
                    due.since(now).as_secs(),
                    MAX_CHAINED_DELAY.as_secs()
                ));
                arrived.refused.push((item, refused));
            }
            Some(due) => {
                let hop = OutgoingMessage::delayed(item.body.clone(), due.since(now));
                early.push((item, hop));
            }
        }
    }
    if early.is_empty() {
        return arrived;
    }
    let messages = service.ports().messages.as_ref();
    let hops: Vec<OutgoingMessage> = early.iter().map(|(_, hop)| hop.clone()).collect();
    match messages.send(queue, &hops).await {
        Ok(()) => {
            info!(
                queue,
                hops = hops.len(),
                "long waits sent on to their next hop"
            );
            return arrived;
        }
        Err(e) => {
            warn!(queue, error = %e, hops = hops.len(), "cannot send long waits on together; sending each on its own");
        }
    }
    for (item, hop) in early {
        match messages.send(queue, std::slice::from_ref(&hop)).await {
            Ok(()) => {}
            Err(e) if e.is_retryable() => {
                error!(queue, message_id = %item.id, error = %e, "cannot send a long wait on; it will be received again");
                arrived.unsent.push(BatchItemFailure {
                    item_identifier: item.id,
                });
            }
            Err(e) => {
                let refused = ItemError::unusable(format!("its next hop is refused: {e}"));
                arrived.refused.push((item, refused));
            }
        }
    }
    arrived
}

impl Arrived {
    /// The batch's response once the due items ran (`outcomes`, by item): the refused ones
    /// given up on with the due ones' failures, each with its reason, to `dead`'s dead
    /// letters, and the early ones that could not be sent on reported for a retry.
    pub async fn settle(self, outcomes: Outcomes, dead: &DeadLetters<'_>) -> BatchResponse {
        let Self {
            mut due,
            unsent,
            refused,
        } = self;
        let outcomes = outcomes.with_refused(
            refused
                .iter()
                .map(|(item, error)| (item.id.clone(), Failure::from(error))),
        );
        due.extend(refused.into_iter().map(|(item, _)| item));
        let mut response = outcomes.settle(&due, dead).await;
        response.batch_item_failures.extend(unsent);
        response
    }
}

/// A batch of a queue that takes only the stack's messages and carries long waits: a
/// stranger's message is refused before anything else (its due instant is not even read), the
/// stack's early ones are sent on ([`send_on_early`]), and the rest are due.
pub async fn arrive(service: &Service, queue: &str, items: Vec<SqsItem>) -> Arrived {
    let (mine, strangers): (Vec<SqsItem>, Vec<SqsItem>) =
        items.into_iter().partition(|item| item.from_stack);
    let mut arrived = send_on_early(service, queue, mine).await;
    arrived.refused.extend(strangers.into_iter().map(|item| {
        let error = item.not_from_the_stack();
        (item, error)
    }));
    arrived
}

/// A message's due instant from its [`DUE_ATTRIBUTE`](imgest_aws::sqs::DUE_ATTRIBUTE), if it carries a readable one.
pub fn due_of(value: Option<&str>) -> Option<Timestamp> {
    value?.trim().parse().ok().map(Timestamp::from_millis)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use imgest_core::ports::ManualClock;
    use imgest_settings::Settings;

    #[test]
    fn a_due_instant_is_read_from_milliseconds_and_anything_else_is_none() {
        assert_eq!(
            due_of(Some("1700000000123")),
            Some(Timestamp::from_millis(1_700_000_000_123))
        );
        for bad in [
            None,
            Some(""),
            Some("soon"),
            Some("1e12"),
            Some("99999999999999999999"),
        ] {
            assert_eq!(due_of(bad), None, "{bad:?}");
        }
    }

    fn item(id: &str, due: Option<i64>) -> SqsItem {
        SqsItem {
            id: id.into(),
            body: format!("body {id}"),
            receives: 1,
            sender: Some("AROAFETCH".into()),
            from_stack: true,
            due: due.map(Timestamp::from_millis),
        }
    }

    #[tokio::test]
    async fn early_messages_go_back_with_the_rest_of_their_wait_and_due_ones_run() {
        let dir = tempfile::tempdir().unwrap();
        let now = Timestamp::from_millis(10_000_000);
        let clock = Arc::new(ManualClock::new(now));
        let vars = HashMap::from([(
            "IMGEST_DATA_DIR".to_owned(),
            dir.path().display().to_string(),
        )]);
        let settings = Settings::from_map(&vars).unwrap();
        let ports = imgest_embedded::ports(dir.path(), "http://127.0.0.1", clock.clone())
            .await
            .unwrap();
        let queue = ports.queue.clone().unwrap();
        let service = imgest_flows::configure::service(ports, &settings);

        let far = 10_000_000 + 8 * 86_400_000;
        let items = vec![
            item("plain", None),
            item("due", Some(10_000_000)),
            item("far", Some(far)),
            item("early", Some(10_000_000 + 3_600_000)),
        ];
        let arrived = send_on_early(&service, "fetch-1", items).await;
        let ids: Vec<&str> = arrived.due.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["plain", "due"]);
        assert!(arrived.unsent.is_empty());
        // A due instant beyond any chained wait is refused alone, with why.
        let refused: Vec<(&str, String)> = arrived
            .refused
            .iter()
            .map(|(item, e)| (item.id.as_str(), e.reason().message))
            .collect();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].0, "far");
        assert!(refused[0].1.contains("longest wait"), "{refused:?}");

        // Sent on, due at its instant and not before.
        let lease = Duration::from_secs(60);
        let almost = now.plus(Duration::from_secs(3599));
        assert!(
            queue
                .receive("fetch-1", almost, 10, lease)
                .await
                .unwrap()
                .is_empty()
        );
        let then = now.plus(Duration::from_secs(3600));
        let back = queue.receive("fetch-1", then, 10, lease).await.unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].payload, "body early");
    }
}
