//! What downloads teach about hosts, shared by every process. On AWS the tier a download
//! starts in is chosen by the intake function and outcomes are seen by the fetch functions,
//! and fifty fetch instances would each allow a throttling host its full concurrency: so the
//! (client, host) tier statistics ([`TierStats`], records of kind `tier`) and each host's
//! health ([`HostHealth`]: concurrency after AIMD, failure score, circuit; kind `host`) are
//! records that every process folds its outcomes into.
//!
//! - Outcomes change this process's copy at once and are kept as pending; a host's pending
//!   outcomes are folded into the shared record in one conditional write when they are
//!   [`FLUSH_EVERY`] old, and all of them at the end of every fetch invocation
//!   ([`Crawler::flush_learning`]): one write per host per invocation or per few seconds,
//!   never one per download.
//! - Readers use the shared record for [`FRESH_FOR`] before reading it again, with their own
//!   pending outcomes folded on top.
//! - Learning is advice: a record that cannot be read or written is logged and the pending
//!   outcomes are dropped (a few seconds of samples); no download waits for it or fails by it.
//! - The probe of an open circuit is the one decision that needs agreement: it is claimed by a
//!   conditional write of the host's record, and its result written at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tracing::{info, warn};

use super::Crawler;
use super::records::{self, Change};
use crate::FlowError;
use imgest_core::domain::{ClientId, Timestamp};
use imgest_download::{Admission, HostEvent, HostHealth, Observation, TierStats};

pub(super) const TIER_KIND: &str = "tier";
pub(super) const HOST_KIND: &str = "host";

/// A host's outcomes are folded into the shared records once they are this old.
pub const FLUSH_EVERY: Duration = Duration::from_secs(2);
/// A shared record is used this long before it is read again.
pub const FRESH_FOR: Duration = Duration::from_secs(5);
/// Outcomes kept per key between flushes; beyond it the oldest are dropped.
const MAX_PENDING: usize = 512;
/// A probe is given up (another may go) after the last tier's deadline and this.
const PROBE_MARGIN: Duration = Duration::from_secs(60);

/// A process's outcomes not yet in the shared records, and when each record was last read.
#[derive(Debug, Default)]
pub(super) struct Learning {
    pending: Mutex<Pending>,
    /// Per record, when it was last read; held while it is read, so the tasks of a batch that
    /// need the same host wait for the one read and go on together (and so also ask the rate
    /// limiter together).
    read_at: Mutex<HashMap<String, ReadAt>>,
}

type ReadAt = Arc<tokio::sync::Mutex<Option<Timestamp>>>;

#[derive(Debug, Default)]
struct Pending {
    tiers: HashMap<String, Batch<Observation>>,
    hosts: HashMap<String, Batch<(HostEvent, Timestamp)>>,
}

#[derive(Debug)]
struct Batch<T> {
    since: Timestamp,
    items: Vec<T>,
}

impl<T> Batch<T> {
    fn push(map: &mut HashMap<String, Self>, key: String, item: T, now: Timestamp) {
        let batch = map.entry(key).or_insert_with(|| Batch {
            since: now,
            items: Vec::new(),
        });
        if batch.items.len() >= MAX_PENDING {
            batch.items.remove(0);
        }
        batch.items.push(item);
    }
}

/// The record key of a (client, host)'s statistics.
fn tier_key(client: &ClientId, host: &str) -> String {
    format!("{client}/{host}")
}

/// `(client, host)` back from a tier key (client ids have no `/`).
fn split_tier_key(key: &str) -> Option<(ClientId, &str)> {
    let (client, host) = key.split_once('/')?;
    Some((ClientId::parse(client).ok()?, host))
}

impl Learning {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When `kind/key` was last read, to hold while deciding to read it and reading it.
    fn read_at(&self, kind: &str, key: &str) -> ReadAt {
        let mut read_at = self.read_at.lock().unwrap_or_else(PoisonError::into_inner);
        if read_at.len() >= 100_000 {
            // Records nobody is reading now start over (read again at their next use).
            read_at.retain(|_, at| Arc::strong_count(at) > 1);
        }
        Arc::clone(read_at.entry(format!("{kind}/{key}")).or_default())
    }
}

/// Whether a record last read at `read_at` is to be read again at `now`; if so, it counts as
/// read now.
fn needs_read(read_at: &mut Option<Timestamp>, now: Timestamp) -> bool {
    if read_at.is_some_and(|at| now < at.plus(FRESH_FOR)) {
        return false;
    }
    *read_at = Some(now);
    true
}

impl Crawler {
    /// Folds a download's timing into the (client, host)'s tier statistics.
    pub(super) fn learn_tier(&self, client: &ClientId, host: &str, observation: Observation) {
        self.chooser.observe(client, host, observation);
        let now = self.now();
        Batch::push(
            &mut self.learning.pending().tiers,
            tier_key(client, host),
            observation,
            now,
        );
    }

