//! `ImageIndex` on the `images` table.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, Transaction, TransactionBehavior, params};

use super::{IN_CHUNK, SqliteStore, placeholders, sql_error, sql_limit};
use imgest_core::domain::{
    ContentHash, Generation, ImageId, ImageRecord, ImageState, JobPart, OfferKey, PreviousFiles,
    SHARD_COUNT, Signature, SourceFormat, StoredVariant, ThumbHash, Timestamp, VariantSetVersion,
};
use imgest_core::ports::{Claim, ImageIndex, KeyedLink, ReadyImage, ScanPage, StoreError};

const COLUMNS: &str = "id, generation, state, claim_expires_at, format, width, height, \
                       original_bytes, variants, created_at, last_update, link_count, expires_at, \
                       variant_set, previous_generation, previous_until, sha256, \
                       original_metadata, thumbhash, signature";

/// A row as stored, before it is checked into an [`ImageRecord`].
struct RawImage {
    id: String,
    generation: String,
    state: String,
    claim_expires_at: Option<i64>,
    format: Option<String>,
    width: Option<i64>,
    height: Option<i64>,
    original_bytes: Option<i64>,
    variants: Option<String>,
    created_at: i64,
    last_update: i64,
    link_count: i64,
    expires_at: Option<i64>,
    variant_set: Option<String>,
    previous_generation: Option<String>,
    previous_until: Option<i64>,
    sha256: Option<String>,
    original_metadata: Option<String>,
    thumbhash: Option<String>,
    signature: Option<String>,
}

impl RawImage {
    /// Reads a row selected with [`COLUMNS`].
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            generation: row.get(1)?,
            state: row.get(2)?,
            claim_expires_at: row.get(3)?,
            format: row.get(4)?,
            width: row.get(5)?,
            height: row.get(6)?,
            original_bytes: row.get(7)?,
            variants: row.get(8)?,
            created_at: row.get(9)?,
            last_update: row.get(10)?,
            link_count: row.get(11)?,
            expires_at: row.get(12)?,
            variant_set: row.get(13)?,
            previous_generation: row.get(14)?,
            previous_until: row.get(15)?,
            sha256: row.get(16)?,
            original_metadata: row.get(17)?,
            thumbhash: row.get(18)?,
            signature: row.get(19)?,
        })
    }

    fn into_record(self) -> Result<ImageRecord, StoreError> {
        let bad = |what: &str| StoreError::corrupt(format!("image row {:?}: {what}", self.id));
        let id = ImageId::parse(&self.id).map_err(|_| bad("invalid id"))?;
        let generation =
            Generation::parse(&self.generation).map_err(|_| bad("invalid generation"))?;
        let state = match self.state.as_str() {
            "processing" => ImageState::Processing {
                claim_expires_at: Timestamp::from_millis(
                    self.claim_expires_at
                        .ok_or_else(|| bad("processing without claim_expires_at"))?,
                ),
            },
            "ready" => {
                let format = self
                    .format
                    .as_deref()
                    .and_then(SourceFormat::parse)
                    .ok_or_else(|| bad("invalid format"))?;
                let dim = |v: Option<i64>, what: &str| {
                    v.and_then(|v| u32::try_from(v).ok())
                        .ok_or_else(|| bad(what))
                };
                let variants: Vec<StoredVariant> = self
                    .variants
                    .as_deref()
                    .map(serde_json::from_str)
                    .transpose()
                    .map_err(|_| bad("invalid variants JSON"))?
                    .ok_or_else(|| bad("ready without variants"))?;
                ImageState::Ready {
                    format,
                    width: dim(self.width, "invalid width")?,
                    height: dim(self.height, "invalid height")?,
                    original_bytes: self
                        .original_bytes
                        .and_then(|b| u64::try_from(b).ok())
                        .ok_or_else(|| bad("invalid original_bytes"))?,
                    variants,
                    variant_set: self
                        .variant_set
                        .as_deref()
                        .map(VariantSetVersion::parse)
                        .transpose()
                        .map_err(|_| bad("invalid variant_set"))?,
                    sha256: self
                        .sha256
                        .as_deref()
                        .map(ContentHash::parse)
                        .transpose()
                        .map_err(|_| bad("invalid sha256"))?,
                    original_metadata: self
                        .original_metadata
                        .as_deref()
                        .map(str::parse)
                        .transpose()
                        .map_err(|_| bad("invalid original_metadata"))?,
                    thumbhash: self
                        .thumbhash
                        .as_deref()
                        .map(ThumbHash::parse)
                        .transpose()
                        .map_err(|_| bad("invalid thumbhash"))?,
                    signature: self
                        .signature
                        .as_deref()
                        .map(Signature::parse)
                        .transpose()
                        .map_err(|_| bad("invalid signature"))?
                        .map(Box::new),
                }
            }
            _ => return Err(bad("unknown state")),
        };
        let previous = match (self.previous_generation.as_deref(), self.previous_until) {
            (Some(g), Some(until)) => Some(PreviousFiles {
                generation: Generation::parse(g).map_err(|_| bad("invalid previous_generation"))?,
                kept_until: Timestamp::from_millis(until),
            }),
            (None, None) => None,
            _ => return Err(bad("previous_generation without previous_until")),
        };
        Ok(ImageRecord {
            id,
            generation,
            state,
            created_at: Timestamp::from_millis(self.created_at),
            last_update: Timestamp::from_millis(self.last_update),
            link_count: u32::try_from(self.link_count).map_err(|_| bad("invalid link_count"))?,
            expires_at: self.expires_at.map(Timestamp::from_millis),
            previous,
        })
    }
}

