//! The crawl's records, stored as versioned JSON through the [`Records`] port, and the one
//! read-modify-write loop every change to them goes through.
//!
//! - URL record (`url`, keyed by url hash): the last outcome of the URL, its validators for
//!   conditional requests, the running download's lease (singleflight) and the crawls waiting
//!   for it.
//! - Crawl record (`crawl`, keyed by the offer's key: its id within its client's namespace): the
//!   offer's latest crawl, one status per URL.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::domain::UrlHash;
use crate::domain::{ClientId, ImageId, OfferKey, Timestamp};
use crate::fetch::Validator;
use crate::flows::FlowError;
use crate::flows::crawl::messages::{CrawlState, PhotoError, PhotoStatus};
use crate::ports::{Records, StoreError, StoredRecord};

pub(super) const URL_KIND: &str = "url";
pub(super) const CRAWL_KIND: &str = "crawl";

/// Conflicting writers retry this often before the flow gives up (retryably).
pub(super) const MAX_ROUNDS: u32 = 32;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Waiter {
    /// The offer's key (its id within its client's namespace).
    pub offer_id: OfferKey,
    pub crawl_id: String,
}

/// Conditional-request validators, with the image they validate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Validators {
    pub image_id: ImageId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

impl Validators {
    pub fn new(image_id: ImageId, validator: Validator) -> Self {
        Self {
            image_id,
            etag: validator.etag,
            last_modified: validator.last_modified,
        }
    }

