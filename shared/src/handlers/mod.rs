//! Lambda handlers as library functions: each takes the service and the event and returns the
//! response, so they are tested with the sample events in `events/` and no Lambda runtime.
//! The function binaries only wire them to `lambda_runtime`.
//!
//! - [`batch`]: partial batch failures, shared by the SQS and stream handlers.
//! - [`fetch_pool`]: the local runner's download workers, a pool per tier.
//! - [`intake`] and [`fetch`]: crawl requests and fetch tasks from SQS.
//! - [`process`]: SQS messages carrying S3 `ObjectCreated` notifications of presigned uploads.
//! - [`gc`]: DynamoDB stream records of image records removed by TTL.
//! - [`sweep`]: the scheduled GC pass and sweeper batch.

pub mod batch;
pub mod fetch;
pub mod fetch_pool;
pub mod gc;
pub mod intake;
pub mod process;
pub mod sweep;

pub use batch::{BatchItemFailure, BatchResponse};

/// `(message id, body)` of every message of an SQS batch.
fn sqs_items(event: aws_lambda_events::event::sqs::SqsEvent) -> Vec<(String, String)> {
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
