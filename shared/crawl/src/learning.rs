//! What downloads teach about hosts, shared by every process. On AWS the tier a download
//! starts in is chosen by the intake function and outcomes are seen by the fetch functions,
//! and fifty fetch instances would each allow a throttling host its full concurrency: so the
//! (client, host) tier statistics ([`TierStats`]) and each host's health ([`HostHealth`]:
//! concurrency after AIMD, failure score, circuit) are folded from outcomes that every process
//! shares.
//!
//! - Outcomes change this process's copy at once and are kept as pending; a host's pending
//!   outcomes are added to the shared **counts** when they are [`FLUSH_EVERY`] old (5 s), and all of
//!   them at the end of every fetch invocation ([`Crawler::flush_learning`]): per host (series
//!   `host`) and per (client, host) (the tier statistics' series, stored as `route`), counts
//!   of outcomes in time buckets, each
//!   flush one add that reads nothing and never conflicts. A hot host's every fetch instance
//!   flushing at once costs one write each, at the partition's rate, and nothing is dropped
//!   for losing a race.
//! - The shared copy is the fold of the counts over a horizon ([`HostHealth::apply_counts`],
//!   [`TierStats::observe_counts`]): ten minutes of a host's buckets of ten seconds (longer
//!   with a longer circuit window), an hour of a (client, host)'s buckets of a minute.
//! - A host's circuit is the one decision that needs agreement: it is its record (kind
//!   `host`), written by a conditional write only when it changes: opened when the counts say
//!   most recent requests fail, the probe claimed after the cool-down, the probe's result
//!   (a success closes it and forgets the counts up to then: a clean slate).
//! - Readers use the shared copy for [`FRESH_FOR`] before reading it again, with their own
//!   pending outcomes folded on top.
//! - Learning is advice: no download waits for it or fails by it. Outcomes whose counts
//!   cannot be added to (a throttled partition, a conflict) are logged and kept pending for
//!   the next flush, oldest first, within the per-key cap ([`MAX_PENDING`]); only what the
//!   cap pushes out is dropped.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tracing::{info, warn};

use super::Crawler;
use super::records::{self, Change};
use imgest_core::domain::{ClientId, Timestamp};
use imgest_flows::FlowError;
use serde::{Deserialize, Serialize};

use imgest_download::{Admission, Circuit, EventCounts, HostEvent, HostHealth};
use imgest_download::{Observation, TierCounts, TierStats};

/// The counter series of (client, host) outcomes (the tier statistics), keyed
/// `{client}/{host}`. Its stored name, `route` (`ctr#route#…` on DynamoDB and in the
/// functions' policies), stays: renaming a stored name would leave the counts written under it
/// unread.
pub(super) const TIER_SERIES: &str = "route";
/// The counter series of a host's outcomes, keyed by host.
pub(super) const HOST_SERIES: &str = "host";
/// The records of hosts' circuits, keyed by host.
pub(super) const HOST_KIND: &str = "host";

/// A host's count buckets (at least; see [`Crawler::host_bucket`]) and how many make its
/// horizon.
const HOST_BUCKET: Duration = Duration::from_secs(10);
const HOST_BUCKETS: i64 = 60;
/// A (client, host)'s count buckets and how many make its horizon (an hour).
const TIER_BUCKET: Duration = Duration::from_secs(60);
const TIER_BUCKETS: i64 = 60;
/// The names of a host's counts.
const ANSWERED: &str = "answered";
const RATE_LIMITED: &str = "rate_limited";
const FAILED: &str = "failed";

