//! The scenario a capacity model is run on: the load (named inputs), the deployment (what
//! `template.yaml` sets), the targets and AWS's limits. JSON; unknown fields are refused, so a
//! misspelt input never passes silently. `docs/capacity.md` documents every field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// The AWS region the stack runs in: its regional quotas (SNS's publish rate) follow it.
    /// Optional (`us-east-1`).
    #[serde(default = "us_east_1")]
    pub region: String,
    pub load: Load,
    pub latency_ms: Latency,
    pub targets: Targets,
    pub deployment: Deployment,
    pub limits: Limits,
    pub prices: Prices,
}

/// The traffic, per second or per hour as each name says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// New photo URLs to download per hour (seed 001's peak: 4,000,000).
    pub photos_per_hour: f64,
    /// Share of downloads whose host answers within each tier's deadline.
    pub tier_mix: [f64; 3],
    /// Download attempts per photo (extra attempts are first-tier timeouts).
    pub attempts_per_photo: f64,
    /// Mean answer time of a download that fits each tier, seconds.
    pub tier_mean_answer_s: [f64; 3],
    /// Share of successful downloads that are new content (the rest are known bytes).
    pub new_content_share: f64,
    /// Share of new photos too large for the fetch function's memory (sent to process).
    pub handoff_share: f64,
    /// Share of attempts answered with a wait longer than SQS's longest delay.
    pub long_wait_share: f64,
    pub long_wait_mean_s: f64,
    pub photos_per_offer: f64,
    /// Photos of changed offers whose URLs are known, per new photo.
    pub known_url_photos_per_new: f64,
    /// Photos of offers re-sent unchanged, per new photo.
    pub unchanged_resent_per_new: f64,
    /// Share of those re-sent after the URL window (`IMGEST_URL_TTL`) since their last
    /// settlement: answered the same, and revalidated in the background (a conditional request
    /// per photo). An offer re-sent every `r` days under a `w`-day window: `r ÷ w` (at most 1).
    pub unchanged_past_window_share: f64,
    /// Photos unlinked (offers deleted or changed), per new photo.
    pub unlinked_photos_per_new: f64,
    pub uploads_per_s: f64,
    /// Share of uploads sent inline (`POST /v1/images`); the rest are presigned.
    pub upload_inline_share: f64,
    /// Share of uploads whose bytes are known.
    pub upload_dedup_share: f64,
    /// `GET /v1/uploads/{id}` polls per presigned upload.
    pub upload_polls_per_presigned: f64,
    pub hand_offers_per_s: f64,
    pub hand_deletes_per_s: f64,
    /// Crawl requests sent through `POST /v1/crawl` (the rest come on the intake queue).
    pub http_crawls_per_s: f64,
    pub crawl_status_polls_per_s: f64,
    /// Partners' pulls of their results' feed (`GET /v1/crawls`), all partners together; the
    /// busiest one's are held against a partition. Optional (0).
    #[serde(default)]
    pub feed_polls_per_s: f64,
    pub image_reads_per_s: f64,
    /// Share of crawl results whose client has a webhook endpoint. Optional (0).
    #[serde(default)]
    pub webhook_share: f64,
    /// How long an endpoint takes to answer a delivery, milliseconds. Optional (300).
    #[serde(default = "webhook_answer_ms")]
    pub webhook_answer_ms: f64,
    /// Share of delivery attempts that fail (answers other than 2xx, timeouts). Optional (0.02).
    #[serde(default = "webhook_failure_share")]
    pub webhook_failure_share: f64,
    /// How long the biggest client's endpoint is down at the peak, seconds: the deliveries it
    /// holds come round on their own backoff. Optional (3,600).
    #[serde(default = "webhook_outage_s")]
    pub webhook_outage_s: f64,
    pub biggest_client_share: f64,
    pub biggest_host_share: f64,
    pub popular_url: PopularUrl,
    pub popular_image: PopularImage,
    pub stored_images: f64,
    pub files_per_image: f64,
    /// Images left unlinked past their grace, per hour: what GC must collect.
    pub orphans_per_hour: f64,
    /// Erasures a second (sellers' `DELETE /v1/images/{id}` of content nothing else
    /// references, operators' purges): each filed for the erasure function. Optional (0).
    #[serde(default)]
    pub erasures_per_s: f64,
    /// How long the peak lasts, hours, and the demand outside it as a share of the peak's: a
    /// client throttled below its demand builds a backlog for `peak_hours` and drains it at
    /// its rate less `offpeak_share` of its demand.
    pub peak_hours: f64,
    pub offpeak_share: f64,
    /// Uploads a minute from the busiest seller (one token subject), against `UploadRpm`.
    pub biggest_seller_uploads_per_min: f64,
    /// What the biggest host will take: requests a second and connections open at once
    /// (its operator's figure, or what it was seen to carry).
    pub biggest_host_rps: f64,
    pub biggest_host_connections: f64,
    /// The bucket is new: S3 takes about 3,500 writes a second in all until it partitions its
    /// prefixes under the load, so the peak's writes are held against one prefix's limit.
    /// Optional (false: a bucket that has carried the load before).
    #[serde(default)]
    pub fresh_bucket: bool,
    /// Bytes stored per image, its original and variants, and per image record (the bill's
    /// storage rows). Optional (1,500,000 and 1,500).
    #[serde(default = "bytes_per_image")]
    pub bytes_per_image: f64,
    #[serde(default = "record_bytes")]
    pub record_bytes: f64,
    /// Log bytes each function invocation writes to CloudWatch Logs (its JSON lines and the
    /// metrics' embedded-format line). Optional (2,000).
    #[serde(default = "log_bytes_per_invocation")]
    pub log_bytes_per_invocation: f64,
}

