//! The schema, created on open and versioned with `PRAGMA user_version`.
//!
//! Timestamps are integer milliseconds since the epoch. A future migration bumps
//! [`SCHEMA_VERSION`] and adds a step to [`migrate`].

use rusqlite::{Connection, TransactionBehavior};

use super::sql_error;
use imgest_core::ports::StoreError;

/// The version this build writes and understands.
pub const SCHEMA_VERSION: i32 = 10;

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

/// Tenancy: an offer is `(client_id, offer_id)` (`''` is open mode's shared namespace, which
/// every offer of an older database moves to), and a presigned upload has an owner.
const V3: &str = "
CREATE TABLE offers_v3 (
    client_id  TEXT    NOT NULL,
    offer_id   TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (client_id, offer_id)
);
CREATE TABLE offer_photos_v3 (
    client_id TEXT    NOT NULL,
    offer_id  TEXT    NOT NULL,
    position  INTEGER NOT NULL,
    -- An image can never be deleted while an offer links it.
    image_id  TEXT    NOT NULL REFERENCES images (id),
    PRIMARY KEY (client_id, offer_id, position),
    FOREIGN KEY (client_id, offer_id) REFERENCES offers_v3 (client_id, offer_id) ON DELETE CASCADE
) WITHOUT ROWID;
INSERT INTO offers_v3 (client_id, offer_id, updated_at) SELECT '', offer_id, updated_at FROM offers;
INSERT INTO offer_photos_v3 (client_id, offer_id, position, image_id)
    SELECT '', offer_id, position, image_id FROM offer_photos;
DROP TABLE offer_photos;
DROP TABLE offers;
-- Renaming also renames the foreign key's target.
ALTER TABLE offers_v3 RENAME TO offers;
ALTER TABLE offer_photos_v3 RENAME TO offer_photos;
-- The reverse index: which offers link an image.
CREATE INDEX offer_photos_by_image ON offer_photos (image_id);

