//! Flows: the use cases, written once over the ports and shared by every entry point (HTTP API,
//! CLI, Lambda handlers, the local runner). Each is a method of [`Service`] (the ports, the
//! lifecycle policy and, where photos are decoded, the pipeline through its port). The crawls
//! are built on these in `imgest-crawl`, so a function that never crawls (the collectors)
//! links no downloader, and one that never decodes no codec.
//!
//! - [`upload`]: content-addressed upload with claim-based dedup, and the store of a crawled
//!   photo (no claim).
//! - [`presigned`]: uploads too large for a request body: a presigned URL, then processing.
//! - [`offers`]: setting, reading and deleting an offer's ordered photo list.
//! - [`gc`]: collecting expired orphans, record first, then that generation's files.
//! - [`sweep`]: garbage collection that starts from the files: files no record needs.
//! - [`backfill`]: re-processing stored photos under the configured variant set.
//! - [`variants`]: the variant set an operator confirmed (what the sweep may retire).
//! - [`audit`]: records checked against their files and link counts against the offers.
//! - [`restore`]: a collected photo stored again from the original the versioned bucket kept.
//! - [`queues`]: the queues' names, what the local task queue holds, which work comes first,
//!   dead letters.
//! - [`browse`]: the operator's pages of stored images (and orphans).
//! - [`erase`]: a seller's erasure of their upload, an operator's purge, tombstones and
//!   receipts.
//! - [`similar`]: near-duplicates: the perceptual-hash index, lookups scoped to the caller.
//! - [`configure`]: the service the settings describe (its policy; the pipeline is given by
//!   the processes that decode).
//! - `files`, `decode`: what several flows share: an image's files written and deleted by
//!   generation, and decoding under the memory budget.
//! - `error`, `counts`, `service`: the flows' error, counters and shared state.

pub mod audit;
pub mod backfill;
pub mod browse;
pub mod configure;
mod counts;
mod decode;
pub mod erase;
mod error;
mod files;
pub mod gc;
pub mod offers;
pub mod presigned;
pub mod queues;
pub mod restore;
mod service;
pub mod similar;
pub mod sweep;
pub mod upload;
pub mod variants;

pub use counts::{CrawlCounters, CrawlCounts, FlowCounters, FlowCounts};
pub use error::FlowError;
pub use service::{Policy, Ports, Service};
