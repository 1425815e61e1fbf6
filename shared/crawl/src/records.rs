//! The crawl's records, stored as versioned JSON through the [`Documents`] port, and the one
//! read-modify-write loop every change to them goes through.
//!
//! - URL record (`url`, keyed by url hash): the last outcome of the URL, its validators for
//!   conditional requests, the running download's lease (singleflight) and the crawl that
//!   started it (the crawls that join it are filed apart: [`joiners`](super::joiners)).
//! - Crawl record (`crawl`, keyed by the offer's key: its id within its client's namespace): the
//!   offer's latest crawl, one status per URL.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::messages::{CrawlState, PhotoError, PhotoStatus};
use imgest_core::domain::UrlHash;
use imgest_core::domain::{ClientId, ImageId, OfferKey, Timestamp};
use imgest_core::ports::{Documents, StoreError, StoredDocument};
use imgest_download::{FetchErrorKind, Validator};
use imgest_flows::FlowError;

pub(super) const URL_KIND: &str = "url";
pub(super) const CRAWL_KIND: &str = "crawl";

/// Conflicting writers retry this often, with backoff and jitter
/// ([`imgest_core::retry::backoff`]), before the flow gives up (retryably).
pub(super) const MAX_ROUNDS: u32 = 12;

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
    /// Names this download among the URL's downloads (the crawls that join it file it with
    /// themselves; empty on leases written before joins were filed apart).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Whether a crawl joined it (its first joiner marks it, once), so that its finisher reads
    /// the joiners' groups only for a download that has some. `None` on leases written before
    /// joiners were spread over groups: theirs are in the URL's one group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined: Option<bool>,
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
    /// The download the last outcome ended: whoever tells the crawls that joined it (its
    /// finisher, its task delivered again, a page handed on) learns from the store where they
    /// are filed, not from a message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<FetchLease>,
    /// The crawl that started the running download (and, in records written before joins were
    /// filed apart, those that joined it). The crawls that join are filed as members of the
    /// URL's group ([`joiners`](super::joiners)), so this never grows with them.
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
    /// While an unchanged offer re-sent after the URL window is revalidated in the background:
    /// the result its partner was told at once (the crawl it settled from), which stands until
    /// the revalidation finds otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub told: Option<Told>,
}

/// The result a revalidated offer's partner was told: every photo ok, with these images.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Told {
    pub crawl_id: String,
    pub settled_at: Timestamp,
    /// Each photo's image, in the crawl's order.
    pub images: Vec<ImageId>,
}

impl CrawlRecord {
    pub fn is_settled(&self) -> bool {
        self.photos
            .iter()
            .all(|p| !matches!(p.status, PhotoStatus::Pending))
    }

    /// Each photo's image, if every photo is ok.
    pub fn images(&self) -> Option<Vec<ImageId>> {
        self.photos
            .iter()
            .map(|p| match &p.status {
                PhotoStatus::Ok { image_id } => Some(image_id.clone()),
                _ => None,
            })
            .collect()
    }

    /// The crawl as its partner knows it: while a revalidation runs, the result it was told
    /// (done, every photo ok); otherwise the crawl itself.
    pub fn as_told(&self) -> std::borrow::Cow<'_, Self> {
        let Some(told) = self
            .told
            .as_ref()
            .filter(|t| t.images.len() == self.photos.len())
        else {
            return std::borrow::Cow::Borrowed(self);
        };
        let photos = self
            .photos
            .iter()
            .zip(&told.images)
            .map(|(p, image_id)| CrawlPhoto {
                url: p.url.clone(),
                url_hash: p.url_hash.clone(),
                status: PhotoStatus::Ok {
                    image_id: image_id.clone(),
                },
            })
            .collect();
        std::borrow::Cow::Owned(Self {
            crawl_id: told.crawl_id.clone(),
            client_id: self.client_id.clone(),
            fingerprint: self.fingerprint.clone(),
            state: CrawlState::Done,
            started_at: self.started_at,
            settled_at: Some(told.settled_at),
            photos,
            told: None,
        })
    }
}

/// A photo of an offer's latest crawl, as [`for_each_latest_crawl`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CrawledPhoto<'a> {
    /// The host of its URL (see [`host_of`](super::host_of)); `None` for a URL that does not
    /// parse or names no host.
    pub host: Option<&'a str>,
    /// Why it failed, if it did.
    pub failed: Option<FetchErrorKind>,
}

