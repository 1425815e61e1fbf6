//! Counter series ([`Documents::add_counts`](imgest_core::ports::Documents)).
//!
//! Item `pk = ctr#{kind}#{key}#s{shard}`, `sk = b#{bucket}` (zero-padded so buckets sort):
//! `c_{name}` N per count, `expires_at` N ms and `ttl` N (epoch seconds, an hour after
//! `expires_at`). An add is one `UpdateItem` of `ADD` and `SET` with no condition: it reads
//! nothing, so any number of writers add to one series and never retry. A series is spread
//! over [`COUNTER_SHARDS`] partitions: each add goes to the next shard of its process's
//! round (started at a random one), so a hot host's series takes that many partitions' write
//! rate (at ten times seed 001's peak the biggest host's adds are about 1,100 write units a
//! second, past one partition's hot half). A read is one eventually consistent `Query` of the
//! buckets in range per shard, side by side, the shards' counts summed per bucket; it also
//! reads the series' unsharded partition (`ctr#{kind}#{key}`), where adds went before the
//! shards, until its buckets expire. The `ctr#` prefix keeps the items out of the image
//! stream's filter and the GC index.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;

use super::DynamoStore;
use super::item::{Attrs, Expr, Item, PK, SK, TTL, ms, n, s, ttl_secs};
use crate::sdk_error::sdk_error;
use imgest_core::domain::Timestamp;
use imgest_core::ports::{CountBucket, StoreError, check_counts};

const KIND: &str = "ctr";
const EXPIRES_AT: &str = "expires_at";
/// A count's attribute is its name after this prefix.
const COUNT_PREFIX: &str = "c_";
/// How long after expiry the TTL deleter may remove an item (as for records).
const TTL_GRACE: Duration = Duration::from_secs(3600);

fn series_pk(kind: &str, key: &str) -> Result<String, StoreError> {
    if kind.contains('#') {
        return Err(StoreError::corrupt(format!(
            "dynamodb: counter kind {kind:?} contains '#'"
        )));
    }
    Ok(format!("{KIND}#{kind}#{key}"))
}

/// Partitions a counter series is spread over (the capacity model divides a series' adds by
/// it).
pub const COUNTER_SHARDS: u32 = 8;

/// The shard of the series' next add: a round per process, from a random start, so the
/// processes' adds spread evenly however few each makes.
fn next_shard() -> u32 {
    static NEXT: OnceLock<AtomicU32> = OnceLock::new();
    NEXT.get_or_init(|| AtomicU32::new(fastrand::u32(..)))
        .fetch_add(1, Ordering::Relaxed)
        % COUNTER_SHARDS
}

fn shard_pk(series: &str, shard: u32) -> String {
    format!("{series}#s{shard}")
}

fn bucket_sk(bucket: i64) -> String {
    format!("b#{bucket:019}")
}

fn bucket_key(pk: &str, bucket: i64) -> Item {
    Item::from([
        (PK.to_owned(), s(pk)),
        (SK.to_owned(), s(bucket_sk(bucket))),
    ])
}

impl DynamoStore {
    pub(super) async fn add_count_item(
        &self,
        kind: &str,
        key: &str,
        bucket: i64,
        counts: &[(&str, u64)],
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        check_counts("dynamodb", bucket, counts.iter().map(|(name, _)| *name))?;
        let pk = shard_pk(&series_pk(kind, key)?, next_shard());
        let mut e = Expr::new();
        for (name, value) in counts {
            let value = i64::try_from(*value).map_err(|_| {
                StoreError::corrupt(format!("dynamodb: count {value} is too large"))
            })?;
            e.add(&format!("{COUNT_PREFIX}{name}"), value);
        }
        e.set(EXPIRES_AT, ms(expires_at))
            .set(TTL, n(ttl_secs(expires_at.plus(TTL_GRACE))));
        let parts = e.finish();
        self.update(bucket_key(&pk, bucket), parts, None)
            .send()
            .await
            .map_err(|e| sdk_error(format!("adding to bucket {bucket} of {pk}"), e))?;
        Ok(())
    }

