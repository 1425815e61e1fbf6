//! Lambda handlers as library functions: each takes the service (or the crawler) and the event
//! and returns the response, so they are tested with the sample events in `events/` and no
//! Lambda runtime. The function binaries only wire them to `lambda_runtime`.
//!
//! - [`batch`]: partial batch failures, shared by the SQS and stream handlers.
//! - [`intake`] and [`fetch`]: crawl requests and fetch tasks from SQS.
//! - [`process`]: SQS messages carrying S3 `ObjectCreated` notifications of presigned uploads,
//!   and the photos the fetch functions downloaded.
//! - [`backfill`]: the backfill's enumeration (scheduled) and its re-processing tasks (SQS).
//! - [`ttl_cleanup`]: image records removed by DynamoDB's TTL (read from the table's stream).
//! - [`scheduled_gc`]: the hourly GC pass and sweep batch.

pub mod backfill;
pub mod batch;
pub mod fetch;
pub mod intake;
pub mod process;
pub mod scheduled_gc;
pub mod ttl_cleanup;

pub use batch::{BatchItemFailure, BatchResponse};

/// `(message id, body)` of every message of an SQS batch. Public so that the fuzz targets read
/// an SQS event as the handlers do.
pub fn sqs_items(event: aws_lambda_events::event::sqs::SqsEvent) -> Vec<(String, String)> {
    event
        .records
        .into_iter()
        .map(|m| {
            (
                m.message_id.clone().unwrap_or_default(),
                m.body.unwrap_or_default(),
            )
        })
        .collect()
}
