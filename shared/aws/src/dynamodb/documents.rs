//! `Documents` on document items.
//!
//! Item `pk = rec#{kind}#{key}`, `sk = rec`: `body` S (or B: deflated, when longer than
//! [`DEFLATE_ABOVE`]), `version` N, `expires_at` N ms and `ttl` N (epoch seconds, an hour after
//! `expires_at`). The `rec#` prefix keeps these items out of the
//! ttl-cleanup function's stream filter (`image#` only) and out of the GC index (they carry no
//! `gc_bucket`).
//!
//! Reads treat an item past `expires_at` as absent (DynamoDB's TTL deleter lags). Writes are
//! conditional updates on the version read; a write over an expired item is conditional on its
//! version too, so two writers racing to recreate an expired record cannot both win. Versions
//! come from [`next_version`]: one past the stored version, never below the clock in
//! milliseconds, so they keep increasing after the TTL deleter removed an item. The deleter
//! waits an hour past expiry ([`TTL_GRACE`]) so that the version of a record that has just
//! expired is still there to follow.
//!
//! A walk of one kind ([`Documents::scan_documents`]) is a Scan of the whole table filtered on
//! `sk = rec` and the `pk` prefix `rec#{kind}#`: it reads (and is billed for) every item of
//! every kind, so it is for occasional whole walks (`imgest stats`), not for lookups.

use std::io::{Read, Write};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

use super::DynamoStore;
use super::item::{Attrs, Expr, Item, PK, TTL, key, ms, n, s, ttl_secs};
use imgest_core::domain::Timestamp;
use imgest_core::ports::{
    CountBucket, DocumentPage, Documents, MemberPage, StoreError, StoredDocument,
};

const KIND: &str = "rec";
const BODY: &str = "body";
const VERSION: &str = "version";
const EXPIRES_AT: &str = "expires_at";

/// Bodies longer than this are stored deflated: DynamoDB bills a write per started KB of the
/// item, and the JSON of a crawl (URLs, hashes) shrinks to about a third.
const DEFLATE_ABOVE: usize = 512;

/// How long after expiry the TTL deleter may remove an item.
const TTL_GRACE: Duration = Duration::from_secs(3600);
/// Writes of one `put_document` with no expected version: creating, then (when the item exists
/// but expired) replacing the expired one; a third try only follows a concurrent deletion.
const CREATE_ATTEMPTS: u32 = 3;

/// The item key of a record. A kind is a name in the code (`url`, `crawl`); one with a `#`
/// could alias another kind's keys (`a#b` + `c` and `a` + `b#c`), so it is refused.
fn record_key(kind: &str, key_: &str) -> Result<Item, StoreError> {
    check_kind(kind)?;
    Ok(key(KIND, &format!("{kind}#{key_}")))
}

/// The `pk` prefix of the records of `kind`: `rec#{kind}#` (refused as in [`record_key`]).
fn record_prefix(kind: &str) -> Result<String, StoreError> {
    check_kind(kind)?;
    Ok(format!("{KIND}#{kind}#"))
}

fn check_kind(kind: &str) -> Result<(), StoreError> {
    if kind.contains('#') {
        return Err(StoreError::corrupt(format!(
            "dynamodb: document kind {kind:?} contains '#'"
        )));
    }
    Ok(())
}

/// One past `previous`, and never less than the clock in milliseconds (see the module doc).
fn next_version(previous: Option<u64>, now: Timestamp) -> u64 {
    let floor = u64::try_from(now.as_millis()).unwrap_or(0);
    previous
        .map_or(0, |v| v.saturating_add(1))
        .max(floor)
        .max(1)
}

fn version_value(v: u64) -> Result<aws_sdk_dynamodb::types::AttributeValue, StoreError> {
    i64::try_from(v)
        .map(n)
        .map_err(|_| StoreError::corrupt(format!("dynamodb: version {v} is too large")))
}

/// A stored item as (body, version, expiry).
struct Raw {
    body: String,
    version: u64,
    expires_at: Timestamp,
}

fn raw_from_item(item: &Item, kind: &str, key_: &str) -> Result<Raw, StoreError> {
    let what = format!("record item {kind}/{key_:?}");
    let a = Attrs::new(item, &what);
    let body = body_of(item, &a, &what)?;
    Ok(Raw {
        body,
        version: a.u64(VERSION)?,
        expires_at: a.time(EXPIRES_AT)?,
    })
}

