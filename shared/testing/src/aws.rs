//! Connecting tests to AWS APIs served by an emulator (moto's server, started by
//! `infra/test.sh`). A test asked to run against AWS that finds no endpoint fails loudly.
//! [`LoseAnswer`] makes the emulator's answer to one request look lost, as a network does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use aws_config::{BehaviorVersion, SdkConfig};

use super::message_sender::QueueReader;

/// An item of `table` as stored (`pk`, `sk`), read consistently: what a test checks of the
/// adapter's layout (`None` if there is none).
pub async fn raw_item(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> Option<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    use aws_sdk_dynamodb::types::AttributeValue;
    client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.to_owned()))
        .key("sk", AttributeValue::S(sk.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .ok()?
        .item
}

/// The emulator's endpoint (`AWS_ENDPOINT_URL`), if one is configured.
pub fn endpoint() -> Option<String> {
    std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// Whether AWS tests are required (`IMGEST_TEST_AWS=1`, or running in CI).
pub fn required() -> bool {
    std::env::var("IMGEST_TEST_AWS").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| !v.is_empty())
}

/// The SDK configuration for the emulator, or `None` when no endpoint is configured and AWS
/// tests are not required (a developer running `cargo test` alone; the test says it skipped).
/// Panics when the tests are required and there is no endpoint.
pub async fn sdk_config(test: &str) -> Option<SdkConfig> {
    match endpoint() {
        Some(_) => Some(aws_config::load_defaults(BehaviorVersion::latest()).await),
        None if required() => {
            panic!(
                "{test}: AWS tests are required (IMGEST_TEST_AWS=1 or CI) but AWS_ENDPOINT_URL is not set; run infra/test.sh"
            )
        }
        None => {
            eprintln!(
                "{test}: skipped, no AWS_ENDPOINT_URL (infra/test.sh starts an emulator and sets it)"
            );
            None
        }
    }
}

/// A fresh resource name (bucket, table, queue), so tests can share one emulator.
pub fn unique_name(prefix: &str) -> String {
    format!("{prefix}-{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff)
}

/// A fresh CloudFront distribution on the emulator, in front of a bucket that need not
/// exist (nothing is fetched through it): its id, and its ARN as the template's
/// `CdnDistributionArn` spells it (the emulator's own leaves out the empty region).
pub async fn distribution(
    cloudfront: &aws_sdk_cloudfront::Client,
    comment: &str,
) -> (String, String) {
    use aws_sdk_cloudfront::types::{
        DefaultCacheBehavior, DistributionConfig, Origin, Origins, S3OriginConfig,
        ViewerProtocolPolicy,
    };
    let origin = Origin::builder()
        .id("files")
        .domain_name("imgest-files.s3.us-east-1.amazonaws.com")
        .s3_origin_config(S3OriginConfig::builder().origin_access_identity("").build())
        .build()
        .expect("an origin");
    let config = DistributionConfig::builder()
        .caller_reference(unique_name("imgest-test"))
        .comment(comment)
        .enabled(true)
        .origins(
            Origins::builder()
                .quantity(1)
                .items(origin)
                .build()
                .expect("origins"),
        )
        .default_cache_behavior(
            DefaultCacheBehavior::builder()
                .target_origin_id("files")
                .viewer_protocol_policy(ViewerProtocolPolicy::RedirectToHttps)
                .build()
                .expect("a cache behaviour"),
        )
        .build()
        .expect("a distribution's config");
    let created = cloudfront
        .create_distribution()
        .distribution_config(config)
        .send()
        .await
        .expect("the emulator creates a distribution");
    let id = created
        .distribution()
        .expect("the created distribution")
        .id()
        .to_owned();
    let arn = format!("arn:aws:cloudfront::123456789012:distribution/{id}");
    (id, arn)
}

/// What invalidation `id` of `distribution` asked CloudFront for: its caller reference and
/// its paths.
pub async fn invalidation(
    cloudfront: &aws_sdk_cloudfront::Client,
    distribution: &str,
    id: &str,
) -> (String, Vec<String>) {
    let got = cloudfront
        .get_invalidation()
        .distribution_id(distribution)
        .id(id)
        .send()
        .await
        .expect("the emulator reads the invalidation back");
    let batch = got
        .invalidation()
        .and_then(|i| i.invalidation_batch())
        .expect("an invalidation's batch");
    let paths = batch
        .paths()
        .map(|p| p.items().to_vec())
        .unwrap_or_default();
    (batch.caller_reference().to_owned(), paths)
}

/// A fresh SQS queue named after `prefix`: its URL and ARN.
pub async fn queue(sqs: &aws_sdk_sqs::Client, prefix: &str) -> (String, String) {
    use aws_sdk_sqs::types::QueueAttributeName;
    let url = sqs
        .create_queue()
        .queue_name(unique_name(prefix))
        .send()
        .await
        .expect("the emulator creates the queue")
        .queue_url
        .expect("a created queue has a URL");
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("the emulator reads the queue's attributes")
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .expect("a queue has an ARN");
    (url, arn)
}

/// Gives the queue at `url` a fresh dead-letter queue (a redrive policy after `max_receives`
/// receives, as the template's queues have): the dead-letter queue's URL.
pub async fn with_dead_letter_queue(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    max_receives: u32,
) -> String {
    use aws_sdk_sqs::types::QueueAttributeName;
    let (dead, arn) = queue(sqs, "dead").await;
    let policy =
        format!(r#"{{"deadLetterTargetArn": "{arn}", "maxReceiveCount": {max_receives}}}"#);
    sqs.set_queue_attributes()
        .queue_url(url)
        .attributes(QueueAttributeName::RedrivePolicy, policy)
        .send()
        .await
        .expect("the emulator sets the redrive policy");
    dead
}

/// The delayed-send state machine the SAM template deploys, created on the emulator (which
/// runs its executions: the wait, then the SQS send), sending to the fetch queues at
/// `fetch_queue_urls` (tier 0 first; SAM's `DefinitionSubstitutions` on AWS); its ARN.
pub async fn delayed_send_state_machine(
    sfn: &aws_sdk_sfn::Client,
    fetch_queue_urls: [&str; 3],
) -> String {
    let mut definition =
        include_str!("../../../infra/statemachine/delayed-send.asl.json").to_owned();
    for (tier, url) in fetch_queue_urls.iter().enumerate() {
        definition = definition.replace(&format!("${{FetchQueue{tier}Url}}"), url);
    }
    sfn.create_state_machine()
        .name(unique_name("imgest-delayed-send"))
        .definition(definition)
        .role_arn("arn:aws:iam::123456789012:role/x")
        .send()
        .await
        .expect("the emulator creates the state machine")
        .state_machine_arn
}

/// The executions of the state machine `arn` with `status` (every one: `None`).
pub async fn executions(
    sfn: &aws_sdk_sfn::Client,
    arn: &str,
    status: Option<aws_sdk_sfn::types::ExecutionStatus>,
) -> usize {
    sfn.list_executions()
        .state_machine_arn(arn)
        .set_status_filter(status)
        .send()
        .await
        .expect("the emulator lists the executions")
        .executions()
        .len()
}

/// Reads an SQS queue back: long-polling `ReceiveMessage`, then `DeleteMessage` for the
/// messages taken (and `ChangeMessageVisibility` to 0 for the ones put back).
pub struct SqsQueueReader {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl SqsQueueReader {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            url: queue_url.into(),
        }
    }
}

#[async_trait]
impl QueueReader for SqsQueueReader {
    async fn take(&self, tag: &str, wait: Duration) -> Vec<String> {
        // Whole seconds, at most SQS's 20; the call returns as soon as a message is there.
        let wait_secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(10)
            .wait_time_seconds(i32::try_from(wait_secs.min(20)).unwrap())
            .send()
            .await
            .unwrap();
        let mut mine = Vec::new();
        for message in out.messages() {
            let body = message.body().unwrap_or_default();
            let receipt = message.receipt_handle().unwrap();
            if body.starts_with(tag) {
                self.client
                    .delete_message()
                    .queue_url(&self.url)
                    .receipt_handle(receipt)
                    .send()
                    .await
                    .unwrap();
                mine.push(body.to_owned());
            } else {
                self.client
                    .change_message_visibility()
                    .queue_url(&self.url)
                    .receipt_handle(receipt)
                    .visibility_timeout(0)
                    .send()
                    .await
                    .unwrap();
            }
        }
        mine
    }
}

/// An SDK interceptor that loses the answer of the `nth` request (1-based) of one operation
/// (its `X-Amz-Target`, e.g. `DynamoDB_20120810.UpdateItem`): the emulator applies the
/// request, and the client sees an HTTP 500 instead of its answer, so the SDK's standard retry
/// makes the very request again, as it does when AWS's answer is lost. A conditional write
/// then meets its own result and is refused.
#[derive(Debug)]
pub struct LoseAnswer {
    target: &'static str,
    nth: u32,
    seen: AtomicU32,
    losing: AtomicBool,
    lost: AtomicU32,
}

impl LoseAnswer {
    pub fn new(target: &'static str, nth: u32) -> Arc<Self> {
        Arc::new(Self {
            target,
            nth,
            seen: AtomicU32::new(0),
            losing: AtomicBool::new(false),
            lost: AtomicU32::new(0),
        })
    }

    /// How many answers were lost (0 or 1).
    pub fn lost(&self) -> u32 {
        self.lost.load(Ordering::SeqCst)
    }

    /// A DynamoDB client on `config` whose answers pass through `lose`.
    pub fn dynamodb(lose: &Arc<Self>, config: &SdkConfig) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(config)
                .interceptor(LoseAnswerInterceptor(Arc::clone(lose)))
                .build(),
        )
    }
}

#[derive(Debug)]
struct LoseAnswerInterceptor(Arc<LoseAnswer>);

impl aws_sdk_dynamodb::config::Intercept for LoseAnswerInterceptor {
    fn name(&self) -> &'static str {
        "LoseAnswer"
    }

    fn read_before_transmit(
        &self,
        context: &aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef<'_>,
        _: &aws_sdk_dynamodb::config::RuntimeComponents,
        _: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        let lose = &self.0;
        let ours = context.request().headers().get("x-amz-target") == Some(lose.target);
        let nth = ours && lose.seen.fetch_add(1, Ordering::SeqCst) + 1 == lose.nth;
        lose.losing.store(nth, Ordering::SeqCst);
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        context: &mut aws_sdk_dynamodb::config::interceptors::BeforeDeserializationInterceptorContextMut<'_>,
        _: &aws_sdk_dynamodb::config::RuntimeComponents,
        _: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        if self.0.losing.swap(false, Ordering::SeqCst) {
            self.0.lost.fetch_add(1, Ordering::SeqCst);
            // A server error: the SDK's standard retry classifies it transient.
            *context.response_mut().status_mut() =
                500.try_into().map_err(|e| format!("status 500: {e}"))?;
        }
        Ok(())
    }
}
