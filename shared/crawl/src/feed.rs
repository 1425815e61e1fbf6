//! The change feed of a client's crawl results (`GET /v1/crawls?after=&limit=`, `imgest results
//! --client`): each result, as it is sent, is also filed under its client, so a partner whose
//! consumer was down pulls what it missed, in the order the results were filed, from a cursor
//! it keeps.
//!
//! Where an entry goes: the members of a group `{client}/{day}/{shard}` (one DynamoDB partition
//! key each), named `{filed_ms:013}.{crawl_id}`, so a group lists in filing order with no scan.
//! The day keeps a group's items to one day of one client's results; the shard (of the crawl id,
//! [`SHARDS`] of them) spreads one client's writes over that many partitions: the busiest
//! client writes to each at a sixteenth of its rate (ten times seed 001's peak, a third of the
//! results from one client, is half a partition's writes spread so). A page reads the shards'
//! first chunks side by side and merges their lists.
//!
//! Why a page stops [`LAG`] short of now: an entry is named by the time it was filed, on the
//! filer's clock, and becomes visible when its write completes; a reader that went past that
//! time before the write landed would never see it. Entries are only read once they are `LAG`
//! old, which covers a write's retries and the functions' clock skew, so a cursor never passes
//! an entry still to come.
//!
//! At least once: a result sent again (a settle handed off and redelivered) is filed again, under
//! a later time; consumers drop a `crawl_id` they already have, as they do for the results'
//! messages.

use std::collections::VecDeque;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use tracing::warn;
use utoipa::ToSchema;

use imgest_core::domain::{ClientId, Timestamp};
use imgest_core::ports::{Documents, walk_cursor};
use imgest_flows::FlowError;

use super::Crawler;
use super::messages::CrawlResult;

/// The documents' kind of the feed's groups.
pub(crate) const FEED_KIND: &str = "feed";

/// How long an entry is kept: a cursor stays good this long (a consumer down for longer has
/// missed results, and is told so: [`FeedError::Expired`]).
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How old an entry must be before a page returns it (see the module's documentation).
pub const LAG: Duration = Duration::from_secs(30);

/// The partitions a client's entries of one day are spread over. Fixed: a reader lists every
/// shard a writer may have used.
pub const SHARDS: u32 = 16;

/// The most results a page holds (`limit`), and how many it holds when the caller names none.
pub const MAX_PAGE: usize = 500;
pub const DEFAULT_PAGE: usize = 100;

const DAY_MS: u64 = 24 * 3600 * 1000;

/// Milliseconds since the epoch (a time before it is the epoch: none is filed then).
fn ms(t: Timestamp) -> u64 {
    u64::try_from(t.as_millis()).unwrap_or(0)
}

/// After the last entry a page returned, or after every entry filed up to a time (`crawl` is
/// [`PAST_ALL`]): a place in the merged order of the members' names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Position {
    at_ms: u64,
    crawl: String,
}

/// Sorts after every crawl id (lowercase hex) filed in the same millisecond.
const PAST_ALL: &str = "~";

impl Position {
    fn member(&self) -> String {
        format!("{:013}.{}", self.at_ms, self.crawl)
    }

    fn of_member(member: &str) -> Option<Self> {
        let (at, crawl) = member.split_once('.')?;
        let well_formed = at.len() == 13
            && at.bytes().all(|b| b.is_ascii_digit())
            && (crawl == PAST_ALL
                || (!crawl.is_empty()
                    && crawl.len() <= 64
                    && crawl.bytes().all(|b| b.is_ascii_hexdigit())));
        well_formed.then(|| Self {
            at_ms: at.parse().unwrap_or(0),
            crawl: crawl.to_owned(),
        })
    }

    fn day(&self) -> u64 {
        self.at_ms / DAY_MS
    }
}

/// A cursor as the caller holds it: opaque (its form may change), durable for [`RETENTION`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedCursor(Position);

impl FeedCursor {
    pub fn parse(s: &str) -> Result<Self, FeedError> {
        let bad = || FeedError::BadCursor(s.chars().take(80).collect());
        if s.len() > 128 {
            return Err(bad());
        }
        let raw = URL_SAFE_NO_PAD.decode(s).map_err(|_| bad())?;
        let member = String::from_utf8(raw).map_err(|_| bad())?;
        Position::of_member(&member).map(Self).ok_or_else(bad)
    }

    pub fn as_string(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.member())
    }
}

/// Why a page cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("{0:?} is not a cursor this feed gave")]
    BadCursor(String),
    #[error(
        "the cursor is older than the feed keeps results ({} days): results after it may have been dropped; start again without one",
        RETENTION.as_secs() / 86_400
    )]
    Expired,
    #[error("limit must be from 1 to {MAX_PAGE}, got {0}")]
    BadLimit(usize),
    #[error(transparent)]
    Flow(#[from] FlowError),
}

