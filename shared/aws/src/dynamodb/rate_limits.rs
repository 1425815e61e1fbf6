//! `RateLimiter` on rate-limit items: per-client grant counts in time buckets.
//!
//! Item `pk = ratelimit#{client}`, `sk = ratelimit`: `buckets` M (bucket index, as a string →
//! permits granted in it, N), `bucket_ms` N (the bucket width: a sixtieth of the window),
//! `version` N (+1 per write) and `ttl` N (a little after the last bucket left the window, so
//! idle clients' items vanish).
//!
//! An exact sliding window would need every grant's time; one item of at most 61 counters
//! keeps a request to one consistent read and one conditional write instead. The count for a
//! window ending at `now` sums every bucket that overlaps `(now - window, now]` (as if each
//! bucket's grants were made at its last millisecond), so the limit is never exceeded; at
//! saturation the window counted is up to one bucket longer than the real one, so a client
//! asking continuously gets at least 60/61 ≈ 98.4 % of its limit. Buckets that left the window
//! are dropped on every write. A write lost to a concurrent one re-reads and tries again a few
//! times, then returns `Conflict` (retryable).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;

use super::item::{Attrs, Expr, Item, PK, TTL, key, n, ttl_secs};
use super::{DynamoStore, backoff, is_condition_failed};
use crate::sdk_error::sdk_error;
use imgest_core::domain::Timestamp;
use imgest_core::ports::{Grant, RateLimiter, StoreError};

const KIND: &str = "ratelimit";
const BUCKETS: &str = "buckets";
const BUCKET_MS: &str = "bucket_ms";
const VERSION: &str = "version";

/// Buckets per window.
const BUCKETS_PER_WINDOW: i64 = 60;
/// Read-decide-write rounds before giving up on a contended client.
const ATTEMPTS: u32 = 8;

/// A client's grants: permits per bucket of `width` ms (bucket `i` covers
/// `[i * width, (i + 1) * width)`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Buckets {
    width: i64,
    counts: BTreeMap<i64, u64>,
}

impl Buckets {
    /// The bucket width for `window` (ms): a sixtieth of it, at least 1 ms.
    fn width_for(window_ms: i64) -> i64 {
        (window_ms / BUCKETS_PER_WINDOW).max(1)
    }

    fn new(width: i64) -> Self {
        Self {
            width,
            counts: BTreeMap::new(),
        }
    }

    /// The same grants in buckets of `width`: each moves to the bucket holding the last
    /// millisecond of its old one (later, so it counts at least as long as before).
    fn rebucketed(self, width: i64) -> Self {
        if self.width == width {
            return self;
        }
        let mut out = Self::new(width);
        for (i, c) in self.counts {
            let last = (i + 1).saturating_mul(self.width) - 1;
            *out.counts.entry(last.div_euclid(width)).or_default() += c;
        }
        out
    }

    /// The last millisecond a grant in bucket `i` may have been made at.
    fn last_ms(&self, i: i64) -> i64 {
        (i + 1).saturating_mul(self.width) - 1
    }

    /// Drops the buckets that cannot hold a grant in `(now - window, now]` (nor later).
    fn forget_before(&mut self, now: i64, window_ms: i64) {
        let start = now - window_ms;
        let width = self.width;
        self.counts
            .retain(|&i, _| (i + 1).saturating_mul(width) - 1 > start);
    }

    fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    fn add(&mut self, now: i64, permits: u64) {
        *self.counts.entry(now.div_euclid(self.width)).or_default() += permits;
    }

    /// The earliest time at which fewer than `limit` permits are in the window: when enough of
    /// the oldest buckets have left it.
    fn retry_at(&self, limit: u32, window_ms: i64, now: i64) -> i64 {
        let excess = self
            .total()
            .saturating_sub(u64::from(limit))
            .saturating_add(1);
        let mut left = 0;
        for (&i, &c) in &self.counts {
            left += c;
            if left >= excess {
                return self.last_ms(i).saturating_add(window_ms);
            }
        }
        // Nothing to wait for, yet nothing granted: a zero limit. Ask again a window later.
        now.saturating_add(window_ms)
    }

