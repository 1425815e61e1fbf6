//! [`DownloadError`]: why one download gave no photo, as a stable [`FetchErrorKind`] plus the
//! facts the scheduler needs (status, `Retry-After`, time spent).

use std::error::Error as StdError;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use super::resolver::DnsFailure;
use crate::{FailureClass, FetchErrorKind, ForbiddenAddress};

/// A failed download. Cheap to clone (the source is shared), so one download's failure can be
/// handed to every offer waiting for the same URL.
///
/// The message never contains credentials: URLs with `user:pass@` are refused before any
/// request, and redirect targets that carry them are refused without being quoted.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct DownloadError {
    pub kind: FetchErrorKind,
    /// The status of the response that failed, if a response did (4xx, 5xx, odd 3xx).
    pub http_status: Option<u16>,
    /// The server's `Retry-After` on an error status, as a delay from when the response came.
    /// Not capped here: the scheduler applies its own cap.
    pub retry_after: Option<Duration>,
    pub message: String,
    /// From the start of the download (first request) to the failure.
    pub elapsed: Duration,
    /// The download stopped because this process had no memory for its body yet, not because
    /// of anything the host did (see [`is_no_room`](Self::is_no_room)).
    no_room: bool,
    #[source]
    source: Option<Arc<dyn StdError + Send + Sync + 'static>>,
}

impl DownloadError {
    pub(crate) fn new(kind: FetchErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            http_status: None,
            retry_after: None,
            message: message.into(),
            elapsed: Duration::ZERO,
            no_room: false,
            source: None,
        }
    }

    /// This process had no room for the body in its memory budget (within the deadline):
    /// the host is not to blame, and the download is to be tried again later. Its kind is
    /// `connection` for a caller that does not ask.
    pub(crate) fn no_room(message: impl Into<String>) -> Self {
        Self {
            no_room: true,
            ..Self::new(FetchErrorKind::Connection, message)
        }
    }

    /// See [`no_room`](Self::no_room).
    pub fn is_no_room(&self) -> bool {
        self.no_room
    }

    pub(crate) fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    pub(crate) fn with_source(mut self, source: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// A response with an error status (the kind from [`FetchErrorKind::from_status`];
    /// `HttpError` for a status it does not map, such as 300 or a 304 nobody asked for).
    pub(crate) fn status(status: u16, retry_after: Option<Duration>) -> Self {
        let kind = FetchErrorKind::from_status(status).unwrap_or(FetchErrorKind::HttpError);
        Self {
            http_status: Some(status),
            retry_after,
            ..Self::new(kind, format!("the server answered HTTP {status}"))
        }
    }

    pub(crate) fn forbidden_address(forbidden: ForbiddenAddress) -> Self {
        Self::new(FetchErrorKind::ForbiddenAddress, forbidden.to_string()).with_source(forbidden)
    }

    /// Classifies a client error: the guard's and the resolver's own errors are found in the
    /// source chain (reqwest and hyper wrap them); anything else on the way is a connection
    /// failure.
    pub(crate) fn from_reqwest(error: reqwest::Error) -> Self {
        let error = error.without_url();
        let mut kind = FetchErrorKind::Connection;
        let mut cause: Option<&(dyn StdError + 'static)> = Some(&error);
        while let Some(e) = cause {
            if e.downcast_ref::<ForbiddenAddress>().is_some() {
                kind = FetchErrorKind::ForbiddenAddress;
                break;
            }
            if e.downcast_ref::<DnsFailure>().is_some() {
                kind = FetchErrorKind::Dns;
                break;
            }
            cause = e.source();
        }
        if kind == FetchErrorKind::Connection && error.is_timeout() {
            kind = FetchErrorKind::Timeout;
        }
        Self::new(kind, chain(&error)).with_source(error)
    }

    /// The stable name partners see (`"not_found"`, `"timeout"`...).
    pub fn kind_str(&self) -> &'static str {
        self.kind.as_str()
    }

    pub fn class(&self) -> FailureClass {
        self.kind.class()
    }

    /// Worth retrying with backoff (server errors, 429, connection and DNS failures).
    pub fn is_retryable(&self) -> bool {
        self.class() == FailureClass::Transient
    }
}

/// An error and its causes on one line: reqwest's own message alone ("error sending
/// request") hides the part that matters ("Connection refused").
fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        // hyper repeats its cause inside its own message at times.
        if !out.contains(&text) {
            let _ = write!(out, ": {text}");
        }
        cause = e.source();
    }
    out
}