    /// Folds a download's outcome into the host's health.
    pub(super) fn learn_host(&self, host: &str, event: HostEvent) {
        let now = self.now();
        self.hosts.observe(host, event, now);
        Batch::push(
            &mut self.learning.pending().hosts,
            host.to_owned(),
            (event, now),
            now,
        );
    }

    /// The tier a new download from `host` for `client` starts in, from the shared
    /// statistics (read again when older than [`FRESH_FOR`]).
    pub async fn start_tier(&self, client: &ClientId, host: &str) -> usize {
        let key = tier_key(client, host);
        let read_at = self.learning.read_at(TIER_KIND, &key);
        let mut read_at = read_at.lock().await;
        let now = self.now();
        if needs_read(&mut read_at, now) {
            let records = self.service.ports().documents.as_ref();
            match records::peek::<TierStats>(records, TIER_KIND, &key, now).await {
                Ok((Some(shared), _)) => self.adopt_tiers(&key, shared),
                Ok((None, _)) => {}
                Err(e) => warn!(host = host, error = %e, "cannot read a host's tier statistics"),
            }
        }
        self.chooser.choose(client, host)
    }

    /// Makes this process's copy of `host`'s health the shared one if it was not read
    /// within [`FRESH_FOR`].
    pub(super) async fn refresh_host(&self, host: &str) {
        let read_at = self.learning.read_at(HOST_KIND, host);
        let mut read_at = read_at.lock().await;
        let now = self.now();
        if !needs_read(&mut read_at, now) {
            return;
        }
        let records = self.service.ports().documents.as_ref();
        match records::peek::<HostHealth>(records, HOST_KIND, host, now).await {
            Ok((Some(shared), _)) => self.adopt_host(host, shared),
            Ok((None, _)) => {}
            Err(e) => warn!(host = host, error = %e, "cannot read a host's health"),
        }
    }

    /// The host's concurrency limit now, from the shared health.
    pub async fn host_concurrency(&self, host: &str) -> usize {
        self.refresh_host(host).await;
        self.hosts.limit(host)
    }

    /// Whether a download from `host` may go: `Ok(true)` as usual, `Ok(false)` if its circuit
    /// is open (settle as `host_unavailable`), and `Ok(true)` for the one probe after the
    /// cool-down, which this call claims. Reports the probe's result with
    /// [`probe_result`](Self::probe_result).
    pub(super) async fn admit(&self, host: &str) -> Result<Admitted, FlowError> {
        self.refresh_host(host).await;
        let now = self.now();
        match self.hosts.admission(host, now) {
            Admission::Go => return Ok(Admitted::Go),
            Admission::Refused => return Ok(Admitted::Refused),
            Admission::ProbeDue => {}
        }
        let lease = self.settings.tiers[self.settings.last_tier()] + PROBE_MARGIN;
        let fresh = self.hosts.fresh(now);
        let (admitted, health) = self
            .update_record(HOST_KIND, host, now, |current: Option<HostHealth>| {
                let mut health = current.unwrap_or_else(|| fresh.clone());
                Ok(match health.admission(now) {
                    // Another process's probe closed it, or only this process had it open.
                    Admission::Go => Change::Keep((Admitted::Go, health)),
                    Admission::Refused => Change::Keep((Admitted::Refused, health)),
                    Admission::ProbeDue => {
                        health.claim_probe(now, lease);
                        Change::Write(health.clone(), (Admitted::Probe, health))
                    }
                })
            })
            .await?;
        self.adopt_host(host, health);
        if admitted == Admitted::Probe {
            info!(host = host, "circuit open: probing the host");
        }
        Ok(admitted)
    }

    /// Closes the host's circuit if the probe succeeded, or opens it again for longer.
    pub(super) async fn probe_result(&self, host: &str, ok: bool) -> Result<(), FlowError> {
        let now = self.now();
        let (_, rules) = self.hosts.rules();
        let rules = *rules;
        let fresh = self.hosts.fresh(now);
        let health = self
            .update_record(HOST_KIND, host, now, |current: Option<HostHealth>| {
                let mut health = current.unwrap_or_else(|| fresh.clone());
                health.probe_result(ok, now, &rules);
                Ok(Change::Write(health.clone(), health))
            })
            .await?;
        info!(host = host, ok, circuit = ?health.circuit, "circuit probe settled");
        self.adopt_host(host, health);
        Ok(())
    }

    /// Folds the outcomes pending for longer than [`FLUSH_EVERY`] into the shared records.
    pub(super) async fn flush_due_learning(&self) {
        let now = self.now();
        self.flush_where(|since| now >= since.plus(FLUSH_EVERY))
            .await;
    }

    /// Folds every pending outcome into the shared records: the fetch function calls it at the
    /// end of each invocation (a frozen instance would keep them from everyone else), the
    /// local runner when it stops.
    pub async fn flush_learning(&self) {
        self.flush_where(|_| true).await;
    }

