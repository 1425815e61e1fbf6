//! The crawls that join a running download: filed as members of one of the URL's groups, one
//! small write each however many joined, and told its outcome a page at a time.
//!
//! A popular URL is joined thousands of times a second while its download runs: filed in one
//! group (one partition key on DynamoDB) those writes would pass a partition's 1,000 a second,
//! and a read of the URL's record after each, its 3,000. So a download's joiners are spread
//! over [`JOINER_GROUPS`] groups by a hash of the crawl, and each checks its own group's mark
//! rather than the record:
//!
//! - The first joiner marks the download joined in the URL's record (a write conditional on
//!   the version it read: once per download, never again once a joiner sees the mark), before
//!   it files itself. The finisher learns from the record it ends whether anyone joined, and a
//!   download nobody joined (nearly all) costs no read of any group.
//! - A joiner files itself in its group, then reads the group's end mark for its download,
//!   consistently. A finisher ending a joined download writes every group's mark first, then
//!   reads the groups. So a joiner that finds no mark is in its group before the finisher
//!   reads it, and one that finds it settles from the outcome recorded itself. A crawl told
//!   twice changes nothing. Nothing a joiner does after the mark writes the URL's record, so
//!   joiners never conflict with each other or with the finisher.
//!
//! Leases written before the groups (their `joined` absent) keep the one group keyed by the
//! URL's hash, checked against the record, as before.
//!
//! Telling is bounded per invocation where invocations are (AWS): the finisher tells up to a
//! page and hands each group's rest on to the settle queue, each page's message handing on the
//! next before it tells its own, so the groups of a URL in a hundred thousand offers are told
//! side by side, and each group's pages one after another.

use std::collections::HashMap;

use futures_util::{StreamExt, TryStreamExt, stream};
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::fetch::status_of;
use super::intake::RETENTION_MARGIN;
use super::records::{self, FetchLease, URL_KIND, UrlRecord, Waiter};
use super::{Crawler, Finishing};
use crate::messages::{JoinerGroup, JoinersMessage, JoinersPage, PhotoStatus};
use imgest_core::domain::{OfferKey, Timestamp, UrlHash};
use imgest_core::ports::StoreError;
use imgest_flows::FlowError;

/// The group kind the joined crawls are filed under (keyed by the URL's hash and the group).
pub(super) const JOINER_KIND: &str = "waiter";
/// The document kind of a group's end mark for a download (keyed by the URL's hash, the group
/// and the download's lease id).
const ENDED_KIND: &str = "waiter-end";
/// Groups a download's joiners are spread over: a URL joined 4,000 times a second (ten times
/// seed 001's peak) writes 250 filings a second in each, and reads as many marks.
pub const JOINER_GROUPS: usize = 16;
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

/// Which group a joiner of this name is filed in: spread evenly, the same in every process.
fn group_of(name: &str) -> usize {
    usize::from(Md5::digest(name.as_bytes())[0]) % JOINER_GROUPS
}

/// The group's key: the URL's hash for the one group of a download from before the groups.
fn group_key(hash: &UrlHash, group: Option<usize>) -> String {
    match group {
        Some(group) => format!("{}.{group:x}", hash.as_str()),
        None => hash.as_str().to_owned(),
    }
}

/// The keys of every group a download's joiners may be filed in (the one of before, then the
/// spread ones): for checking that none is left.
pub fn joiner_groups(hash: &UrlHash) -> Vec<String> {
    std::iter::once(None)
        .chain((0..JOINER_GROUPS).map(Some))
        .map(|g| group_key(hash, g))
        .collect()
}

fn end_mark_key(hash: &UrlHash, group: usize, lease: &str) -> String {
    format!("{}.{group:x}.{lease}", hash.as_str())
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
    /// It ended and another runs, or nothing is recorded (the record expired), or the record
    /// moved on before the joiner could mark it: join again.
    Ended,
}

