//! Flows: the use cases, written once over the ports and shared by every entry point (HTTP API,
//! CLI, Lambda handlers).
//!
//! - [`upload`]: content-addressed upload with claim-based dedup.
//! - [`offers`]: setting, reading and deleting an offer's ordered photo list.
//! - [`gc`]: collecting expired orphans, record first, then that generation's files.
//! - [`sweep`]: the honest sweeper, which starts from the files.
//! - [`crawl`]: feeds: intake, tiered downloads, retries, settling offers and sending results.

pub mod crawl;
mod error;
pub mod gc;
mod metrics;
pub mod offers;
pub mod presigned;
mod service;
pub mod sweep;
pub mod upload;

pub use error::FlowError;
pub use metrics::{Metrics, MetricsSnapshot};
pub use service::{Policy, Ports, Service};
