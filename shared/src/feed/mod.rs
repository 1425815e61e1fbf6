//! The feed downloader's building blocks (partners send feeds of photo URLs; imgest fetches
//! them). The crawl flows in [`crate::flows::crawl`] put them together.
//!
//! - [`NormalizedUrl`]: a feed URL parsed once at the edge and normalised, so that two URLs
//!   of the same photo have the same [`key`](NormalizedUrl::key) (the dedup key) and
//!   [`UrlHash`]; [`fetch_url`](NormalizedUrl::fetch_url) is what the downloader requests.
//! - [`check_ip`] and [`check_host_literal`]: which addresses a download may connect to, so a
//!   feed cannot point imgest at its own network, loopback or a cloud metadata service (SSRF).
//! - [`FeedErrorKind`]: the stable error kinds, and the one place they are classified.
//! - [`Fetcher`]: one download of one photo URL, done safely (deadline, guard, redirects,
//!   limits, signature, MD5, conditional requests).
//! - [`messages`]: the crawl request, fetch task and crawl result wire formats.
//! - [`backoff`]: retry delays (full jitter, `Retry-After`) and the recheck schedule.
//! - [`TierRouter`]: which timeout tier a host's downloads start in.
//! - [`HostLimits`]: per-domain concurrency (AIMD on 429) and failure backoff.
//! - [`FeedSettings`]: the `IMGEST_*` settings of all of the above.

mod address_guard;
pub mod backoff;
mod error_kind;
mod fetch;
mod host_limits;
pub mod messages;
mod settings;
mod tier_router;
mod url;

pub use self::address_guard::{
    AddressClass, ForbiddenAddress, check_host_literal, check_ip, classify,
};
pub use self::error_kind::{FailureClass, FeedErrorKind};
pub use self::fetch::{
    Download, FetchConfig, FetchError, Fetched, Fetcher, FetcherSetupError, TlsSetupError,
    Validator, install_default_provider,
};
pub use self::host_limits::{HostLimits, HostSlot};
pub use self::settings::{FeedSettings, RECHECK_CAP};
pub use self::tier_router::{Observation, TierRouter};
pub use self::url::{NormalizationRules, NormalizedUrl, UrlError, UrlHash};
