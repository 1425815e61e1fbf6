//! [`SqliteStore`]: image records, offer links, the task queue, versioned documents and
//! rate limits in one SQLite file; [`QueueSender`] sends messages into its task queue.
//!
//! rusqlite is synchronous, so the store holds one connection behind a mutex and runs every
//! call on tokio's blocking pool. The database is in WAL mode (readers do not block the
//! writer), `synchronous=NORMAL` (durable at checkpoints, never corrupt), with foreign keys on
//! and a busy timeout. Every operation that reads before it writes runs in one
//! `BEGIN IMMEDIATE` transaction: the write lock is taken up front, so the conditional
//! semantics of the ports hold between tasks of this process (serialised by the mutex) and
//! between processes sharing the file (serialised by SQLite's lock, waited for up to the busy
//! timeout). A lock still held after that is `StoreError::Unavailable` (retryable).

mod counts;
mod documents;
mod images;
mod members;
mod messages;
mod offers;
mod queue;
mod rate_limits;
mod schema;
mod uploads;

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use imgest_core::ports::StoreError;

pub use messages::QueueSender;
pub use schema::SCHEMA_VERSION;

/// How long a statement waits for another connection's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Ids per `IN (...)` list (far below SQLite's variable limit).
const IN_CHUNK: usize = 500;

/// The embedded `ImageIndex`, `OfferLinks`, `UploadRecords`, `Checkpoints`, `TaskQueue`,
/// `Documents` and `RateLimiter`. Cheap to clone (one shared connection); open several on one
/// file, even from several processes, and they stay consistent.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` and brings its schema up to
    /// date. Blocking: call it at start-up (or in `spawn_blocking`).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql_error(&format!("opening {}", path.display()), e))?;
        Self::init(conn, true)
    }

    /// A private in-memory database (unit tests).
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory()
            .map_err(|e| sql_error("opening an in-memory database", e))?;
        Self::init(conn, false)
    }

    fn init(mut conn: Connection, wal: bool) -> Result<Self, StoreError> {
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| sql_error("setting the busy timeout", e))?;
        if wal {
            // Returns the mode now in force; a file system without shared memory keeps its
            // rollback journal, which is slower but just as correct.
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
                .map_err(|e| sql_error("enabling WAL", e))?;
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| sql_error("setting synchronous=NORMAL", e))?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(|e| sql_error("enabling foreign keys", e))?;
        schema::migrate(&mut conn)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn run<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&mut Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            // A panic inside `f` rolled its transaction back while unwinding (dropping a
            // rusqlite `Transaction` rolls back), so the connection is still sound.
            let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut conn)
        })
        .await
        .map_err(|e| E::from(StoreError::backend("sqlite task failed", e)))?
    }
}

impl SqliteStore {
    /// Runs a short read on the caller's thread if the connection is free at once and SQLite
    /// answers without waiting for a lock; `None` (nothing done) otherwise, and the caller goes
    /// through [`run`](Self::run). A point read on a warm page cache takes a few microseconds,
    /// less than the two thread switches of a trip through the blocking pool, and never
    /// blocks the async thread: the mutex is only tried and the busy timeout is off meanwhile.
    fn try_read_now<T>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Option<Result<T, StoreError>> {
        let conn = self.conn.try_lock().ok()?;
        conn.busy_timeout(Duration::ZERO).ok()?;
        let out = read(&conn);
        if let Err(e) = conn.busy_timeout(BUSY_TIMEOUT) {
            return Some(Err(sql_error("restoring the busy timeout", e)));
        }
        match out {
            Err(e) if e.is_retryable() => None,
            other => Some(other),
        }
    }
}

/// SQLITE_BUSY / SQLITE_LOCKED (another connection holds the lock past the busy timeout) is
/// retryable; anything else is a backend failure.
pub(crate) fn sql_error(context: &str, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::unavailable(format!("sqlite: {context}"), e)
        }
        _ => StoreError::backend(format!("sqlite: {context}"), e),
    }
}

/// `usize` limits as SQL integers.
fn sql_limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `?, ?, ?` for `n` parameters.
fn placeholders(n: usize) -> String {
    let mut s = String::with_capacity(n * 3);
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        s.push('?');
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_schema_is_versioned_and_a_newer_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        drop(SqliteStore::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        let version: i32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        // Reopening an up-to-date file is a no-op.
        drop(SqliteStore::open(&path).unwrap());
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        assert!(matches!(
            SqliteStore::open(&path),
            Err(StoreError::Backend { .. })
        ));
    }

    #[test]
    fn a_held_write_lock_is_unavailable_not_a_failure() {
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        );
        assert!(sql_error("x", busy).is_retryable());
        let other = rusqlite::Error::InvalidQuery;
        assert!(!sql_error("x", other).is_retryable());
    }

    #[test]
    fn a_read_runs_at_once_only_when_the_connection_is_free() {
        let store = SqliteStore::open_in_memory().unwrap();
        let one = |conn: &Connection| {
            conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
                .map_err(|e| sql_error("x", e))
        };
        assert_eq!(store.try_read_now(one).unwrap().unwrap(), 1);
        let held = store.conn.lock().unwrap();
        assert!(
            store.try_read_now(one).is_none(),
            "never waits for the mutex"
        );
        drop(held);
        // The busy timeout is back for the writers.
        let busy_ms: i64 = store
            .conn
            .lock()
            .unwrap()
            .query_row("PRAGMA busy_timeout", [], |r| r.get(0))
            .unwrap();
        assert_eq!(busy_ms, i64::try_from(BUSY_TIMEOUT.as_millis()).unwrap());
    }

    #[test]
    fn placeholders_are_comma_separated() {
        assert_eq!(placeholders(0), "");
        assert_eq!(placeholders(3), "?, ?, ?");
    }
}