pub(super) fn immediate(conn: &mut Connection) -> Result<Transaction<'_>, StoreError> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sql_error("beginning a write transaction", e))
}

pub(super) fn commit(tx: Transaction<'_>) -> Result<(), StoreError> {
    tx.commit().map_err(|e| sql_error("committing", e))
}

pub(super) fn select_one(
    conn: &Connection,
    id: &ImageId,
) -> Result<Option<ImageRecord>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM images WHERE id = ?1"))
        .and_then(|mut stmt| stmt.query_row([id.as_str()], RawImage::from_row).optional())
        .map_err(|e| sql_error("reading an image", e))?
        .map(RawImage::into_record)
        .transpose()
}

/// The stored records among `ids`, in the order of `ids` (missing ones left out).
pub(super) fn select_many(
    conn: &Connection,
    ids: &[ImageId],
) -> Result<Vec<ImageRecord>, StoreError> {
    let mut found: HashMap<String, ImageRecord> = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(IN_CHUNK) {
        let sql = format!(
            "SELECT {COLUMNS} FROM images WHERE id IN ({})",
            placeholders(chunk.len())
        );
        let rows = conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(
                    rusqlite::params_from_iter(chunk.iter().map(ImageId::as_str)),
                    RawImage::from_row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| sql_error("reading images", e))?;
        for raw in rows {
            let record = raw.into_record()?;
            found.insert(record.id.as_str().to_owned(), record);
        }
    }
    Ok(ids
        .iter()
        .filter_map(|id| found.get(id.as_str()).cloned())
        .collect())
}

fn millis(d: Duration, from: Timestamp) -> i64 {
    from.plus(d).as_millis()
}

