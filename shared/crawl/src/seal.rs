//! A crawl's seal: what intake asked for, kept where the functions that decode hostile bytes
//! cannot write, and what the intake function checks before it links a crawl they settled.
//!
//! On AWS the fetch and process functions run image codecs on partners' bytes, and settle
//! crawls: they write crawl records, which the intake function finishes (links the offer's
//! photos, sends the result). A compromised decoder could rewrite a crawl record, to list a
//! URL the offer never had or an image its URL never gave. So intake, which writes a crawl
//! record first, also writes its seal (a `seal` record, keyed by the offer and the crawl id:
//! the SHA-256 of the crawl's id, client, fingerprint, URLs with their hashes, and the images
//! a revalidation's partner was told), and the fetch and process roles may not write seals
//! (`rec#seal#` is outside their `dynamodb:LeadingKeys`). Before it finishes a crawl it did
//! not build in the same call, the intake function checks:
//!
//! - the crawl record matches its seal (else it is refused, `forbidden`, and counted:
//!   nothing is linked);
//! - each photo the crawl says is ok has that image in its URL's record, which the download
//!   of that URL wrote: a photo whose URL record says otherwise takes what the record says
//!   (its current outcome), and one whose download still runs is checked again later.
//!
//! What a compromised decoder can still do is what its job is: decide the outcome of the URLs
//! it downloads (for every offer that lists them, within the URL window). It cannot attach an
//! image to an offer that does not list that URL, nor change what an offer lists. The cost:
//! one small write per crawl that waits for a download, and on AWS one read of the seal and
//! one (eventually consistent) read per ok photo when the intake function finishes it.

use std::collections::HashMap;

use serde::Serialize;

use super::Crawler;
use super::records::{self, CrawlPhoto, CrawlRecord, URL_KIND, UrlOutcome, UrlRecord};
use crate::messages::PhotoStatus;
use imgest_core::domain::{ClientId, ContentHash, ImageId, OfferKey, Timestamp, UrlHash};
use imgest_core::ports::StoreError;
use imgest_flows::FlowError;

pub(super) const SEAL_KIND: &str = "seal";

/// The parts of a crawl intake decided, in the order they are hashed.
#[derive(Serialize)]
struct Sealed<'a> {
    crawl_id: &'a str,
    client_id: &'a ClientId,
    fingerprint: &'a str,
    urls: Vec<(&'a str, Option<&'a UrlHash>)>,
    told: Option<(&'a str, i64, &'a [ImageId])>,
}

/// The seal of `crawl`: hex SHA-256 of what intake decided of it.
pub(super) fn seal_of(crawl: &CrawlRecord) -> Result<String, FlowError> {
    let sealed = Sealed {
        crawl_id: &crawl.crawl_id,
        client_id: &crawl.client_id,
        fingerprint: &crawl.fingerprint,
        urls: crawl
            .photos
            .iter()
            .map(|p: &CrawlPhoto| (p.url.as_str(), p.url_hash.as_ref()))
            .collect(),
        told: crawl.told.as_ref().map(|t| {
            (
                t.crawl_id.as_str(),
                t.settled_at.as_millis(),
                t.images.as_slice(),
            )
        }),
    };
    let json = serde_json::to_vec(&sealed)
        .map_err(|e| FlowError::Internal(format!("cannot encode a crawl's seal: {e}")))?;
    Ok(ContentHash::of_bytes(&json).to_string())
}

/// Where the seal of the offer's crawl `crawl_id` is kept.
fn seal_key(offer: &OfferKey, crawl_id: &str) -> String {
    format!("{offer}#{crawl_id}")
}

