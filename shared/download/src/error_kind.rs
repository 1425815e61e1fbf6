//! Why a photo URL did not give a photo: the stable error kinds partners see in crawl results,
//! and how each one is treated (retried now, moved to a slower tier, or re-checked later).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A URL's failure, as named in results (`"kind"`). Stable: partners branch on these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FetchErrorKind {
    /// 404 or 410.
    NotFound,
    /// 401 or 403.
    Forbidden,
    /// Any other 4xx (except 408 and 429, which are retried).
    HttpError,
    /// 5xx (or 408) after the retries.
    ServerError,
    /// 429 after the retries.
    RateLimited,
    /// Past the last tier's deadline.
    Timeout,
    /// Refused, reset or otherwise broken connections (TLS included).
    Connection,
    /// The host name did not resolve.
    Dns,
    /// The body is larger than `IMGEST_MAX_BODY`.
    TooLarge,
    /// The body is not an image imgest reads.
    UnsupportedFormat,
    CorruptImage,
    TooManyPixels,
    /// More than 5 redirects.
    TooManyRedirects,
    /// The URL or a redirect points at an address or port downloads may not reach.
    ForbiddenAddress,
    /// The URL or a redirect names a host outside the client's allowlist
    /// (`IMGEST_CLIENT_HOSTS`).
    ForbiddenHost,
    InvalidUrl,
    /// The host's circuit is open (most of its recent requests failed): not tried until a
    /// probe after a cool-down succeeds.
    HostUnavailable,
    /// The body has the MD5 of a stored image but another SHA-256 (an MD5 collision): refused,
    /// never linked.
    HashCollision,
    /// The downloaded body was gone when its turn to be processed came (a message redriven
    /// from the dead-letter queue after the body expired): downloaded again on the next crawl.
    BodyGone,
    /// The photo was erased (an operator's purge, or its last seller's erasure): its bytes
    /// are refused if blocked, and a photo erased since the URL was last downloaded is not
    /// linked.
    Erased,
}

/// What the downloader does after a failure of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// Retried with backoff (up to the attempt limit).
    Transient,
    /// Tried again in the next (slower) tier; past the last one, final.
    Slow,
    /// Final for this crawl; the URL is re-checked on a progressive schedule.
    Permanent,
}

impl FetchErrorKind {
    pub const ALL: [Self; 20] = [
        Self::NotFound,
        Self::Forbidden,
        Self::HttpError,
        Self::ServerError,
        Self::RateLimited,
        Self::Timeout,
        Self::Connection,
        Self::Dns,
        Self::TooLarge,
        Self::UnsupportedFormat,
        Self::CorruptImage,
        Self::TooManyPixels,
        Self::TooManyRedirects,
        Self::ForbiddenAddress,
        Self::ForbiddenHost,
        Self::InvalidUrl,
        Self::HostUnavailable,
        Self::HashCollision,
        Self::BodyGone,
        Self::Erased,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::Forbidden => "forbidden",
            Self::HttpError => "http_error",
            Self::ServerError => "server_error",
            Self::RateLimited => "rate_limited",
            Self::Timeout => "timeout",
            Self::Connection => "connection",
            Self::Dns => "dns",
            Self::TooLarge => "too_large",
            Self::UnsupportedFormat => "unsupported_format",
            Self::CorruptImage => "corrupt_image",
            Self::TooManyPixels => "too_many_pixels",
            Self::TooManyRedirects => "too_many_redirects",
            Self::ForbiddenAddress => "forbidden_address",
            Self::ForbiddenHost => "forbidden_host",
            Self::InvalidUrl => "invalid_url",
            Self::HostUnavailable => "host_unavailable",
            Self::HashCollision => "hash_collision",
            Self::BodyGone => "body_gone",
            Self::Erased => "erased",
        }
    }

    /// The one place failures are classified.
    pub fn class(self) -> FailureClass {
        match self {
            Self::ServerError
            | Self::RateLimited
            | Self::Connection
            | Self::Dns
            | Self::HostUnavailable
            | Self::BodyGone => FailureClass::Transient,
            Self::Timeout => FailureClass::Slow,
            Self::NotFound
            | Self::Forbidden
            | Self::HttpError
            | Self::TooLarge
            | Self::UnsupportedFormat
            | Self::CorruptImage
            | Self::TooManyPixels
            | Self::TooManyRedirects
            | Self::ForbiddenAddress
            | Self::ForbiddenHost
            | Self::InvalidUrl
            | Self::HashCollision
            | Self::Erased => FailureClass::Permanent,
        }
    }

    /// The kind an HTTP error status maps to (`None` for 2xx/3xx/304).
    pub fn from_status(status: u16) -> Option<Self> {
        match status {
            404 | 410 => Some(Self::NotFound),
            401 | 403 => Some(Self::Forbidden),
            408 => Some(Self::ServerError),
            429 => Some(Self::RateLimited),
            400..=499 => Some(Self::HttpError),
            500..=599 => Some(Self::ServerError),
            _ => None,
        }
    }
}

impl std::fmt::Display for FetchErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_json() {
        for kind in FetchErrorKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<FetchErrorKind>(&json).unwrap(), kind);
        }
    }

    #[test]
    fn statuses_map_to_the_issue_kinds() {
        assert_eq!(
            FetchErrorKind::from_status(404),
            Some(FetchErrorKind::NotFound)
        );
        assert_eq!(
            FetchErrorKind::from_status(410),
            Some(FetchErrorKind::NotFound)
        );
        assert_eq!(
            FetchErrorKind::from_status(401),
            Some(FetchErrorKind::Forbidden)
        );
        assert_eq!(
            FetchErrorKind::from_status(403),
            Some(FetchErrorKind::Forbidden)
        );
        assert_eq!(
            FetchErrorKind::from_status(418),
            Some(FetchErrorKind::HttpError)
        );
        assert_eq!(
            FetchErrorKind::from_status(408),
            Some(FetchErrorKind::ServerError)
        );
        assert_eq!(
            FetchErrorKind::from_status(429),
            Some(FetchErrorKind::RateLimited)
        );
        assert_eq!(
            FetchErrorKind::from_status(503),
            Some(FetchErrorKind::ServerError)
        );
        assert_eq!(FetchErrorKind::from_status(200), None);
        assert_eq!(FetchErrorKind::from_status(304), None);
        assert_eq!(FetchErrorKind::NotFound.class(), FailureClass::Permanent);
        assert_eq!(FetchErrorKind::Timeout.class(), FailureClass::Slow);
        assert_eq!(FetchErrorKind::RateLimited.class(), FailureClass::Transient);
    }
}