fn claim_tx(
    conn: &mut Connection,
    id: &ImageId,
    proposed: &Generation,
    now: Timestamp,
    claim_ttl: Duration,
    orphan_ttl: Duration,
) -> Result<Claim, StoreError> {
    let tx = immediate(conn)?;
    let claim_expires_at = millis(claim_ttl, now);
    let claim =
        match select_one(&tx, id)? {
            // Refreshed a moment ago: no write would change it enough to matter (see
            // `refresh_granularity`).
            Some(record) if record.is_freshly_refreshed(now, orphan_ttl) => Claim::Existing(record),
            None => {
                let generation = proposed.clone();
                tx.execute(
                    "INSERT INTO images (id, generation, state, claim_expires_at, created_at, \
                 last_update, link_count, expires_at) \
                 VALUES (?1, ?2, 'processing', ?3, ?4, ?4, 0, NULL)",
                    params![
                        id.as_str(),
                        generation.as_str(),
                        claim_expires_at,
                        now.as_millis()
                    ],
                )
                .map_err(|e| sql_error("claiming an image", e))?;
                Claim::New { generation }
            }
            Some(mut record) => match record.state {
                ImageState::Ready { .. } => {
                    // Refresh; an unlinked record (even one expired but not yet collected) gets a
                    // new orphan expiry, a linked one keeps having none.
                    let orphan_expiry = (record.link_count == 0).then(|| now.plus(orphan_ttl));
                    tx.execute(
                        "UPDATE images SET last_update = ?2, \
                     expires_at = CASE WHEN link_count = 0 THEN ?3 ELSE NULL END \
                     WHERE id = ?1",
                        params![id.as_str(), now.as_millis(), millis(orphan_ttl, now)],
                    )
                    .map_err(|e| sql_error("refreshing an image", e))?;
                    record.last_update = now;
                    record.expires_at = orphan_expiry;
                    Claim::Existing(record)
                }
                // Our own claim, made by an earlier attempt whose answer was lost.
                ImageState::Processing { .. } if &record.generation == proposed => Claim::New {
                    generation: proposed.clone(),
                },
                ImageState::Processing { claim_expires_at } if claim_expires_at > now => {
                    Claim::InProgress { claim_expires_at }
                }
                ImageState::Processing { .. } => {
                    // The holder crashed: take over under a generation of our own, so its late
                    // writes never land on our keys and its `complete` is refused.
                    let generation = proposed.clone();
                    tx.execute(
                    "UPDATE images SET generation = ?2, claim_expires_at = ?3, created_at = ?4, \
                     last_update = ?4, link_count = 0, expires_at = NULL \
                     WHERE id = ?1",
                    params![id.as_str(), generation.as_str(), claim_expires_at, now.as_millis()],
                )
                .map_err(|e| sql_error("taking over an expired claim", e))?;
                    Claim::New { generation }
                }
            },
        };
    commit(tx)?;
    Ok(claim)
}

/// The columns of a ready image that need converting: its original size and its variants.
fn ready_columns(id: &ImageId, ready: &ReadyImage) -> Result<(i64, String), StoreError> {
    let original_bytes = i64::try_from(ready.original_bytes).map_err(|_| StoreError::Backend {
        message: format!(
            "image {id}: original size {} is out of range",
            ready.original_bytes
        ),
        source: None,
    })?;
    let variants = serde_json::to_string(&ready.variants)
        .map_err(|e| StoreError::backend(format!("image {id}: encoding variants"), e))?;
    Ok((original_bytes, variants))
}

/// Inserts a ready, unlinked row unless the id has one; `None` if it had.
fn create_ready_tx(
    conn: &mut Connection,
    id: &ImageId,
    generation: &Generation,
    ready: &ReadyImage,
    now: Timestamp,
    orphan_ttl: Duration,
) -> Result<Option<ImageRecord>, StoreError> {
    let (original_bytes, variants) = ready_columns(id, ready)?;
    let tx = immediate(conn)?;
    let inserted = tx
        .execute(
            "INSERT INTO images (id, generation, state, claim_expires_at, format, width, height, \
             original_bytes, variants, created_at, last_update, link_count, expires_at, \
             variant_set, sha256, original_metadata, thumbhash, signature) \
             VALUES (?1, ?2, 'ready', NULL, ?3, ?4, ?5, ?6, ?7, ?8, ?8, 0, ?9, ?10, ?11, ?12, \
             ?13, ?14) \
             ON CONFLICT (id) DO NOTHING",
            params![
                id.as_str(),
                generation.as_str(),
                ready.format.as_str(),
                i64::from(ready.width),
                i64::from(ready.height),
                original_bytes,
                variants,
                now.as_millis(),
                millis(orphan_ttl, now),
                ready.variant_set.as_str(),
                ready.sha256.map(|h| h.to_hex()),
                ready.original_metadata.map(|m| m.as_str()),
                ready.thumbhash.as_ref().map(ThumbHash::to_base64),
                ready.signature.as_ref().map(Signature::to_text),
            ],
        )
        .map_err(|e| sql_error("creating an image", e))?;
    let record = if inserted == 0 {
        None
    } else {
        Some(
            select_one(&tx, id)?
                .ok_or_else(|| StoreError::corrupt(format!("image {id} vanished while created")))?,
        )
    };
    commit(tx)?;
    Ok(record)
}

