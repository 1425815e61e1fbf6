//! The crawl's wire formats: the crawl request (`POST /v1/crawl` and the intake queue), the
//! fetch task (one per URL download, on the tier queues), the downloaded photo (AWS: on the
//! process queue) and the crawl result (the results queue and `GET /v1/offers/{id}/crawl`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use imgest_core::domain::UrlHash;
use imgest_core::domain::{ClientId, ImageId, OfferId, OfferKey, Timestamp};
use imgest_download::{FetchErrorKind, Validator};

/// An offer's photo URLs, in the offer's order. Ids are checked when parsed; URLs one by one later
/// (a bad URL fails its photo, not the offer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"client_id": "acme", "offer_id": "car-1", "urls": ["https://img.example.com/car-1/front.jpg"]}))]
pub struct CrawlRequest {
    /// The partner (on `POST /v1/crawl`: the token's `client_id`).
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._:-]{1,64}$")]
    pub client_id: ClientId,
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub offer_id: OfferId,
    /// The offer's photo URLs (http or https), in the offer's order.
    pub urls: Vec<String>,
}

/// One URL to download (or keep trying to), in a tier's lane.
///
/// A task is believed only as far as the store confirms it: its `lease` must be the URL's
/// running download, its `url_hash` the hash of its `url` normalised again, and the client
/// whose budget and hosts it uses is the one the lease names (see `Crawler::run_fetch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchTask {
    pub url_hash: UrlHash,
    pub url: String,
    /// Whose budget the download spends (the client whose crawl asked for it first; the
    /// lease's client decides).
    pub client_id: ClientId,
    pub tier: usize,
    /// Downloads tried so far for this crawl of the URL (0 for the first).
    pub attempt: u32,
    /// The id of the URL's download lease this task runs (empty only in tasks queued by the
    /// release before, which run the URL's running download, whichever it is).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub lease: String,
}

/// A downloaded photo waiting under `fetched/{url_hash}` for the process function (AWS): the
/// fetch function sends it to the process queue, as `{"downloaded": {...}}`, with what settling
/// the URL needs besides the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DownloadedPhoto {
    pub url_hash: UrlHash,
    /// Downloads tried for this crawl of the URL, this one included.
    pub attempts: u32,
    /// The URL's download lease the body was downloaded under: settled only while that
    /// download still runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub lease: String,
    /// What the host said identifies this version (`etag`, `last_modified`).
    #[serde(flatten)]
    pub validator: Validator,
}

/// A process queue message that is not a storage notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessMessage {
    pub downloaded: DownloadedPhoto,
}

/// A crawl whose every URL settled where it may not be finished (AWS: the fetch and process
/// functions, which parse hostile bytes, may not link offers nor send results): handed, on the
/// settle queue, to the intake function, which finishes it. `{"settle": {"offer", "crawl_id"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleMessage {
    pub settle: SettledCrawl,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledCrawl {
    /// The offer, in its client's namespace (`{client}/{offer}`).
    pub offer: OfferKey,
    pub crawl_id: String,
}

/// The crawls that joined a popular URL's download, still to be told its outcome, a page at a
/// time (`{"joiners": {"url_hash", "group", "from"}}` on the settle queue): the invocation that
/// finished the download told a page and handed on the rest, so that no invocation tells more
/// than a page however many crawls joined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinersMessage {
    pub joiners: JoinersPage,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinersPage {
    pub url_hash: UrlHash,
    /// Which of the URL's groups of joined crawls
    /// ([`JOINER_GROUPS`](crate::JOINER_GROUPS)); absent for the one group of a download
    /// started before joiners were spread over groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<JoinerGroup>,
    /// Where the page starts in the group (the cursor of the page before; empty: its start).
    pub from: String,
}

/// One of a URL's groups of joined crawls: a number below
/// [`JOINER_GROUPS`](crate::JOINER_GROUPS), refused as a message's field otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct JoinerGroup(u8);

impl JoinerGroup {
    /// The group numbered `index`, if there is one.
    pub fn new(index: usize) -> Option<Self> {
        u8::try_from(index)
            .ok()
            .filter(|_| index < crate::JOINER_GROUPS)
            .map(Self)
    }

    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl TryFrom<u8> for JoinerGroup {
    type Error = String;

    fn try_from(number: u8) -> Result<Self, Self::Error> {
        Self::new(usize::from(number)).ok_or_else(|| {
            format!(
                "no group {number} of joined crawls: there are {}",
                crate::JOINER_GROUPS
            )
        })
    }
}

impl From<JoinerGroup> for u8 {
    fn from(group: JoinerGroup) -> Self {
        group.0
    }
}

/// What the settle queue carries: a settled crawl to finish, or a page of joined crawls to
/// tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SettleQueueMessage {
    Crawl(SettleMessage),
    Joiners(JoinersMessage),
}

/// What happened to one URL of an offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PhotoStatus {
    Pending,
    Ok {
        #[schema(value_type = String, pattern = "^[0-9a-f]{32}$")]
        image_id: ImageId,
    },
    Failed {
        error: PhotoError,
    },
}

/// Why a URL's photo is not there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PhotoError {
    pub kind: FetchErrorKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    pub attempts: u32,
    /// When a URL that failed permanently will next be downloaded (RFC 3339), if it is
    /// mentioned again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_check_at: Option<String>,
}

impl PhotoError {
    pub fn new(kind: FetchErrorKind, http_status: Option<u16>, attempts: u32) -> Self {
        Self {
            kind,
            http_status,
            attempts,
            next_check_at: None,
        }
    }

    pub fn with_next_check(mut self, at: Option<Timestamp>) -> Self {
        self.next_check_at = at.map(rfc3339);
        self
    }
}