    /// What to send the host next time.
    pub fn validator(&self) -> Validator {
        Validator {
            etag: self.etag.clone(),
            last_modified: self.last_modified.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub(super) enum UrlOutcome {
    Ok {
        image_id: ImageId,
        at: Timestamp,
    },
    Failed {
        error: PhotoError,
        at: Timestamp,
        /// The URL is not downloaded again before this (not set for `host_unavailable`: the
        /// host's circuit decides).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recheck_at: Option<Timestamp>,
    },
}

/// A download in progress; others join it rather than start their own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct FetchLease {
    pub client_id: ClientId,
    pub until: Timestamp,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct UrlRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<UrlOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validators: Option<Validators>,
    /// Permanent failures in a row (the recheck interval doubles with each).
    #[serde(default)]
    pub permanent_failures: u32,
    /// Crawls in a row whose downloads of the URL failed transiently (the recheck interval
    /// doubles with each).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub transient_failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch: Option<FetchLease>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiters: Vec<Waiter>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CrawlPhoto {
    /// As the crawl request gave it.
    pub url: String,
    /// `None` for a URL that did not parse (its status says `invalid_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_hash: Option<UrlHash>,
    #[serde(flatten)]
    pub status: PhotoStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CrawlRecord {
    pub crawl_id: String,
    pub client_id: ClientId,
    /// MD5 of the offer's URL keys in order: an unchanged offer has the same one.
    pub fingerprint: String,
    pub state: CrawlState,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<Timestamp>,
    pub photos: Vec<CrawlPhoto>,
}

impl CrawlRecord {
    pub fn is_settled(&self) -> bool {
        self.photos
            .iter()
            .all(|p| !matches!(p.status, PhotoStatus::Pending))
    }
}

/// What an [`update`] closure decides.
pub(super) enum Change<T, R> {
    /// Write this value, then return `R`.
    Write(T, R),
    /// Leave the record as it is and return `R`.
    Keep(R),
}

/// Reads the record, lets `decide` choose, and writes conditionally, reading again whenever
/// another writer got in first. `decide` may run several times: it must be pure.
///
/// The first read is a peek (half the price): a write over a stale peek names a version that
/// moved on and conflicts, and a decision to keep the record as it is is made again on a
/// consistent read before it is returned, so a stale peek costs a read, never a wrong answer.
pub(super) async fn update<T, R>(
    records: &dyn Records,
    kind: &str,
    key: &str,
    now: Timestamp,
    expires_at: Timestamp,
    mut decide: impl FnMut(Option<T>) -> Result<Change<T, R>, FlowError>,
) -> Result<R, FlowError>
where
    T: Serialize + DeserializeOwned,
{
    let mut consistent = false;
    let mut round = 0;
    while round < MAX_ROUNDS {
        let (current, version) = read_to_write::<T>(records, kind, key, now, consistent).await?;
        match decide(current)? {
            Change::Keep(_) if !consistent => consistent = true,
            Change::Keep(r) => return Ok(r),
            Change::Write(value, r) => {
                if put(records, kind, key, &value, version, expires_at, now).await? {
                    return Ok(r);
                }
                consistent = true;
                round += 1;
                tokio::task::yield_now().await;
            }
        }
    }
    Err(too_many_rounds(kind, key))
}

pub(super) fn too_many_rounds(kind: &str, key: &str) -> FlowError {
    StoreError::Conflict(format!(
        "{kind} record {key} kept changing under {MAX_ROUNDS} writes"
    ))
    .into()
}

/// The record (consistently read) and the version a write over it must name.
pub(super) async fn read_versioned<T: DeserializeOwned>(
    records: &dyn Records,
    kind: &str,
    key: &str,
    now: Timestamp,
) -> Result<(Option<T>, Option<u64>), FlowError> {
    versioned(kind, key, records.get_record(kind, key, now).await?)
}

/// Writes `value` if the record is still at `version`; `false` if another writer got in first.
pub(super) async fn put<T: Serialize>(
    records: &dyn Records,
    kind: &str,
    key: &str,
    value: &T,
    version: Option<u64>,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<bool, FlowError> {
    let body = serde_json::to_string(value)
        .map_err(|e| FlowError::Internal(format!("cannot encode {kind} record: {e}")))?;
    match records
        .put_record(kind, key, &body, version, expires_at, now)
        .await
    {
        Ok(_) => Ok(true),
        Err(StoreError::Conflict(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn read<T: DeserializeOwned>(
    records: &dyn Records,
    kind: &str,
    key: &str,
    now: Timestamp,
) -> Result<Option<T>, FlowError> {
    Ok(read_versioned(records, kind, key, now).await?.0)
}

/// [`read_versioned`], but the answer may miss writes of about the last second
/// ([`Records::peek_record`]): for settling from outcomes already recorded. A write that names
/// the version peeked conflicts if the peek was stale.
pub(super) async fn peek<T: DeserializeOwned>(
    records: &dyn Records,
    kind: &str,
    key: &str,
    now: Timestamp,
) -> Result<(Option<T>, Option<u64>), FlowError> {
    versioned(kind, key, records.peek_record(kind, key, now).await?)
}

/// The record and its version for a write over it: a peek (see [`peek`]) unless `consistent`.
/// A write naming the version of a stale peek conflicts, and the caller reads again,
/// consistently.
pub(super) async fn read_to_write<T: DeserializeOwned>(
    records: &dyn Records,
    kind: &str,
    key: &str,
    now: Timestamp,
    consistent: bool,
) -> Result<(Option<T>, Option<u64>), FlowError> {
    if consistent {
        read_versioned(records, kind, key, now).await
    } else {
        peek(records, kind, key, now).await
    }
}

fn versioned<T: DeserializeOwned>(
    kind: &str,
    key: &str,
    stored: Option<StoredRecord>,
) -> Result<(Option<T>, Option<u64>), FlowError> {
    Ok(match stored {
        Some(s) => (Some(parse::<T>(kind, key, &s.body)?), Some(s.version)),
        None => (None, None),
    })
}

fn parse<T: DeserializeOwned>(kind: &str, key: &str, body: &str) -> Result<T, FlowError> {
    serde_json::from_str(body)
        .map_err(|e| StoreError::corrupt(format!("{kind} record {key} does not parse: {e}")).into())
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
