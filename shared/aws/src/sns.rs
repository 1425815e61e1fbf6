//! [`SnsTopics`]: messages to an SNS topic, for a logical queue whose `IMGEST_QUEUES` entry is
//! a topic's ARN (the crawl results: each client's subscription takes only its own, by the
//! messages' `client_id` attribute). Published with `PublishBatch`, ten per call, each with its
//! attributes; a topic has no delivery delay, so a delayed message is refused.

use std::collections::HashMap;

use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};

use crate::sdk_error::sdk_error;
use imgest_core::ports::{OutgoingMessage, StoreError, Subscriber};

/// The message attribute each result names its client in, which a client's subscription must
/// filter on.
const CLIENT_ATTRIBUTE: &str = "client_id";

/// `PublishBatch` takes at most this many entries.
const BATCH_ENTRIES: usize = 10;

/// Whether a logical queue's target is an SNS topic (its ARN) rather than an SQS queue (a URL).
pub fn is_topic(target: &str) -> bool {
    target.starts_with("arn:") && target.split(':').nth(2) == Some("sns")
}

/// Publishes to SNS topics. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SnsTopics {
    client: aws_sdk_sns::Client,
}

impl SnsTopics {
    pub fn new(client: aws_sdk_sns::Client) -> Self {
        Self { client }
    }

    /// The topic's subscriptions, each with the one client its filter takes (see
    /// [`Subscriber::client`]).
    pub async fn subscribers(&self, topic_arn: &str) -> Result<Vec<Subscriber>, StoreError> {
        let mut out = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let page = self
                .client
                .list_subscriptions_by_topic()
                .topic_arn(topic_arn)
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| sdk_error(format!("listing the subscriptions of {topic_arn}"), e))?;
            for subscription in page.subscriptions() {
                let arn = subscription
                    .subscription_arn()
                    .unwrap_or_default()
                    .to_owned();
                // A subscription still waiting for its confirmation has no ARN yet, nor
                // attributes: it delivers nothing until confirmed, and is reported as it is.
                let attributes = if arn.starts_with("arn:") {
                    self.client
                        .get_subscription_attributes()
                        .subscription_arn(&arn)
                        .send()
                        .await
                        .map_err(|e| sdk_error(format!("reading subscription {arn}"), e))?
                        .attributes
                        .unwrap_or_default()
                } else {
                    HashMap::new()
                };
                out.push(Subscriber {
                    subscription: arn,
                    endpoint: subscription.endpoint().unwrap_or_default().to_owned(),
                    client: client_of(
                        attributes.get("FilterPolicyScope").map(String::as_str),
                        attributes.get("FilterPolicy").map(String::as_str),
                    ),
                });
            }
            match page.next_token() {
                Some(token) => next = Some(token.to_owned()),
                None => return Ok(out),
            }
        }
    }

    /// Publishes `messages` to the topic `topic_arn` (`queue` names it in errors).
    pub async fn publish(
        &self,
        queue: &str,
        topic_arn: &str,
        messages: &[OutgoingMessage],
    ) -> Result<(), StoreError> {
        if messages.iter().any(|m| !m.delay.is_zero()) {
            return Err(StoreError::Backend {
                message: format!("publishing to {queue:?}: a topic delivers at once, not later"),
                source: None,
            });
        }
        for batch in messages.chunks(BATCH_ENTRIES) {
            let entries = batch
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let mut attributes = HashMap::new();
                    for (name, value) in m.attributes.iter().filter(|(_, v)| !v.is_empty()) {
                        let value = MessageAttributeValue::builder()
                            .data_type("String")
                            .string_value(value)
                            .build()?;
                        attributes.insert(name.clone(), value);
                    }
                    PublishBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message(&m.body)
                        .set_message_attributes((!attributes.is_empty()).then_some(attributes))
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::backend("building a PublishBatch request", e))?;
            let out = self
                .client
                .publish_batch()
                .topic_arn(topic_arn)
                .set_publish_batch_request_entries(Some(entries))
                .send()
                .await
                .map_err(|e| sdk_error(format!("publishing to {queue:?}"), e))?;
            if let Some(failed) = out.failed().first() {
                let message = format!(
                    "publishing to {queue:?}: {} of {} messages failed (first: {}: {})",
                    out.failed().len(),
                    batch.len(),
                    failed.code(),
                    failed.message().unwrap_or("")
                );
                return Err(if failed.sender_fault() {
                    StoreError::Backend {
                        message,
                        source: None,
                    }
                } else {
                    StoreError::Unavailable {
                        message,
                        source: None,
                    }
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_told_from_queues_by_their_arn() {
        assert!(is_topic(
            "arn:aws:sns:eu-west-1:123456789012:imgest-results"
        ));
        assert!(is_topic("arn:aws-cn:sns:cn-north-1:123456789012:results"));
        assert!(!is_topic(
            "https://sqs.eu-west-1.amazonaws.com/123456789012/results"
        ));
        assert!(!is_topic("arn:aws:sqs:eu-west-1:123456789012:results"));
    }
}

/// The one client a subscription's filter takes: a filter on the message attributes (SNS's
/// default scope) whose only key is [`CLIENT_ATTRIBUTE`], naming one client exactly. Any other
/// filter (none, a pattern, several clients, other keys, the body's scope) may let another
/// client's results through.
fn client_of(scope: Option<&str>, policy: Option<&str>) -> Option<String> {
    if scope.is_some_and(|s| s != "MessageAttributes") {
        return None;
    }
    let policy: serde_json::Value = serde_json::from_str(policy?).ok()?;
    let policy = policy.as_object()?;
    if policy.len() != 1 {
        return None;
    }
    match policy.get(CLIENT_ATTRIBUTE)?.as_array()?.as_slice() {
        [serde_json::Value::String(client)] => Some(client.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod reader_tests {
    use super::client_of;

    #[test]
    fn only_a_filter_naming_one_client_exactly_is_a_clients() {
        let scoped = Some("MessageAttributes");
        assert_eq!(
            client_of(scoped, Some(r#"{"client_id": ["acme"]}"#)).as_deref(),
            Some("acme")
        );
        assert_eq!(
            client_of(None, Some(r#"{"client_id": ["acme"]}"#)).as_deref(),
            Some("acme")
        );
        for (scope, policy) in [
            (scoped, None),
            (scoped, Some("{}")),
            (scoped, Some(r#"{"client_id": ["acme", "beta"]}"#)),
            (scoped, Some(r#"{"client_id": [{"prefix": "a"}]}"#)),
            (scoped, Some(r#"{"client_id": [{"anything-but": "acme"}]}"#)),
            (scoped, Some(r#"{"client_id": ["acme"], "other": ["x"]}"#)),
            (scoped, Some(r#"{"offer_id": ["o1"]}"#)),
            (Some("MessageBody"), Some(r#"{"client_id": ["acme"]}"#)),
            (scoped, Some("not json")),
        ] {
            assert_eq!(client_of(scope, policy), None, "{scope:?} {policy:?}");
        }
    }
}