fn webhook_answer_ms() -> f64 {
    300.0
}

fn webhook_failure_share() -> f64 {
    0.02
}

fn webhook_outage_s() -> f64 {
    3600.0
}

fn us_east_1() -> String {
    "us-east-1".to_owned()
}

fn bytes_per_image() -> f64 {
    1_500_000.0
}

fn record_bytes() -> f64 {
    1_500.0
}

fn log_bytes_per_invocation() -> f64 {
    2_000.0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PopularUrl {
    /// Offers listing it.
    pub offers: f64,
    /// Crawls joining its running download per second.
    pub join_per_s: f64,
}

/// An image linked by very many offers (a dealer's logo). Its link count is a number, so how
/// many links it has does not grow its item; how often they change is what loads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PopularImage {
    /// Links and unlinks per second.
    pub changes_per_s: f64,
}

/// Typical in-region latency of one request, milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// A single-item read or write.
    pub dynamodb: f64,
    /// A `TransactWriteItems`.
    pub transaction: f64,
    /// A `Query`, `BatchGetItem` or `BatchWriteItem`. Optional (8).
    #[serde(default = "dynamodb_batch_ms")]
    pub dynamodb_batch: f64,
    /// An SQS request (`SendMessageBatch`).
    pub sqs: f64,
    /// An S3 LIST or `DeleteObjects`. Optional (20).
    #[serde(default = "s3_ms")]
    pub s3: f64,
    /// A CloudFront `CreateInvalidation`. Optional (300).
    #[serde(default = "cloudfront_ms")]
    pub cloudfront: f64,
    /// An S3 PUT or single DELETE. Optional (25).
    #[serde(default = "s3_put_ms")]
    pub s3_put: f64,
}

/// Which of a scenario's latencies a request waits, by the profile's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyClass {
    Dynamodb,
    Transaction,
    DynamodbBatch,
    Sqs,
    S3,
    S3Put,
    Cloudfront,
    /// A request the profile names in no other way: the slowest of the usual ones.
    Unknown,
}

impl LatencyClass {
    /// `None` for what Lambda's event source mapping does outside the function (receiving and
    /// deleting its batch).
    pub fn of(op: &str) -> Option<Self> {
        Some(match op {
            "sqs.DeleteMessageBatch" => return None,
            o if o.starts_with("sqs.ReceiveMessage") => return None,
            "dynamodb.TransactWriteItems" | "dynamodb.TransactGetItems" => Self::Transaction,
            "dynamodb.BatchGetItem" | "dynamodb.BatchWriteItem" | "dynamodb.Query" => {
                Self::DynamodbBatch
            }
            o if o.starts_with("dynamodb.") => Self::Dynamodb,
            o if o.starts_with("sqs.") => Self::Sqs,
            "s3.PUT" | "s3.POST" | "s3.DELETE" => Self::S3Put,
            o if o.starts_with("s3.") => Self::S3,
            o if o.starts_with("cloudfront.") => Self::Cloudfront,
            _ => Self::Unknown,
        })
    }
}

