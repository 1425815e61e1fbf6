//! Lambda handlers as library functions: each takes the service and the event and returns the
//! response, so they are tested with the sample events in `events/` and no Lambda runtime.
//! The function binaries only wire them to `lambda_runtime`.
//!
//! - [`batch`]: partial batch failures, shared by the SQS and stream handlers.
//! - [`process`]: SQS messages carrying S3 `ObjectCreated` notifications of presigned uploads.
//! - [`gc`]: DynamoDB stream records of image records removed by TTL.
//! - [`sweep`]: the scheduled GC pass and sweeper batch.

pub mod batch;
pub mod gc;
pub mod process;
pub mod sweep;

pub use batch::{BatchItemFailure, BatchResponse};