-- Whose upload it is (the MD5 of the token's subject; NULL in open mode).
ALTER TABLE uploads ADD COLUMN owner TEXT;
";

/// Lifecycle: which variant set a ready image's files were made with, and the generation a
/// re-processed image replaced while its files are kept.
const V4: &str = "
ALTER TABLE images ADD COLUMN variant_set TEXT;
ALTER TABLE images ADD COLUMN previous_generation TEXT;
ALTER TABLE images ADD COLUMN previous_until INTEGER;
";

/// Dead letters: the kind of their reason apart from its words (older rows wrote
/// `kind: message` in `reason`, which is split once here).
const V5: &str = "
ALTER TABLE dead_letters ADD COLUMN kind TEXT NOT NULL DEFAULT '';
UPDATE dead_letters
   SET kind = substr(reason, 1, instr(reason, ':') - 1),
       reason = ltrim(substr(reason, instr(reason, ':') + 1))
 WHERE instr(reason, ':') > 1;
";

/// The SHA-256 of each ready image's original, checked on every dedup hit (NULL on rows
/// written before: the first hit adopts it).
const V6: &str = "
ALTER TABLE images ADD COLUMN sha256 TEXT;
";

/// Members filed under a group of a record kind (the crawls waiting for a URL's download): one
/// row each, so adding one never rewrites the others; and counter series (what hosts taught),
/// one row per bucket and count.
const V7: &str = "
CREATE TABLE IF NOT EXISTS record_members (
    kind       TEXT    NOT NULL,
    grp        TEXT    NOT NULL,
    member     TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (kind, grp, member)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS record_members_expiry ON record_members (expires_at);

-- Counter series: named counts per time bucket, only ever added to.
CREATE TABLE IF NOT EXISTS record_counts (
    kind       TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    bucket     INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    value      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (kind, key, bucket, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS record_counts_expiry ON record_counts (expires_at);
";

/// What each ready image's stored original kept of the photo's metadata (NULL on rows
/// written before originals were stripped: stored as sent).
const V8: &str = "
ALTER TABLE images ADD COLUMN original_metadata TEXT;
";

/// Each ready image's placeholder, a base64 ThumbHash (NULL on rows written before
/// placeholders were made).
const V9: &str = "
ALTER TABLE images ADD COLUMN thumbhash TEXT;
";

/// Each ready image's perceptual signature (near-duplicates; NULL on rows written before
/// signatures were made).
const V10: &str = "
ALTER TABLE images ADD COLUMN signature TEXT;
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
    if version < 3 {
        tx.execute_batch(V3)
            .map_err(|e| sql_error("moving offers to per-client keys", e))?;
    }
    if version < 4 {
        tx.execute_batch(V4)
            .map_err(|e| sql_error("recording variant set versions", e))?;
    }
    if version < 5 {
        tx.execute_batch(V5)
            .map_err(|e| sql_error("keeping dead letters' kinds", e))?;
    }
    if version < 6 {
        tx.execute_batch(V6)
            .map_err(|e| sql_error("recording strong hashes", e))?;
    }
    if version < 7 {
        tx.execute_batch(V7)
            .map_err(|e| sql_error("adding record members and counts", e))?;
    }
    if version < 8 {
        tx.execute_batch(V8)
            .map_err(|e| sql_error("recording what originals keep of their metadata", e))?;
    }
    if version < 9 {
        tx.execute_batch(V9)
            .map_err(|e| sql_error("recording placeholders", e))?;
    }
    if version < 10 {
        tx.execute_batch(V10)
            .map_err(|e| sql_error("recording perceptual signatures", e))?;
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

    #[test]
    fn a_version_4_database_splits_its_dead_letters_reasons_into_kind_and_words() {
        let mut conn = Connection::open_in_memory().unwrap();
        for v in [V1, V2, V3, V4] {
            conn.execute_batch(v).unwrap();
        }
        conn.pragma_update(None, "user_version", 4).unwrap();
        conn.execute_batch(
            "INSERT INTO dead_letters (queue, key, payload, attempts, reason, failed_at) \
               VALUES ('backfill', 'a', 'x', 3, 'http_404: gone: really', 1), \
                      ('fetch-0', 'b', 'y', 10, 'no kind here', 2);",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let rows: Vec<(String, String)> = conn
            .prepare("SELECT kind, reason FROM dead_letters ORDER BY seq")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            [
                ("http_404".to_owned(), "gone: really".to_owned()),
                (String::new(), "no kind here".to_owned())
            ]
        );
    }

    #[test]
    fn a_version_2_database_keeps_its_offers_in_the_shared_namespace() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        conn.execute_batch(V1).unwrap();
        conn.execute_batch(V2).unwrap();
        conn.pragma_update(None, "user_version", 2).unwrap();
        conn.execute_batch(
            "INSERT INTO images (id, generation, state, created_at, last_update, link_count) \
               VALUES ('0cc175b9c0f1b6a831c399e269772661', '0badcafe', 'ready', 1, 1, 1); \
             INSERT INTO offers (offer_id, updated_at) VALUES ('o1', 5); \
             INSERT INTO offer_photos (offer_id, position, image_id) \
               VALUES ('o1', 0, '0cc175b9c0f1b6a831c399e269772661'); \
             INSERT INTO uploads (id, size, state, created_at, expires_at) \
               VALUES ('fedcba9876543210fedcba9876543210', 3, '{}', 1, 2);",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let (client, offer, image): (String, String, String) = conn
            .query_row(
                "SELECT o.client_id, o.offer_id, p.image_id FROM offers o \
                 JOIN offer_photos p USING (client_id, offer_id)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(
            (client.as_str(), offer.as_str(), image.as_str()),
            ("", "o1", "0cc175b9c0f1b6a831c399e269772661")
        );
        let owner: Option<String> = conn
            .query_row("SELECT owner FROM uploads", [], |r| r.get(0))
            .unwrap();
        assert_eq!(owner, None);
        // Deleting the offer still takes its photos with it.
        conn.execute("DELETE FROM offers", []).unwrap();
        let left: i64 = conn
            .query_row("SELECT COUNT(*) FROM offer_photos", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
    }
}
