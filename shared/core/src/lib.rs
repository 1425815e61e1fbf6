//! imgest's core: what every other crate builds on, with no storage, network or codec in it.
//!
//! - [`domain`]: ids, hashes, normalised URLs, variant specs, image records, file keys, time.
//! - [`ports`]: the capabilities flows need (`BlobStore`, `ImageIndex`, `OfferLinks`,
//!   `Documents`, `RateLimiter`, `MessageSender`, `TaskQueue`, `Clock`, …), and [`Ports`], one
//!   handle of each, which an adapter crate builds.
//! - [`download_rules`]: the ports, hosts, circuit thresholds and trusted hash headers the
//!   crawl's settings name for downloads.
//! - [`imaging`]: what the photo pipeline takes and gives, and its port ([`imaging::Imaging`]),
//!   so the flows see it without linking the codecs.
//! - [`retry`]: backoff with full jitter between rounds of a lost race.
//! - [`backend`]: where records, files and queues live (the embedded default or AWS).
//! - [`telemetry`]: JSON-lines logs, and the stages' and flows' metrics through the `metrics`
//!   facade (the exporters are installed by the binaries' crates).

pub mod backend;
pub mod budget;
pub mod domain;
pub mod download_rules;
pub mod imaging;
pub mod ports;
pub mod retry;
pub mod telemetry;

pub use ports::Ports;
