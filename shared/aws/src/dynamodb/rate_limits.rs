//! `RateLimiter` on per-bucket counters: a client's grants counted in buckets of a sixtieth of
//! its window, each bucket its own item, written only with `ADD`.
//!
//! Items `pk = ratelimit#{client}`, `sk = b#{width}#{index}` (width in ms, index zero-padded so
//! the buckets sort): `g` N (permits granted in the bucket) and `ttl` N (once the bucket has
//! left the window, so idle clients' items vanish).
//!
//! A request at `now` counts every bucket that overlaps `(now - window, now]` (as if each
//! bucket's grants were made at its last millisecond), so the limit is never exceeded, and at
//! saturation a client gets at least 60/61 ≈ 98.4 % of its limit. The earlier buckets of that
//! window are closed: nobody writes them any more, so their sum is read once per bucket per
//! process (one consistent `Query` of the client's buckets) and kept. The request itself is
//! one `UpdateItem` of the current bucket:
//!
//! ```text
//! ADD g :n SET ttl = :ttl   IF attribute_not_exists(g) OR g <= :room_minus_n
//! ```
//!
//! where `room` is the limit less the closed buckets' sum. The condition depends on nothing
//! the writer read of the current bucket, so concurrent writers never make each other retry:
//! each write succeeds while the bucket has room. A refused write returns the bucket as it is
//! (`ReturnValuesOnConditionCheckFailure`), and the rest of the room, if any, is asked for
//! once more. At most two writes and, once per bucket, one read: a hot client's limiter costs
//! one write per request at any concurrency, and its ceiling is the partition's, not a round
//! trip's.
//!
//! **A big client's counter is spread over partitions.** One item takes at most 1,000 writes
//! a second, and a client allowed ten thousand downloads a second (ten times seed 001's
//! biggest) writes its current bucket some 1,600 times a second. So a limit above
//! [`PERMITS_PER_S_PER_SHARD`] a second is split into [`rate_limit_shards`] counters, each
//! with its share of the limit (the shares add up to it) under a partition key of its own
//! (`ratelimit#{client}` for the first, as every client's was before, then
//! `ratelimit#{client}#1`, …), and the grants never pass the limit. Each process has a home
//! counter (picked at random once, so a function's many instances spread their writes and
//! reads evenly over the counters) and takes its permits from it; what its home cannot grant
//! is asked of the next counters in turn (a read of each once a bucket, and a write where the
//! read says there is room), only when the home ran short; what none grants waits for its
//! `retry_at`, as any other. So a counter's closed buckets are read by its home processes,
//! about a counter's share of the instances, and by every process only while the client is
//! held at its limit (a counter picked at random per request had every instance read every
//! counter once a second: 3,462 reads a second of each at ten times seed 001's peak, over a
//! partition's 3,000). A limit
//! changed across the threshold splits the counters differently: for one window the grants
//! already made count in the first counter only, so a raised or lowered limit may let up to
//! the old limit more through in that window.
//!
//! Workers' clocks are trusted to agree (as they must for any limiter keyed by the callers'
//! time): a grant a lagging worker records in a bucket after another worker read it as closed
//! counts in that worker's window only from its next read. The exposure is what is granted
//! within the skew, well under a bucket (a second at a one-minute window) with synchronised
//! clocks.

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};

use super::DynamoStore;
use super::item::{Expr, Item, PK, SK, TTL, n, s, ttl_secs};
use crate::sdk_error::sdk_error;
use imgest_core::domain::Timestamp;
use imgest_core::ports::{Grant, RateLimiter, StoreError};

const KIND: &str = "ratelimit";
const GRANTED: &str = "g";

/// Buckets per window.
const BUCKETS_PER_WINDOW: i64 = 60;

/// Permits a second one counter is given at most before a client's limit is split: some 300
/// writes a second on it at the batches the fetch functions ask for (6.5 permits a write at
/// the capacity model's peak), within a hot partition's 500.
pub const PERMITS_PER_S_PER_SHARD: u64 = 2_000;

/// The most counters a limit is split into.
pub const MAX_RATE_LIMIT_SHARDS: u64 = 16;