/// One page of a client's results, and where the next starts.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FeedPage {
    /// In the order they were filed (about the order they settled); each with its `crawl_id`
    /// and `settled_at`.
    pub results: Vec<CrawlResult>,
    /// Where the next page starts: pass it as `after`. Always present: a page that reached
    /// the feed's end still moves the cursor past what it read.
    pub next: String,
    /// More results were there than `limit`: ask again at once.
    pub more: bool,
}

/// The group of `client`'s entries filed on `day` under `shard`.
fn group(client: &ClientId, day: u64, shard: u32) -> String {
    format!("{}/{day}/{shard}", client.as_str())
}

/// The shard of a crawl's entries (FNV-1a of its id: stable across builds and platforms).
fn shard_of(crawl_id: &str) -> u32 {
    let hash = crawl_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (hash % u64::from(SHARDS)) as u32
}

/// One shard's list, read a chunk at a time as the merge takes from it.
struct ShardList {
    group: String,
    buffer: VecDeque<(String, String)>,
    cursor: Option<String>,
    done: bool,
}

impl ShardList {
    fn new(group: String, after: Option<&Position>) -> Self {
        let cursor = after.map(|p| walk_cursor(&group, &p.member()));
        Self {
            group,
            buffer: VecDeque::new(),
            cursor,
            done: false,
        }
    }

    /// Reads a chunk if the buffer is empty and the list goes on.
    async fn fill(
        &mut self,
        documents: &dyn Documents,
        chunk: usize,
        now: Timestamp,
    ) -> Result<(), FlowError> {
        self.head(documents, chunk, now).await.map(drop)
    }

    /// The next member's name, reading a chunk if the buffer is empty.
    async fn head(
        &mut self,
        documents: &dyn Documents,
        chunk: usize,
        now: Timestamp,
    ) -> Result<Option<&str>, FlowError> {
        while self.buffer.is_empty() && !self.done {
            let page = documents
                .list_members(FEED_KIND, &self.group, self.cursor.as_deref(), chunk, now)
                .await?;
            self.buffer.extend(page.members);
            match page.next {
                Some(next) => self.cursor = Some(next),
                None => self.done = true,
            }
        }
        Ok(self.buffer.front().map(|(member, _)| member.as_str()))
    }
}

impl Crawler {
    /// Files `result` in its client's feed, named by the time now (before its message is sent:
    /// a result sent is in the feed); returns the time it is filed under (milliseconds), which
    /// with the client and the crawl id finds it again ([`feed_entry`](Self::feed_entry)).
    pub(super) async fn file_in_feed(
        &self,
        result: &CrawlResult,
        body: &str,
    ) -> Result<u64, FlowError> {
        let now = self.now();
        let at = Position {
            at_ms: ms(now),
            crawl: result.crawl_id.clone(),
        };
        let group = group(&result.client_id, at.day(), shard_of(&result.crawl_id));
        self.service
            .ports()
            .documents
            .put_member(
                FEED_KIND,
                &group,
                &at.member(),
                body,
                now.plus(RETENTION),
                now,
            )
            .await?;
        Ok(at.at_ms)
    }

    /// The body of `client`'s entry for crawl `crawl_id` filed at `at_ms`, if it is still kept:
    /// one read of the few members filed in that millisecond of its shard.
    pub(super) async fn feed_entry(
        &self,
        client: &ClientId,
        at_ms: u64,
        crawl_id: &str,
    ) -> Result<Option<String>, FlowError> {
        let at = Position {
            at_ms,
            crawl: crawl_id.to_owned(),
        };
        let group = group(client, at.day(), shard_of(crawl_id));
        let wanted = at.member();
        // Every member of the millisecond sorts after `{at_ms}.` and before `{at_ms}.~`.
        let mut cursor = Some(walk_cursor(&group, &format!("{at_ms:013}.")));
        let documents = self.service.ports().documents.as_ref();
        while let Some(from) = cursor.take() {
            let page = documents
                .list_members(FEED_KIND, &group, Some(&from), 16, self.now())
                .await?;
            for (name, body) in page.members {
                if name == wanted {
                    return Ok(Some(body));
                }
                if name > wanted {
                    return Ok(None);
                }
            }
            cursor = page.next;
        }
        Ok(None)
    }

