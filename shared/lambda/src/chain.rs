//! Long waits on arrival. A message delayed beyond SQS's 15 minutes (a retry after a day-long
//! `Retry-After`) is sent with SQS's longest delay and the instant it is due
//! ([`DUE_ATTRIBUTE`](imgest_aws::sqs::DUE_ATTRIBUTE)), so it arrives early, once per hop. The fetch handler (the fetch queues
//! are the only ones sent such waits) passes its batch through [`send_on_early`] first: each
//! early message is sent on with the rest of its wait, which acknowledges this receive, and
//! only the due ones run.
//!
//! Only a queue whose senders are the functions themselves may be chained this way: sending a
//! message on vouches for its original sender (`imgest.sender`), which a client's own message
//! must never obtain (the intake queue's handler never calls this).

use imgest_aws::sqs_dead_letters::SENDER;
use imgest_core::domain::Timestamp;
use imgest_core::ports::OutgoingMessage;
use imgest_flows::Service;
use tracing::{error, info};

use super::batch::{BatchItemFailure, SqsItem};

/// A batch once its early messages are sent on.
#[derive(Debug, Default)]
pub struct Arrived {
    /// The messages that are due, to run now.
    pub due: Vec<SqsItem>,
    /// The early messages that could not be sent on: reported for a retry (SQS delivers them
    /// again after their visibility timeout; nothing is lost).
    pub unsent: Vec<BatchItemFailure>,
}

/// Sends each message of `items` that is not yet due back to `queue` with the rest of its
/// wait, and returns the others, by the service's clock (the one the senders counted the due
/// instants from).
pub async fn send_on_early(service: &Service, queue: &str, items: Vec<SqsItem>) -> Arrived {
    let now = service.ports().clock.now();
    let (early, due): (Vec<SqsItem>, Vec<SqsItem>) = items
        .into_iter()
        .partition(|item| item.due.is_some_and(|due| due > now));
    if early.is_empty() {
        return Arrived {
            due,
            unsent: Vec::new(),
        };
    }
    let messages: Vec<OutgoingMessage> = early
        .iter()
        .map(|item| {
            let rest = item.due.map_or_else(Default::default, |due| due.since(now));
            let message = OutgoingMessage::delayed(item.body.clone(), rest);
            match item.sender() {
                Some(sender) => message.with_attribute(SENDER, sender),
                None => message,
            }
        })
        .collect();
    let unsent = match service.ports().messages.send(queue, &messages).await {
        Ok(()) => {
            info!(
                queue,
                hops = early.len(),
                "long waits sent on to their next hop"
            );
            Vec::new()
        }
        Err(e) => {
            error!(queue, error = %e, messages = early.len(), "cannot send long waits on; they will be received again");
            early
                .into_iter()
                .map(|item| BatchItemFailure {
                    item_identifier: item.id,
                })
                .collect()
        }
    };
    Arrived { due, unsent }
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
            sender_id: Some("AROAFETCH:fetch-0".into()),
            original_sender: None,
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
        let service = imgest_flows::configure::service(ports, &settings).unwrap();

        let items = vec![
            item("plain", None),
            item("due", Some(10_000_000)),
            item("early", Some(10_000_000 + 3_600_000)),
        ];
        let arrived = send_on_early(&service, "fetch-1", items).await;
        let ids: Vec<&str> = arrived.due.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["plain", "due"]);
        assert!(arrived.unsent.is_empty());

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
