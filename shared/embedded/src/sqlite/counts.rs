//! Counter series ([`Documents::add_counts`](imgest_core::ports::Documents)) on the
//! `record_counts` table: one row per `(kind, key, bucket, name)`, added to in place.
//!
//! As with records, an expired row reads as absent and a later `add_counts` deletes a few
//! expired rows at a time once their grace period is over.

use std::time::Duration;

use rusqlite::{Connection, params};

use super::images::{commit, immediate};
use super::sql_error;
use imgest_core::domain::Timestamp;
use imgest_core::ports::{CountBucket, StoreError};

/// How long an expired row is kept before it may be deleted.
const DELETE_GRACE: Duration = Duration::from_secs(3600);
/// Expired rows deleted by one `add_counts`, at most.
const DELETE_BATCH: i64 = 32;

pub(super) fn add(
    conn: &mut Connection,
    kind: &str,
    key: &str,
    bucket: i64,
    counts: &[(String, u64)],
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<(), StoreError> {
    let tx = immediate(conn)?;
    {
        let mut st = tx
            .prepare_cached(
                "INSERT INTO record_counts (kind, key, bucket, name, value, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (kind, key, bucket, name) DO UPDATE \
                 SET value = value + excluded.value, \
                 expires_at = max(expires_at, excluded.expires_at)",
            )
            .map_err(|e| sql_error("adding to a count", e))?;
        for (name, value) in counts {
            let value = i64::try_from(*value)
                .map_err(|_| StoreError::corrupt(format!("sqlite: count {value} is too large")))?;
            st.execute(params![
                kind,
                key,
                bucket,
                name,
                value,
                expires_at.as_millis()
            ])
            .map_err(|e| sql_error("adding to a count", e))?;
        }
    }
    tx.prepare_cached(
        "DELETE FROM record_counts WHERE (kind, key, bucket, name) IN \
         (SELECT kind, key, bucket, name FROM record_counts WHERE expires_at <= ?1 LIMIT ?2)",
    )
    .and_then(|mut st| st.execute(params![now.minus(DELETE_GRACE).as_millis(), DELETE_BATCH]))
    .map_err(|e| sql_error("deleting expired counts", e))?;
    commit(tx)
}

pub(super) fn read(
    conn: &Connection,
    kind: &str,
    key: &str,
    from: i64,
    to: i64,
    now: Timestamp,
) -> Result<Vec<CountBucket>, StoreError> {
    let rows: Vec<(i64, String, i64)> = conn
        .prepare_cached(
            "SELECT bucket, name, value FROM record_counts WHERE kind = ?1 AND key = ?2 \
             AND bucket BETWEEN ?3 AND ?4 AND expires_at > ?5 ORDER BY bucket, name",
        )
        .and_then(|mut st| {
            st.query_map(params![kind, key, from, to, now.as_millis()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect()
        })
        .map_err(|e| sql_error("reading counts", e))?;
    let mut buckets: Vec<CountBucket> = Vec::new();
    for (bucket, name, value) in rows {
        let value = u64::try_from(value).map_err(|_| {
            StoreError::corrupt(format!("sqlite: count {kind}/{key:?} is negative"))
        })?;
        match buckets.last_mut() {
            Some(last) if last.bucket == bucket => {
                last.counts.insert(name, value);
            }
            _ => buckets.push(CountBucket {
                bucket,
                counts: [(name, value)].into(),
            }),
        }
    }
    Ok(buckets)
}