    /// `client`'s results filed after `after` (from the oldest kept without one), at most
    /// `limit`, and the cursor of the next page. Reads the shards of each day from the cursor's
    /// to now's, a chunk at a time as the merge needs: about `limit` entries and a few more per
    /// shard, and no request for a day before the cursor's.
    pub async fn feed_page(
        &self,
        client: &ClientId,
        after: Option<&FeedCursor>,
        limit: usize,
    ) -> Result<FeedPage, FeedError> {
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(FeedError::BadLimit(limit));
        }
        let now = self.now();
        let horizon = ms(now.minus(LAG));
        let oldest = ms(now.minus(RETENTION));
        let start = match after {
            Some(FeedCursor(p)) if p.at_ms < oldest => return Err(FeedError::Expired),
            Some(FeedCursor(p)) => p.clone(),
            None => Position {
                at_ms: oldest,
                crawl: String::new(),
            },
        };
        let documents = self.service.ports().documents.as_ref();
        let chunk = limit.div_ceil(SHARDS as usize) + 4;
        let mut results = Vec::new();
        let mut last = start.clone();
        let mut full = false;
        'days: for day in start.day()..=horizon / DAY_MS {
            let mut lists: Vec<ShardList> = (0..SHARDS)
                .map(|shard| {
                    let after = (day == start.day() && !start.crawl.is_empty()).then_some(&start);
                    ShardList::new(group(client, day, shard), after)
                })
                .collect();
            // Each shard's first chunk, side by side (the later ones as the merge needs them).
            futures_util::future::try_join_all(
                lists
                    .iter_mut()
                    .map(|list| list.fill(documents, chunk, now)),
            )
            .await?;
            loop {
                // The list whose next member comes first.
                let mut first: Option<(usize, String)> = None;
                for (i, list) in lists.iter_mut().enumerate() {
                    if let Some(head) = list.head(documents, chunk, now).await?
                        && first.as_ref().is_none_or(|(_, f)| head < f.as_str())
                    {
                        first = Some((i, head.to_owned()));
                    }
                }
                let Some((i, member)) = first else {
                    continue 'days;
                };
                let Some(at) = Position::of_member(&member) else {
                    warn!(group = %lists[i].group, member = %member, "a feed entry with a name it cannot have was skipped");
                    lists[i].buffer.pop_front();
                    continue;
                };
                if at.at_ms > horizon {
                    break 'days;
                }
                if results.len() == limit {
                    full = true;
                    break 'days;
                }
                let (_, body) = lists[i].buffer.pop_front().unwrap_or_default();
                match serde_json::from_str::<CrawlResult>(&body) {
                    Ok(result) => results.push(result),
                    Err(e) => {
                        warn!(group = %lists[i].group, member = %member, error = %e, "an unreadable feed entry was skipped");
                    }
                }
                last = at;
            }
        }
        // A page that reached the feed's end has read everything filed up to the horizon.
        let past_horizon = Position {
            at_ms: horizon,
            crawl: PAST_ALL.to_owned(),
        };
        let next = if full { last } else { last.max(past_horizon) };
        Ok(FeedPage {
            results,
            next: FeedCursor(next).as_string(),
            more: full,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_strangers_are_refused() {
        let p = Position {
            at_ms: 1_700_000_000_118,
            crawl: "9f2c4e1a0b7d3c58".into(),
        };
        let cursor = FeedCursor(p.clone());
        assert_eq!(FeedCursor::parse(&cursor.as_string()).unwrap(), cursor);
        let past = FeedCursor(Position {
            at_ms: 5,
            crawl: PAST_ALL.into(),
        });
        assert_eq!(FeedCursor::parse(&past.as_string()).unwrap(), past);
        for bad in [
            "",
            "!!!",
            &URL_SAFE_NO_PAD.encode("1700000000118"),
            &URL_SAFE_NO_PAD.encode("170000000011.abc"),
            &URL_SAFE_NO_PAD.encode("1700000000118.xyz"),
            &URL_SAFE_NO_PAD.encode("1700000000118."),
            &"A".repeat(200),
        ] {
            assert!(FeedCursor::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_order_by_time_then_crawl_and_past_all_follows_every_crawl_of_its_millisecond() {
        let at = |ms: u64, crawl: &str| {
            Position {
                at_ms: ms,
                crawl: crawl.into(),
            }
            .member()
        };
        assert!(at(999, "ffff") < at(1000, "0000"));
        assert!(at(1000, "ffffffffffffffff") < at(1000, PAST_ALL));
        assert!(at(1000, PAST_ALL) < at(1001, "0"));
    }

    #[test]
    fn shards_spread_crawl_ids_and_stay_put() {
        let mut seen = [0u32; SHARDS as usize];
        for i in 0..8000u64 {
            seen[shard_of(&format!("{i:016x}")) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (400..600).contains(&n)), "{seen:?}");
        assert_eq!(shard_of("9f2c4e1a0b7d3c58"), shard_of("9f2c4e1a0b7d3c58"));
    }
}