impl Latency {
    /// One request's latency of `class`, ms.
    pub fn of(&self, class: LatencyClass) -> f64 {
        match class {
            LatencyClass::Dynamodb => self.dynamodb,
            LatencyClass::Transaction => self.transaction,
            LatencyClass::DynamodbBatch => self.dynamodb_batch,
            LatencyClass::Sqs => self.sqs,
            LatencyClass::S3 => self.s3,
            LatencyClass::S3Put => self.s3_put,
            LatencyClass::Cloudfront => self.cloudfront,
            LatencyClass::Unknown => self.dynamodb.max(self.sqs).max(self.s3_put),
        }
    }

    /// These latencies, each class's replaced by the mean wait of the requests of that class
    /// that were observed (`(mean ms, count)` by request name); a class none was observed in
    /// keeps its own.
    pub fn observed(&self, by_op: &BTreeMap<String, (f64, u64)>) -> Self {
        let mut out = self.clone();
        let slots: [(LatencyClass, &mut f64); 7] = [
            (LatencyClass::Dynamodb, &mut out.dynamodb),
            (LatencyClass::Transaction, &mut out.transaction),
            (LatencyClass::DynamodbBatch, &mut out.dynamodb_batch),
            (LatencyClass::Sqs, &mut out.sqs),
            (LatencyClass::S3, &mut out.s3),
            (LatencyClass::S3Put, &mut out.s3_put),
            (LatencyClass::Cloudfront, &mut out.cloudfront),
        ];
        for (class, slot) in slots {
            let (sum, n) = by_op
                .iter()
                .filter(|(op, _)| LatencyClass::of(op) == Some(class))
                .fold((0.0, 0_u64), |(sum, n), (_, (mean, count))| {
                    (sum + mean * *count as f64, n + count)
                });
            if n > 0 {
                *slot = sum / n as f64;
            }
        }
        out
    }
}

fn dynamodb_batch_ms() -> f64 {
    8.0
}

fn s3_put_ms() -> f64 {
    25.0
}

fn s3_ms() -> f64 {
    20.0
}

fn cloudfront_ms() -> f64 {
    300.0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Targets {
    pub sweep_pass_days: f64,
    pub audit_cycle_days: f64,
    pub backfill_days: f64,
    /// Reserved concurrency suggested per instance needed at peak.
    pub headroom: f64,
    /// How long telling a popular URL's waiters may take once its download settled, seconds.
    /// Optional (900).
    #[serde(default = "popular_drain_s")]
    pub popular_drain_s: f64,
}

fn popular_drain_s() -> f64 {
    900.0
}

/// What the template deploys (its parameters' defaults; a test compares them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deployment {
    pub fetch: [FetchFunction; 3],
    /// Each tier's whole-request deadline, seconds (`FetchTiers`).
    pub fetch_tiers_s: [f64; 3],
    /// Downloads at once per host and instance (`HostConcurrency`).
    pub host_concurrency: f64,
    /// Body memory reserved per download before its headers (`IMGEST_FETCH_RESERVE`), MB.
    pub reservation_estimate_mb: f64,
    pub intake: QueueFunction,
    pub process: QueueFunction,
    /// The webhooks function: `max_concurrency` is its reserved concurrency
    /// (`WebhookReservedConcurrency`).
    pub webhooks: QueueFunction,
    pub api: Api,
    pub long_waits: LongWaits,
    pub gc: Gc,
    pub sweep: Sweep,
    pub audit: Audit,
    pub backfill: Backfill,
    /// Provisioned warm throughput of the table (0: a fresh on-demand table's).
    pub warm_wcu: f64,
    pub warm_rcu: f64,
    /// Instances of the scheduled maintenance function (GC, sweep, audit) at once (not
    /// reserved: its runs are scheduled, one at a time).
    pub maintenance_instances: f64,
    /// Downloads a client may start per rate window (`ClientRpm`), and the biggest client's
    /// own figure (its `ClientRpmOverrides` entry; 0: none, `client_rpm` applies).
    pub client_rpm: f64,
    pub biggest_client_rpm: f64,
    /// Uploads a minute per token subject (`UploadRpm`).
    pub upload_rpm: f64,
    /// The erasure function's `MemorySize` (its share of a vCPU). Optional (256).
    #[serde(default = "erasure_memory_mb")]
    pub erasure_memory_mb: f64,
    /// Near-duplicate detection (`Similar`). Optional (`off`, the template's default).
    #[serde(default)]
    pub similar: Similar,
}

