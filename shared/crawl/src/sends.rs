//! Queue sends made together: the fetch tasks of one intake, and the downloads of one batch
//! handed to the process function, go out in one `SendMessageBatch` (up to ten messages for
//! the price of one request) instead of one request each.

use std::time::Duration;

use super::gather::{Gather, abandoned, same_kind};
use imgest_core::ports::{MessageSender, OutgoingMessage, StoreError};

/// How long the first message waits for others. Longer than a rate-limit request's gathering:
/// the downloads of a batch end over the spread of their hosts' answers, and a message's
/// wait delays nothing a user waits for (its task, or its photo's processing, starts later).
const SEND_GATHER: Duration = Duration::from_millis(50);

/// Messages waiting for their queue's shared send, by queue.
pub(super) struct SendBatcher {
    gather: Gather<OutgoingMessage, Result<(), StoreError>>,
}

impl Default for SendBatcher {
    fn default() -> Self {
        Self {
            gather: Gather::with_window(SEND_GATHER),
        }
    }
}

impl SendBatcher {
    /// Sends `message` to `queue` together with every other message for that queue within
    /// [`SEND_GATHER`]. `Ok` once it was sent.
    pub async fn send(
        &self,
        sender: &dyn MessageSender,
        queue: &str,
        message: OutgoingMessage,
    ) -> Result<(), StoreError> {
        self.gather
            .ask(queue, message, |messages| async move {
                let result = sender.send(queue, &messages).await;
                messages
                    .iter()
                    .map(|_| match &result {
                        Ok(()) => Ok(()),
                        Err(e) => Err(same_kind("shared queue send", e)),
                    })
                    .collect()
            })
            .await
            .unwrap_or_else(|| Err(abandoned("queue send")))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use imgest_core::ports::{DeadMessage, Letter, QueueCounts};

    /// Records every send; fails sends to the queue named "down".
    #[derive(Default)]
    struct Recorder {
        sends: Mutex<Vec<(String, Vec<String>)>>,
    }

    #[async_trait]
    impl MessageSender for Recorder {
        async fn send(&self, queue: &str, messages: &[OutgoingMessage]) -> Result<(), StoreError> {
            if queue == "down" {
                return Err(StoreError::Unavailable {
                    message: "throttled".into(),
                    source: None,
                });
            }
            let bodies = messages.iter().map(|m| m.body.clone()).collect();
            if let Ok(mut sends) = self.sends.lock() {
                sends.push((queue.to_owned(), bodies));
            }
            Ok(())
        }

        async fn dead_letter(&self, _: &str, _: &[Letter]) -> Result<(), StoreError> {
            Ok(())
        }

        async fn counts(&self, _: &str) -> Result<QueueCounts, StoreError> {
            Ok(QueueCounts::default())
        }

        async fn dead_letters(&self, _: &str, _: usize) -> Result<Vec<DeadMessage>, StoreError> {
            Ok(Vec::new())
        }

        async fn redrive(
            &self,
            _: &str,
            _: usize,
            _: &imgest_core::ports::RedriveKinds,
        ) -> Result<u64, StoreError> {
            Ok(0)
        }
    }

    fn message(body: &str) -> OutgoingMessage {
        OutgoingMessage::now(body)
    }

    #[tokio::test]
    async fn concurrent_sends_go_out_together_per_queue_and_failures_reach_every_sender() {
        let recorder = Recorder::default();
        let batcher = SendBatcher::default();
        let sends = [
            ("a", "1"),
            ("b", "2"),
            ("a", "3"),
            ("down", "4"),
            ("down", "5"),
        ]
        .map(|(queue, body)| batcher.send(&recorder, queue, message(body)));
        let results = futures_util::future::join_all(sends).await;
        assert!(results[..3].iter().all(Result::is_ok), "{results:?}");
        for failed in &results[3..] {
            let Err(e) = failed else {
                panic!("a send to a failing queue succeeded");
            };
            assert!(e.is_retryable(), "{e}");
        }
        let mut sends = recorder.sends.lock().map(|s| s.clone()).unwrap_or_default();
        sends.sort();
        assert_eq!(
            sends,
            [
                ("a".to_owned(), vec!["1".to_owned(), "3".to_owned()]),
                ("b".to_owned(), vec!["2".to_owned()]),
            ]
        );
    }
}