    fn from_item(item: &Item, client: &str) -> Result<(Self, u64), StoreError> {
        let what = format!("rate-limit item {client:?}");
        let a = Attrs::new(item, &what);
        let width = a.i64(BUCKET_MS)?;
        if width < 1 {
            return Err(a.corrupt(BUCKET_MS, "is not positive"));
        }
        let mut buckets = Self::new(width);
        match item.get(BUCKETS) {
            None => {}
            Some(AttributeValue::M(m)) => {
                for (i, c) in m {
                    let i = i
                        .parse::<i64>()
                        .map_err(|_| a.corrupt(BUCKETS, "has a key that is not a bucket"))?;
                    let c = match c {
                        AttributeValue::N(c) => c.parse::<u64>().ok(),
                        _ => None,
                    }
                    .ok_or_else(|| a.corrupt(BUCKETS, "has a count that is not a number"))?;
                    buckets.counts.insert(i, c);
                }
            }
            Some(_) => return Err(a.corrupt(BUCKETS, "is not a map")),
        }
        Ok((buckets, a.u64(VERSION)?))
    }

    fn to_attribute(&self) -> AttributeValue {
        AttributeValue::M(
            self.counts
                .iter()
                .map(|(i, c)| (i.to_string(), AttributeValue::N(c.to_string())))
                .collect::<HashMap<_, _>>(),
        )
    }
}

fn window_millis(window: Duration) -> i64 {
    i64::try_from(window.as_millis()).unwrap_or(i64::MAX).max(1)
}