    pub(super) async fn read_count_items(
        &self,
        kind: &str,
        key: &str,
        from: i64,
        to: i64,
        now: Timestamp,
    ) -> Result<Vec<CountBucket>, StoreError> {
        let series = series_pk(kind, key)?;
        if to < from || to < 0 {
            return Ok(Vec::new());
        }
        // The shards and the partition the series had before them, side by side.
        let partitions: Vec<String> = (0..COUNTER_SHARDS)
            .map(|shard| shard_pk(&series, shard))
            .chain(std::iter::once(series.clone()))
            .collect();
        let read = partitions
            .iter()
            .map(|pk| self.read_partition(pk, from, to, now));
        let mut merged: BTreeMap<i64, BTreeMap<String, u64>> = BTreeMap::new();
        for buckets in futures_util::future::try_join_all(read).await? {
            for b in buckets {
                let counts = merged.entry(b.bucket).or_default();
                for (name, value) in b.counts {
                    *counts.entry(name).or_default() += value;
                }
            }
        }
        Ok(merged
            .into_iter()
            .map(|(bucket, counts)| CountBucket { bucket, counts })
            .collect())
    }

    /// One partition's buckets from `from` to `to`, unexpired at `now`.
    async fn read_partition(
        &self,
        pk: &str,
        from: i64,
        to: i64,
        now: Timestamp,
    ) -> Result<Vec<CountBucket>, StoreError> {
        let mut e = Expr::new();
        let condition = format!(
            "{} AND {} BETWEEN {} AND {}",
            e.eq(PK, s(pk)),
            e.name(SK),
            e.value(s(bucket_sk(from.max(0)))),
            e.value(s(bucket_sk(to))),
        );
        let parts = e.finish();
        // Eventually consistent: learning is advice, and a second's lag costs nothing.
        let items = self
            .query_all(&condition, parts, false, || {
                format!("reading the counts of {pk}")
            })
            .await?;
        let mut buckets = Vec::with_capacity(items.len());
        for item in &items {
            if let Some(bucket) = bucket_of(item, pk, now)? {
                buckets.push(bucket);
            }
        }
        Ok(buckets)
    }
}

/// A stored bucket, unless it expired at or before `now`.
fn bucket_of(item: &Item, pk: &str, now: Timestamp) -> Result<Option<CountBucket>, StoreError> {
    let what = format!("a bucket of {pk}");
    let a = Attrs::new(item, &what);
    if a.time(EXPIRES_AT)? <= now {
        return Ok(None);
    }
    let bucket = a
        .s(SK)?
        .strip_prefix("b#")
        .and_then(|b| b.parse::<i64>().ok())
        .ok_or_else(|| a.corrupt(SK, "is not a bucket's"))?;
    let mut counts = BTreeMap::new();
    for (attr, value) in item {
        let Some(name) = attr.strip_prefix(COUNT_PREFIX) else {
            continue;
        };
        let value = match value {
            AttributeValue::N(v) => v.parse::<u64>().ok(),
            _ => None,
        }
        .ok_or_else(|| a.corrupt(attr, "is not a count"))?;
        counts.insert(name.to_owned(), value);
    }
    Ok(Some(CountBucket { bucket, counts }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_processs_adds_go_round_the_shards() {
        let first = next_shard();
        let round: Vec<u32> = (1..=COUNTER_SHARDS).map(|_| next_shard()).collect();
        assert!(round.iter().all(|s| *s < COUNTER_SHARDS));
        // Consecutive adds of one process take every shard in turn (no other test here adds).
        let mut seen: Vec<u32> = round.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(
            seen.len(),
            COUNTER_SHARDS as usize,
            "{first} then {round:?}"
        );
        assert_eq!(
            shard_pk("ctr#host#cdn.example", 3),
            "ctr#host#cdn.example#s3"
        );
    }

    #[test]
    fn buckets_sort_as_numbers_and_series_stay_apart_from_records() {
        assert!(bucket_sk(9) < bucket_sk(10));
        assert!(bucket_sk(10) < bucket_sk(170_000_000_000));
        assert_eq!(
            series_pk("host", "cdn.example").unwrap(),
            "ctr#host#cdn.example"
        );
        assert!(series_pk("ho#st", "x").is_err());
    }
}
