//! Fetching photo URLs: one download done safely, and the policies that decide when and where
//! downloads run. The crawl flows in [`crate::flows::crawl`] put them together.
//!
//! - [`Fetcher`]: one download of one photo URL (deadline, address guard, redirects, limits,
//!   signature, MD5, conditional requests).
//! - [`check_ip`] and [`check_host_literal`]: which addresses a download may connect to, so a
//!   crawl cannot point imgest at its own network, loopback or a cloud metadata service (SSRF).
//! - [`AllowedPorts`] and [`HostAllowlist`]: which ports, and per client which hosts.
//! - [`FetchErrorKind`]: the stable error kinds, and the one place they are classified.
//! - [`backoff`]: retry delays (full jitter, `Retry-After`) and the recheck schedule.
//! - [`TierRouter`]: which timeout tier a host's downloads start in.
//! - [`HostLimits`]: per-host concurrency (AIMD on 429) and failure backoff.
//!
//! A URL's identity (normalisation, the dedup key) is a domain type:
//! [`NormalizedUrl`](crate::domain::NormalizedUrl).

mod address_guard;
pub mod backoff;
mod egress;
mod error_kind;
mod fetcher;
mod host_limits;
mod tier_router;

pub use self::address_guard::{
    AddressClass, ForbiddenAddress, check_host_literal, check_ip, classify,
};
pub use self::egress::{AllowedPorts, HostAllowlist};
pub use self::error_kind::{FailureClass, FetchErrorKind};
pub use self::fetcher::{
    Download, FetchConfig, FetchError, Fetched, Fetcher, FetcherSetupError, TlsSetupError,
    Validator, install_default_provider,
};
pub use self::host_limits::{HostLimits, HostSlot};
pub use self::tier_router::{Observation, TierRouter};