impl Crawler {
    /// Writes the seal of `crawl` (the offer's crawl about to be written), kept as long as the
    /// crawl record. Written again, it is the same; a different one (the crawl written again
    /// with other parts) replaces it.
    pub(super) async fn write_seal(
        &self,
        offer: &OfferKey,
        crawl: &CrawlRecord,
        now: Timestamp,
    ) -> Result<(), FlowError> {
        let seal = seal_of(crawl)?;
        let key = seal_key(offer, &crawl.crawl_id);
        let records = self.service.ports().documents.as_ref();
        let expires_at = self.retention(now);
        let mut expected = None;
        for _ in 0..records::MAX_ROUNDS {
            match records
                .put_document(SEAL_KIND, &key, &seal, expected, expires_at, now)
                .await
            {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict(_)) => {
                    match records.get_document(SEAL_KIND, &key, now).await? {
                        Some(stored) if stored.body == seal => return Ok(()),
                        Some(stored) => expected = Some(stored.version),
                        None => expected = None,
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(records::too_many_rounds(SEAL_KIND, &key))
    }

    /// `crawl` as the store bears it out, before the intake function finishes it: refused
    /// (`forbidden`) unless it matches its seal; each ok photo checked against its URL's
    /// record (see the module doc). A retryable error while a photo's download still runs.
    pub(super) async fn verified(
        &self,
        offer: &OfferKey,
        mut crawl: CrawlRecord,
    ) -> Result<CrawlRecord, FlowError> {
        let now = self.now();
        let records = self.service.ports().documents.as_ref();
        let key = seal_key(offer, &crawl.crawl_id);
        let seal = match records.peek_document(SEAL_KIND, &key, now).await? {
            Some(seal) => Some(seal),
            None => records.get_document(SEAL_KIND, &key, now).await?,
        };
        if seal.is_none_or(|s| s.body != seal_of(&crawl).unwrap_or_default()) {
            self.counters.crawls_unverified.increment(1);
            return Err(FlowError::Forbidden(format!(
                "the crawl {} of offer {offer} does not match what intake sealed: not finished",
                crawl.crawl_id
            )));
        }
        let mut confirmed: HashMap<(UrlHash, ImageId), Confirmed> = HashMap::new();
        for photo in &mut crawl.photos {
            let (PhotoStatus::Ok { image_id }, Some(hash)) = (&photo.status, &photo.url_hash)
            else {
                continue;
            };
            let pair = (hash.clone(), image_id.clone());
            let answer = match confirmed.get(&pair) {
                Some(answer) => answer.clone(),
                None => {
                    let answer = self.confirm(hash, image_id, now).await?;
                    confirmed.insert(pair, answer.clone());
                    answer
                }
            };
            match answer {
                Confirmed::Yes => {}
                Confirmed::Running => {
                    return Err(StoreError::Conflict(format!(
                        "the crawl {} of offer {offer}: URL {hash}'s download has not recorded its outcome yet",
                        crawl.crawl_id
                    ))
                    .into());
                }
                Confirmed::Otherwise(status) => {
                    self.counters.crawls_unverified.increment(1);
                    tracing::warn!(offer_id = %offer, url_hash = %hash, "a settled photo its URL's record does not bear out: the record's outcome stands");
                    photo.status = status;
                }
                Confirmed::Missing => {
                    self.counters.crawls_unverified.increment(1);
                    return Err(FlowError::Forbidden(format!(
                        "the crawl {} of offer {offer}: URL {hash} has no recorded outcome to bear its photo out",
                        crawl.crawl_id
                    )));
                }
            }
        }
        Ok(crawl)
    }

    /// Whether `hash`'s URL record says `image_id` is its photo. The fetch and process
    /// functions tell a crawl its outcome a moment before they record it on the URL (a crash
    /// between leaves the download running, and its task settles it again): a record whose
    /// download still runs is read again a few times, consistently, before the check is left
    /// for later.
    async fn confirm(
        &self,
        hash: &UrlHash,
        image_id: &ImageId,
        now: Timestamp,
    ) -> Result<Confirmed, FlowError> {
        let records = self.service.ports().documents.as_ref();
        let mut consistent = false;
        for round in 0..records::MAX_ROUNDS {
            let (record, _) = records::read_to_write::<UrlRecord>(
                records,
                URL_KIND,
                hash.as_str(),
                now,
                consistent,
            )
            .await?;
            let Some(record) = record else {
                if consistent {
                    return Ok(Confirmed::Missing);
                }
                consistent = true;
                continue;
            };
            match &record.last {
                Some(UrlOutcome::Ok { image_id: kept, .. }) if kept == image_id => {
                    return Ok(Confirmed::Yes);
                }
                _ if record.fetch.is_some() => {}
                Some(outcome) => return Ok(Confirmed::Otherwise(super::fetch::status_of(outcome))),
                None => return Ok(Confirmed::Missing),
            }
            consistent = true;
            imgest_core::retry::backoff(round).await;
        }
        Ok(Confirmed::Running)
    }
}

/// What a URL's record says of a photo a crawl says it gave.
#[derive(Debug, Clone)]
enum Confirmed {
    /// That image.
    Yes,
    /// Its download still runs, its outcome not recorded yet.
    Running,
    /// Another outcome, which stands.
    Otherwise(PhotoStatus),
    /// No outcome at all.
    Missing,
}
