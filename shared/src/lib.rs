//! imgest's library: everything but the wiring.
//!
//! - [`domain`]: ids, hashes, variant specs, image records, blob keys, timestamps.
//! - [`feed`]: feed URL identity (normalisation, url hash) and the address guard for downloads.
//! - [`ports`]: the capabilities flows need (`BlobStore`, `ImageIndex`, `OfferLinks`,
//!   `TaskQueue`, `Clock`).
//! - [`pipeline`]: bytes in, variants out: format sniffing, limits, EXIF orientation, resizing,
//!   watermarking, JPEG encoding.
//! - [`flows`]: upload with dedup, offer linking, GC and the honest sweeper, over the ports.
//! - [`handlers`]: the Lambda handlers (SQS batches, stream records, schedules) over the flows.
//! - [`api`]: the HTTP API (an axum router shared by the local runner and the Lambda function).
//! - [`adapters`]: the ports on embedded storage (SQLite, a directory).
//! - [`settings`]: typed configuration parsed once from the environment.
//! - [`telemetry`]: JSON-lines logs.
//! - [`app`]: builds the ports for a backend and the service over them.
//! - `testing` (feature `testing`): the contract suite each adapter of a port must pass.

pub mod adapters;
pub mod api;
pub mod app;
pub mod domain;
pub mod feed;
pub mod flows;
pub mod handlers;
pub mod pipeline;
pub mod ports;
pub mod settings;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
