//! `Documents` on the `records` table: one row per `(kind, key)` with its JSON body, version and
//! expiry.
//!
//! An expired row reads as absent but is kept for [`DELETE_GRACE`] before a later `put_document`
//! deletes it (a few at a time, so no write pays for a backlog). While the row is kept, the next
//! version is derived from it; once it is gone, from the clock (see [`next_version`]), so a
//! writer that read a version before the record expired can never match a newer record's.
//!
//! A walk of one kind ([`Documents::scan_documents`]) reads the primary key in key order, each page
//! starting after the last key of the one before (carried in the cursor), so a record present
//! throughout is read once however the rows around it change.

use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::images::{commit, immediate};
use super::{SqliteStore, sql_error, sql_limit};
use imgest_core::domain::Timestamp;
use imgest_core::ports::{
    CountBucket, DocumentPage, Documents, MemberPage, StoreError, StoredDocument, walk_cursor,
    walk_cursor_key,
};

/// How long an expired row is kept before it may be deleted.
const DELETE_GRACE: Duration = Duration::from_secs(3600);
/// Expired rows deleted by one `put_document`, at most.
const DELETE_BATCH: i64 = 32;

/// The version a write gives a key whose stored version is `previous`: one more, and never less
/// than the clock in milliseconds. Versions therefore keep increasing even after an expired row
/// was deleted (a new record starts past every version written before its predecessor expired,
/// unless a key was written more than once per millisecond for the whole grace period).
fn next_version(previous: Option<u64>, now: Timestamp) -> u64 {
    let floor = u64::try_from(now.as_millis()).unwrap_or(0);
    previous
        .map_or(0, |v| v.saturating_add(1))
        .max(floor)
        .max(1)
}

fn version_of(n: i64, kind: &str, key: &str) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| {
        StoreError::corrupt(format!(
            "sqlite: record {kind}/{key:?} has a negative version {n}"
        ))
    })
}

fn to_sql_version(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::corrupt(format!("sqlite: version {v} is too large")))
}