fn version_value(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

impl DynamoStore {
    /// One round: read, decide, write. `None` if the write lost to a concurrent one.
    async fn try_acquire(
        &self,
        client: &str,
        wanted: u32,
        limit: u32,
        window_ms: i64,
        now: i64,
        consistent: bool,
    ) -> Result<Option<Grant>, StoreError> {
        let item_key = key(KIND, client);
        let width = Buckets::width_for(window_ms);
        // The first read of an acquire is eventually consistent (half the price): a stale one
        // names a version that moved on, so its write conflicts, and it can only have fewer
        // grants in the window than there are, so a refusal on it is a refusal now too.
        let item = self
            .read_item(
                item_key.clone(),
                &format!("reading the rate limit of {client:?}"),
                consistent,
            )
            .await?;
        let (mut buckets, version) = match &item {
            Some(item) => {
                let (buckets, version) = Buckets::from_item(item, client)?;
                (buckets.rebucketed(width), Some(version))
            }
            None => (Buckets::new(width), None),
        };
        buckets.forget_before(now, window_ms);
        let available = u64::from(limit).saturating_sub(buckets.total());
        let granted = u32::try_from(available.min(u64::from(wanted))).unwrap_or(wanted);
        if granted > 0 {
            buckets.add(now, u64::from(granted));
            let mut e = Expr::new();
            // The item is of no use once its newest bucket has left the window.
            let last = buckets
                .counts
                .keys()
                .next_back()
                .map_or(now, |&i| buckets.last_ms(i));
            let expiry = Timestamp::from_millis(last.saturating_add(window_ms));
            e.set(BUCKETS, buckets.to_attribute())
                .set(BUCKET_MS, n(width))
                .set(
                    VERSION,
                    version_value(version.map_or(1, |v| v.saturating_add(1))),
                )
                .set(TTL, n(ttl_secs(expiry) + 1));
            let condition = match version {
                Some(v) => e.eq(VERSION, version_value(v)),
                None => e.not_exists(PK),
            };
            let parts = e.finish();
            match self.update(item_key, parts, Some(condition)).send().await {
                Ok(_) => {}
                Err(e) if is_condition_failed(&e) => return Ok(None),
                Err(e) => {
                    return Err(sdk_error(format!("recording grants of {client:?}"), e));
                }
            }
        }
        Ok(Some(Grant {
            granted,
            retry_at: (granted < wanted)
                .then(|| Timestamp::from_millis(buckets.retry_at(limit, window_ms, now))),
        }))
    }
}

#[async_trait]
impl RateLimiter for DynamoStore {
    async fn acquire(
        &self,
        client: &str,
        wanted: u32,
        limit: u32,
        window: Duration,
        now: Timestamp,
    ) -> Result<Grant, StoreError> {
        if wanted == 0 {
            return Ok(Grant {
                granted: 0,
                retry_at: None,
            });
        }
        let window_ms = window_millis(window);
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                backoff(attempt - 1).await;
            }
            if let Some(grant) = self
                .try_acquire(
                    client,
                    wanted,
                    limit,
                    window_ms,
                    now.as_millis(),
                    attempt > 0,
                )
                .await?
            {
                return Ok(grant);
            }
        }
        Err(StoreError::Conflict(format!(
            "the rate limit of {client:?} is contended: {ATTEMPTS} writes lost"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buckets(width: i64, counts: &[(i64, u64)]) -> Buckets {
        Buckets {
            width,
            counts: counts.iter().copied().collect(),
        }
    }

    #[test]
    fn a_bucket_counts_while_any_of_it_overlaps_the_window() {
        // 60 s window, 1 s buckets; bucket 5 is [5000, 6000).
        let mut b = buckets(1000, &[(4, 1), (5, 2), (70, 3)]);
        // At 65 999 the window is (5999, 65999]: bucket 5's last ms (5999) has left it.
        b.forget_before(65_999, 60_000);
        assert_eq!(b.counts, buckets(1000, &[(70, 3)]).counts);
        let mut b = buckets(1000, &[(4, 1), (5, 2)]);
        b.forget_before(65_998, 60_000);
        assert_eq!(b.total(), 2);
    }

    #[test]
    fn retry_at_is_when_enough_of_the_oldest_buckets_have_left() {
        let b = buckets(1000, &[(5, 2), (6, 3), (9, 5)]);
        // Full at 10: bucket 5 leaving frees two.
        assert_eq!(b.retry_at(10, 60_000, 10_000), 65_999);
        // Over a lowered limit of 6: buckets 5 and 6 must leave.
        assert_eq!(b.retry_at(6, 60_000, 10_000), 66_999);
        assert_eq!(buckets(1000, &[]).retry_at(0, 60_000, 10_000), 70_000);
        // Just left: not counted any more.
        let mut later = b.clone();
        later.forget_before(65_999, 60_000);
        assert_eq!(later.total(), 8);
    }

    #[test]
    fn a_new_width_moves_grants_later_never_earlier() {
        let b = buckets(1000, &[(5, 2), (6, 3)]).rebucketed(400);
        // [5000, 6000) → the bucket of 5999: [5600, 6000) = 14; [6000, 7000) → 6999: 17.
        assert_eq!(b.counts, buckets(400, &[(14, 2), (17, 3)]).counts);
        assert_eq!(Buckets::width_for(60_000), 1000);
        assert_eq!(Buckets::width_for(10), 1);
    }

    #[test]
    fn stored_items_round_trip_and_bad_ones_are_errors() {
        let b = buckets(100, &[(-1, 2), (17_000_000_000, 3)]);
        let item: Item = HashMap::from([
            (BUCKETS.to_owned(), b.to_attribute()),
            (BUCKET_MS.to_owned(), n(100)),
            (VERSION.to_owned(), n(4)),
        ]);
        assert_eq!(Buckets::from_item(&item, "c").ok(), Some((b, 4)));
        let mut bad = item.clone();
        bad.insert(BUCKETS.to_owned(), AttributeValue::S("x".into()));
        assert!(Buckets::from_item(&bad, "c").is_err());
        let mut bad = item;
        bad.insert(BUCKET_MS.to_owned(), n(0));
        assert!(Buckets::from_item(&bad, "c").is_err());
    }
}
