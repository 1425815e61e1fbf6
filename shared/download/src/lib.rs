//! Downloading photo URLs: one download done safely, and the policies that decide when and where
//! downloads run. The crawl flows in [`imgest_crawl`] put them together.
//!
//! - [`Downloader`]: one download of one photo URL (deadline, address guard, redirects, limits,
//!   signature, MD5, conditional requests).
//! - [`Poster`]: one signed webhook POSTed under the same guard (no redirects, a deadline).
//! - [`check_ip`] and [`check_host_literal`]: which addresses a download may connect to, so a
//!   crawl cannot point imgest at its own network, loopback or a cloud metadata service (SSRF).
//! - [`AllowedPorts`] and [`HostAllowlist`]: which ports, and per client which hosts.
//! - [`HashHeaders`]: hosts trusted to name a body's MD5 before it is read.
//! - [`FetchErrorKind`]: the stable error kinds, and the one place they are classified.
//! - [`backoff`]: retry delays (full jitter, `Retry-After`) and the recheck schedule.
//! - [`TierChooser`]: which timeout tier a host's downloads start in.
//! - [`HostHealth`]: a host's concurrency (AIMD on 429), failure backoff and circuit breaker;
//!   [`HostLimits`] holds a process's copies and its running downloads.
//!
//! A URL's identity (normalisation, the dedup key) is a domain type:
//! [`NormalizedUrl`](imgest_core::domain::NormalizedUrl).

mod address_guard;
pub mod backoff;
mod downloader;
mod error_kind;
mod host_health;
mod host_limits;
mod tier_chooser;

pub use self::address_guard::{
    AddressClass, ForbiddenAddress, check_host_literal, check_ip, classify,
};
pub use self::downloader::{
    BodyDedup, Download, DownloadConfig, DownloadError, Downloaded, Downloader,
    DownloaderSetupError, KnownImages, PostAnswer, PostConfig, Poster, TlsSetupError, Validator,
    install_default_provider,
};
pub use self::error_kind::{FailureClass, FetchErrorKind};
pub use self::host_health::{Admission, Circuit, CircuitRules, EventCounts, HostEvent, HostHealth};
pub use self::host_limits::{HostLimits, HostSlot};
pub use self::tier_chooser::{Observation, TierChooser, TierCounts, TierStats};
pub use imgest_core::download_rules::{AllowedPorts, HashHeaders, HostAllowlist};
