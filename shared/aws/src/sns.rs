//! [`SnsTopics`]: messages to an SNS topic, for a logical queue whose `IMGEST_QUEUES` entry is
//! a topic's ARN (the crawl results: each client's subscription takes only its own, by the
//! messages' `client_id` attribute). Published with `PublishBatch`, ten per call, each with its
//! attributes; a topic has no delivery delay, so a delayed message is refused.

use std::collections::HashMap;

use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};

use crate::sdk_error::sdk_error;
use imgest_core::ports::{OutgoingMessage, StoreError};

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
