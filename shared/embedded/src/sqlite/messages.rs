//! [`QueueSender`]: the message sender port on the embedded task queue.
//!
//! Each message becomes a task of its own in the queue of that name, under a fresh random key
//! (queues are sets by key; a message is never meant to replace another), due at the clock's
//! now plus its delay. The queue's run-at time stands in for SQS's delivery delay, and for the
//! chain of delays that carries a longer wait on AWS. Every name is a queue here (queues exist by being used), so
//! unlike `SqsSender` no name is `NotFound`.

use std::sync::Arc;

use async_trait::async_trait;

use imgest_core::ports::{
    Clock, DeadLetter, DeadMessage, Letter, MessageSender, OutgoingMessage, QueueCounts,
    RedriveKinds, StoreError, TaskQueue,
};

/// Sends messages as tasks of a [`TaskQueue`] (the `SqliteStore` locally).
#[derive(Clone)]
pub struct QueueSender {
    queue: Arc<dyn TaskQueue>,
    clock: Arc<dyn Clock>,
}

impl QueueSender {
    pub fn new(queue: Arc<dyn TaskQueue>, clock: Arc<dyn Clock>) -> Self {
        Self { queue, clock }
    }
}

impl std::fmt::Debug for QueueSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSender").finish_non_exhaustive()
    }
}

fn message_key() -> String {
    format!("msg-{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

#[async_trait]
impl MessageSender for QueueSender {
    async fn send(&self, queue: &str, messages: &[OutgoingMessage]) -> Result<(), StoreError> {
        // One clock reading for the batch: delays are relative to the send, not to each enqueue.
        let now = self.clock.now();
        for message in messages {
            self.queue
                .enqueue(
                    queue,
                    &message_key(),
                    &message.body,
                    now.plus(message.delay),
                )
                .await?;
        }
        Ok(())
    }

    /// Each letter a dead letter of the queue's own list, under a fresh key (the message's id
    /// is another queue's).
    async fn dead_letter(&self, queue: &str, letters: &[Letter]) -> Result<(), StoreError> {
        let now = self.clock.now();
        for letter in letters {
            let dead = DeadLetter {
                key: message_key(),
                payload: letter.body.clone(),
                attempts: letter.attempts,
                reason: letter.reason.clone(),
                failed_at: now,
            };
            self.queue.add_dead_letter(queue, &dead).await?;
        }
        Ok(())
    }

    async fn counts(&self, queue: &str) -> Result<QueueCounts, StoreError> {
        self.queue.counts(queue, self.clock.now()).await
    }

    async fn dead_letters(
        &self,
        queue: &str,
        limit: usize,
    ) -> Result<Vec<DeadMessage>, StoreError> {
        Ok(self
            .queue
            .dead_letters(queue, limit)
            .await?
            .into_iter()
            .map(|letter| DeadMessage {
                id: letter.key,
                body: letter.payload,
                reason: Some(letter.reason),
                attempts: Some(letter.attempts),
                sent_at_ms: Some(letter.failed_at.as_millis()),
                sender: None,
            })
            .collect())
    }

    async fn redrive(
        &self,
        queue: &str,
        max: usize,
        kinds: &RedriveKinds,
    ) -> Result<u64, StoreError> {
        self.queue
            .redrive(queue, max, kinds, self.clock.now())
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use super::*;
    use crate::SqliteStore;
    use imgest_core::domain::Timestamp;
    use imgest_core::ports::ManualClock;

    #[tokio::test]
    async fn sent_messages_are_received_once_their_delay_has_passed() {
        let start = Timestamp::from_millis(1_700_000_000_000);
        let store = Arc::new(SqliteStore::open_in_memory().unwrap());
        let clock = Arc::new(ManualClock::new(start));
        let sender = QueueSender::new(store.clone(), clock.clone());
        let message = |body: &str, delay| OutgoingMessage::delayed(body, delay);
        sender
            .send(
                "results",
                &[
                    message("now", Duration::ZERO),
                    message("same", Duration::ZERO),
                    message("later", Duration::from_secs(3600)),
                ],
            )
            .await
            .unwrap();
        sender.send("results", &[]).await.unwrap();
        let visibility = Duration::from_secs(30);
        let got = store
            .receive("results", start, 10, visibility)
            .await
            .unwrap();
        let bodies: Vec<&str> = got.iter().map(|d| d.payload.as_str()).collect();
        assert_eq!(bodies, ["now", "same"], "identical sends stay two messages");
        for d in &got {
            assert!(store.ack(d).await.unwrap());
        }
        let early = start.plus(Duration::from_secs(3599));
        assert!(
            store
                .receive("results", early, 10, visibility)
                .await
                .unwrap()
                .is_empty()
        );
        clock.advance(Duration::from_secs(3600));
        let late = store
            .receive("results", clock.now(), 10, visibility)
            .await
            .unwrap();
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].payload, "later");
        assert!(
            store
                .receive("other", clock.now(), 10, visibility)
                .await
                .unwrap()
                .is_empty()
        );
    }
}
