//! The crawl functions' handlers, on [`imgest_lambda`]'s wiring: each takes the crawler and the
//! event and returns the batch's response, tested with the sample events in `events/` and no
//! Lambda runtime. Apart from `imgest-lambda` so that the functions that never crawl (the
//! collectors, the erasure function) link no downloader, and a change to the crawl rebuilds
//! none of them.
//!
//! - [`intake`] and [`fetch`]: crawl requests and fetch tasks from SQS; [`settle`]: the crawls
//!   the fetch and process functions hand to the intake function to finish.
//! - [`process`]: SQS messages carrying S3 `ObjectCreated` notifications of presigned uploads,
//!   and the photos the fetch functions downloaded.
//! - [`webhooks`]: results delivered to their clients' endpoints, from their queue.

pub mod fetch;
pub mod intake;
pub mod process;
pub mod settle;
pub mod webhooks;

use std::sync::Arc;

use imgest_crawl::{Crawler, Processing};
use imgest_flows::Service;
use imgest_settings::Settings;

/// What the crawl functions start with: the crawler over `service` (from
/// `imgest_lambda::service_from_env`, or `decoding_service_from_env` where photos are decoded:
/// fetch and process), processing new photos as `processing` says.
pub fn crawler(settings: &Settings, service: Service, processing: Processing) -> Crawler {
    Crawler::new(Arc::new(service), settings.crawl.clone(), processing)
}