/// This process's home counter among a split limit's, before it is taken modulo their number:
/// picked at random once.
static HOME_COUNTER: LazyLock<u64> = LazyLock::new(|| fastrand::u64(..));

/// How many counters a limit of `limit` permits per `window` is split into: one until it
/// passes [`PERMITS_PER_S_PER_SHARD`] a second.
pub fn rate_limit_shards(limit: u32, window: Duration) -> u64 {
    let window_ms = u64::try_from(window_millis(window)).unwrap_or(1);
    let per_s = u64::from(limit).saturating_mul(1000) / window_ms;
    per_s
        .div_ceil(PERMITS_PER_S_PER_SHARD)
        .clamp(1, MAX_RATE_LIMIT_SHARDS)
}

/// Counter `shard`'s share of `limit` split `shards` ways: they add up to it.
fn share_of(limit: u32, shards: u64, shard: u64) -> u32 {
    let (limit, shards) = (u64::from(limit), shards.max(1));
    let share = limit / shards + u64::from(shard < limit % shards);
    u32::try_from(share).unwrap_or(u32::MAX)
}

/// The name counter `shard` of `client` is kept under: the client's own for the first (`#` is
/// in no client id nor upload budget's name, so no client's name is another's counter).
fn counter_name(client: &str, shard: u64) -> String {
    if shard == 0 {
        client.to_owned()
    } else {
        format!("{client}#{shard}")
    }
}

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

    /// The last millisecond a grant in bucket `i` may have been made at.
    fn last_ms(&self, i: i64) -> i64 {
        (i + 1).saturating_mul(self.width) - 1
    }

    /// The first bucket that may hold a grant in `(now - window, now]`.
    fn first_in_window(&self, now: i64, window_ms: i64) -> i64 {
        // The first bucket whose last millisecond is after `now - window`.
        (now - window_ms + 1).div_euclid(self.width)
    }

    /// Drops the buckets that cannot hold a grant in `(now - window, now]` (nor later).
    fn forget_before(&mut self, now: i64, window_ms: i64) {
        let first = self.first_in_window(now, window_ms);
        self.counts.retain(|&i, _| i >= first);
    }

    /// Permits in buckets `from..to`.
    fn sum(&self, from: i64, to: i64) -> u64 {
        self.counts.range(from..to).map(|(_, c)| c).sum()
    }

    /// The earliest time at which fewer than `limit` permits are in the window: when enough of
    /// the oldest buckets have left it.
    fn retry_at(&self, limit: u32, window_ms: i64, now: i64) -> i64 {
        let total: u64 = self.counts.values().sum();
        let excess = total.saturating_sub(u64::from(limit)).saturating_add(1);
        let mut left = 0;
        for (&i, &c) in &self.counts {
            left += c;
            if left >= excess {
                return self.last_ms(i).saturating_add(window_ms).max(now + 1);
            }
        }
        // Nothing to wait for, yet nothing granted: a zero limit. Ask again a window later.
        now.saturating_add(window_ms)
    }
}

/// What a process knows of one client's closed buckets.
#[derive(Debug, Clone)]
struct Known {
    buckets: Buckets,
    /// Buckets before this one were closed when read (and are in `buckets`).
    closed_before: i64,
}

/// The closed buckets each client's requests have read, per bucket width.
#[derive(Debug, Default)]
pub(crate) struct RateCache {
    known: Mutex<HashMap<(String, i64), Known>>,
}

/// The sort key of bucket `index` of `width` ms: zero-padded, so the buckets sort.
fn bucket_sk(width: i64, index: i64) -> String {
    format!("b#{width:013}#{index:016}")
}

fn window_millis(window: Duration) -> i64 {
    i64::try_from(window.as_millis()).unwrap_or(i64::MAX).max(1)
}

fn granted_of(item: &Item) -> Option<u64> {
    item.get(GRANTED)?.as_n().ok()?.parse().ok()
}

