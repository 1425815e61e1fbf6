//! The crawls that join a running download: filed as members of the URL's group, one small
//! write each however many joined, and told its outcome a page at a time.
//!
//! What keeps every joiner told: a joiner files itself, then reads the URL's record
//! consistently. If the download it joined still runs, its finisher, which records the outcome
//! before it reads the group (consistently, always: one read of an empty group for a download
//! nobody joined), finds it; if not, the outcome is recorded and the joiner settles from it
//! itself. A crawl told twice changes nothing. Nothing a joiner does writes the URL's record,
//! so joiners never conflict with each other or with the finisher.
//!
//! Telling is bounded per invocation where invocations are (AWS): the finisher tells one page
//! and hands the rest on to the settle queue, each page's message handing on the next before
//! it tells its own, so the pages of a URL in a hundred thousand offers are told side by side.

use std::collections::HashMap;

use futures_util::{StreamExt, TryStreamExt, stream};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::fetch::status_of;
use super::intake::RETENTION_MARGIN;
use super::records::{self, FetchLease, URL_KIND, UrlRecord, Waiter};
use super::{Crawler, Finishing};
use crate::messages::{JoinersMessage, JoinersPage, PhotoStatus};
use imgest_core::domain::{OfferKey, Timestamp, UrlHash};
use imgest_flows::FlowError;

/// The group kind the joined crawls are filed under (keyed by the URL's hash).
pub(super) const JOINER_KIND: &str = "waiter";
/// Joined crawls told per page (per invocation on AWS): each is a crawl record's read and write,
/// and finishing the crawls that settle, about a second for a page told 16 at a time.
pub const JOINERS_PER_PAGE: usize = 100;
/// Crawls of a page told at once.
const AT_ONCE: usize = 16;

/// A joined crawl as filed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Joiner {
    offer_id: OfferKey,
    crawl_id: String,
    /// The download it joined ([`FetchLease::id`]).
    lease: String,
}

/// Its name in the group: unique per crawl of an offer (crawl ids are fixed-length hex).
fn member_name(waiter: &Waiter) -> String {
    format!("{}/{}", waiter.crawl_id, waiter.offer_id)
}

/// Whether `current` is still the download `joined` (and running at `now`).
fn still_running(current: Option<&FetchLease>, joined: &FetchLease, now: Timestamp) -> bool {
    current.is_some_and(|l| l.id == joined.id && l.until == joined.until && now < l.until)
}

/// What filing a joiner found.
pub(super) enum AfterJoin {
    /// The download still runs: its finisher tells the crawl.
    Waiting,
    /// It ended meanwhile: the crawl settles with the outcome recorded.
    Settled(PhotoStatus),
    /// It ended and another runs, or nothing is recorded (the record expired): join again.
    Ended,
}

impl Crawler {
    /// Files `waiter` as a joiner of the running download `lease` of URL `hash` (one write),
    /// then reads the record to learn whether the download ended meanwhile.
    pub(super) async fn file_joiner(
        &self,
        hash: &UrlHash,
        lease: &FetchLease,
        waiter: &Waiter,
        now: Timestamp,
    ) -> Result<AfterJoin, FlowError> {
        let records = self.service.ports().documents.as_ref();
        let name = member_name(waiter);
        let body = serde_json::to_string(&Joiner {
            offer_id: waiter.offer_id.clone(),
            crawl_id: waiter.crawl_id.clone(),
            lease: lease.id.clone(),
        })
        .map_err(|e| FlowError::Internal(format!("cannot encode a joined crawl: {e}")))?;
        // Kept until the lease would run out, and a margin: its finisher tells it long before.
        let expires_at = lease.until.plus(RETENTION_MARGIN);
        records
            .put_member(JOINER_KIND, hash.as_str(), &name, &body, expires_at, now)
            .await?;
        let now = self.now();
        let record = records::read::<UrlRecord>(records, URL_KIND, hash.as_str(), now).await?;
        let record = record.unwrap_or_default();
        if still_running(record.fetch.as_ref(), lease, now) {
            return Ok(AfterJoin::Waiting);
        }
        // Ended between the join's read and the filing: the filing is spent.
        records
            .delete_members(JOINER_KIND, hash.as_str(), &[name])
            .await?;
        // Another download of the URL runs already (the join's read was stale): join that one.
        if record.fetch.as_ref().is_some_and(|l| now < l.until) {
            return Ok(AfterJoin::Ended);
        }
        Ok(match &record.last {
            Some(last) => AfterJoin::Settled(status_of(last)),
            None => AfterJoin::Ended,
        })
    }

