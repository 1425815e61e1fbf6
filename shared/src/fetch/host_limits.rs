//! Politeness per domain: how many downloads may run at once (additive increase on success,
//! multiplicative decrease on 429, so a host that pushes back gets fewer requests, not
//! retries on top), and a failure score that decays with time, so a host that keeps failing
//! is backed off instead of hammered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::domain::Timestamp;

/// The failure score halves over this time.
const SCORE_HALF_LIFE: Duration = Duration::from_secs(600);
/// Below this score a host is not backed off.
const SCORE_THRESHOLD: f64 = 5.0;
/// The backoff for a score just over the threshold; doubles per point above it.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_CAP: Duration = Duration::from_secs(900);
/// Hosts remembered before idle ones are forgotten.
const CAPACITY: usize = 100_000;

#[derive(Debug)]
struct HostState {
    limit: f64,
    in_flight: usize,
    score: f64,
    score_at: Timestamp,
}

/// Shared by every worker of a process.
#[derive(Debug)]
pub struct HostLimits {
    initial: f64,
    max: f64,
    hosts: Mutex<HashMap<String, HostState>>,
    released: Notify,
}

/// One running download to a host; dropping it frees the slot.
#[derive(Debug)]
pub struct HostSlot {
    limits: Arc<HostLimits>,
    host: String,
}

impl HostLimits {
    /// Each host starts with `initial` concurrent downloads and may grow to 4× that.
    pub fn new(initial: usize) -> Arc<Self> {
        let initial = initial.max(1) as f64;
        Arc::new(Self {
            initial,
            max: initial * 4.0,
            hosts: Mutex::new(HashMap::new()),
            released: Notify::new(),
        })
    }

    /// Waits for a free slot for `host`.
    pub async fn acquire(self: &Arc<Self>, host: &str, now: Timestamp) -> HostSlot {
        loop {
            let notified = self.released.notified();
            {
                let mut hosts = self.lock();
                let state = self.state(&mut hosts, host, now);
                if (state.in_flight as f64) < state.limit.floor().max(1.0) {
                    state.in_flight += 1;
                    return HostSlot {
                        limits: self.clone(),
                        host: host.to_owned(),
                    };
                }
            }
            notified.await;
        }
    }

    /// The host answered (not 429): one more concurrent download allowed, up to the cap, and
    /// its failure score halves (a host that works again is not held off for long).
    pub fn on_success(&self, host: &str, now: Timestamp) {
        let mut hosts = self.lock();
        let state = self.state(&mut hosts, host, now);
        state.score = decayed(state, now) / 2.0;
        state.score_at = now;
        // Additive increase of one slot per `limit` successes: one per round trip of a full
        // window, as TCP does.
        state.limit = (state.limit + 1.0 / state.limit.max(1.0)).min(self.max);
    }

    /// The host answered 429: half the concurrency.
    pub fn on_rate_limited(&self, host: &str, now: Timestamp) {
        let mut hosts = self.lock();
        let state = self.state(&mut hosts, host, now);
        state.limit = (state.limit / 2.0).max(1.0);
        self.add_failure(state, now);
    }

    /// A failure the host is responsible for (5xx, connection, timeout).
    pub fn on_failure(&self, host: &str, now: Timestamp) {
        let mut hosts = self.lock();
        let state = self.state(&mut hosts, host, now);
        self.add_failure(state, now);
    }

    /// How long to hold off new downloads from `host`, if its failure score is high.
    pub fn backoff(&self, host: &str, now: Timestamp) -> Option<Duration> {
        let mut hosts = self.lock();
        let state = hosts.get_mut(host)?;
        let score = decayed(state, now);
        (score >= SCORE_THRESHOLD).then(|| {
            let steps = (score - SCORE_THRESHOLD).floor().min(20.0) as u32;
            BACKOFF_BASE.saturating_mul(1 << steps).min(BACKOFF_CAP)
        })
    }

    /// The current concurrency limit of `host` (for statistics and tests).
    pub fn limit(&self, host: &str) -> usize {
        self.lock()
            .get(host)
            .map_or(self.initial, |s| s.limit)
            .floor() as usize
    }

    fn add_failure(&self, state: &mut HostState, now: Timestamp) {
        state.score = decayed(state, now) + 1.0;
        state.score_at = now;
    }

    fn state<'a>(
        &self,
        hosts: &'a mut HashMap<String, HostState>,
        host: &str,
        now: Timestamp,
    ) -> &'a mut HostState {
        if hosts.len() >= CAPACITY && !hosts.contains_key(host) {
            hosts.retain(|_, s| s.in_flight > 0 || decayed(s, now) >= 0.5);
        }
        hosts.entry(host.to_owned()).or_insert_with(|| HostState {
            limit: self.initial,
            in_flight: 0,
            score: 0.0,
            score_at: now,
        })
    }

    fn release(&self, host: &str) {
        if let Some(state) = self.lock().get_mut(host) {
            state.in_flight = state.in_flight.saturating_sub(1);
        }
        self.released.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HostState>> {
        self.hosts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn decayed(state: &HostState, now: Timestamp) -> f64 {
    let age_ms = (now.as_millis() - state.score_at.as_millis()).max(0) as f64;
    state.score * 0.5f64.powf(age_ms / SCORE_HALF_LIFE.as_millis() as f64)
}

impl Drop for HostSlot {
    fn drop(&mut self) {
        self.limits.release(&self.host);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp::from_millis(1_700_000_000_000);

    #[tokio::test]
    async fn a_429_halves_concurrency_and_successes_grow_it_back_slowly() {
        let limits = HostLimits::new(8);
        limits.on_rate_limited("h", T0);
        assert_eq!(limits.limit("h"), 4);
        limits.on_rate_limited("h", T0);
        limits.on_rate_limited("h", T0);
        limits.on_rate_limited("h", T0);
        assert_eq!(limits.limit("h"), 1, "never below one");
        for _ in 0..3 {
            limits.on_success("h", T0);
        }
        assert_eq!(limits.limit("h"), 2);
        assert_eq!(limits.limit("other"), 8);
    }

    #[tokio::test]
    async fn slots_beyond_the_limit_wait_for_a_release() {
        let limits = HostLimits::new(1);
        let first = limits.acquire("h", T0).await;
        let waiter = tokio::spawn({
            let limits = limits.clone();
            async move {
                let _slot = limits.acquire("h", T0).await;
            }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        let _other_host = limits.acquire("g", T0).await;
        drop(first);
        waiter.await.unwrap();
    }

    #[test]
    fn failing_hosts_are_backed_off_until_the_score_decays() {
        let limits = HostLimits::new(4);
        for _ in 0..4 {
            limits.on_failure("h", T0);
        }
        assert_eq!(limits.backoff("h", T0), None);
        limits.on_failure("h", T0);
        assert_eq!(limits.backoff("h", T0), Some(BACKOFF_BASE));
        limits.on_failure("h", T0);
        limits.on_failure("h", T0);
        assert_eq!(limits.backoff("h", T0), Some(BACKOFF_BASE * 4));
        let later = T0.plus(SCORE_HALF_LIFE);
        assert_eq!(limits.backoff("h", later), None);
    }
}