impl DynamoStore {
    async fn raw_record(
        &self,
        kind: &str,
        key_: &str,
        consistent: bool,
    ) -> Result<Option<Raw>, StoreError> {
        let item = self
            .read_item(
                record_key(kind, key_)?,
                &format!("reading record {kind}/{key_:?}"),
                consistent,
            )
            .await?;
        item.map(|item| raw_from_item(&item, kind, key_))
            .transpose()
    }

    /// Writes version `version` of the record if `condition` (built by `when` on the same
    /// expression) holds: `Ok(false)` if it did not.
    async fn write_record(
        &self,
        kind: &str,
        key_: &str,
        body: &str,
        version: u64,
        expires_at: Timestamp,
        when: impl FnOnce(&mut Expr) -> Result<String, StoreError>,
    ) -> Result<bool, StoreError> {
        let mut e = Expr::new();
        e.set(BODY, body_value(body))
            .set(VERSION, version_value(version)?)
            .set(EXPIRES_AT, ms(expires_at))
            .set(TTL, n(ttl_secs(expires_at.plus(TTL_GRACE))));
        let condition = when(&mut e)?;
        let parts = e.finish();
        self.update_if(record_key(kind, key_)?, parts, condition, || {
            format!("writing record {kind}/{key_:?}")
        })
        .await
    }
}

/// The body of a record's or a member's item, inflated if it was stored deflated.
pub(super) fn body_of(item: &Item, a: &Attrs<'_>, what: &str) -> Result<String, StoreError> {
    Ok(match item.get(BODY) {
        Some(AttributeValue::B(deflated)) => inflate(deflated.as_ref())
            .ok_or_else(|| StoreError::corrupt(format!("{what}: the deflated body is corrupt")))?,
        _ => a.s(BODY)?.to_owned(),
    })
}

/// The body as stored: as is when short, deflated when long (records, and members: a results'
/// feed entry of an offer's photos is one write unit, not two).
pub(super) fn body_value(body: &str) -> AttributeValue {
    if body.len() <= DEFLATE_ABOVE {
        return s(body);
    }
    let mut encoder = DeflateEncoder::new(Vec::new(), Compression::fast());
    // Writing to a Vec cannot fail; if it somehow did, the plain body is still correct.
    match encoder
        .write_all(body.as_bytes())
        .and_then(|()| encoder.finish())
    {
        Ok(deflated) => AttributeValue::B(Blob::new(deflated)),
        Err(_) => s(body),
    }
}

fn inflate(deflated: &[u8]) -> Option<String> {
    let mut body = String::new();
    DeflateDecoder::new(deflated)
        .read_to_string(&mut body)
        .ok()?;
    Some(body)
}

/// The stored record, unless it expired at or before `now`.
fn live(raw: Option<Raw>, now: Timestamp) -> Option<StoredDocument> {
    raw.filter(|raw| raw.expires_at > now)
        .map(|raw| StoredDocument {
            body: raw.body,
            version: raw.version,
        })
}

fn conflict(kind: &str, key_: &str, expected: Option<u64>) -> StoreError {
    StoreError::Conflict(format!(
        "record {kind}/{key_:?} is no longer at version {expected:?}"
    ))
}