impl Crawler {
    /// Files `waiter` as a joiner of the running download `lease` of URL `hash`, as `record`
    /// (at `version`) shows it: marks the download joined first if nobody has, then one write,
    /// then a read of its group's end mark (of the record, for a download from before the
    /// groups) to learn whether the download ended meanwhile.
    pub(super) async fn file_joiner(
        &self,
        hash: &UrlHash,
        record: &UrlRecord,
        version: Option<u64>,
        waiter: &Waiter,
        now: Timestamp,
    ) -> Result<AfterJoin, FlowError> {
        let Some(lease) = record.fetch.as_ref() else {
            return Ok(AfterJoin::Ended);
        };
        let records = self.service.ports().documents.as_ref();
        let name = member_name(waiter);
        let group = match lease.joined {
            None => None,
            Some(joined) => {
                if !joined && !self.mark_joined(hash, record, version, now).await? {
                    return Ok(AfterJoin::Ended);
                }
                Some(group_of(&name))
            }
        };
        let key = group_key(hash, group);
        let body = serde_json::to_string(&Joiner {
            offer_id: waiter.offer_id.clone(),
            crawl_id: waiter.crawl_id.clone(),
            lease: lease.id.clone(),
        })
        .map_err(|e| FlowError::Internal(format!("cannot encode a joined crawl: {e}")))?;
        // Kept until the lease would run out, and a margin: its finisher tells it long before.
        let expires_at = lease.until.plus(RETENTION_MARGIN);
        records
            .put_member(JOINER_KIND, &key, &name, &body, expires_at, now)
            .await?;
        let now = self.now();
        let ended = match group {
            Some(group) => records
                .get_document(ENDED_KIND, &end_mark_key(hash, group, &lease.id), now)
                .await?
                .is_some(),
            None => {
                let current = records::read::<UrlRecord>(records, URL_KIND, hash.as_str(), now)
                    .await?
                    .unwrap_or_default();
                !still_running(current.fetch.as_ref(), lease, now)
            }
        };
        if !ended {
            return Ok(AfterJoin::Waiting);
        }
        // Ended between the join's read and the filing: the filing is spent.
        records.delete_members(JOINER_KIND, &key, &[name]).await?;
        let record = records::read::<UrlRecord>(records, URL_KIND, hash.as_str(), now).await?;
        let record = record.unwrap_or_default();
        // Another download of the URL runs already (the join's read was stale): join that one.
        if record.fetch.as_ref().is_some_and(|l| now < l.until) {
            return Ok(AfterJoin::Ended);
        }
        Ok(match &record.last {
            Some(last) => AfterJoin::Settled(status_of(last)),
            None => AfterJoin::Ended,
        })
    }

    /// Marks the download `record` runs joined, if the record is still at `version`; `false`
    /// if it moved on (another joiner marked it, or the download ended): the join reads again.
    async fn mark_joined(
        &self,
        hash: &UrlHash,
        record: &UrlRecord,
        version: Option<u64>,
        now: Timestamp,
    ) -> Result<bool, FlowError> {
        let mut marked = record.clone();
        let Some(lease) = marked.fetch.as_mut() else {
            return Ok(false);
        };
        lease.joined = Some(true);
        self.put_url(hash, &marked, version, now).await
    }

    /// Tells the crawls that joined the download `finished` (the URL's record as its finisher
    /// just wrote it) ended its outcome, and deletes their filings; `None` reads the record
    /// (a task delivered again after its finisher stopped), and then the download running now,
    /// if any, keeps its own joiners. Where this runs in a bounded invocation (the fetch and
    /// process functions), about a page is told here and the rest handed on to the settle
    /// queue.
    pub(super) async fn tell_joiners(
        &self,
        hash: &UrlHash,
        finished: Option<&UrlRecord>,
    ) -> Result<(), FlowError> {
        let now = self.now();
        let read;
        let (record, running) = match finished {
            Some(record) => (record, None),
            None => {
                read = self.as_recorded(hash, now).await?;
                let Some((record, running)) = &read else {
                    return Ok(());
                };
                (record, running.clone())
            }
        };
        let Some(last) = &record.last else {
            return Ok(());
        };
        let status = status_of(last);
        let groups: Vec<Option<usize>> = match record.ended.as_ref() {
            // Nobody joined it: nothing to read.
            Some(FetchLease {
                joined: Some(false),
                ..
            }) => return Ok(()),
            Some(
                lease @ FetchLease {
                    joined: Some(true), ..
                },
            ) => {
                self.mark_ended(hash, lease, now).await?;
                (0..JOINER_GROUPS).map(Some).collect()
            }
            // A download from before the groups (or an outcome recorded before `ended` was).
            _ => vec![None],
        };
        let hand_on = self.finishing == Finishing::Handoff;
        let mut budget = JOINERS_PER_PAGE;
        for group in groups {
            if hand_on && budget == 0 {
                self.hand_on_joiners(hash, group, "").await?;
                continue;
            }
            let told = self
                .tell_group(hash, group, None, hand_on, &status, running.as_deref())
                .await?;
            budget = budget.saturating_sub(told.max(1));
        }
        Ok(())
    }