impl DynamoStore {
    /// The client's buckets of `width` from `from` to `to` (inclusive), read consistently.
    async fn read_buckets(
        &self,
        client: &str,
        width: i64,
        from: i64,
        to: i64,
    ) -> Result<BTreeMap<i64, u64>, StoreError> {
        let mut e = Expr::new();
        let condition = format!(
            "{} AND {} BETWEEN {} AND {}",
            e.eq(PK, s(format!("{KIND}#{client}"))),
            e.name(SK),
            e.value(s(bucket_sk(width, from.max(0)))),
            e.value(s(bucket_sk(width, to.max(0)))),
        );
        let parts = e.finish();
        let items = self
            .query_all(&condition, parts, true, || {
                format!("reading the rate limit of {client:?}")
            })
            .await?;
        let mut out = BTreeMap::new();
        for item in items {
            let index = item
                .get(SK)
                .and_then(|v| v.as_s().ok())
                .and_then(|sk| sk.rsplit('#').next()?.parse::<i64>().ok());
            if let (Some(index), Some(g)) = (index, granted_of(&item)) {
                out.insert(index, g);
            }
        }
        Ok(out)
    }

    /// The client's buckets in the window of `now`, the closed ones from the cache (read once
    /// per bucket), the current one as last read.
    async fn window_buckets(
        &self,
        client: &str,
        width: i64,
        now: i64,
        window_ms: i64,
    ) -> Result<Buckets, StoreError> {
        let current = now.div_euclid(width);
        let key = (client.to_owned(), width);
        let cached = self
            .rate_cache
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        let mut buckets = match cached {
            Some(known) if known.closed_before >= current => known.buckets,
            _ => {
                let mut b = Buckets::new(width);
                b.counts = self
                    .read_buckets(client, width, b.first_in_window(now, window_ms), current)
                    .await?;
                b
            }
        };
        buckets.forget_before(now, window_ms);
        let mut closed = buckets.clone();
        closed.counts.retain(|&i, _| i < current);
        let mut known = self
            .rate_cache
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if known.len() >= 100_000 {
            known.clear();
        }
        let entry = known.entry(key).or_insert_with(|| Known {
            buckets: Buckets::new(width),
            closed_before: i64::MIN,
        });
        if current >= entry.closed_before {
            *entry = Known {
                buckets: closed,
                closed_before: current,
            };
        }
        Ok(buckets)
    }

    /// Adds `permits` to the current bucket if it then holds at most `room`: `Ok(Ok(()))`, or
    /// `Ok(Err(g))` with what the bucket holds when it would not.
    async fn add_to_bucket(
        &self,
        client: &str,
        width: i64,
        index: i64,
        permits: u64,
        room: u64,
        expires: Timestamp,
    ) -> Result<Result<(), u64>, StoreError> {
        let mut e = Expr::new();
        e.add(GRANTED, i64::try_from(permits).unwrap_or(i64::MAX))
            .set(TTL, n(ttl_secs(expires) + 1));
        let condition = format!(
            "{} OR {}",
            e.not_exists(GRANTED),
            e.cmp(
                GRANTED,
                "<=",
                n(i64::try_from(room - permits).unwrap_or(i64::MAX))
            ),
        );
        let key = HashMap::from([
            (PK.to_owned(), s(format!("{KIND}#{client}"))),
            (SK.to_owned(), s(bucket_sk(width, index))),
        ]);
        let sent = self
            .update(key.clone(), e.finish(), Some(condition))
            .return_values(ReturnValue::None)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(Ok(())),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    let held = match failed.item().and_then(granted_of) {
                        Some(g) => g,
                        // An emulator that does not return the item: read it.
                        None => self
                            .read_item(key, "reading a rate-limit bucket", true)
                            .await?
                            .as_ref()
                            .and_then(granted_of)
                            .unwrap_or(room),
                    };
                    Ok(Err(held))
                }
                _ => Err(sdk_error(format!("recording grants of {client:?}"), err)),
            },
        }
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
        let shards = rate_limit_shards(limit, window);
        let home = *HOME_COUNTER % shards;
        let mut granted = 0;
        let mut retry_at: Option<Timestamp> = None;
        // The home counter, then, only when it ran short, the others in turn.
        for k in 0..shards {
            let grant = self
                .acquire_from(
                    client,
                    (home + k) % shards,
                    shards,
                    wanted - granted,
                    limit,
                    window,
                    now,
                )
                .await?;
            granted += grant.granted;
            retry_at = match (retry_at, grant.retry_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if granted == wanted {
                break;
            }
        }
        Ok(Grant {
            granted,
            retry_at: (granted < wanted).then_some(()).and(retry_at),
        })
    }
}