fn complete_tx(
    conn: &mut Connection,
    id: &ImageId,
    generation: &Generation,
    ready: &ReadyImage,
    now: Timestamp,
    orphan_ttl: Duration,
) -> Result<ImageRecord, StoreError> {
    let (original_bytes, variants) = ready_columns(id, ready)?;
    let tx = immediate(conn)?;
    let changed = tx
        .execute(
            "UPDATE images SET state = 'ready', claim_expires_at = NULL, format = ?3, \
             width = ?4, height = ?5, original_bytes = ?6, variants = ?7, last_update = ?8, \
             expires_at = CASE WHEN link_count = 0 THEN ?9 ELSE NULL END, variant_set = ?10, \
             sha256 = ?11, original_metadata = ?12, thumbhash = ?13, signature = ?14 \
             WHERE id = ?1 AND generation = ?2 AND state = 'processing'",
            params![
                id.as_str(),
                generation.as_str(),
                ready.format.as_str(),
                i64::from(ready.width),
                i64::from(ready.height),
                original_bytes,
                variants,
                now.as_millis(),
                millis(orphan_ttl, now),
                ready.variant_set.as_str(),
                ready.sha256.map(|h| h.to_hex()),
                ready.original_metadata.map(|m| m.as_str()),
                ready.thumbhash.as_ref().map(ThumbHash::to_base64),
                ready.signature.as_ref().map(Signature::to_text),
            ],
        )
        .map_err(|e| sql_error("completing an image", e))?;
    if changed == 0 {
        return Err(StoreError::Conflict(format!(
            "image {id}: the claim of generation {generation} is no longer held"
        )));
    }
    let record = select_one(&tx, id)?
        .ok_or_else(|| StoreError::corrupt(format!("image {id} vanished while completing")))?;
    commit(tx)?;
    Ok(record)
}

fn replace_files_tx(
    conn: &mut Connection,
    id: &ImageId,
    expected: &Generation,
    generation: &Generation,
    ready: &ReadyImage,
    keep_previous_until: Timestamp,
) -> Result<Option<ImageRecord>, StoreError> {
    let (original_bytes, variants) = ready_columns(id, ready)?;
    let tx = immediate(conn)?;
    let Some(record) = select_one(&tx, id)?.filter(|r| r.is_ready() && &r.generation == expected)
    else {
        return Ok(None);
    };
    let previous = if generation == expected {
        record.previous
    } else {
        Some(PreviousFiles {
            generation: expected.clone(),
            kept_until: keep_previous_until,
        })
    };
    tx.execute(
        "UPDATE images SET generation = ?2, format = ?3, width = ?4, height = ?5, \
         original_bytes = ?6, variants = ?7, variant_set = ?8, previous_generation = ?9, \
         previous_until = ?10, sha256 = COALESCE(?11, sha256), \
         original_metadata = COALESCE(?12, original_metadata), \
         thumbhash = COALESCE(?13, thumbhash), signature = COALESCE(?14, signature) \
         WHERE id = ?1",
        params![
            id.as_str(),
            generation.as_str(),
            ready.format.as_str(),
            i64::from(ready.width),
            i64::from(ready.height),
            original_bytes,
            variants,
            ready.variant_set.as_str(),
            previous.as_ref().map(|p| p.generation.as_str()),
            previous.as_ref().map(|p| p.kept_until.as_millis()),
            ready.sha256.map(|h| h.to_hex()),
            ready.original_metadata.map(|m| m.as_str()),
            ready.thumbhash.as_ref().map(ThumbHash::to_base64),
            ready.signature.as_ref().map(Signature::to_text),
        ],
    )
    .map_err(|e| sql_error("replacing an image's files", e))?;
    let record = select_one(&tx, id)?
        .ok_or_else(|| StoreError::corrupt(format!("image {id} vanished while replaced")))?;
    commit(tx)?;
    Ok(Some(record))
}

