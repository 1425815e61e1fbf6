//! imgest's library: everything but the wiring of the binaries.
//!
//! - [`domain`]: ids, hashes, normalised URLs, variant specs, image records, file keys, time.
//! - [`ports`]: the capabilities flows need (`BlobStore`, `ImageIndex`, `OfferLinks`,
//!   `Records`, `RateLimiter`, `MessageSender`, `TaskQueue`, `Clock`, …).
//! - [`pipeline`]: bytes in, variants out: format sniffing, limits, EXIF orientation, resizing,
//!   watermarking, JPEG encoding.
//! - [`fetch`]: one photo URL downloaded safely, and the policies around downloads (address
//!   guard, error kinds, backoff, timeout tiers, per-host limits).
//! - [`flows`]: the use cases over the ports: uploads with dedup, offers, GC, the sweep, and
//!   crawls (an offer's photo URLs downloaded and linked).
//! - [`auth`]: who is calling (bearer JWTs, or API Gateway's checked claims) and what they may
//!   do: the decisions every route makes.
//! - [`api`]: the HTTP API (an axum router shared by the local runner and the API function).
//! - [`handlers`]: the Lambda functions' handlers (SQS batches, the table's stream, schedules).
//! - [`runner`]: the local runner: the whole service in one process.
//! - [`adapters`]: the ports on the embedded backend (SQLite, a directory) and on AWS (S3,
//!   DynamoDB, SQS, Step Functions).
//! - [`app`]: builds the ports of the configured backend, once, and the service over them.
//! - [`settings`]: typed configuration parsed once from the environment.
//! - [`telemetry`]: JSON-lines logs and the stages' metrics.
//! - `testing` (feature `testing`): the contract suite each adapter of a port must pass.

pub mod adapters;
pub mod api;
pub mod app;
pub mod auth;
pub mod domain;
pub mod fetch;
pub mod flows;
pub mod handlers;
pub mod pipeline;
pub mod ports;
pub mod runner;
pub mod settings;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