impl DynamoStore {
    /// What counter `shard` of `client`'s `shards` grants of `wanted`.
    #[allow(clippy::too_many_arguments)]
    async fn acquire_from(
        &self,
        client: &str,
        shard: u64,
        shards: u64,
        wanted: u32,
        limit: u32,
        window: Duration,
        now: Timestamp,
    ) -> Result<Grant, StoreError> {
        let window_ms = window_millis(window);
        let width = Buckets::width_for(window_ms);
        let now_ms = now.as_millis();
        let current = now_ms.div_euclid(width);
        let (client, limit) = (&counter_name(client, shard), share_of(limit, shards, shard));
        let mut buckets = self
            .window_buckets(client, width, now_ms, window_ms)
            .await?;
        let closed = buckets.sum(i64::MIN, current);
        let room = u64::from(limit).saturating_sub(closed);
        let expires = Timestamp::from_millis(buckets.last_ms(current).saturating_add(window_ms));
        let mut held = buckets.counts.get(&current).copied().unwrap_or(0);
        let mut granted = 0;
        // At most two writes: what was asked for, then what is left of the room.
        for _ in 0..2 {
            let ask = u64::from(wanted).min(room.saturating_sub(held));
            if ask == 0 {
                break;
            }
            match self
                .add_to_bucket(client, width, current, ask, room, expires)
                .await?
            {
                Ok(()) => {
                    granted = ask;
                    held += ask;
                    break;
                }
                Err(now_held) => held = now_held,
            }
        }
        buckets.counts.insert(current, held);
        let granted = u32::try_from(granted).unwrap_or(wanted);
        Ok(Grant {
            granted,
            retry_at: (granted < wanted)
                .then(|| Timestamp::from_millis(buckets.retry_at(limit, window_ms, now_ms))),
        })
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
        assert_eq!(b.sum(i64::MIN, i64::MAX), 2);
        assert_eq!(b.first_in_window(65_998, 60_000), 5);
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
        assert_eq!(later.sum(i64::MIN, i64::MAX), 8);
    }

    #[test]
    fn a_limit_is_split_past_its_threshold_into_shares_that_add_up_to_it() {
        let minute = Duration::from_secs(60);
        assert_eq!(rate_limit_shards(600, minute), 1, "ClientRpm's default");
        assert_eq!(rate_limit_shards(120_000, minute), 1, "2,000 a second");
        assert_eq!(rate_limit_shards(120_060, minute), 2);
        assert_eq!(
            rate_limit_shards(632_600, minute),
            6,
            "ten times the biggest"
        );
        assert_eq!(rate_limit_shards(u32::MAX, minute), MAX_RATE_LIMIT_SHARDS);
        assert_eq!(
            rate_limit_shards(5, Duration::from_millis(1)),
            3,
            "5,000 a second"
        );
        assert_eq!(rate_limit_shards(0, minute), 1);
        for (limit, shards) in [(632_600, 6), (7, 3), (0, 4), (u32::MAX, 16)] {
            let total: u64 = (0..shards)
                .map(|s| u64::from(share_of(limit, shards, s)))
                .sum();
            assert_eq!(total, u64::from(limit), "{limit} over {shards}");
        }
        assert_eq!(counter_name("acme", 0), "acme");
        assert_eq!(counter_name("acme", 3), "acme#3");
    }

    #[test]
    fn bucket_keys_sort_by_width_then_index() {
        assert!(bucket_sk(1000, 9) < bucket_sk(1000, 10));
        assert!(bucket_sk(1000, 1_700_000_000) < bucket_sk(1000, 1_700_000_001));
        assert_eq!(Buckets::width_for(60_000), 1000);
        assert_eq!(Buckets::width_for(10), 1);
    }
}
