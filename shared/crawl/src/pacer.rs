//! Spreads each client's new downloads over time at its rate limit, when they are queued.
//!
//! The rate limiter is the guarantee (checked at download time, across all workers); pacing
//! is what keeps it cheap and fair: a client that sends 10 000 URLs at once gets them queued
//! one limit-interval apart, so other clients' downloads due now are not stuck behind them,
//! and workers do not pick up tasks only to find the budget spent.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use imgest_core::domain::{ClientId, Timestamp};

/// No task is queued further ahead than this (SQS's longest delivery delay); beyond it the
/// rate limiter defers tasks at download time.
pub(super) const MAX_PACING_DELAY: Duration = Duration::from_secs(900);

#[derive(Debug, Default)]
pub(super) struct Pacer {
    next_free: Mutex<HashMap<ClientId, Timestamp>>,
}

impl Pacer {
    /// When `client`'s next download should run, given `limit` per `window`.
    pub fn slot(
        &self,
        client: &ClientId,
        limit: u32,
        window: Duration,
        now: Timestamp,
    ) -> Timestamp {
        let interval = window / limit.max(1);
        let mut next = self.next_free.lock().unwrap_or_else(|e| e.into_inner());
        if next.len() > 100_000 {
            next.retain(|_, at| *at > now);
        }
        let at = next
            .get(client)
            .copied()
            .filter(|at| *at > now)
            .unwrap_or(now);
        let at = at.min(now.plus(MAX_PACING_DELAY));
        next.insert(client.clone(), at.plus(interval));
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_spread_one_interval_apart_and_clients_are_independent() {
        let pacer = Pacer::default();
        let now = Timestamp::from_millis(1_000_000);
        let busy = ClientId::parse("busy").unwrap();
        let quiet = ClientId::parse("quiet").unwrap();
        let window = Duration::from_secs(60);
        let slots: Vec<i64> = (0..3)
            .map(|_| pacer.slot(&busy, 600, window, now).as_millis() - now.as_millis())
            .collect();
        assert_eq!(slots, vec![0, 100, 200]);
        assert_eq!(pacer.slot(&quiet, 600, window, now), now);
        let later = now.plus(Duration::from_secs(10));
        assert_eq!(
            pacer.slot(&busy, 600, window, later),
            later,
            "idle time is not banked"
        );
    }

    #[test]
    fn pacing_never_queues_beyond_the_longest_delay() {
        let pacer = Pacer::default();
        let now = Timestamp::from_millis(0);
        let client = ClientId::parse("c").unwrap();
        let last = (0..2000)
            .map(|_| pacer.slot(&client, 60, Duration::from_secs(60), now))
            .max()
            .unwrap();
        assert_eq!(last, now.plus(MAX_PACING_DELAY));
    }
}
