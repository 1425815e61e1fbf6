//! `RateLimiter` on the `rate_grants` table: an exact sliding window log.
//!
//! Each `acquire` that grants something adds a row (client, time, permits). The grants that
//! count against a request at `now` are those after `now - window`, including any recorded at a
//! later time by a worker whose clock runs ahead (counting them is conservative: the limit
//! holds whichever worker's clock is right). Rows that left the window are deleted as the
//! client asks again, so a client holds at most about `limit` rows. Reading, granting and
//! recording happen in one `BEGIN IMMEDIATE` transaction, so concurrent workers, even in other
//! processes on the same file, never grant the same permit twice.

use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, params};

use super::images::{commit, immediate};
use super::{SqliteStore, sql_error};
use imgest_core::domain::Timestamp;
use imgest_core::ports::{Grant, RateLimiter, StoreError};

/// The earliest time after which the grants `log` (oldest first: time, permits) hold fewer
/// than `limit` permits: when enough of the oldest have left the window.
fn retry_at(log: &[(i64, u32)], limit: u32, window: Duration, now: Timestamp) -> Timestamp {
    let total: u64 = log.iter().map(|&(_, p)| u64::from(p)).sum();
    let excess = total.saturating_sub(u64::from(limit)).saturating_add(1);
    let mut left = 0_u64;
    for &(at, permits) in log {
        left += u64::from(permits);
        if left >= excess {
            // A grant at `at` is in the window (now - window, now] until now = at + window.
            return Timestamp::from_millis(at).plus(window);
        }
    }
    // Nothing to wait for, yet nothing granted: a zero limit. Ask again a window later.
    now.plus(window)
}

fn acquire_tx(
    conn: &mut Connection,
    client: &str,
    wanted: u32,
    limit: u32,
    window: Duration,
    now: Timestamp,
) -> Result<Grant, StoreError> {
    let tx = immediate(conn)?;
    let start = now.minus(window).as_millis();
    tx.prepare_cached("DELETE FROM rate_grants WHERE client = ?1 AND granted_at <= ?2")
        .and_then(|mut st| st.execute(params![client, start]))
        .map_err(|e| sql_error("forgetting old grants", e))?;
    let mut log: Vec<(i64, u32)> = tx
        .prepare_cached(
            "SELECT granted_at, permits FROM rate_grants WHERE client = ?1 \
             ORDER BY granted_at",
        )
        .and_then(|mut st| {
            st.query_map([client], |r| {
                let permits: i64 = r.get(1)?;
                Ok((r.get(0)?, u32::try_from(permits).unwrap_or(u32::MAX)))
            })?
            .collect()
        })
        .map_err(|e| sql_error("reading grants", e))?;
    let used: u64 = log.iter().map(|&(_, p)| u64::from(p)).sum();
    let available = u64::from(limit).saturating_sub(used);
    let granted = u32::try_from(available.min(u64::from(wanted))).unwrap_or(wanted);
    if granted > 0 {
        tx.prepare_cached(
            "INSERT INTO rate_grants (client, granted_at, permits) VALUES (?1, ?2, ?3)",
        )
        .and_then(|mut st| st.execute(params![client, now.as_millis(), granted]))
        .map_err(|e| sql_error("recording a grant", e))?;
        // Keep the log ordered: a grant from a clock behind another worker's goes before
        // theirs.
        let at = log.partition_point(|&(t, _)| t <= now.as_millis());
        log.insert(at, (now.as_millis(), granted));
    }
    commit(tx)?;
    Ok(Grant {
        granted,
        retry_at: (granted < wanted).then(|| retry_at(&log, limit, window, now)),
    })
}

#[async_trait]
impl RateLimiter for SqliteStore {
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
        let client = client.to_owned();
        self.run(move |conn| acquire_tx(conn, &client, wanted, limit, window, now))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timestamp = Timestamp::from_millis(1_000_000);
    const W: Duration = Duration::from_secs(10);

    #[test]
    fn retry_waits_for_enough_of_the_oldest_grants_to_leave() {
        let log = [(1_000, 2), (2_000, 3), (5_000, 5)];
        // Full (10 of 10): the first grant leaving frees a permit.
        assert_eq!(retry_at(&log, 10, W, T), Timestamp::from_millis(11_000));
        // Over a lowered limit of 6: 5 permits must leave, the first two grants.
        assert_eq!(retry_at(&log, 6, W, T), Timestamp::from_millis(12_000));
        // A zero limit with nothing granted: a window later.
        assert_eq!(retry_at(&[], 0, W, T), T.plus(W));
    }
}
