//! Adapters: the ports on real backends. Embedded: a directory ([`FsBlobStore`]), one SQLite
//! file ([`SqliteStore`]: image, offer and upload records, checkpoints, the task queue) and the
//! runner's own upload URLs ([`LocalUploadUrls`]). AWS: S3 ([`S3BlobStore`], presigned upload
//! URLs), DynamoDB ([`DynamoStore`]), SQS with Step Functions for long delays ([`SqsSender`]).

pub mod dynamodb;
pub mod fs;
pub mod local_upload_urls;
pub mod s3;
pub mod sfn;
pub mod sqlite;
pub mod sqs;
mod sqs_dead_letters;

pub use dynamodb::DynamoStore;
pub use fs::FsBlobStore;
pub use local_upload_urls::LocalUploadUrls;
pub use s3::S3BlobStore;
pub use sfn::StepFunctionsDelay;
pub use sqlite::SqliteStore;
pub use sqs::{MAX_SQS_DELAY, SqsSender};