    /// Tells the crawls filed as joiners of URL `hash` its outcome, `status` when the caller
    /// has just recorded it (else as recorded; those that joined a download of it still running
    /// are left to that download's finisher), from the start of the group, and deletes their
    /// filings. Where this runs in a bounded invocation (the fetch and process functions), one
    /// page is told here and the rest handed on to the settle queue.
    pub(super) async fn tell_joiners(
        &self,
        hash: &UrlHash,
        status: Option<&PhotoStatus>,
    ) -> Result<(), FlowError> {
        let hand_on = self.finishing == Finishing::Handoff;
        self.tell_joiners_from(hash, None, hand_on, status.cloned())
            .await
    }

    /// A page of joined crawls handed on by [`tell_joiners`](Self::tell_joiners) (the settle
    /// queue's `joiners` message): the next page is handed on first, then this one told.
    pub async fn tell_joiners_page(&self, page: &JoinersPage) -> Result<(), FlowError> {
        self.tell_joiners_from(&page.url_hash, Some(page.from.clone()), true, None)
            .await
    }

    async fn tell_joiners_from(
        &self,
        hash: &UrlHash,
        mut cursor: Option<String>,
        hand_on: bool,
        known: Option<PhotoStatus>,
    ) -> Result<(), FlowError> {
        let records = self.service.ports().documents.as_ref();
        let now = self.now();
        // Known: the caller has just ended the download. Else as recorded, and the download
        // running now, if any, keeps its own joiners.
        let (status, running) = match known {
            Some(status) => (status, None),
            None => {
                let record =
                    records::read::<UrlRecord>(records, URL_KIND, hash.as_str(), now).await?;
                let Some(record) = record else {
                    return Ok(());
                };
                let Some(last) = &record.last else {
                    return Ok(());
                };
                let running = record.fetch.filter(|l| now < l.until).map(|l| l.id);
                (status_of(last), running)
            }
        };
        let outcome: HashMap<UrlHash, PhotoStatus> = [(hash.clone(), status)].into();
        let running = running.as_deref();
        loop {
            let page = records
                .list_members(
                    JOINER_KIND,
                    hash.as_str(),
                    cursor.as_deref(),
                    JOINERS_PER_PAGE,
                    now,
                )
                .await?;
            if hand_on && let Some(next) = &page.next {
                self.hand_on_joiners(hash, next).await?;
            }
            let mut told = Vec::with_capacity(page.members.len());
            let mut joiners = Vec::with_capacity(page.members.len());
            for (name, body) in page.members {
                match serde_json::from_str::<Joiner>(&body) {
                    Ok(joiner) if Some(joiner.lease.as_str()) == running => {}
                    Ok(joiner) => joiners.push((name, joiner)),
                    Err(e) => {
                        // Nothing to tell from it; kept, it would be read by every page walk.
                        warn!(url_hash = %hash, member = %name, error = %e, "a joined crawl's filing does not parse: deleted");
                        told.push(name);
                    }
                }
            }
            let settled: Vec<String> = stream::iter(joiners)
                .map(|(name, joiner)| {
                    let outcome = &outcome;
                    async move {
                        self.settle(&joiner.offer_id, &joiner.crawl_id, outcome)
                            .await
                            .map(|_| name)
                    }
                })
                .buffer_unordered(AT_ONCE)
                .try_collect()
                .await?;
            let count = settled.len();
            told.extend(settled);
            records
                .delete_members(JOINER_KIND, hash.as_str(), &told)
                .await?;
            if count > 0 {
                info!(url_hash = %hash, crawls = count, "joined crawls told");
            }
            match page.next {
                Some(next) if !hand_on => cursor = Some(next),
                _ => return Ok(()),
            }
        }
    }

    /// Sends the page of joined crawls from `from` on to the settle queue.
    async fn hand_on_joiners(&self, hash: &UrlHash, from: &str) -> Result<(), FlowError> {
        let message = JoinersMessage {
            joiners: JoinersPage {
                url_hash: hash.clone(),
                from: from.to_owned(),
            },
        };
        self.send_to_settle(&message).await
    }
}
