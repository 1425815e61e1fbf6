//! The response headers the downloader reads: `Retry-After`, and the validators
//! (`ETag`, `Last-Modified`) it sends back on the next download of the same URL.

use std::time::{Duration, SystemTime};

use reqwest::header::{
    ETAG, HeaderMap, HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, RETRY_AFTER,
};
use serde::{Deserialize, Serialize};

/// What a server said identifies the version of a photo it sent, to ask next time "only if it
/// changed" (`If-None-Match`, `If-Modified-Since`). Stored per URL with its download.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validator {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

impl Validator {
    /// The validators of a response (values that are not visible ASCII are ignored).
    pub(super) fn from_headers(headers: &HeaderMap) -> Self {
        let text = |name| {
            headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        Self {
            etag: text(ETAG),
            last_modified: text(LAST_MODIFIED),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }

    /// The conditional request headers; a stored value that is not a valid header value
    /// (it came from a server) is left out rather than failing the download.
    pub(super) fn conditional_headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let pairs = [
            (IF_NONE_MATCH, &self.etag),
            (IF_MODIFIED_SINCE, &self.last_modified),
        ];
        for (name, value) in pairs {
            if let Some(value) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(name, value);
            }
        }
        headers
    }
}

/// `Retry-After` as a delay from `now`: delta seconds, or an HTTP date (a date in the past is
/// zero). `None` if absent or unreadable.
pub(super) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(reqwest::header::HeaderName, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(n, v)| (n.clone(), HeaderValue::from_str(v).unwrap()))
            .collect()
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let read = |v: &str| retry_after(&headers(&[(RETRY_AFTER, v)]), now);
        assert_eq!(read("7"), Some(Duration::from_secs(7)));
        assert_eq!(read(" 0 "), Some(Duration::ZERO));
        assert_eq!(
            read("Sun, 06 Nov 1994 08:50:07 GMT"),
            Some(Duration::from_secs(30))
        );
        // The obsolete formats HTTP still asks recipients to accept.
        assert_eq!(
            read("Sunday, 06-Nov-94 08:49:47 GMT"),
            Some(Duration::from_secs(10))
        );
        assert_eq!(read("Sun, 06 Nov 1994 08:00:00 GMT"), Some(Duration::ZERO));
        for bad in ["", "-1", "1.5", "soon", "99999999999999999999999"] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn validators_round_trip_into_conditional_headers() {
        let v = Validator::from_headers(&headers(&[
            (ETAG, "\"abc\""),
            (LAST_MODIFIED, "Wed, 21 Oct 2015 07:28:00 GMT"),
        ]));
        assert_eq!(v.etag.as_deref(), Some("\"abc\""));
        let sent = v.conditional_headers();
        assert_eq!(sent[IF_NONE_MATCH], "\"abc\"");
        assert_eq!(sent[IF_MODIFIED_SINCE], "Wed, 21 Oct 2015 07:28:00 GMT");
        let bad = Validator {
            etag: Some("a\nb".into()),
            last_modified: None,
        };
        assert!(bad.conditional_headers().is_empty());
        assert!(Validator::from_headers(&HeaderMap::new()).is_empty());
    }
}