    /// Folds `downloads` answers of `host` for `client` after `elapsed` into this process's
    /// learning, as that many fetches would (for the contention benchmark, which drives the
    /// shared learning without downloading).
    #[doc(hidden)]
    pub fn observe_answers(
        &self,
        client: &ClientId,
        host: &str,
        elapsed: Duration,
        downloads: usize,
    ) {
        for _ in 0..downloads {
            self.learn_tier(client, host, Observation::Finished(elapsed));
            self.learn_host(host, HostEvent::Answered);
        }
    }

    /// [`flush_learning`](Self::flush_learning), saying how many outcomes it shared and how
    /// many it had to drop (for the contention benchmark).
    #[doc(hidden)]
    pub async fn share_learning(&self) -> Shared {
        self.flush_where(|_| true).await
    }

    async fn flush_where(&self, due: impl Fn(Timestamp) -> bool) -> Shared {
        let (tiers, hosts) = {
            let mut pending = self.learning.pending();
            (
                take_due(&mut pending.tiers, &due),
                take_due(&mut pending.hosts, &due),
            )
        };
        let mut shared = Shared::default();
        for (key, observations) in tiers {
            match self.flush_tiers(&key, &observations).await {
                Ok(()) => shared.shared += observations.len(),
                Err(e) => {
                    shared.dropped += observations.len();
                    warn!(key, error = %e, "cannot share a host's tier statistics");
                }
            }
        }
        for (host, events) in hosts {
            match self.flush_host(&host, &events).await {
                Ok(()) => shared.shared += events.len(),
                Err(e) => {
                    shared.dropped += events.len();
                    warn!(host = host, error = %e, "cannot share a host's health");
                }
            }
        }
        shared
    }

    async fn flush_tiers(&self, key: &str, observations: &[Observation]) -> Result<(), FlowError> {
        let now = self.now();
        let tiers = self.chooser.tiers();
        let stats = self
            .update_record(TIER_KIND, key, now, |current: Option<TierStats>| {
                let mut stats = current.unwrap_or_default();
                for observation in observations {
                    stats.observe(tiers, *observation);
                }
                Ok(Change::Write(stats.clone(), stats))
            })
            .await?;
        self.adopt_tiers(key, stats);
        Ok(())
    }

    /// Makes `shared` this process's copy of a (client, host)'s statistics, with the
    /// outcomes still pending here folded on top.
    fn adopt_tiers(&self, key: &str, mut shared: TierStats) {
        let Some((client, host)) = split_tier_key(key) else {
            return;
        };
        if let Some(batch) = self.learning.pending().tiers.get(key) {
            for observation in &batch.items {
                shared.observe(self.chooser.tiers(), *observation);
            }
        }
        self.chooser.set(&client, host, shared);
    }

    async fn flush_host(
        &self,
        host: &str,
        events: &[(HostEvent, Timestamp)],
    ) -> Result<(), FlowError> {
        let now = self.now();
        let (max, rules) = self.hosts.rules();
        let rules = *rules;
        let first = events.first().map_or(now, |(_, at)| *at);
        let fresh = self.hosts.fresh(first);
        let (health, opened) = self
            .update_record(HOST_KIND, host, now, |current: Option<HostHealth>| {
                let mut health = current.unwrap_or_else(|| fresh.clone());
                let was = health.circuit;
                for (event, at) in events {
                    health.apply(*event, *at, max, &rules);
                }
                let opened = was != health.circuit;
                Ok(Change::Write(health.clone(), (health, opened)))
            })
            .await?;
        if opened {
            warn!(host = host, circuit = ?health.circuit, "circuit opened: most of the host's recent requests failed");
        }
        self.adopt_host(host, health);
        Ok(())
    }

    /// Makes `shared` this process's copy of the host's health, with the outcomes still
    /// pending here folded on top.
    fn adopt_host(&self, host: &str, mut shared: HostHealth) {
        let (max, rules) = self.hosts.rules();
        if let Some(batch) = self.learning.pending().hosts.get(host) {
            for (event, at) in &batch.items {
                shared.apply(*event, *at, max, rules);
            }
        }
        self.hosts.set_health(host, shared, self.now());
    }
}

/// What a flush of the learning did: outcomes shared, and outcomes dropped because their
/// series could not be written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shared {
    pub shared: usize,
    pub dropped: usize,
}

/// What the circuit said of a download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admitted {
    Go,
    /// Settle as `host_unavailable`.
    Refused,
    /// The one download let through an open circuit; its result closes or re-opens it.
    Probe,
}

fn take_due<T>(
    map: &mut HashMap<String, Batch<T>>,
    due: &impl Fn(Timestamp) -> bool,
) -> Vec<(String, Vec<T>)> {
    let keys: Vec<String> = map
        .iter()
        .filter(|(_, b)| due(b.since))
        .map(|(k, _)| k.clone())
        .collect();
    keys.into_iter()
        .filter_map(|k| map.remove(&k).map(|b| (k, b.items)))
        .collect()
}