/// The ids of segment `segment` of `segments`: a range of shards, as `[low, high)` strings
/// (`"g"` sorts after every hex id).
fn segment_range(segment: u32, segments: u32) -> (String, String) {
    let segments = segments.clamp(1, SHARD_COUNT as u32) as usize;
    let segment = (segment as usize).min(segments - 1);
    let bound = |i: usize| {
        let shard = SHARD_COUNT * i / segments;
        if shard >= SHARD_COUNT {
            "g".to_owned()
        } else {
            format!("{shard:02x}")
        }
    };
    (bound(segment), bound(segment + 1))
}

fn scan_documents(
    conn: &Connection,
    segment: u32,
    segments: u32,
    cursor: Option<&str>,
    limit: usize,
) -> Result<ScanPage, StoreError> {
    let (low, high) = segment_range(segment, segments);
    let sql = format!(
        "SELECT {COLUMNS} FROM images WHERE id >= ?1 AND id < ?2 AND id > ?3 ORDER BY id LIMIT ?4"
    );
    let rows = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| {
            stmt.query_map(
                params![low, high, cursor.unwrap_or(""), sql_limit(limit.max(1))],
                RawImage::from_row,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| sql_error("scanning images", e))?;
    let full = rows.len() >= limit.max(1);
    let records = rows
        .into_iter()
        .map(RawImage::into_record)
        .collect::<Result<Vec<_>, _>>()?;
    let next = if full {
        records.last().map(|r| r.id.as_str().to_owned())
    } else {
        None
    };
    Ok(ScanPage { records, next })
}

fn expired_records(
    conn: &Connection,
    part: JobPart,
    now: Timestamp,
    limit: usize,
) -> Result<Vec<ImageRecord>, StoreError> {
    // Each branch walks its partial index in expiry order; the merge keeps the earliest. A
    // part's first digits are a pattern (`[048c]`), so every part's query is one cached
    // statement; the whole job's matches every id.
    let sql = format!(
        "SELECT {COLUMNS} FROM ( \
           SELECT * FROM (SELECT {COLUMNS}, expires_at AS expiry FROM images \
             WHERE state = 'ready' AND link_count = 0 AND expires_at <= ?1 AND id GLOB ?3 \
             ORDER BY expires_at LIMIT ?2) \
           UNION ALL \
           SELECT * FROM (SELECT {COLUMNS}, claim_expires_at AS expiry FROM images \
             WHERE state = 'processing' AND claim_expires_at <= ?1 AND id GLOB ?3 \
             ORDER BY claim_expires_at LIMIT ?2) \
         ) ORDER BY expiry, id LIMIT ?2"
    );
    let first_digits = format!("[{}]*", part.digits().collect::<String>());
    let rows = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| {
            stmt.query_map(
                params![now.as_millis(), sql_limit(limit), first_digits],
                RawImage::from_row,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| sql_error("listing expired images", e))?;
    rows.into_iter().map(RawImage::into_record).collect()
}

#[async_trait]
impl ImageIndex for SqliteStore {
    async fn claim(
        &self,
        id: &ImageId,
        proposed: &Generation,
        now: Timestamp,
        claim_ttl: Duration,
        orphan_ttl: Duration,
    ) -> Result<Claim, StoreError> {
        // The common case, a dedup hit on a record refreshed a moment ago, is one read.
        if let Some(read) = self.try_read_now(|conn| select_one(conn, id))
            && let Some(record) = read?
            && record.is_freshly_refreshed(now, orphan_ttl)
        {
            return Ok(Claim::Existing(record));
        }
        let (id, proposed) = (id.clone(), proposed.clone());
        self.run(move |conn| claim_tx(conn, &id, &proposed, now, claim_ttl, orphan_ttl))
            .await
    }

    async fn complete(
        &self,
        id: &ImageId,
        generation: &Generation,
        ready: ReadyImage,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<ImageRecord, StoreError> {
        let (id, generation) = (id.clone(), generation.clone());
        self.run(move |conn| complete_tx(conn, &id, &generation, &ready, now, orphan_ttl))
            .await
    }

    async fn create_ready(
        &self,
        id: &ImageId,
        generation: &Generation,
        ready: ReadyImage,
        now: Timestamp,
        orphan_ttl: Duration,
        _first_link: Option<&KeyedLink>,
    ) -> Result<Option<ImageRecord>, StoreError> {
        // Each change links and lists in one transaction: the record starts unlinked.
        let (id, generation) = (id.clone(), generation.clone());
        self.run(move |conn| create_ready_tx(conn, &id, &generation, &ready, now, orphan_ttl))
            .await
    }

    async fn abandon(&self, id: &ImageId, generation: &Generation) -> Result<(), StoreError> {
        let (id, generation) = (id.clone(), generation.clone());
        self.run(move |conn| {
            conn.execute(
                "DELETE FROM images WHERE id = ?1 AND generation = ?2 AND state = 'processing'",
                params![id.as_str(), generation.as_str()],
            )
            .map(drop)
            .map_err(|e| sql_error("abandoning a claim", e))
        })
        .await
    }

    async fn get(&self, id: &ImageId) -> Result<Option<ImageRecord>, StoreError> {
        let id = id.clone();
        self.run(move |conn| select_one(conn, &id)).await
    }

    async fn get_many(&self, ids: &[ImageId]) -> Result<Vec<ImageRecord>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = ids.to_vec();
        self.run(move |conn| {
            // One read transaction: every chunk sees the same snapshot.
            let tx = conn
                .transaction()
                .map_err(|e| sql_error("beginning a read", e))?;
            let records = select_many(&tx, &ids)?;
            commit(tx)?;
            Ok(records)
        })
        .await
    }

    async fn expired_in(
        &self,
        part: JobPart,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<ImageRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.run(move |conn| expired_records(conn, part, now, limit))
            .await
    }

    async fn replace_files(
        &self,
        id: &ImageId,
        expected: &Generation,
        generation: &Generation,
        ready: ReadyImage,
        keep_previous_until: Timestamp,
    ) -> Result<Option<ImageRecord>, StoreError> {
        let (id, expected, generation) = (id.clone(), expected.clone(), generation.clone());
        self.run(move |conn| {
            replace_files_tx(
                conn,
                &id,
                &expected,
                &generation,
                &ready,
                keep_previous_until,
            )
        })
        .await
    }

    async fn correct_link_count(
        &self,
        seen: &ImageRecord,
        count: u32,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError> {
        let seen = seen.clone();
        self.run(move |conn| {
            conn.execute(
                "UPDATE images SET link_count = ?5, \
                 expires_at = CASE WHEN ?5 = 0 THEN ?6 ELSE NULL END \
                 WHERE id = ?1 AND generation = ?2 AND state = 'ready' AND link_count = ?3 \
                 AND last_update = ?4",
                params![
                    seen.id.as_str(),
                    seen.generation.as_str(),
                    i64::from(seen.link_count),
                    seen.last_update.as_millis(),
                    i64::from(count),
                    millis(orphan_ttl, now),
                ],
            )
            .map(|n| n > 0)
            .map_err(|e| sql_error("correcting a link count", e))
        })
        .await
    }

    async fn keyed_links(&self, _id: &ImageId) -> Result<Vec<OfferKey>, StoreError> {
        // Each change links and lists in one transaction: no link is ever waiting for its
        // offer's write.
        Ok(Vec::new())
    }

    async fn scan(
        &self,
        segment: u32,
        segments: u32,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StoreError> {
        let cursor = cursor.map(str::to_owned);
        self.run(move |conn| scan_documents(conn, segment, segments, cursor.as_deref(), limit))
            .await
    }

    async fn delete_if_expired(
        &self,
        id: &ImageId,
        generation: &Generation,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let (id, generation) = (id.clone(), generation.clone());
        self.run(move |conn| {
            conn.execute(
                "DELETE FROM images WHERE id = ?1 AND generation = ?2 AND ( \
                   (state = 'ready' AND link_count = 0 AND expires_at <= ?3) \
                   OR (state = 'processing' AND claim_expires_at <= ?3))",
                params![id.as_str(), generation.as_str(), now.as_millis()],
            )
            .map(|n| n > 0)
            .map_err(|e| sql_error("deleting an expired image", e))
        })
        .await
    }

    async fn set_strong_hash(
        &self,
        id: &ImageId,
        generation: &Generation,
        sha256: &ContentHash,
    ) -> Result<bool, StoreError> {
        self.set_once(id, generation, Column::Sha256, sha256.to_hex())
            .await
    }

    async fn set_thumbhash(
        &self,
        id: &ImageId,
        generation: &Generation,
        thumbhash: &ThumbHash,
    ) -> Result<bool, StoreError> {
        self.set_once(id, generation, Column::Thumbhash, thumbhash.to_base64())
            .await
    }

    async fn set_signature(
        &self,
        id: &ImageId,
        generation: &Generation,
        signature: &Signature,
    ) -> Result<bool, StoreError> {
        self.set_once(id, generation, Column::Signature, signature.to_text())
            .await
    }
}

/// A column of a ready record that is written once, after the fact (records made before it was).
#[derive(Debug, Clone, Copy)]
enum Column {
    Sha256,
    Thumbhash,
    Signature,
}

impl Column {
    /// The statement that writes it, only on a ready record of that generation lacking it.
    fn update(self) -> &'static str {
        match self {
            Self::Sha256 => {
                "UPDATE images SET sha256 = ?3 \
                 WHERE id = ?1 AND generation = ?2 AND state = 'ready' AND sha256 IS NULL"
            }
            Self::Thumbhash => {
                "UPDATE images SET thumbhash = ?3 \
                 WHERE id = ?1 AND generation = ?2 AND state = 'ready' AND thumbhash IS NULL"
            }
            // Or over one made before points were (its text has no `:p`), by one with.
            Self::Signature => {
                "UPDATE images SET signature = ?3 \
                 WHERE id = ?1 AND generation = ?2 AND state = 'ready' AND (signature IS NULL \
                   OR (instr(signature, ':p') = 0 AND instr(?3, ':p') > 0))"
            }
        }
    }

    fn what(self) -> &'static str {
        match self {
            Self::Sha256 => "recording an image's SHA-256",
            Self::Thumbhash => "recording an image's placeholder",
            Self::Signature => "recording an image's perceptual signature",
        }
    }
}

impl SqliteStore {
    /// Writes `column` of record `id` if it is ready under `generation` and lacks it; whether
    /// it was written.
    async fn set_once(
        &self,
        id: &ImageId,
        generation: &Generation,
        column: Column,
        value: String,
    ) -> Result<bool, StoreError> {
        let (id, generation) = (id.clone(), generation.clone());
        self.run(move |conn| {
            conn.execute(
                column.update(),
                params![id.as_str(), generation.as_str(), value],
            )
            .map(|n| n > 0)
            .map_err(|e| sql_error(column.what(), e))
        })
        .await
    }
}