fn put_tx(
    conn: &mut Connection,
    kind: &str,
    key: &str,
    body: &str,
    expected: Option<u64>,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<u64, StoreError> {
    let tx = immediate(conn)?;
    let stored: Option<(i64, i64)> = tx
        .prepare_cached("SELECT version, expires_at FROM records WHERE kind = ?1 AND key = ?2")
        .and_then(|mut st| {
            st.query_row(params![kind, key], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(|e| sql_error("reading a record", e))?;
    let stored = stored
        .map(|(v, exp)| Ok::<_, StoreError>((version_of(v, kind, key)?, exp)))
        .transpose()?;
    let live = stored
        .filter(|&(_, exp)| exp > now.as_millis())
        .map(|(v, _)| v);
    if live != expected {
        return Err(StoreError::Conflict(format!(
            "record {kind}/{key:?} is at version {live:?}, not {expected:?}"
        )));
    }
    let version = next_version(stored.map(|(v, _)| v), now);
    let sql_version = to_sql_version(version)?;
    tx.prepare_cached(
        "INSERT INTO records (kind, key, body, version, expires_at) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (kind, key) DO UPDATE SET body = excluded.body, \
         version = excluded.version, expires_at = excluded.expires_at",
    )
    .and_then(|mut st| {
        st.execute(params![
            kind,
            key,
            body,
            sql_version,
            expires_at.as_millis()
        ])
    })
    .map_err(|e| sql_error("writing a record", e))?;
    // Opportunistic clean-up, bounded; the row just written is live, so it is never one of them.
    tx.prepare_cached(
        "DELETE FROM records WHERE (kind, key) IN \
         (SELECT kind, key FROM records WHERE expires_at <= ?1 LIMIT ?2)",
    )
    .and_then(|mut st| st.execute(params![now.minus(DELETE_GRACE).as_millis(), DELETE_BATCH]))
    .map_err(|e| sql_error("deleting expired records", e))?;
    commit(tx)?;
    Ok(version)
}

fn scan_page(
    conn: &Connection,
    kind: &str,
    cursor: Option<&str>,
    limit: usize,
    now: Timestamp,
) -> Result<DocumentPage, StoreError> {
    let after = cursor
        .map(|c| walk_cursor_key("sqlite", kind, c))
        .transpose()?;
    let limit = limit.max(1);
    // Two statements rather than `(?2 IS NULL OR key > ?2)`, which would keep SQLite from
    // seeking the primary key to the cursor.
    let sql = match after {
        None => {
            "SELECT key, body, version FROM records \
             WHERE kind = ?1 AND expires_at > ?2 ORDER BY key LIMIT ?3"
        }
        Some(_) => {
            "SELECT key, body, version FROM records \
             WHERE kind = ?1 AND expires_at > ?2 AND key > ?4 ORDER BY key LIMIT ?3"
        }
    };
    let rows: Vec<(String, String, i64)> = conn
        .prepare_cached(sql)
        .and_then(|mut st| {
            let row = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?));
            match &after {
                None => st.query_map(params![kind, now.as_millis(), sql_limit(limit)], row),
                Some(after) => {
                    st.query_map(params![kind, now.as_millis(), sql_limit(limit), after], row)
                }
            }?
            .collect()
        })
        .map_err(|e| sql_error("walking records", e))?;
    // A full page may be the last one: the next then comes back empty, with no next.
    let next = if rows.len() >= limit {
        rows.last().map(|(key, _, _)| walk_cursor(kind, key))
    } else {
        None
    };
    let records = rows
        .into_iter()
        .map(|(key, body, v)| {
            let version = version_of(v, kind, &key)?;
            Ok((key, StoredDocument { body, version }))
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(DocumentPage {
        documents: records,
        next,
    })
}

#[async_trait]
impl Documents for SqliteStore {
    async fn get_document(
        &self,
        kind: &str,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredDocument>, StoreError> {
        let (kind, key) = (kind.to_owned(), key.to_owned());
        self.run(move |conn| {
            let row: Option<(String, i64)> = conn
                .prepare_cached(
                    "SELECT body, version FROM records \
                     WHERE kind = ?1 AND key = ?2 AND expires_at > ?3",
                )
                .and_then(|mut st| {
                    st.query_row(params![kind, key, now.as_millis()], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .optional()
                })
                .map_err(|e| sql_error("reading a record", e))?;
            row.map(|(body, v)| {
                Ok(StoredDocument {
                    body,
                    version: version_of(v, &kind, &key)?,
                })
            })
            .transpose()
        })
        .await
    }

    async fn put_document(
        &self,
        kind: &str,
        key: &str,
        body: &str,
        expected: Option<u64>,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let (kind, key, body) = (kind.to_owned(), key.to_owned(), body.to_owned());
        self.run(move |conn| put_tx(conn, &kind, &key, &body, expected, expires_at, now))
            .await
    }

    async fn scan_documents(
        &self,
        kind: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Timestamp,
    ) -> Result<DocumentPage, StoreError> {
        let (kind, cursor) = (kind.to_owned(), cursor.map(str::to_owned));
        self.run(move |conn| scan_page(conn, &kind, cursor.as_deref(), limit, now))
            .await
    }

    async fn put_member(
        &self,
        kind: &str,
        group: &str,
        member: &str,
        body: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let (kind, group, member, body) = (
            kind.to_owned(),
            group.to_owned(),
            member.to_owned(),
            body.to_owned(),
        );
        self.run(move |conn| {
            super::members::put(conn, &kind, &group, &member, &body, expires_at, now)
        })
        .await
    }

    async fn list_members(
        &self,
        kind: &str,
        group: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Timestamp,
    ) -> Result<MemberPage, StoreError> {
        let (kind, group, cursor) = (kind.to_owned(), group.to_owned(), cursor.map(str::to_owned));
        self.run(move |conn| {
            super::members::list(conn, &kind, &group, cursor.as_deref(), limit, now)
        })
        .await
    }

    async fn delete_members(
        &self,
        kind: &str,
        group: &str,
        members: &[String],
    ) -> Result<(), StoreError> {
        if members.is_empty() {
            return Ok(());
        }
        let (kind, group, members) = (kind.to_owned(), group.to_owned(), members.to_vec());
        self.run(move |conn| super::members::delete(conn, &kind, &group, &members))
            .await
    }

    async fn add_counts(
        &self,
        kind: &str,
        key: &str,
        bucket: i64,
        counts: &[(&str, u64)],
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        imgest_core::ports::check_counts("sqlite", bucket, counts.iter().map(|(n, _)| *n))?;
        let counts: Vec<(String, u64)> =
            counts.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect();
        let (kind, key) = (kind.to_owned(), key.to_owned());
        self.run(move |conn| {
            super::counts::add(conn, &kind, &key, bucket, &counts, expires_at, now)
        })
        .await
    }

    async fn read_counts(
        &self,
        kind: &str,
        key: &str,
        from: i64,
        to: i64,
        now: Timestamp,
    ) -> Result<Vec<CountBucket>, StoreError> {
        let (kind, key) = (kind.to_owned(), key.to_owned());
        self.run(move |conn| super::counts::read(conn, &kind, &key, from, to, now))
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const T: Timestamp = Timestamp::from_millis(1_700_000_000_000);

    #[test]
    fn versions_increase_and_never_fall_behind_the_clock() {
        assert_eq!(next_version(None, T), 1_700_000_000_000);
        assert_eq!(next_version(Some(5), T), 1_700_000_000_000);
        assert_eq!(next_version(Some(1_700_000_000_000), T), 1_700_000_000_001);
        assert_eq!(next_version(None, Timestamp::from_millis(-5)), 1);
        assert_eq!(next_version(Some(u64::MAX), T), u64::MAX);
    }

    #[tokio::test]
    async fn expired_rows_are_deleted_only_after_the_grace_period() {
        let store = SqliteStore::open_in_memory().unwrap();
        let expires = T.plus(Duration::from_secs(10));
        let v1 = store
            .put_document("k", "old", "{}", None, expires, T)
            .await
            .unwrap();
        let rows = |store: &SqliteStore| {
            let conn = store.conn.lock().unwrap();
            conn.query_row("SELECT COUNT(*) FROM records", [], |r| r.get::<_, i64>(0))
                .unwrap()
        };
        // Expired, within the grace period: kept (and the key's next version follows it).
        let soon = expires.plus(Duration::from_secs(1));
        store
            .put_document("k", "other", "{}", None, soon.plus(DELETE_GRACE * 2), soon)
            .await
            .unwrap();
        assert_eq!(rows(&store), 2);
        // Past the grace period: the next write deletes it.
        let later = expires.plus(DELETE_GRACE);
        store
            .put_document("k", "third", "{}", None, later.plus(DELETE_GRACE), later)
            .await
            .unwrap();
        assert_eq!(rows(&store), 2);
        assert_eq!(store.get_document("k", "old", later).await.unwrap(), None);
        // Recreated from nothing: still past every version it had.
        let v2 = store
            .put_document("k", "old", "{}", None, later.plus(DELETE_GRACE), later)
            .await
            .unwrap();
        assert!(v2 > v1);
    }
}