/// A host's outcomes are added to the shared counts once they are this old: as often as
/// readers read the counts again ([`FRESH_FOR`]), since adding more often would reach no one
/// sooner and only write more (a slow tier's invocation of 30 s flushes mid-way six times, not
/// fifteen: the biggest host's partition takes a fraction of the writes).
pub const FLUSH_EVERY: Duration = FRESH_FOR;
/// Shared counts are used this long before they are read again.
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
    /// Puts back `items` a flush could not share, before the key's newer ones; what the cap
    /// leaves no room for (the oldest) is dropped and counted.
    fn put_back(
        map: &mut HashMap<String, Self>,
        key: String,
        items: Vec<T>,
        now: Timestamp,
    ) -> usize {
        let batch = map.entry(key).or_insert_with(|| Batch {
            since: now,
            items: Vec::new(),
        });
        let newer = std::mem::take(&mut batch.items);
        let mut all = items;
        all.extend(newer);
        let over = all.len().saturating_sub(MAX_PENDING);
        batch.items = all.split_off(over);
        over
    }

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
        let read_at = self.learning.read_at(TIER_SERIES, &key);
        let mut read_at = read_at.lock().await;
        let now = self.now();
        if needs_read(&mut read_at, now) {
            match self.read_tiers(&key, now).await {
                Ok(shared) => self.adopt_tiers(&key, shared),
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
        match self.read_host(host, now).await {
            Ok((shared, _)) => self.adopt_host(host, shared),
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
        // Opened here by outcomes not shared yet: as good a reason for a probe as the record's.
        let here = self.hosts.health(host, now).circuit;
        let (admitted, circuit) = self
            .update_record(HOST_KIND, host, now, |current: Option<HostCircuit>| {
                let mut record = current.unwrap_or_default();
                let mut health = fresh.clone();
                health.circuit = match record.circuit {
                    Circuit::Closed => here,
                    recorded => recorded,
                };
                Ok(match health.admission(now) {
                    // Another process's probe closed it, or only this process had it open.
                    Admission::Go => Change::Keep((Admitted::Go, record)),
                    Admission::Refused => Change::Keep((Admitted::Refused, record)),
                    Admission::ProbeDue => {
                        health.claim_probe(now, lease);
                        record.circuit = health.circuit;
                        Change::Write(record.clone(), (Admitted::Probe, record))
                    }
                })
            })
            .await?;
        self.adopt_circuit(host, &circuit, now);
        if admitted == Admitted::Probe {
            info!(host = host, "circuit open: probing the host");
        }
        Ok(admitted)
    }

    /// Closes the host's circuit if the probe succeeded (forgetting its outcomes so far), or
    /// opens it again for longer.
    pub(super) async fn probe_result(&self, host: &str, ok: bool) -> Result<(), FlowError> {
        let now = self.now();
        let (_, rules) = self.hosts.rules();
        let rules = *rules;
        let fresh = self.hosts.fresh(now);
        let (before, after) = self
            .update_record(HOST_KIND, host, now, |current: Option<HostCircuit>| {
                let mut record = current.unwrap_or_default();
                let before = record.circuit;
                let mut health = fresh.clone();
                health.circuit = before;
                health.probe_result(ok, now, &rules);
                record.circuit = health.circuit;
                if ok && before != record.circuit {
                    record.reset_at = Some(now);
                }
                Ok(Change::Write(record.clone(), (before, record)))
            })
            .await?;
        info!(host = host, ok, circuit = ?after.circuit, "circuit probe settled");
        let mut health = self.hosts.health(host, now);
        health.circuit = before;
        health.probe_result(ok, now, &rules);
        health.circuit = after.circuit;
        self.hosts.set_health(host, health, now);
        Ok(())
    }

    /// Folds the outcomes pending for longer than [`FLUSH_EVERY`] into the shared counts.
    pub(super) async fn flush_due_learning(&self) {
        let now = self.now();
        self.flush_where(|since| now >= since.plus(FLUSH_EVERY))
            .await;
    }

    /// Folds every pending outcome into the shared counts: the fetch function calls it at the
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

    /// Puts back outcomes of `key` a flush could not share (in the pending map `which`
    /// picks), counting them kept and what the cap drops.
    fn keep<T>(
        &self,
        shared: &mut Shared,
        which: impl FnOnce(&mut Pending) -> &mut HashMap<String, Batch<T>>,
        key: String,
        items: Vec<T>,
    ) {
        shared.kept += items.len();
        let now = self.now();
        let mut pending = self.learning.pending();
        shared.dropped += Batch::put_back(which(&mut pending), key, items, now);
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
                    warn!(key, error = %e, "cannot share a host's tier statistics now: kept for the next flush");
                    self.keep(&mut shared, |p| &mut p.tiers, key, observations);
                }
            }
        }
        for (host, events) in hosts {
            match self.flush_host(&host, &events).await {
                Ok(()) => shared.shared += events.len(),
                Err(e) => {
                    warn!(host = host, error = %e, "cannot share a host's health now: kept for the next flush");
                    self.keep(&mut shared, |p| &mut p.hosts, host, events);
                }
            }
        }
        shared
    }

    /// Adds a (client, host)'s outcomes to its counts (in the bucket of now: they are at most
    /// a flush old), then takes the shared statistics they make.
    async fn flush_tiers(&self, key: &str, observations: &[Observation]) -> Result<(), FlowError> {
        let now = self.now();
        let tiers = self.chooser.tiers();
        let mut counts = TierCounts::default();
        for observation in observations {
            counts.count(tiers, *observation);
        }
        let names = tier_count_names(&counts);
        let adds: Vec<(&str, u64)> = names.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let bucket = bucket_of(now, TIER_BUCKET);
        self.service
            .ports()
            .documents
            .add_counts(
                TIER_SERIES,
                key,
                bucket,
                &adds,
                bucket_expiry(bucket, TIER_BUCKET, TIER_BUCKETS),
                now,
            )
            .await?;
        let shared = self.read_tiers(key, now).await?;
        self.adopt_tiers(key, shared);
        // As good as a reader's read: the next one waits its FRESH_FOR from here.
        *self.learning.read_at(TIER_SERIES, key).lock().await = Some(now);
        Ok(())
    }

    /// A (client, host)'s statistics: its counts over the horizon, folded bucket by bucket.
    async fn read_tiers(&self, key: &str, now: Timestamp) -> Result<TierStats, FlowError> {
        let to = bucket_of(now, TIER_BUCKET);
        let buckets = self
            .service
            .ports()
            .documents
            .read_counts(TIER_SERIES, key, to - TIER_BUCKETS + 1, to, now)
            .await?;
        let tiers = self.chooser.tiers().len();
        let mut stats = TierStats::default();
        for bucket in &buckets {
            stats.observe_counts(tiers, &tier_counts(&bucket.counts, tiers));
        }
        Ok(stats)
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

    /// Adds a host's outcomes to its counts (each in the bucket of when it was seen), then takes
    /// the shared health they make, opening the circuit if the counts say so and it is closed.
    async fn flush_host(
        &self,
        host: &str,
        events: &[(HostEvent, Timestamp)],
    ) -> Result<(), FlowError> {
        let width = self.host_bucket();
        let mut buckets: BTreeMap<i64, EventCounts> = BTreeMap::new();
        for (event, at) in events {
            buckets
                .entry(bucket_of(*at, width))
                .or_default()
                .count(*event);
        }
        let documents = &self.service.ports().documents;
        for (bucket, counts) in &buckets {
            let adds: Vec<(&str, u64)> = [
                (ANSWERED, counts.answered),
                (RATE_LIMITED, counts.rate_limited),
                (FAILED, counts.failed),
            ]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
            let expires_at = bucket_expiry(*bucket, width, HOST_BUCKETS);
            documents
                .add_counts(HOST_SERIES, host, *bucket, &adds, expires_at, self.now())
                .await?;
        }
        let now = self.now();
        let (mut shared, record) = self.read_host(host, now).await?;
        *self.learning.read_at(HOST_KIND, host).lock().await = Some(now);
        let (_, rules) = self.hosts.rules();
        if record.circuit == Circuit::Closed && shared.should_open(now, rules) {
            // Open since the last failure that tipped it, as if it had been folded in then.
            let at = events
                .iter()
                .filter(|(event, _)| *event == HostEvent::Failed)
                .map(|(_, at)| *at)
                .max()
                .unwrap_or(now);
            let record = self.open_circuit(host, at).await?;
            shared.circuit = record.circuit;
            warn!(host = host, circuit = ?shared.circuit, "circuit opened: most of the host's recent requests failed");
        }
        self.adopt_host(host, shared);
        Ok(())
    }

    /// Opens a host's circuit as of `at` unless another process changed it first; the record
    /// as it is.
    async fn open_circuit(&self, host: &str, at: Timestamp) -> Result<HostCircuit, FlowError> {
        let (_, rules) = self.hosts.rules();
        let rules = *rules;
        let fresh = self.hosts.fresh(at);
        let now = self.now();
        self.update_record(HOST_KIND, host, now, |current: Option<HostCircuit>| {
            let mut record = current.unwrap_or_default();
            if record.circuit != Circuit::Closed {
                return Ok(Change::Keep(record));
            }
            let mut health = fresh.clone();
            health.open(at, &rules);
            record.circuit = health.circuit;
            Ok(Change::Write(record.clone(), record))
        })
        .await
    }

    /// A host's shared health (its counts over the horizon folded bucket by bucket, those
    /// before the circuit's last reset left out, and the circuit as recorded) and its record.
    async fn read_host(
        &self,
        host: &str,
        now: Timestamp,
    ) -> Result<(HostHealth, HostCircuit), FlowError> {
        let width = self.host_bucket();
        let to = bucket_of(now, width);
        let documents = self.service.ports().documents.as_ref();
        let buckets = documents
            .read_counts(HOST_SERIES, host, to - HOST_BUCKETS + 1, to, now)
            .await?;
        let (record, _) = records::peek::<HostCircuit>(documents, HOST_KIND, host, now).await?;
        let record = record.unwrap_or_default();
        let (max, rules) = self.hosts.rules();
        let width_ms = millis(width);
        let first = buckets.first().map_or(now, |b| {
            Timestamp::from_millis(b.bucket.saturating_mul(width_ms))
        });
        let mut health = self.hosts.fresh(first);
        for bucket in &buckets {
            let start = Timestamp::from_millis(bucket.bucket.saturating_mul(width_ms));
            // A clean slate forgets the bucket it was made in too (its outcomes are not told
            // apart by time within it).
            if record.reset_at.is_some_and(|reset| start <= reset) {
                continue;
            }
            let end = Timestamp::from_millis(
                (bucket.bucket + 1)
                    .saturating_mul(width_ms)
                    .saturating_sub(1)
                    .min(now.as_millis()),
            );
            health.apply_counts(event_counts(&bucket.counts), end, max, rules);
        }
        health.circuit = record.circuit;
        Ok((health, record))
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

    /// Takes the recorded circuit into this process's copy of the host's health.
    fn adopt_circuit(&self, host: &str, record: &HostCircuit, now: Timestamp) {
        let mut health = self.hosts.health(host, now);
        health.circuit = record.circuit;
        self.hosts.set_health(host, health, now);
    }

    /// The width of a host's count buckets: ten seconds, or a sixth of the circuit's window
    /// when that is longer, so the horizon always holds ten windows.
    fn host_bucket(&self) -> Duration {
        let (_, rules) = self.hosts.rules();
        HOST_BUCKET.max(rules.window / 6)
    }
}

/// A host's circuit as every process agrees on it (the record of kind `host`). Records written
/// before the counts held the whole health read as this, their circuit kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct HostCircuit {
    #[serde(default)]
    circuit: Circuit,
    /// Outcomes counted in buckets that began by this instant are forgotten: a probe that
    /// worked closed the circuit with a clean slate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reset_at: Option<Timestamp>,
}