fn erasure_memory_mb() -> f64 {
    256.0
}

/// What near-duplicate detection does (`Similar`, `IMGEST_SIMILAR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Similar {
    /// Signatures stored with the records only.
    #[default]
    Off,
    /// New photos filed in the index.
    Index,
    /// Filed, and each new photo looked up as it is stored.
    Report,
}

/// How a wait longer than SQS's longest delay is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LongWaits {
    /// One Step Functions execution per wait (`LongWaits=step-functions`, the template's
    /// default): bounded by the account's open executions.
    StepFunctions,
    /// A chain of SQS delays of at most 15 minutes each, the message sent on by its queue's
    /// handler at each early arrival (`LongWaits=sqs-chain`): no quota of open waits.
    SqsChain,
}

/// Where a sweep run resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Checkpoint {
    /// At the next shard: a shard longer than a run never finishes.
    Shard,
    /// At the next page within its shard.
    Page,
}

/// How the audit compares the table with the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditMode {
    /// Every record's files listed, a segment's records held in memory.
    Listing,
    /// S3 Inventory and a table export compared by Athena.
    Inventory,
}

/// One tier's fetch function and its queue's trigger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchFunction {
    pub memory_mb: f64,
    /// The trigger's `BatchSize`.
    pub batch: f64,
    /// The trigger's `MaximumBatchingWindowInSeconds`.
    pub window_s: f64,
    /// The function's `Timeout`, seconds.
    pub timeout_s: f64,
    /// Its reserved concurrency (`FetchConcurrency`).
    pub reserved: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueFunction {
    pub memory_mb: f64,
    pub batch: f64,
    pub max_concurrency: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Api {
    pub memory_mb: f64,
    pub reserved: f64,
    /// Throttle per route: `[rate per second, burst]` (`"default"` for the rest).
    pub routes: BTreeMap<String, [f64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gc {
    /// Jobs running at once (each one GC-index bucket's page at a time).
    pub jobs: f64,
    /// Records one job collects at once (`GC_CONCURRENCY`).
    pub concurrency: f64,
    /// The most of the time GC may run: half of each run (`run_s` of the sweep) every
    /// `period_s` (the rest is the sweep's).
    pub duty: f64,
    /// GC-index partitions the candidates are spread over.
    pub buckets: f64,
    /// The scheduled maintenance function's `MemorySize` (its share of a vCPU).
    pub memory_mb: f64,
    /// GC has runs of its own beside the sweep's (the template's `Collect` and `Maintenance`
    /// schedules), so the sweep has all of its runs' time. Optional (false: one run does both,
    /// GC first).
    #[serde(default)]
    pub beside_sweep: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    pub jobs: f64,
    /// Files one job lists and judges per second, if you measured it: by default the model
    /// computes it from the profile's sweep stage (a page's LIST, its records' lookups, its
    /// checkpoint and its CPU). Optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_per_s_per_job: Option<f64>,
    pub checkpoint: Checkpoint,
    /// A run's length, seconds (the function's timeout less its margin).
    pub run_s: f64,
    /// How often a run starts (`GcSchedule`), seconds.
    pub period_s: f64,
    pub shards: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Audit {
    pub mode: AuditMode,
    pub segments: f64,
    /// Bytes one record takes in a segment's memory (listing mode).
    pub bytes_per_record: f64,
    /// Bytes of the table export and of the inventory per image (inventory mode).
    pub export_bytes_per_image: f64,
    pub inventory_bytes_per_file: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backfill {
    /// Photos re-processed per second at most (`BackfillRate`).
    pub rate: f64,
    /// Invocations on its queue at most (`BackfillConcurrency`).
    pub concurrency: f64,
    pub reserved: f64,
    pub memory_mb: f64,
    /// Parallel segments of its scan (`BackfillSegments`).
    pub segments: f64,
    /// CPU seconds per re-processed photo (1 vCPU).
    pub cpu_s_per_photo: f64,
    /// Write units per re-processed photo (its record rewritten once, about 1.5 KB).
    pub wcu_per_photo: f64,
}

/// AWS's limits (us-east-1 defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub account_concurrency: f64,
    pub unreserved_min: f64,
    pub partition_wcu: f64,
    /// A partition is hot above this share of its limit.
    pub partition_fraction: f64,
    pub item_kb: f64,
    pub table_initial_wcu: f64,
    pub table_initial_rcu: f64,
    pub sqs_in_flight: f64,
    pub sqs_max_delay_s: f64,
    pub sfn_open_executions: f64,
    pub s3_put_per_prefix: f64,
    pub api_account_rps: f64,
    /// Lambda's SQS pollers per queue at rest (batches fill from what they receive).
    pub sqs_pollers: f64,
    pub lambda_max_memory_mb: f64,
    /// CloudFront's invalidation paths in progress at once per distribution (a quota AWS
    /// raises on request). Optional (3,000).
    #[serde(default = "cdn_paths_in_progress")]
    pub cdn_paths_in_progress: f64,
    /// How long an invalidation stays in progress, seconds. Optional (120).
    #[serde(default = "cdn_invalidation_s")]
    pub cdn_invalidation_s: f64,
    /// A partition's read units a second (DynamoDB: 3,000). Optional.
    #[serde(default = "partition_rcu")]
    pub partition_rcu: f64,
    /// SNS's publish rate in the scenario's region, messages a second (0: the published
    /// default of that region, [`sns_publish_quota`]). Optional (0).
    #[serde(default)]
    pub sns_publish_per_s: f64,
}

fn partition_rcu() -> f64 {
    3000.0
}

/// SNS's default publish quota for standard topics (messages a second, per account and
/// region; a soft quota AWS raises on request): 30,000 in us-east-1, 9,000 in us-west-2 and
/// eu-west-1, 1,500 elsewhere (AWS General Reference, "Amazon Simple Notification Service
/// endpoints and quotas", `Publish` API throttling).
pub fn sns_publish_quota(region: &str) -> f64 {
    match region {
        "us-east-1" => 30_000.0,
        "us-west-2" | "eu-west-1" => 9_000.0,
        _ => 1_500.0,
    }
}

fn cdn_paths_in_progress() -> f64 {
    3000.0
}

fn cdn_invalidation_s() -> f64 {
    120.0
}

/// List prices (us-east-1) of what the bill adds beyond the measured stages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    pub lambda_gb_second: f64,
    pub lambda_request: f64,
    pub sqs_request: f64,
    /// An S3 PUT or LIST.
    pub s3_put: f64,
    pub dynamodb_rcu: f64,
    pub sfn_transition: f64,
    pub api_request: f64,
    pub inventory_per_million_objects: f64,
    pub export_per_gb: f64,
    pub athena_per_tb: f64,
    pub pitr_per_gb_month: f64,
    /// Storage and logs. Optional (S3 Standard $0.023, DynamoDB Standard $0.25 a GB-month;
    /// CloudWatch Logs ingestion $0.50 a GB).
    #[serde(default = "s3_gb_month")]
    pub s3_gb_month: f64,
    #[serde(default = "dynamodb_gb_month")]
    pub dynamodb_gb_month: f64,
    #[serde(default = "logs_per_gb")]
    pub logs_per_gb: f64,
    /// A DynamoDB write request unit (on demand), for writes the model adds to the measured
    /// stages'. Optional ($0.625 a million).
    #[serde(default = "dynamodb_wcu")]
    pub dynamodb_wcu: f64,
}

fn s3_gb_month() -> f64 {
    0.023
}

fn dynamodb_gb_month() -> f64 {
    0.25
}

fn logs_per_gb() -> f64 {
    0.50
}

fn dynamodb_wcu() -> f64 {
    0.625e-6
}

impl Scenario {
    /// Parses a scenario: unknown fields, and route keys that name no route, are refused.
    pub fn parse(json: &str) -> anyhow::Result<Self> {
        let scenario: Self = serde_json::from_str(json)?;
        for route in scenario.deployment.api.routes.keys() {
            if route != "default" && !super::model::ROUTES.contains(&route.as_str()) {
                anyhow::bail!(
                    "deployment.api.routes: {route:?} is not a route of the API (the routes: \"default\", {})",
                    super::model::ROUTES.join(", ")
                );
            }
        }
        Ok(scenario)
    }

    /// SNS's publish rate here: the scenario's own figure, or its region's default.
    pub fn sns_publish_per_s(&self) -> f64 {
        if self.limits.sns_publish_per_s > 0.0 {
            self.limits.sns_publish_per_s
        } else {
            sns_publish_quota(&self.region)
        }
    }
}
