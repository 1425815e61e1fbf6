//! Members of a record group ([`Documents::put_member`](imgest_core::ports::Documents)) on the
//! `record_members` table: one row per `(kind, group, member)`, read in member order.
//!
//! As with records, an expired row reads as absent and a later `put_member` deletes a few
//! expired rows at a time once their grace period is over.

use std::time::Duration;

use rusqlite::{Connection, params};

use super::images::{commit, immediate};
use super::{sql_error, sql_limit};
use imgest_core::domain::Timestamp;
use imgest_core::ports::{MemberPage, StoreError, walk_cursor, walk_cursor_key};

/// How long an expired row is kept before it may be deleted.
const DELETE_GRACE: Duration = Duration::from_secs(3600);
/// Expired rows deleted by one `put_member`, at most.
const DELETE_BATCH: i64 = 32;

pub(super) fn put(
    conn: &mut Connection,
    kind: &str,
    group: &str,
    member: &str,
    body: &str,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<(), StoreError> {
    let tx = immediate(conn)?;
    tx.prepare_cached(
        "INSERT INTO record_members (kind, grp, member, body, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (kind, grp, member) DO UPDATE SET \
         body = excluded.body, expires_at = excluded.expires_at",
    )
    .and_then(|mut st| st.execute(params![kind, group, member, body, expires_at.as_millis()]))
    .map_err(|e| sql_error("writing a record member", e))?;
    tx.prepare_cached(
        "DELETE FROM record_members WHERE (kind, grp, member) IN \
         (SELECT kind, grp, member FROM record_members WHERE expires_at <= ?1 LIMIT ?2)",
    )
    .and_then(|mut st| st.execute(params![now.minus(DELETE_GRACE).as_millis(), DELETE_BATCH]))
    .map_err(|e| sql_error("deleting expired record members", e))?;
    commit(tx)
}

pub(super) fn list(
    conn: &Connection,
    kind: &str,
    group: &str,
    cursor: Option<&str>,
    limit: usize,
    now: Timestamp,
) -> Result<MemberPage, StoreError> {
    let after = cursor
        .map(|c| walk_cursor_key("sqlite", group, c))
        .transpose()?;
    let limit = limit.max(1);
    // `>=` from the empty name for the first page, `>` after the cursor: either way SQLite seeks
    // the primary key.
    let sql = if after.is_some() {
        "SELECT member, body FROM record_members WHERE kind = ?1 AND grp = ?2 \
         AND member > ?3 AND expires_at > ?4 ORDER BY member LIMIT ?5"
    } else {
        "SELECT member, body FROM record_members WHERE kind = ?1 AND grp = ?2 \
         AND member >= ?3 AND expires_at > ?4 ORDER BY member LIMIT ?5"
    };
    let after = after.unwrap_or_default();
    let rows: Vec<(String, String)> = conn
        .prepare_cached(sql)
        .and_then(|mut st| {
            st.query_map(
                params![kind, group, after, now.as_millis(), sql_limit(limit)],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?
            .collect()
        })
        .map_err(|e| sql_error("reading record members", e))?;
    let next = (rows.len() >= limit)
        .then(|| rows.last().map(|(m, _)| walk_cursor(group, m)))
        .flatten();
    Ok(MemberPage {
        members: rows,
        next,
    })
}

pub(super) fn delete(
    conn: &mut Connection,
    kind: &str,
    group: &str,
    members: &[String],
) -> Result<(), StoreError> {
    let tx = immediate(conn)?;
    {
        let mut st = tx
            .prepare_cached(
                "DELETE FROM record_members WHERE kind = ?1 AND grp = ?2 AND member = ?3",
            )
            .map_err(|e| sql_error("deleting record members", e))?;
        for member in members {
            st.execute(params![kind, group, member])
                .map_err(|e| sql_error("deleting record members", e))?;
        }
    }
    commit(tx)
}