/// The bucket of `at` for buckets of `width`.
fn bucket_of(at: Timestamp, width: Duration) -> i64 {
    at.as_millis().div_euclid(millis(width).max(1))
}

/// A bucket is kept while it is within the horizon of `buckets`, and a bucket more.
fn bucket_expiry(bucket: i64, width: Duration, buckets: i64) -> Timestamp {
    Timestamp::from_millis((bucket + buckets + 1).saturating_mul(millis(width)))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn event_counts(counts: &BTreeMap<String, u64>) -> EventCounts {
    let get = |name: &str| counts.get(name).copied().unwrap_or(0);
    EventCounts {
        answered: get(ANSWERED),
        rate_limited: get(RATE_LIMITED),
        failed: get(FAILED),
    }
}

/// A (client, host)'s counts by name: `miss_{tier}` and `fit_{tier}`, the zero ones left out.
fn tier_count_names(counts: &TierCounts) -> Vec<(String, u64)> {
    let mut names = Vec::new();
    for (i, &(missed, fitted)) in counts.tiers.iter().enumerate() {
        if missed > 0 {
            names.push((format!("miss_{i}"), missed));
        }
        if fitted > 0 {
            names.push((format!("fit_{i}"), fitted));
        }
    }
    names
}

fn tier_counts(counts: &BTreeMap<String, u64>, tiers: usize) -> TierCounts {
    let get = |name: String| counts.get(&name).copied().unwrap_or(0);
    TierCounts {
        tiers: (0..tiers)
            .map(|i| (get(format!("miss_{i}")), get(format!("fit_{i}"))))
            .collect(),
    }
}

/// What a flush of the learning did: outcomes shared; outcomes kept pending because their
/// series could not be written now; and outcomes dropped because the per-key cap had no room
/// for them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shared {
    pub shared: usize,
    pub kept: usize,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_a_flush_could_not_share_go_back_before_newer_ones_within_the_cap() {
        let now = Timestamp::from_millis(1_000);
        let mut map: HashMap<String, Batch<usize>> = HashMap::new();
        Batch::push(&mut map, "h".into(), 900, now);
        // A flush took 0..600 and failed: they go back, oldest first, before what came since.
        let dropped = Batch::put_back(&mut map, "h".into(), (0..600).collect(), now);
        let items = &map["h"].items;
        assert_eq!(items.len(), MAX_PENDING);
        assert_eq!(dropped, 601 - MAX_PENDING);
        assert_eq!(items.last(), Some(&900));
        assert_eq!(items.first(), Some(&(601 - MAX_PENDING)));
        // A key with nothing newer takes them all back when they fit.
        assert_eq!(Batch::put_back(&mut map, "g".into(), vec![1, 2], now), 0);
        assert_eq!(map["g"].items, vec![1, 2]);
    }
}
