//! Which timeout tier a new download starts in, learned per (client, host).
//!
//! Every outcome says, for each tier, whether a download like it would have fitted that tier's
//! deadline: a success in `e` seconds fits every tier of at least `e`; a timeout at tier `i`
//! fits none up to `i`. Each tier keeps a decaying miss rate per host, and new downloads go to
//! the fastest tier whose miss rate is low. So a host that needs 3 s stops paying a wasted
//! 1 s attempt per photo after its first few, and a host that gets faster is noticed from its
//! successes in the slower tier (they report how long they took), with no probing.
//!
//! [`TierStats`] is the pure part, folded the same way by every process into a shared copy;
//! [`TierChooser`] holds a process's copies (replaced by the shared ones when they are read).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use imgest_core::domain::ClientId;

/// Weight of the newest outcome in a tier's miss rate.
const ALPHA: f64 = 0.2;
/// A tier is used while fewer than this share of recent downloads would have missed it.
const MAX_MISS_RATE: f64 = 0.3;
/// Hosts remembered; beyond it the least recently seen are forgotten (they start at tier 0).
const CAPACITY: usize = 100_000;

/// How a download ended, as far as choosing a tier cares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Observation {
    /// Finished (any response, success or HTTP error) after `elapsed`.
    Finished(Duration),
    /// Cut at the deadline of this tier.
    TimedOut { tier: usize },
}

/// One (client, host)'s statistics: per tier, the decaying share of downloads that would have
/// missed its deadline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TierStats {
    pub miss_rate: Vec<f64>,
}

impl TierStats {
    /// The fastest tier whose miss rate is low (the last if none is); 0 with no statistics.
    pub fn tier(&self, tiers: usize) -> usize {
        if self.miss_rate.is_empty() {
            return 0;
        }
        self.miss_rate
            .iter()
            .take(tiers)
            .position(|rate| *rate < MAX_MISS_RATE)
            .unwrap_or(tiers.saturating_sub(1))
    }

    /// Folds in one outcome.
    pub fn observe(&mut self, tiers: &[Duration], observation: Observation) {
        // A host's first outcome is all there is to go on: it sets the rates outright, so a
        // slow host wastes one fast-tier attempt, not several.
        let alpha = if self.miss_rate.is_empty() {
            1.0
        } else {
            ALPHA
        };
        // Tiers added since the statistics were written start with no misses.
        self.miss_rate.resize(tiers.len(), 0.0);
        for (i, (rate, deadline)) in self.miss_rate.iter_mut().zip(tiers).enumerate() {
            // A timeout says nothing about the slower tiers.
            let Some(missed) = missed(observation, i, *deadline) else {
                continue;
            };
            *rate = (1.0 - alpha) * *rate + alpha * if missed { 1.0 } else { 0.0 };
        }
    }
}

/// Per tier, how many downloads would have missed its deadline and how many fitted it (a
/// time bucket's worth of outcomes, from every process): what the shared counts hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TierCounts {
    /// `(missed, fitted)` per tier, fastest first.
    pub tiers: Vec<(u64, u64)>,
}

impl TierCounts {
    /// One more outcome.
    pub fn count(&mut self, tiers: &[Duration], observation: Observation) {
        self.tiers.resize(tiers.len().max(self.tiers.len()), (0, 0));
        for (i, (counts, deadline)) in self.tiers.iter_mut().zip(tiers).enumerate() {
            match missed(observation, i, *deadline) {
                Some(true) => counts.0 += 1,
                Some(false) => counts.1 += 1,
                None => {}
            }
        }
    }
}

/// Whether `observation` says a download would have missed tier `i` (of `deadline`); `None`
/// when it says nothing of it (a timeout, of the slower tiers).
fn missed(observation: Observation, i: usize, deadline: Duration) -> Option<bool> {
    match observation {
        Observation::Finished(elapsed) => Some(elapsed > deadline),
        Observation::TimedOut { tier } if i <= tier => Some(true),
        Observation::TimedOut { .. } => None,
    }
}

impl TierStats {
    /// Folds in a bucket of counted outcomes as that many [`observe`](Self::observe)s would,
    /// taking each tier's misses and fits as spread evenly (their order within a bucket is not
    /// kept): the miss rate moves toward the bucket's share of misses by `1 − (1 − α)ⁿ`.
    pub fn observe_counts(&mut self, tiers: usize, counts: &TierCounts) {
        let first = self.miss_rate.is_empty();
        self.miss_rate.resize(tiers, 0.0);
        for (rate, &(missed, fitted)) in self.miss_rate.iter_mut().zip(&counts.tiers) {
            let n = missed + fitted;
            if n == 0 {
                continue;
            }
            let share = missed as f64 / n as f64;
            // A host's first outcomes are all there is to go on: they set the rates outright.
            let weight = if first {
                1.0
            } else {
                1.0 - (1.0 - ALPHA).powi(i32::try_from(n.min(1_000)).unwrap_or(1_000))
            };
            *rate = (1.0 - weight) * *rate + weight * share;
        }
    }
}

#[derive(Debug, Clone)]
struct HostStats {
    stats: TierStats,
    last_seen: u64,
}

/// The per-host statistics, shared by intake and every worker of a process.
#[derive(Debug)]
pub struct TierChooser {
    tiers: Vec<Duration>,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    hosts: HashMap<(ClientId, String), HostStats>,
    tick: u64,
}