/// One photo of a result, in the request's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PhotoResult {
    pub url: String,
    #[serde(flatten)]
    pub status: PhotoStatus,
    /// With `IMGEST_SIMILAR=report`, on a photo stored: its near-duplicates that other clients'
    /// offers link, nearest first (ids and distances only, for a moderation step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_duplicates: Option<Vec<ReportedDuplicate>>,
}

/// A near-duplicate named in a result, or in the answer to an upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReportedDuplicate {
    #[schema(value_type = String, pattern = "^[0-9a-f]{32}$")]
    pub image_id: ImageId,
    /// PDQ bits apart, 0 to 31.
    pub distance: u32,
}

impl From<imgest_flows::similar::NearDuplicate> for ReportedDuplicate {
    /// Ids and distances only: how it matched is not told of another client's image.
    fn from(m: imgest_flows::similar::NearDuplicate) -> Self {
        Self {
            image_id: m.image_id,
            distance: m.distance,
        }
    }
}

/// `"pending"` while any URL is, then `"done"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CrawlState {
    Pending,
    Done,
}

/// The crawl of one offer: the result message once done, and the crawl status.
///
/// A result may be delivered more than once (queues deliver at least once, and a crawl request
/// repeating the offer's last one is answered with that crawl's result again): the same
/// `crawl_id` is the same result. Of two results of one offer, the later `settled_at` is the
/// offer's current state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CrawlResult {
    #[schema(value_type = String)]
    pub client_id: ClientId,
    #[schema(value_type = String)]
    pub offer_id: OfferId,
    /// The crawl's id: a result delivered again carries the same.
    #[schema(example = "9f2c4e1a0b7d3c58")]
    pub crawl_id: String,
    pub state: CrawlState,
    /// When the crawl settled (RFC 3339, milliseconds); absent while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "2024-03-12T14:05:40.118Z")]
    pub settled_at: Option<String>,
    pub photos: Vec<PhotoResult>,
}

pub(crate) fn rfc3339(at: Timestamp) -> String {
    humantime::format_rfc3339_seconds(at.to_system()).to_string()
}

/// `at` in RFC 3339 with milliseconds (results' `settled_at`: two settlements a second apart
/// still order).
pub(crate) fn rfc3339_millis(at: Timestamp) -> String {
    humantime::format_rfc3339_millis(at.to_system()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_of_joiners_names_one_of_the_groups_or_none() {
        let page = |json: serde_json::Value| serde_json::from_value::<SettleQueueMessage>(json);
        let hash = "0cc175b9c0f1b6a831c399e269772661";
        let Ok(SettleQueueMessage::Joiners(m)) =
            page(serde_json::json!({"joiners": {"url_hash": hash, "group": 15, "from": ""}}))
        else {
            panic!("a page of the last group");
        };
        assert_eq!(m.joiners.group.map(JoinerGroup::index), Some(15));
        let Ok(SettleQueueMessage::Joiners(m)) =
            page(serde_json::json!({"joiners": {"url_hash": hash, "from": "x"}}))
        else {
            panic!("a page of the one group of before");
        };
        assert_eq!(m.joiners.group, None);
        for group in [16, 255, -1, 1000] {
            let json =
                serde_json::json!({"joiners": {"url_hash": hash, "group": group, "from": ""}});
            assert!(page(json).is_err(), "group {group}");
        }
        assert_eq!(JoinerGroup::new(crate::JOINER_GROUPS), None);
    }

    #[test]
    fn results_have_the_documented_shape() {
        let result = CrawlResult {
            client_id: ClientId::parse("acme").unwrap(),
            offer_id: OfferId::parse("o1").unwrap(),
            crawl_id: "9f2c4e1a0b7d3c58".into(),
            state: CrawlState::Done,
            settled_at: Some(rfc3339_millis(Timestamp::from_millis(1_700_000_000_118))),
            photos: vec![
                PhotoResult {
                    url: "https://img.example/a.jpg".into(),
                    status: PhotoStatus::Ok {
                        image_id: ImageId::of_bytes(b"a"),
                    },
                    near_duplicates: None,
                },
                PhotoResult {
                    url: "https://img.example/b.jpg".into(),
                    status: PhotoStatus::Failed {
                        error: PhotoError::new(FetchErrorKind::NotFound, Some(404), 1)
                            .with_next_check(Some(Timestamp::from_millis(1_700_000_000_000))),
                    },
                    near_duplicates: None,
                },
            ],
        };
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "client_id": "acme",
                "offer_id": "o1",
                "crawl_id": "9f2c4e1a0b7d3c58",
                "state": "done",
                "settled_at": "2023-11-14T22:13:20.118Z",
                "photos": [
                    {"url": "https://img.example/a.jpg", "status": "ok",
                     "image_id": "0cc175b9c0f1b6a831c399e269772661"},
                    {"url": "https://img.example/b.jpg", "status": "failed",
                     "error": {"kind": "not_found", "http_status": 404, "attempts": 1,
                               "next_check_at": "2023-11-14T22:13:20Z"}}
                ]
            })
        );
        let back: CrawlResult = serde_json::from_value(json).unwrap();
        assert_eq!(back, result);
    }

    #[test]
    fn requests_with_bad_ids_are_refused_when_parsed() {
        let bad = r#"{"client_id": "a b", "offer_id": "o1", "urls": []}"#;
        assert!(serde_json::from_str::<CrawlRequest>(bad).is_err());
        let ok = r#"{"client_id": "acme", "offer_id": "o1", "urls": ["http://x/a.jpg"]}"#;
        assert_eq!(
            serde_json::from_str::<CrawlRequest>(ok).unwrap().urls.len(),
            1
        );
    }
}
