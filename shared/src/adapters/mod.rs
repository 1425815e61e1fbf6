//! Embedded adapters: the ports on a local directory ([`FsBlobStore`]) and one SQLite file
//! ([`SqliteStore`]: image records, offer links and the task queue).

pub mod dynamodb;
pub mod fs;
pub mod local_upload_urls;
pub mod s3;
pub mod sfn;
pub mod sqlite;
pub mod sqs;

pub use dynamodb::DynamoStore;
pub use fs::FsBlobStore;
pub use local_upload_urls::LocalUploadUrls;
pub use s3::S3BlobStore;
pub use sfn::StepFunctionsDelay;
pub use sqlite::SqliteStore;
pub use sqs::{MAX_SQS_DELAY, SqsSender};
