//! The ports on AWS: S3 ([`S3BlobStore`], presigned upload URLs), DynamoDB ([`DynamoStore`]),
//! SQS, with Step Functions ([`StepFunctionsDelay`]) or chained delays for long waits, and SNS
//! for the results topic ([`SqsSender`]),
//! [`ports`], which builds them all from an [`AwsBackend`](imgest_core::backend::AwsBackend), and
//! [`read_object`] for what a function reads once at start-up (the watermark).

pub mod cloudfront;
pub mod dynamodb;
pub mod s3;
mod sdk_error;
pub mod sfn;
pub mod sns;
pub mod sqs;
pub mod sqs_dead_letters;

pub use cloudfront::CloudFrontCdn;
pub use dynamodb::DynamoStore;
pub use s3::S3BlobStore;
pub use sfn::StepFunctionsDelay;
pub use sns::SnsTopics;
pub use sqs::SqsSender;

use std::sync::Arc;

use imgest_core::Ports;
use imgest_core::backend::{AwsBackend, LongWaits};
use imgest_core::ports::{Cdn, Clock, StoreError};

/// The SDK's configuration from the standard AWS environment (region, credentials,
/// `AWS_ENDPOINT_URL` for emulators), or the endpoint `aws` names.
async fn sdk_config(aws: &AwsBackend) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(url) = &aws.endpoint_url {
        loader = loader.endpoint_url(url);
    }
    loader.load().await
}

fn s3_client(aws: &AwsBackend, config: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let s3_config = aws_sdk_s3::config::Builder::from(config)
        .force_path_style(aws.force_path_style)
        .build();
    aws_sdk_s3::Client::from_conf(s3_config)
}

/// The CDN `aws` names (`IMGEST_CDN_DISTRIBUTION_ARN`), told of erasures; `None` without one.
pub async fn cdn(aws: &AwsBackend) -> Option<Arc<dyn Cdn>> {
    let id = aws.cdn_distribution_id.as_deref()?;
    let config = sdk_config(aws).await;
    Some(Arc::new(CloudFrontCdn::new(
        aws_sdk_cloudfront::Client::new(&config),
        id,
    )))
}

/// The ports on AWS: the clients configured from the standard AWS environment and the
/// resources `aws` names.
pub async fn ports(aws: &AwsBackend, clock: Arc<dyn Clock>) -> Ports {
    let config = sdk_config(aws).await;
    let blobs = Arc::new(S3BlobStore::new(s3_client(aws, &config), &aws.bucket));
    let records = Arc::new(DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&config),
        &aws.table,
    ));
    let mut sender = SqsSender::new(aws_sdk_sqs::Client::new(&config), aws.queues.clone())
        .with_topics(SnsTopics::new(aws_sdk_sns::Client::new(&config)))
        .with_max_sqs_delay(aws.sqs_max_delay)
        .with_clock(clock.clone())
        .with_letter_bodies(blobs.clone());
    if let LongWaits::StepFunctions { state_machine_arn } = &aws.long_waits {
        sender = sender.with_step_functions(StepFunctionsDelay::new(
            aws_sdk_sfn::Client::new(&config),
            state_machine_arn,
        ));
    }
    let messages = Arc::new(sender);
    Ports {
        blobs: blobs.clone(),
        images: records.clone(),
        offers: records.clone(),
        uploads: records.clone(),
        upload_urls: blobs,
        checkpoints: records.clone(),
        documents: records.clone(),
        rate_limits: records,
        messages,
        // Lambda's SQS triggers receive on AWS; nothing here polls a queue.
        queue: None,
        clock,
    }
}

/// The S3 object `bucket`/`key` whole, refused over `limit` bytes: configuration a function reads
/// once at start-up (the watermark). A missing object is [`StoreError::NotFound`].
pub async fn read_object(
    aws: &AwsBackend,
    bucket: &str,
    key: &str,
    limit: u64,
) -> Result<Vec<u8>, StoreError> {
    let config = sdk_config(aws).await;
    S3BlobStore::new(s3_client(aws, &config), bucket)
        .read_whole(key, limit)
        .await
}
