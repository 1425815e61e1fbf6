//! Politeness per domain in one process: how many downloads may run at once, and whether a
//! host is backed off or its circuit open, from each host's [`HostHealth`]. The health is
//! folded from this process's outcomes as they happen and replaced by the shared copy (every
//! process's outcomes) whenever the crawl flows read it, so a 429 seen anywhere lowers the
//! concurrency used everywhere.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::host_health::{Admission, CircuitRules, HostEvent, HostHealth};
use imgest_core::domain::Timestamp;

/// Hosts remembered before idle ones are forgotten.
const CAPACITY: usize = 100_000;

#[derive(Debug)]
struct HostState {
    health: HostHealth,
    in_flight: usize,
}

/// Shared by every worker of a process.
#[derive(Debug)]
pub struct HostLimits {
    initial: f64,
    max: f64,
    circuit: CircuitRules,
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
    pub fn new(initial: usize, circuit: CircuitRules) -> Arc<Self> {
        let initial = initial.max(1) as f64;
        Arc::new(Self {
            initial,
            max: initial * 4.0,
            circuit,
            hosts: Mutex::new(HashMap::new()),
            released: Notify::new(),
        })
    }

    /// Waits for a free slot for `host`.
    pub async fn acquire(self: &Arc<Self>, host: &str, now: Timestamp) -> HostSlot {
        loop {
            let notified = self.released.notified();
            if let Some(slot) = self.try_acquire(host, now) {
                return slot;
            }
            notified.await;
        }
    }

    /// A free slot for `host` now, if there is one.
    pub fn try_acquire(self: &Arc<Self>, host: &str, now: Timestamp) -> Option<HostSlot> {
        let mut hosts = self.lock();
        let state = self.state(&mut hosts, host, now);
        if (state.in_flight as f64) < state.health.limit.floor().max(1.0) {
            state.in_flight += 1;
            return Some(HostSlot {
                limits: self.clone(),
                host: host.to_owned(),
            });
        }
        None
    }

    /// Folds a download's outcome into the host's health.
    pub fn observe(&self, host: &str, event: HostEvent, now: Timestamp) {
        let mut hosts = self.lock();
        let state = self.state(&mut hosts, host, now);
        state.health.apply(event, now, self.max, &self.circuit);
        if event == HostEvent::Answered {
            // A grown limit may let a waiting download go.
            self.released.notify_waiters();
        }
    }

    /// How long to hold off new downloads from `host`, if its failure score is high.
    pub fn backoff(&self, host: &str, now: Timestamp) -> Option<Duration> {
        self.lock().get(host)?.health.backoff(now)
    }

    /// What the host's circuit lets a download do now.
    pub fn admission(&self, host: &str, now: Timestamp) -> Admission {
        self.lock()
            .get(host)
            .map_or(Admission::Go, |s| s.health.admission(now))
    }

    /// The current concurrency limit of `host`.
    pub fn limit(&self, host: &str) -> usize {
        self.lock()
            .get(host)
            .map_or(self.initial, |s| s.health.limit)
            .floor() as usize
    }

    /// The host's health as this process knows it (a fresh one for a host never seen).
    pub fn health(&self, host: &str, now: Timestamp) -> HostHealth {
        self.lock()
            .get(host)
            .map_or_else(|| self.fresh(now), |s| s.health.clone())
    }

    /// A host never seen: the initial concurrency, nothing against it.
    pub fn fresh(&self, now: Timestamp) -> HostHealth {
        HostHealth::new(self.initial, now)
    }

    /// The concurrency cap and circuit rules every copy of a host's health is folded with.
    pub fn rules(&self) -> (f64, &CircuitRules) {
        (self.max, &self.circuit)
    }

    /// Replaces what this process knows of `host` by `health` (the shared copy); its running
    /// downloads stay counted.
    pub fn set_health(&self, host: &str, health: HostHealth, now: Timestamp) {
        let mut hosts = self.lock();
        self.state(&mut hosts, host, now).health = health;
        drop(hosts);
        self.released.notify_waiters();
    }

    fn state<'a>(
        &self,
        hosts: &'a mut HashMap<String, HostState>,
        host: &str,
        now: Timestamp,
    ) -> &'a mut HostState {
        if hosts.len() >= CAPACITY && !hosts.contains_key(host) {
            hosts.retain(|_, s| {
                s.in_flight > 0
                    || s.health
                        .backoff(now.plus(Duration::from_secs(3600)))
                        .is_some()
            });
        }
        hosts.entry(host.to_owned()).or_insert_with(|| HostState {
            health: HostHealth::new(self.initial, now),
            in_flight: 0,
        })
    }

    fn release(&self, host: &str) {
        if let Some(state) = self.lock().get_mut(host) {
            state.in_flight = state.in_flight.saturating_sub(1);
        }
        self.released.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HostState>> {
        // Limits stay usable after a panic elsewhere: worst case, one skewed sample.
        self.hosts.lock().unwrap_or_else(|e| e.into_inner())
    }
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
    async fn a_429_halves_one_hosts_concurrency_only() {
        let limits = HostLimits::new(8, CircuitRules::default());
        limits.observe("h", HostEvent::RateLimited, T0);
        assert_eq!(limits.limit("h"), 4);
        assert_eq!(limits.limit("other"), 8);
    }

    #[tokio::test]
    async fn slots_beyond_the_limit_wait_for_a_release() {
        let limits = HostLimits::new(1, CircuitRules::default());
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

    #[tokio::test]
    async fn a_shared_health_replaces_the_local_one_and_keeps_running_downloads_counted() {
        let limits = HostLimits::new(2, CircuitRules::default());
        let _one = limits.acquire("h", T0).await;
        let mut shared = limits.health("h", T0);
        shared.apply(HostEvent::RateLimited, T0, 8.0, &CircuitRules::default());
        limits.set_health("h", shared, T0);
        assert_eq!(limits.limit("h"), 1);
        let second = limits.acquire("h", T0);
        tokio::pin!(second);
        tokio::select! {
            biased;
            _ = &mut second => panic!("the one slot is taken"),
            () = std::future::ready(()) => {}
        }
    }
}
