//! The schema, created on open and versioned with `PRAGMA user_version`.
//!
//! Timestamps are integer milliseconds since the epoch. A future migration bumps
//! [`SCHEMA_VERSION`] and adds a step to [`migrate`].

use rusqlite::{Connection, TransactionBehavior};

use super::sql_error;
use crate::ports::StoreError;

/// The version this build writes and understands.
pub const SCHEMA_VERSION: i32 = 2;

const V1: &str = "
CREATE TABLE IF NOT EXISTS images (
    id               TEXT    PRIMARY KEY NOT NULL,
    generation       TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('processing', 'ready')),
    claim_expires_at INTEGER,
    format           TEXT,
    width            INTEGER,
    height           INTEGER,
    original_bytes   INTEGER,
    variants         TEXT,
    created_at       INTEGER NOT NULL,
    last_update      INTEGER NOT NULL,
    link_count       INTEGER NOT NULL DEFAULT 0 CHECK (link_count >= 0),
    expires_at       INTEGER
);
-- Garbage-collection candidates: unlinked ready records by expiry, claims by claim expiry.
CREATE INDEX IF NOT EXISTS images_orphan_expiry
    ON images (expires_at) WHERE state = 'ready' AND link_count = 0;
CREATE INDEX IF NOT EXISTS images_claim_expiry
    ON images (claim_expires_at) WHERE state = 'processing';

CREATE TABLE IF NOT EXISTS offers (
    offer_id   TEXT    PRIMARY KEY NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS offer_photos (
    offer_id TEXT    NOT NULL REFERENCES offers (offer_id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    -- An image can never be deleted while an offer links it.
    image_id TEXT    NOT NULL REFERENCES images (id),
    PRIMARY KEY (offer_id, position)
) WITHOUT ROWID;
-- The reverse index: which offers link an image.
CREATE INDEX IF NOT EXISTS offer_photos_by_image ON offer_photos (image_id);

CREATE TABLE IF NOT EXISTS tasks (
    queue        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    run_at       INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    receipt      TEXT,
    leased_until INTEGER,
    enqueued_seq INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks (queue, run_at, enqueued_seq);

CREATE TABLE IF NOT EXISTS dead_letters (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    queue     TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    payload   TEXT    NOT NULL,
    attempts  INTEGER NOT NULL,
    reason    TEXT    NOT NULL,
    failed_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_newest ON dead_letters (queue, failed_at, seq);

-- Presigned uploads, from the URL handed out until the photo is processed.
CREATE TABLE IF NOT EXISTS uploads (
    id         TEXT    PRIMARY KEY NOT NULL,
    size       INTEGER NOT NULL,
    state      TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

-- Where long jobs resume (the sweeper's next shard).
CREATE TABLE IF NOT EXISTS checkpoints (
    name  TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);

-- Monotonic counters (the queue's enqueue order).
CREATE TABLE IF NOT EXISTS counters (
    name  TEXT    PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
);
";

/// Versioned records and rate-limit grants (the crawls).
const V2: &str = "
-- Versioned JSON records (the crawls' URL and crawl records). Rows past `expires_at` read as
-- absent and are deleted a while later (see the `records` module).
CREATE TABLE IF NOT EXISTS records (
    kind       TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_expiry ON records (expires_at);

-- Rate-limit grants: one row per `acquire` that granted something (a sliding window log).
CREATE TABLE IF NOT EXISTS rate_grants (
    client     TEXT    NOT NULL,
    granted_at INTEGER NOT NULL,
    permits    INTEGER NOT NULL CHECK (permits > 0)
);
CREATE INDEX IF NOT EXISTS rate_grants_by_client ON rate_grants (client, granted_at);
";

/// Brings the database to [`SCHEMA_VERSION`] in one write transaction, so processes opening
/// the same new file at once do not race; refuses a database written by a newer build.
pub fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sql_error("starting the schema migration", e))?;
    let version: i32 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| sql_error("reading the schema version", e))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::corrupt(format!(
            "the database has schema version {version}, newer than this build's {SCHEMA_VERSION}"
        )));
    }
    if version < 1 {
        tx.execute_batch(V1)
            .map_err(|e| sql_error("creating the schema", e))?;
    }
    if version < 2 {
        tx.execute_batch(V2)
            .map_err(|e| sql_error("adding records and rate limits to the schema", e))?;
    }
    if version < SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(|e| sql_error("writing the schema version", e))?;
    }
    tx.commit()
        .map_err(|e| sql_error("committing the schema migration", e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_version_1_database_gains_the_new_tables_and_keeps_its_rows() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(V1).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute(
            "INSERT INTO checkpoints (name, value) VALUES ('sweep', '3f')",
            [],
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let version: i32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let kept: String = conn
            .query_row(
                "SELECT value FROM checkpoints WHERE name = 'sweep'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kept, "3f");
        for table in ["records", "rate_grants"] {
            let n: i64 = conn
                .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 0, "{table}");
        }
    }
}
