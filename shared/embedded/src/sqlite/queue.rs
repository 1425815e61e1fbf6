//! `TaskQueue` on the `tasks` and `dead_letters` tables.
//!
//! Modelled on a Redis sorted-set queue with unique members: `(queue, key)` is the primary key,
//! so enqueueing a pending key replaces it. A lease is a random receipt plus `leased_until`;
//! `ack`, `retry` and `dead_letter` only act while the row still carries the caller's receipt.

use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::images::{commit, immediate};
use super::{SqliteStore, sql_error, sql_limit};
use imgest_core::domain::Timestamp;
use imgest_core::ports::{
    DeadLetter, Delivery, Enqueued, QueueCounts, Reason, RedriveKinds, StoreError, TaskQueue,
};

fn new_receipt() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

fn attempts(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The next value of the enqueue-order counter (inside the caller's write transaction).
fn next_seq(conn: &Connection) -> Result<i64, StoreError> {
    conn.prepare_cached(
        "INSERT INTO counters (name, value) VALUES ('enqueue_seq', 1) \
         ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value",
    )
    .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
    .map_err(|e| sql_error("advancing the enqueue counter", e))
}

fn enqueue_tx(
    conn: &mut Connection,
    queue: &str,
    key: &str,
    payload: &str,
    run_at: Timestamp,
) -> Result<Enqueued, StoreError> {
    let tx = immediate(conn)?;
    let seq = next_seq(&tx)?;
    let replaced = tx
        .execute(
            "UPDATE tasks SET payload = ?3, run_at = ?4, attempts = 0, receipt = NULL, \
             leased_until = NULL, enqueued_seq = ?5 WHERE queue = ?1 AND key = ?2",
            params![queue, key, payload, run_at.as_millis(), seq],
        )
        .map_err(|e| sql_error("replacing a task", e))?
        > 0;
    if !replaced {
        tx.execute(
            "INSERT INTO tasks (queue, key, payload, run_at, attempts, enqueued_seq) \
             VALUES (?1, ?2, ?3, ?4, 0, ?5)",
            params![queue, key, payload, run_at.as_millis(), seq],
        )
        .map_err(|e| sql_error("enqueueing a task", e))?;
    }
    commit(tx)?;
    Ok(if replaced {
        Enqueued::Replaced
    } else {
        Enqueued::New
    })
}

/// Whether `queue` has a task that `receive` would lease at `now`.
fn any_due(conn: &Connection, queue: &str, now: Timestamp) -> Result<bool, StoreError> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE queue = ?1 AND run_at <= ?2 \
         AND (leased_until IS NULL OR leased_until <= ?2))",
    )
    .and_then(|mut stmt| stmt.query_row(params![queue, now.as_millis()], |r| r.get(0)))
    .map_err(|e| sql_error("looking for due tasks", e))
}