#[async_trait]
impl Documents for DynamoStore {
    async fn get_document(
        &self,
        kind: &str,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredDocument>, StoreError> {
        Ok(live(self.raw_record(kind, key, true).await?, now))
    }

    async fn peek_document(
        &self,
        kind: &str,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredDocument>, StoreError> {
        Ok(live(self.raw_record(kind, key, false).await?, now))
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
        if let Some(v) = expected {
            let version = next_version(Some(v), now);
            let written = self
                .write_record(kind, key, body, version, expires_at, |e| {
                    let same = e.eq(VERSION, version_value(v)?);
                    let live = e.cmp(EXPIRES_AT, ">", ms(now));
                    Ok(format!("{same} AND {live}"))
                })
                .await?;
            return if written {
                Ok(version)
            } else {
                Err(conflict(kind, key, expected))
            };
        }
        // No record expected: create one, which fails if an item exists; if that item has
        // expired, replace it conditional on its version (a concurrent writer moves it on).
        let mut previous: Option<u64> = None;
        for _ in 0..CREATE_ATTEMPTS {
            let version = next_version(previous, now);
            let written = self
                .write_record(kind, key, body, version, expires_at, |e| match previous {
                    None => Ok(e.not_exists(PK)),
                    Some(old) => {
                        let same = e.eq(VERSION, version_value(old)?);
                        let expired = e.cmp(EXPIRES_AT, "<=", ms(now));
                        Ok(format!("{same} AND {expired}"))
                    }
                })
                .await?;
            if written {
                return Ok(version);
            }
            match self.raw_record(kind, key, true).await? {
                Some(raw) if raw.expires_at > now => return Err(conflict(kind, key, expected)),
                Some(raw) => previous = Some(raw.version),
                // Deleted since (by the TTL deleter): create it after all.
                None => previous = None,
            }
        }
        Err(conflict(kind, key, expected))
    }

    async fn scan_documents(
        &self,
        kind: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Timestamp,
    ) -> Result<DocumentPage, StoreError> {
        let prefix = record_prefix(kind)?;
        let (items, next) = self
            .scan_items(
                KIND,
                Some(&prefix),
                &[BODY, VERSION, EXPIRES_AT],
                0,
                1,
                cursor,
                limit,
            )
            .await?;
        let mut records = Vec::with_capacity(items.len());
        for item in &items {
            let key_ = match item.get(PK) {
                Some(AttributeValue::S(pk)) => pk.strip_prefix(prefix.as_str()),
                _ => None,
            }
            .ok_or_else(|| {
                StoreError::corrupt(format!(
                    "dynamodb: a scan for {prefix}* returned item {:?}",
                    item.get(PK)
                ))
            })?;
            if let Some(record) = live(Some(raw_from_item(item, kind, key_)?), now) {
                records.push((key_.to_owned(), record));
            }
        }
        Ok(DocumentPage {
            documents: records,
            next,
        })
    }

    async fn put_member(
        &self,
        kind: &str,
        group: &str,
        member: &str,
        body: &str,
        expires_at: Timestamp,
        _now: Timestamp,
    ) -> Result<(), StoreError> {
        self.put_member_item(kind, group, member, body, expires_at)
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
        self.list_member_items(kind, group, cursor, limit, now)
            .await
    }

    async fn delete_members(
        &self,
        kind: &str,
        group: &str,
        members: &[String],
    ) -> Result<(), StoreError> {
        self.delete_member_items(kind, group, members).await
    }

    async fn add_counts(
        &self,
        kind: &str,
        key: &str,
        bucket: i64,
        counts: &[(&str, u64)],
        expires_at: Timestamp,
        _now: Timestamp,
    ) -> Result<(), StoreError> {
        self.add_count_item(kind, key, bucket, counts, expires_at)
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
        self.read_count_items(kind, key, from, to, now).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn long_bodies_are_stored_deflated_in_fewer_bytes_and_short_ones_as_they_are() {
        assert_eq!(body_value("{}"), s("{}"));
        let long: String = (0..20)
            .map(|i| format!("{{\"url\":\"https://photos.example.com/offer/{i}.jpg\",\"status\":\"pending\"}},"))
            .collect();
        let AttributeValue::B(deflated) = body_value(&long) else {
            panic!("a {} byte body is stored as is", long.len());
        };
        assert!(
            deflated.as_ref().len() < long.len() / 2,
            "{} bytes",
            deflated.as_ref().len()
        );
        assert_eq!(inflate(deflated.as_ref()).as_deref(), Some(long.as_str()));
        assert_eq!(inflate(b"not deflate data at all"), None);
    }

    #[test]
    fn record_keys_never_look_like_images() {
        let key = record_key("url", "image#abc").unwrap();
        assert_eq!(key[PK], s("rec#url#image#abc"));
        assert_eq!(key["sk"], s("rec"));
        assert!(record_key("url#x", "y").is_err());
        assert_eq!(record_prefix("url").unwrap(), "rec#url#");
        assert!(record_prefix("url#x").is_err());
    }

    #[test]
    fn versions_increase_and_never_fall_behind_the_clock() {
        let now = Timestamp::from_millis(1_700_000_000_000);
        assert_eq!(next_version(None, now), 1_700_000_000_000);
        assert_eq!(next_version(Some(7), now), 1_700_000_000_000);
        assert_eq!(
            next_version(Some(1_800_000_000_000), now),
            1_800_000_000_001
        );
    }
}