/// Walks every offer's latest crawl (the live crawl records), `page` records at a time, and
/// calls `each` with each crawl's photos.
///
/// Returns how many records were left out because their body does not parse: each is logged
/// and skipped, so that one damaged record does not hide what all the others say.
pub(crate) async fn for_each_latest_crawl(
    records: &dyn Documents,
    now: Timestamp,
    page: usize,
    mut each: impl FnMut(&[CrawledPhoto<'_>]),
) -> Result<u64, FlowError> {
    let mut unreadable = 0;
    let mut cursor: Option<String> = None;
    loop {
        let walked = records
            .scan_documents(CRAWL_KIND, cursor.as_deref(), page, now)
            .await?;
        for (key, stored) in &walked.documents {
            let crawl: CrawlRecord = match parse(CRAWL_KIND, key, &stored.body) {
                Ok(crawl) => crawl,
                Err(e) => {
                    unreadable += 1;
                    warn!(offer = %key, error = %e, "a crawl record was left out of a walk");
                    continue;
                }
            };
            let urls: Vec<Option<url::Url>> = crawl
                .photos
                .iter()
                .map(|p| url::Url::parse(&p.url).ok())
                .collect();
            let photos: Vec<CrawledPhoto<'_>> = crawl
                .photos
                .iter()
                .zip(&urls)
                .map(|(photo, url)| CrawledPhoto {
                    host: url
                        .as_ref()
                        .filter(|u| u.host_str().is_some_and(|h| !h.is_empty()))
                        .map(super::host_of),
                    failed: match &photo.status {
                        PhotoStatus::Failed { error } => Some(error.kind),
                        PhotoStatus::Pending | PhotoStatus::Ok { .. } => None,
                    },
                })
                .collect();
            each(&photos);
        }
        match walked.next {
            Some(next) => cursor = Some(next),
            None => return Ok(unreadable),
        }
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
    records: &dyn Documents,
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
                imgest_core::retry::backoff(round).await;
                round += 1;
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
    records: &dyn Documents,
    kind: &str,
    key: &str,
    now: Timestamp,
) -> Result<(Option<T>, Option<u64>), FlowError> {
    versioned(kind, key, records.get_document(kind, key, now).await?)
}

/// Writes `value` if the record is still at `version`; `false` if another writer got in first.
pub(super) async fn put<T: Serialize>(
    records: &dyn Documents,
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
        .put_document(kind, key, &body, version, expires_at, now)
        .await
    {
        Ok(_) => Ok(true),
        Err(StoreError::Conflict(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn read<T: DeserializeOwned>(
    records: &dyn Documents,
    kind: &str,
    key: &str,
    now: Timestamp,
) -> Result<Option<T>, FlowError> {
    Ok(read_versioned(records, kind, key, now).await?.0)
}

/// [`read_versioned`], but the answer may miss writes of about the last second
/// ([`Documents::peek_document`]): for settling from outcomes already recorded. A write that names
/// the version peeked conflicts if the peek was stale.
pub(super) async fn peek<T: DeserializeOwned>(
    records: &dyn Documents,
    kind: &str,
    key: &str,
    now: Timestamp,
) -> Result<(Option<T>, Option<u64>), FlowError> {
    versioned(kind, key, records.peek_document(kind, key, now).await?)
}

/// The record and its version for a write over it: a peek (see [`peek`]) unless `consistent`.
/// A write naming the version of a stale peek conflicts, and the caller reads again,
/// consistently.
pub(super) async fn read_to_write<T: DeserializeOwned>(
    records: &dyn Documents,
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

pub(super) fn versioned<T: DeserializeOwned>(
    kind: &str,
    key: &str,
    stored: Option<StoredDocument>,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;
    use imgest_embedded::SqliteStore;

    const T: Timestamp = Timestamp::from_millis(1_700_000_000_000);

    fn crawl(photos: &[(&str, PhotoStatus)]) -> String {
        serde_json::to_string(&CrawlRecord {
            crawl_id: "c1".into(),
            client_id: ClientId::parse("acme").unwrap(),
            fingerprint: "f".into(),
            state: CrawlState::Done,
            started_at: T,
            settled_at: Some(T),
            photos: photos
                .iter()
                .map(|(url, status)| CrawlPhoto {
                    url: (*url).to_owned(),
                    url_hash: None,
                    status: status.clone(),
                })
                .collect(),
            told: None,
        })
        .unwrap()
    }

    fn failed(kind: FetchErrorKind) -> PhotoStatus {
        PhotoStatus::Failed {
            error: PhotoError::new(kind, None, 1),
        }
    }

    #[tokio::test]
    async fn the_walk_gives_each_live_crawls_photos_and_counts_the_records_that_do_not_parse() {
        let store = SqliteStore::open_in_memory().unwrap();
        let (lives, expired) = (
            T.plus(Duration::from_secs(3600)),
            T.plus(Duration::from_secs(1)),
        );
        let put = async |kind: &str, key: &str, body: &str, expires_at| {
            store
                .put_document(kind, key, body, None, expires_at, T)
                .await
                .unwrap();
        };
        let one = crawl(&[
            (
                "https://Photos.Example:8443/a.jpg",
                failed(FetchErrorKind::NotFound),
            ),
            ("https://photos.example/b.jpg", PhotoStatus::Pending),
            ("not a url", failed(FetchErrorKind::InvalidUrl)),
            (
                "mailto:someone@example.com",
                failed(FetchErrorKind::InvalidUrl),
            ),
        ]);
        put(CRAWL_KIND, "acme/o1", &one, lives).await;
        put(CRAWL_KIND, "acme/o2", &crawl(&[]), lives).await;
        put(CRAWL_KIND, "acme/broken", "{\"photos\": 3}", lives).await;
        put(
            CRAWL_KIND,
            "acme/old",
            &crawl(&[("https://old.example/x.jpg", PhotoStatus::Pending)]),
            expired,
        )
        .await;
        put(URL_KIND, "u1", "{}", lives).await;

        let mut seen = Vec::new();
        let now = T.plus(Duration::from_secs(2));
        let unreadable = for_each_latest_crawl(&store, now, 1, |photos| {
            seen.push(
                photos
                    .iter()
                    .map(|p| (p.host.map(str::to_owned), p.failed))
                    .collect::<Vec<_>>(),
            );
        })
        .await
        .unwrap();
        assert_eq!(unreadable, 1);
        assert_eq!(
            seen,
            [
                vec![
                    (
                        Some("photos.example:8443".to_owned()),
                        Some(FetchErrorKind::NotFound)
                    ),
                    (Some("photos.example".to_owned()), None),
                    (None, Some(FetchErrorKind::InvalidUrl)),
                    (None, Some(FetchErrorKind::InvalidUrl)),
                ],
                vec![],
            ]
        );
    }
}