impl TierChooser {
    pub fn new(tiers: Vec<Duration>) -> Self {
        Self {
            tiers,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The tier a new download from `host` for `client` starts in.
    pub fn choose(&self, client: &ClientId, host: &str) -> usize {
        let inner = self.lock();
        inner
            .hosts
            .get(&(client.clone(), host.to_owned()))
            .map_or(0, |s| s.stats.tier(self.tiers.len()))
    }

    pub fn observe(&self, client: &ClientId, host: &str, observation: Observation) {
        let tiers = &self.tiers;
        self.with(client, host, |stats| stats.observe(tiers, observation));
    }

    /// Replaces this process's statistics of (`client`, `host`) by `stats` (the shared copy).
    pub fn set(&self, client: &ClientId, host: &str, stats: TierStats) {
        self.with(client, host, |s| *s = stats);
    }

    /// The timeout tiers' deadlines, fastest first.
    pub fn tiers(&self) -> &[Duration] {
        &self.tiers
    }

    fn with(&self, client: &ClientId, host: &str, change: impl FnOnce(&mut TierStats)) {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let key = (client.clone(), host.to_owned());
        if inner.hosts.len() >= CAPACITY && !inner.hosts.contains_key(&key) {
            evict_oldest(&mut inner.hosts);
        }
        let entry = inner.hosts.entry(key).or_insert_with(|| HostStats {
            stats: TierStats::default(),
            last_seen: tick,
        });
        entry.last_seen = tick;
        change(&mut entry.stats);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Statistics stay usable after a panic elsewhere: worst case, one skewed sample.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn evict_oldest(hosts: &mut HashMap<(ClientId, String), HostStats>) {
    // Rare (only when full): drop the older half at once rather than one per insert.
    let mut ages: Vec<u64> = hosts.values().map(|s| s.last_seen).collect();
    let mid = ages.len() / 2;
    let (_, median, _) = ages.select_nth_unstable(mid);
    let cutoff = *median;
    hosts.retain(|_, s| s.last_seen > cutoff);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chooser() -> TierChooser {
        TierChooser::new([1, 5, 30].map(Duration::from_secs).to_vec())
    }

    fn client() -> ClientId {
        ClientId::parse("acme").unwrap()
    }

    #[test]
    fn counted_outcomes_fold_as_the_outcomes_would_one_by_one() {
        let tiers = [1, 5, 30].map(Duration::from_secs);
        let outcomes = [
            Observation::TimedOut { tier: 0 },
            Observation::Finished(Duration::from_secs(3)),
            Observation::Finished(Duration::from_secs(3)),
            Observation::Finished(Duration::from_millis(300)),
        ];
        let (mut one_by_one, mut counted) = (TierStats::default(), TierStats::default());
        let mut first = TierCounts::default();
        first.count(&tiers, outcomes[0]);
        one_by_one.observe(&tiers, outcomes[0]);
        counted.observe_counts(tiers.len(), &first);
        assert_eq!(counted, one_by_one, "the first outcome sets the rates");
        let mut rest = TierCounts::default();
        for o in &outcomes[1..] {
            rest.count(&tiers, *o);
            one_by_one.observe(&tiers, *o);
        }
        assert_eq!(rest.tiers, [(2, 1), (0, 3), (0, 3)]);
        counted.observe_counts(tiers.len(), &rest);
        for (a, b) in counted.miss_rate.iter().zip(&one_by_one.miss_rate) {
            // The same weight overall; only the order within the bucket differs.
            assert!((a - b).abs() < 0.1, "{counted:?} vs {one_by_one:?}");
        }
        assert_eq!(counted.tier(3), one_by_one.tier(3));
    }

    #[test]
    fn unknown_hosts_start_in_the_first_tier() {
        assert_eq!(chooser().choose(&client(), "img.example"), 0);
    }

    #[test]
    fn a_slow_host_moves_to_the_tier_that_fits_and_back_when_it_speeds_up() {
        let r = chooser();
        r.observe(&client(), "slow.example", Observation::TimedOut { tier: 0 });
        assert_eq!(r.choose(&client(), "slow.example"), 1, "after one timeout");
        r.observe(
            &client(),
            "slow.example",
            Observation::Finished(Duration::from_secs(3)),
        );
        assert_eq!(r.choose(&client(), "slow.example"), 1);
        assert_eq!(
            r.choose(&client(), "fast.example"),
            0,
            "other hosts unaffected"
        );
        let other = ClientId::parse("other").unwrap();
        assert_eq!(r.choose(&other, "slow.example"), 0, "per client");
        for _ in 0..6 {
            r.observe(
                &client(),
                "slow.example",
                Observation::Finished(Duration::from_millis(200)),
            );
        }
        assert_eq!(r.choose(&client(), "slow.example"), 0);
    }

    #[test]
    fn timeouts_in_every_tier_route_to_the_last() {
        let r = chooser();
        for tier in [0, 0, 1, 1, 2] {
            r.observe(&client(), "dead.example", Observation::TimedOut { tier });
        }
        assert_eq!(r.choose(&client(), "dead.example"), 2);
    }

    #[test]
    fn an_occasional_slow_photo_does_not_move_a_fast_host() {
        let r = chooser();
        r.observe(
            &client(),
            "ok.example",
            Observation::Finished(Duration::from_millis(100)),
        );
        for i in 0..20 {
            let elapsed = if i % 10 == 0 { 3000 } else { 100 };
            r.observe(
                &client(),
                "ok.example",
                Observation::Finished(Duration::from_millis(elapsed)),
            );
            assert_eq!(r.choose(&client(), "ok.example"), 0, "photo {i}");
        }
    }
}