    /// The URL's record (consistently read), if any, and the download running now, if any:
    /// its joiners are its own finisher's to tell.
    async fn as_recorded(
        &self,
        hash: &UrlHash,
        now: Timestamp,
    ) -> Result<Option<(UrlRecord, Option<String>)>, FlowError> {
        let records = self.service.ports().documents.as_ref();
        let record = records::read::<UrlRecord>(records, URL_KIND, hash.as_str(), now).await?;
        Ok(record.map(|record| {
            let running = record.fetch.as_ref().filter(|l| now < l.until);
            let running = running.map(|l| l.id.clone());
            (record, running)
        }))
    }

    /// Writes every group's end mark for the joined download `lease`, before any group is
    /// read: a joiner filed after a group is read finds its mark.
    async fn mark_ended(
        &self,
        hash: &UrlHash,
        lease: &FetchLease,
        now: Timestamp,
    ) -> Result<(), FlowError> {
        let records = self.service.ports().documents.as_ref();
        let expires_at = lease.until.plus(RETENTION_MARGIN);
        stream::iter(0..JOINER_GROUPS)
            .map(|group| {
                let key = end_mark_key(hash, group, &lease.id);
                async move {
                    match records
                        .put_document(ENDED_KIND, &key, &lease.id, None, expires_at, now)
                        .await
                    {
                        // Marked already (a task delivered again, a finisher retried).
                        Ok(_) | Err(StoreError::Conflict { .. }) => Ok(()),
                        Err(e) => Err(FlowError::from(e)),
                    }
                }
            })
            .buffer_unordered(JOINER_GROUPS)
            .try_collect::<()>()
            .await
    }

    /// A page of joined crawls handed on by [`tell_joiners`](Self::tell_joiners) (the settle
    /// queue's `joiners` message): the group's next page is handed on first, then this one
    /// told, with the outcome as recorded (the download running now, if any, keeps its own
    /// joiners).
    pub async fn tell_joiners_page(&self, page: &JoinersPage) -> Result<(), FlowError> {
        let group = page.group.map(JoinerGroup::index);
        let hash = &page.url_hash;
        let Some((record, running)) = self.as_recorded(hash, self.now()).await? else {
            return Ok(());
        };
        let Some(last) = &record.last else {
            return Ok(());
        };
        let status = status_of(last);
        let from = (!page.from.is_empty()).then(|| page.from.clone());
        self.tell_group(hash, group, from, true, &status, running.as_deref())
            .await
            .map(|_| ())
    }

    /// Tells the crawls filed in `group` of URL `hash`, from `cursor`, `status`, except those
    /// that joined the download `running` (its own finisher tells them), and deletes their
    /// filings: a page, handing the next on, if `hand_on`; else every page. Returns how many
    /// it told.
    async fn tell_group(
        &self,
        hash: &UrlHash,
        group: Option<usize>,
        mut cursor: Option<String>,
        hand_on: bool,
        status: &PhotoStatus,
        running: Option<&str>,
    ) -> Result<usize, FlowError> {
        let records = self.service.ports().documents.as_ref();
        let now = self.now();
        let key = group_key(hash, group);
        let outcome: HashMap<UrlHash, PhotoStatus> = [(hash.clone(), status.clone())].into();
        let mut total = 0;
        loop {
            let page = records
                .list_members(JOINER_KIND, &key, cursor.as_deref(), JOINERS_PER_PAGE, now)
                .await?;
            if hand_on && let Some(next) = &page.next {
                self.hand_on_joiners(hash, group, next).await?;
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
            records.delete_members(JOINER_KIND, &key, &told).await?;
            if count > 0 {
                info!(url_hash = %hash, crawls = count, "joined crawls told");
            }
            total += count;
            match page.next {
                Some(next) if !hand_on => cursor = Some(next),
                _ => return Ok(total),
            }
        }
    }

    /// Sends the page of `group`'s joined crawls from `from` (empty: its start) on to the
    /// settle queue.
    async fn hand_on_joiners(
        &self,
        hash: &UrlHash,
        group: Option<usize>,
        from: &str,
    ) -> Result<(), FlowError> {
        let message = JoinersMessage {
            joiners: JoinersPage {
                url_hash: hash.clone(),
                group: group.and_then(JoinerGroup::new),
                from: from.to_owned(),
            },
        };
        self.send_to_settle(&message).await
    }
}