fn receive_tx(
    conn: &mut Connection,
    queue: &str,
    now: Timestamp,
    max: usize,
    visibility: Duration,
) -> Result<Vec<Delivery>, StoreError> {
    let tx = immediate(conn)?;
    let due: Vec<String> = tx
        .prepare_cached(
            "SELECT key FROM tasks WHERE queue = ?1 AND run_at <= ?2 \
             AND (leased_until IS NULL OR leased_until <= ?2) \
             ORDER BY run_at, enqueued_seq LIMIT ?3",
        )
        .and_then(|mut stmt| {
            stmt.query_map(params![queue, now.as_millis(), sql_limit(max)], |r| {
                r.get(0)
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| sql_error("finding due tasks", e))?;
    let leased_until = now.plus(visibility).as_millis();
    let mut deliveries = Vec::with_capacity(due.len());
    {
        let mut lease = tx
            .prepare_cached(
                "UPDATE tasks SET receipt = ?3, leased_until = ?4, attempts = attempts + 1 \
                 WHERE queue = ?1 AND key = ?2 RETURNING payload, attempts",
            )
            .map_err(|e| sql_error("leasing tasks", e))?;
        for key in due {
            let receipt = new_receipt();
            let (payload, n): (String, i64) = lease
                .query_row(params![queue, key, receipt, leased_until], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .map_err(|e| sql_error("leasing a task", e))?;
            deliveries.push(Delivery {
                queue: queue.to_owned(),
                key,
                payload,
                attempts: attempts(n),
                receipt,
            });
        }
    }
    commit(tx)?;
    Ok(deliveries)
}

/// Adds a row to the dead letters (inside the caller's write transaction).
fn insert_dead_letter(
    conn: &Connection,
    queue: &str,
    letter: &DeadLetter,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO dead_letters (queue, key, payload, attempts, kind, reason, failed_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            queue,
            letter.key,
            letter.payload,
            letter.attempts,
            letter.reason.kind,
            letter.reason.message,
            letter.failed_at.as_millis()
        ],
    )
    .map_err(|e| sql_error("writing a dead letter", e))?;
    Ok(())
}

fn dead_letter_tx(
    conn: &mut Connection,
    delivery: &Delivery,
    reason: &Reason,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let tx = immediate(conn)?;
    let task: Option<(String, i64)> = tx
        .query_row(
            "SELECT payload, attempts FROM tasks WHERE queue = ?1 AND key = ?2 AND receipt = ?3",
            params![delivery.queue, delivery.key, delivery.receipt],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| sql_error("reading a task", e))?;
    let Some((payload, attempts)) = task else {
        return Ok(false);
    };
    let letter = DeadLetter {
        key: delivery.key.clone(),
        payload,
        attempts: self::attempts(attempts),
        reason: reason.clone(),
        failed_at: now,
    };
    insert_dead_letter(&tx, &delivery.queue, &letter)?;
    tx.execute(
        "DELETE FROM tasks WHERE queue = ?1 AND key = ?2",
        params![delivery.queue, delivery.key],
    )
    .map_err(|e| sql_error("removing a dead task", e))?;
    commit(tx)?;
    Ok(true)
}

#[async_trait]
impl TaskQueue for SqliteStore {
    async fn enqueue(
        &self,
        queue: &str,
        key: &str,
        payload: &str,
        run_at: Timestamp,
    ) -> Result<Enqueued, StoreError> {
        let (queue, key, payload) = (queue.to_owned(), key.to_owned(), payload.to_owned());
        self.run(move |conn| enqueue_tx(conn, &queue, &key, &payload, run_at))
            .await
    }

    async fn receive(
        &self,
        queue: &str,
        now: Timestamp,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<Delivery>, StoreError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        // Idle pools ask often; a look that finds nothing due is one read on this thread, not
        // a write transaction on the blocking pool.
        if let Some(due) = self.try_read_now(|conn| any_due(conn, queue, now))
            && !due?
        {
            return Ok(Vec::new());
        }
        let queue = queue.to_owned();
        self.run(move |conn| receive_tx(conn, &queue, now, max, visibility))
            .await
    }

    async fn ack(&self, delivery: &Delivery) -> Result<bool, StoreError> {
        let d = delivery.clone();
        self.run(move |conn| {
            conn.execute(
                "DELETE FROM tasks WHERE queue = ?1 AND key = ?2 AND receipt = ?3",
                params![d.queue, d.key, d.receipt],
            )
            .map(|n| n > 0)
            .map_err(|e| sql_error("acknowledging a task", e))
        })
        .await
    }

    async fn retry(&self, delivery: &Delivery, run_at: Timestamp) -> Result<bool, StoreError> {
        let d = delivery.clone();
        self.run(move |conn| {
            conn.execute(
                "UPDATE tasks SET run_at = ?4, receipt = NULL, leased_until = NULL \
                 WHERE queue = ?1 AND key = ?2 AND receipt = ?3",
                params![d.queue, d.key, d.receipt, run_at.as_millis()],
            )
            .map(|n| n > 0)
            .map_err(|e| sql_error("retrying a task", e))
        })
        .await
    }

    async fn dead_letter(
        &self,
        delivery: &Delivery,
        reason: &Reason,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let (d, reason) = (delivery.clone(), reason.clone());
        self.run(move |conn| dead_letter_tx(conn, &d, &reason, now))
            .await
    }

    async fn add_dead_letter(&self, queue: &str, letter: &DeadLetter) -> Result<(), StoreError> {
        let (queue, letter) = (queue.to_owned(), letter.clone());
        self.run(move |conn| insert_dead_letter(conn, &queue, &letter))
            .await
    }

    async fn counts(&self, queue: &str, now: Timestamp) -> Result<QueueCounts, StoreError> {
        let queue = queue.to_owned();
        self.run(move |conn| {
            // One statement: one consistent snapshot of both tables. A NULL lease is no lease.
            conn.query_row(
                "SELECT \
                   COALESCE(SUM((leased_until > ?2) IS NOT 1 AND run_at <= ?2), 0), \
                   COALESCE(SUM((leased_until > ?2) IS NOT 1 AND run_at > ?2), 0), \
                   COALESCE(SUM((leased_until > ?2) IS 1), 0), \
                   (SELECT COUNT(*) FROM dead_letters WHERE queue = ?1) \
                 FROM tasks WHERE queue = ?1",
                params![queue, now.as_millis()],
                |r| {
                    Ok(QueueCounts {
                        ready: count(r.get(0)?),
                        delayed: count(r.get(1)?),
                        in_flight: count(r.get(2)?),
                        dead: count(r.get(3)?),
                    })
                },
            )
            .map_err(|e| sql_error("counting tasks", e))
        })
        .await
    }

    async fn dead_letters(&self, queue: &str, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let queue = queue.to_owned();
        self.run(move |conn| {
            conn.prepare_cached(
                "SELECT key, payload, attempts, kind, reason, failed_at FROM dead_letters \
                 WHERE queue = ?1 ORDER BY failed_at DESC, seq DESC LIMIT ?2",
            )
            .and_then(|mut stmt| {
                stmt.query_map(params![queue, sql_limit(limit)], |r| {
                    Ok(DeadLetter {
                        key: r.get(0)?,
                        payload: r.get(1)?,
                        attempts: attempts(r.get(2)?),
                        reason: Reason {
                            kind: r.get(3)?,
                            message: r.get(4)?,
                        },
                        failed_at: Timestamp::from_millis(r.get(5)?),
                    })
                })?
                .collect()
            })
            .map_err(|e| sql_error("listing dead letters", e))
        })
        .await
    }

    async fn release_leases(&self, queue: &str) -> Result<u64, StoreError> {
        let queue = queue.to_owned();
        self.run(move |conn| {
            conn.execute(
                "UPDATE tasks SET receipt = NULL, leased_until = NULL \
                 WHERE queue = ?1 AND receipt IS NOT NULL",
                params![queue],
            )
            .map(|n| n as u64)
            .map_err(|e| sql_error("releasing leases", e))
        })
        .await
    }

    async fn redrive(
        &self,
        queue: &str,
        max: usize,
        kinds: &RedriveKinds,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let (queue, kinds) = (queue.to_owned(), kinds.clone());
        self.run(move |conn| redrive_tx(conn, &queue, max, &kinds, now))
            .await
    }
}

fn redrive_tx(
    conn: &mut Connection,
    queue: &str,
    max: usize,
    kinds: &RedriveKinds,
    now: Timestamp,
) -> Result<u64, StoreError> {
    let tx = immediate(conn)?;
    // The kinds are few and the list is read in order: filtered here, the oldest `max` that
    // the redrive takes.
    let letters: Vec<(i64, String, String)> = tx
        .prepare_cached(
            "SELECT seq, key, payload, kind FROM dead_letters WHERE queue = ?1 \
             ORDER BY failed_at, seq",
        )
        .and_then(|mut stmt| {
            stmt.query_map(params![queue], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, String>(3)?))
            })?
            .filter(|row| {
                row.as_ref()
                    .map_or(true, |(_, _, _, kind)| kinds.takes(Some(kind)))
            })
            .take(max)
            .map(|row| row.map(|(seq, key, payload, _)| (seq, key, payload)))
            .collect()
        })
        .map_err(|e| sql_error("reading dead letters", e))?;
    let mut moved = 0;
    for (seq, key, payload) in letters {
        let order = next_seq(&tx)?;
        moved += tx
            .execute(
                "INSERT INTO tasks (queue, key, payload, run_at, attempts, enqueued_seq) \
                 VALUES (?1, ?2, ?3, ?4, 0, ?5) ON CONFLICT (queue, key) DO NOTHING",
                params![queue, key, payload, now.as_millis(), order],
            )
            .map_err(|e| sql_error("redriving a dead letter", e))? as u64;
        tx.execute("DELETE FROM dead_letters WHERE seq = ?1", params![seq])
            .map_err(|e| sql_error("removing a redriven dead letter", e))?;
    }
    commit(tx)?;
    Ok(moved)
}
