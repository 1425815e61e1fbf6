//! The Lambda bootstraps that SAM ships, run as Lambda runs them: each function's binary started
//! against the Runtime API emulator (`imgest-runtime-api`) with the AWS side on the emulator
//! the test command starts, fed the events its trigger delivers. Each test asserts on the
//! function's answer and on what it wrote (read back through the AWS adapters); two on what a
//! binary alone can show: its peak memory against the template's `MemorySize` with the hostile
//! photos, and a process killed mid-batch whose messages SQS delivers again.
//!
//! Ignored by a plain `cargo test`, as they need the built bootstraps: `infra/lambda-smoke.sh`
//! (part of `infra/test.sh`) builds the arm64 ones with `sam build` and runs these under
//! qemu-user. `IMGEST_BOOTSTRAPS` names the directory (SAM's `.aws-sam/build/<LogicalId>/` or
//! cargo-lambda's `target/lambda/<binary>/` layout), `IMGEST_BOOTSTRAP_RUNNER` the command line
//! to run them under (none: run directly, as the cold-start benchmark does on x86-64).
//! Each function's start-to-first-answer is printed as a `cold start:` line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use bytes::Bytes;
use imgest_core::domain::{BlobKey, ClientId, ImageId, OfferId, OfferKey, Tenant};
use imgest_crawl::Processing;
use imgest_hosts::{Answer, Gate, PartnerHost};
use imgest_lambda_crawl as handlers;
use imgest_runtime_api::{Function, FunctionError, Launch, Outcome};
use serde_json::{Value, json};

use crate::aws::{TtlRemoval, event, ttl_removal};
use crate::crawl_aws::{CrawlOnAws, intake_event, take};
use crate::identity_aws::api_event;
use crate::support::webhooks::Receiver;
use crate::support::{TestApp, fixture, sample};
use crate::watermark_aws;

/// A function of `template.yaml`: its binary (cargo-lambda's layout) and its logical id
/// (SAM's).
#[derive(Clone, Copy)]
struct Bootstrap {
    binary: &'static str,
    logical_id: &'static str,
}

const API: Bootstrap = Bootstrap::of("imgest-api", "ApiFunction");
const INTAKE: Bootstrap = Bootstrap::of("imgest-intake", "IntakeFunction");
const FETCH: Bootstrap = Bootstrap::of("imgest-fetch", "FetchFunction0");
const PROCESS: Bootstrap = Bootstrap::of("imgest-process", "ProcessFunction");
const TTL_CLEANUP: Bootstrap = Bootstrap::of("imgest-ttl-cleanup", "TtlCleanupFunction");
const SCHEDULED_GC: Bootstrap = Bootstrap::of("imgest-scheduled-gc", "ScheduledGcFunction");
const BACKFILL: Bootstrap = Bootstrap::of("imgest-backfill", "BackfillFunction");
const ERASURE: Bootstrap = Bootstrap::of("imgest-erasure", "ErasureFunction");
const WEBHOOKS: Bootstrap = Bootstrap::of("imgest-webhooks", "WebhooksFunction");
const EVERY_FUNCTION: [Bootstrap; 9] = [
    API,
    INTAKE,
    FETCH,
    PROCESS,
    TTL_CLEANUP,
    SCHEDULED_GC,
    BACKFILL,
    ERASURE,
    WEBHOOKS,
];

impl Bootstrap {
    const fn of(binary: &'static str, logical_id: &'static str) -> Self {
        Self { binary, logical_id }
    }

    fn path(self) -> PathBuf {
        let dir = std::env::var_os("IMGEST_BOOTSTRAPS")
            .map(PathBuf::from)
            .expect(
                "IMGEST_BOOTSTRAPS: the directory of the built bootstraps (infra/lambda-smoke.sh)",
            );
        let candidates = [
            dir.join(self.logical_id).join("bootstrap"),
            dir.join(self.binary).join("bootstrap"),
        ];
        candidates
            .iter()
            .find(|p| p.is_file())
            .cloned()
            .unwrap_or_else(|| panic!("no bootstrap at {candidates:?}"))
    }
}

/// The AWS side (bucket, table, queues on the emulator; the local runner on the same
/// resources, to read back what the functions wrote) and the environment every function gets.
struct Stack {
    crawl: CrawlOnAws,
    env: Vec<(String, String)>,
}

impl Stack {
    async fn start(test: &str) -> Self {
        let crawl = CrawlOnAws::start_beside_functions(test)
            .await
            .expect("the bootstraps' tests need the AWS emulator: run infra/lambda-smoke.sh");
        let (bucket, table) = crawl.app.aws.clone().unwrap();
        let mut env: Vec<(String, String)> = [
            ("IMGEST_BACKEND", "aws"),
            ("IMGEST_BUCKET", &bucket),
            ("IMGEST_TABLE", &table),
            ("IMGEST_QUEUES", &crawl.queues),
            ("IMGEST_S3_FORCE_PATH_STYLE", "true"),
            ("IMGEST_AUTH", "gateway"),
            ("IMGEST_JWT_AUDIENCE", "imgest"),
            ("IMGEST_PUBLIC_URL", "https://cdn.example.com"),
            // The partner host of the crawl test is on 127.0.0.1.
            ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true"),
            ("IMGEST_FETCH_PORTS", "any"),
            // The sender of the tests' intake events may send crawls for any client.
            (
                "IMGEST_INTAKE_SENDERS",
                &format!("{}=*", crate::support::TEST_SENDER),
            ),
            // The app's own sends and the sample events come from the stack's roles.
            (
                "IMGEST_STACK_ROLES",
                &format!(
                    "{},{}",
                    crate::support::STACK_SENDER,
                    crate::support::SAMPLE_EVENT_SENDER
                ),
            ),
            ("IMGEST_LOG", "info"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        // The emulator's endpoint and the fake credentials infra/moto.sh exported.
        for var in [
            "AWS_ENDPOINT_URL",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
            "AWS_EC2_METADATA_DISABLED",
        ] {
            if let Ok(value) = std::env::var(var) {
                env.push((var.to_owned(), value));
            }
        }
        Self { crawl, env }
    }

    async fn function(&self, bootstrap: Bootstrap, vars: &[(&str, &str)]) -> Function {
        self.launch(bootstrap, vars).start().await.unwrap()
    }

    fn launch(&self, bootstrap: Bootstrap, vars: &[(&str, &str)]) -> Launch {
        let runner = std::env::var("IMGEST_BOOTSTRAP_RUNNER").unwrap_or_default();
        Launch::new(bootstrap.path(), bootstrap.binary)
            .runner(runner.split_whitespace())
            .envs(self.env.iter().cloned())
            .envs(vars.iter().copied())
    }

    /// The function with the memory the template gives it (`MemorySize`, which Lambda tells
    /// it and its memory budget follows), and `timeout` for each invocation.
    async fn deployed(
        &self,
        bootstrap: Bootstrap,
        vars: &[(&str, &str)],
        timeout: Duration,
    ) -> Function {
        self.launch(bootstrap, vars)
            .memory_mb(memory_size(bootstrap.logical_id))
            .timeout(timeout)
            .start()
            .await
            .unwrap()
    }
}

/// A template function's `MemorySize`, in MB.
fn memory_size(logical_id: &str) -> u32 {
    template_number(logical_id, "MemorySize")
}

/// A template function's `Timeout`: a run that budgets its work by its deadline (the scheduled
/// sweep) gets the time Lambda gives it, not the emulator's default, which an emulated build
/// on a busy machine can spend before 256 shards are listed.
fn template_timeout(logical_id: &str) -> Duration {
    Duration::from_secs(template_number(logical_id, "Timeout").into())
}

fn template_number(logical_id: &str, property: &str) -> u32 {
    let template = crate::template::text();
    crate::template::value_of(&crate::template::resource(&template, logical_id), property)
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("{logical_id} has no {property}"))
}

/// Asserts the function's process never held more than its template `MemorySize`. Under
/// qemu-user (`IMGEST_BOOTSTRAP_RUNNER`) the peak is the emulator's, which holds the program's
/// memory and its own: its translated-code cache and its own heap (measured at the end: they
/// only grow; about 30 MiB for the fetch function) are not the program's and are allowed on
/// top; the rest of the emulator's memory still counts (a stricter bound).
fn within_memory_size(function: &Function, bootstrap: Bootstrap) {
    let limit = u64::from(memory_size(bootstrap.logical_id)) << 20;
    let peak = function
        .peak_memory()
        .unwrap_or_else(|| panic!("{}: no peak memory to read", function.name()));
    let emulated = std::env::var("IMGEST_BOOTSTRAP_RUNNER").is_ok_and(|r| !r.trim().is_empty());
    let runner = if emulated {
        function.runner_own_memory().unwrap_or(0)
    } else {
        0
    };
    eprintln!(
        "peak memory: {} {:.0} MiB of {} MiB (the runner's own {:.0} MiB of it)",
        function.name(),
        peak as f64 / f64::from(1 << 20),
        limit >> 20,
        runner as f64 / f64::from(1 << 20)
    );
    assert!(
        peak <= limit + runner,
        "{}: peak {peak} bytes, over its MemorySize ({limit} bytes) and the runner's own memory ({runner} bytes)",
        function.name()
    );
}

/// Receives `n` messages of a queue as Lambda's event source mapping does: they stay on the
/// queue, invisible for `visibility`, until the function's answer lets them be deleted
/// ([`acknowledge`]); a function that dies leaves them to be received again.
async fn receive(sqs: &aws_sdk_sqs::Client, url: &str, n: usize, visibility: i32) -> SqsEvent {
    use aws_sdk_sqs::types::MessageSystemAttributeName;
    let mut event = SqsEvent::default();
    for _ in 0..60 {
        if event.records.len() >= n {
            break;
        }
        let received = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .visibility_timeout(visibility)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        for m in received.messages.unwrap_or_default() {
            event.records.push(crate::crawl_aws::lambda_message(url, m));
        }
    }
    assert_eq!(event.records.len(), n, "messages on {url}");
    event
}

/// Deletes the messages of `event` the function's answer did not report as failed, as
/// Lambda does after a batch.
async fn acknowledge(sqs: &aws_sdk_sqs::Client, url: &str, event: &SqsEvent, answer: &Value) {
    let failed: Vec<&str> = answer["batchItemFailures"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|i| i["itemIdentifier"].as_str())
                .collect()
        })
        .unwrap_or_default();
    for m in &event.records {
        if !failed.contains(&m.message_id.as_deref().unwrap_or_default()) {
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle.clone().unwrap())
                .send()
                .await
                .unwrap();
        }
    }
}

/// Invokes `function` and returns its answer, failing with its error report and log when it
/// gives none; the first answer prints the function's cold start.
async fn answer(function: &mut Function, event: &Value) -> Value {
    let first = function.start_to_first_answer().is_none();
    let outcome = match function.invoke(event.to_string()).await {
        Ok(outcome) => outcome,
        Err(e) => panic!("{e}"),
    };
    if first {
        let secs = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64());
        eprintln!(
            "cold start: {} init {:.3} s, first answer {:.3} s",
            function.name(),
            secs(function.init_duration()),
            secs(function.start_to_first_answer())
        );
    }
    match outcome {
        Outcome::Response(body) => serde_json::from_slice(&body).unwrap(),
        Outcome::Error { error_type, body } => panic!(
            "{} answered {error_type}: {}\n{}",
            function.name(),
            String::from_utf8_lossy(&body),
            function.log()
        ),
    }
}

#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn no_bootstrap_starts_when_nobody_checks_callers() {
    // Refused while reading the settings, before anything on AWS is reached (and with no
    // instance metadata to ask, had it been).
    let env = [
        ("IMGEST_BACKEND", "aws"),
        ("IMGEST_BUCKET", "files"),
        ("IMGEST_TABLE", "records"),
        ("IMGEST_LOG", "info"),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    let runner = std::env::var("IMGEST_BOOTSTRAP_RUNNER").unwrap_or_default();
    for bootstrap in EVERY_FUNCTION {
        for auth in ["off", ""] {
            let mut function = Launch::new(bootstrap.path(), bootstrap.binary)
                .runner(runner.split_whitespace())
                .envs(env)
                .env("IMGEST_AUTH", auth)
                .start()
                .await
                .unwrap();
            match function.invoke(json!({}).to_string()).await {
                Err(FunctionError::Exited { log, .. }) => assert!(
                    log.contains("IMGEST_AUTH") && log.contains("refused on AWS Lambda"),
                    "{} with IMGEST_AUTH={auth:?}: {log}",
                    bootstrap.binary
                ),
                other => panic!(
                    "{} started with IMGEST_AUTH={auth:?}: {other:?}\n{}",
                    bootstrap.binary,
                    function.log()
                ),
            }
        }
    }
}

/// An API Gateway response's status and JSON body.
fn http(response: &Value) -> (u64, Value) {
    let body = response["body"].as_str().unwrap_or_default();
    let json = serde_json::from_str(body).unwrap_or(Value::Null);
    (response["statusCode"].as_u64().unwrap(), json)
}

/// Asserts a batch function reported no failed item.
fn no_failures(function: &Function, response: &Value) {
    assert_eq!(
        response["batchItemFailures"],
        json!([]),
        "{}: {response}\n{}",
        function.name(),
        function.log()
    );
}

/// A client's offer's photos, read from the table.
async fn photos_of(app: &TestApp, client: &str, offer: &str) -> Vec<String> {
    let key = OfferKey::new(
        Tenant::Client(ClientId::parse(client).unwrap()),
        OfferId::parse(offer).unwrap(),
    );
    let photos = app.service.ports().offers.photos(&key).await.unwrap();
    photos
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn the_api_bootstrap_answers_health_an_upload_a_dedup_hit_and_an_offer() {
    let stack = Stack::start("api bootstrap").await;
    let app = &stack.crawl.app;
    let mut api = stack.function(API, &[]).await;

    let (status, health) =
        http(&answer(&mut api, &api_event("anonymous", "GET", "/healthz", None)).await);
    assert_eq!(status, 200, "{health}");

    let photo = fixture("photo.jpg");
    let upload = api_event(
        "seller-a",
        "POST",
        "/v1/images",
        Some((&photo, "image/jpeg")),
    );
    let (status, image) = http(&answer(&mut api, &upload).await);
    assert_eq!(status, 201, "{image}");
    let image_id = image["image_id"].as_str().unwrap().to_owned();
    assert_eq!(image_id, ImageId::of_bytes(&photo).to_string());
    assert!(
        image["variants"]["large"]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://cdn.example.com/"),
        "{image}"
    );
    // The original and its three variants, decoded and encoded by this build.
    assert_eq!(app.files_of(&image_id).await.len(), 4);
    // The invocation's metrics left with it, as embedded-metric-format lines on stdout.
    let decoded = metrics_line(&api, "decode").await;
    assert_eq!(decoded["imgest_stage_total"], 1, "{decoded}");
    assert_eq!(decoded["outcome"], "ok", "{decoded}");
    assert!(
        decoded["_aws"]["CloudWatchMetrics"][0]["Namespace"].is_string(),
        "{decoded}"
    );

    let (status, again) = http(&answer(&mut api, &upload).await);
    assert_eq!(
        (status, &again["deduplicated"]),
        (200, &json!(true)),
        "{again}"
    );
    assert_eq!(app.files_of(&image_id).await.len(), 4);

    let photos = json!({ "image_ids": [image_id] }).to_string();
    let link = api_event(
        "partner-a",
        "PUT",
        "/v1/offers/car-1/photos",
        Some((photos.as_bytes(), "application/json")),
    );
    let (status, linked) = http(&answer(&mut api, &link).await);
    assert_eq!(status, 200, "{linked}");
    assert_eq!(photos_of(app, "acme", "car-1").await, [image_id]);
}

/// The function's latest embedded-metric-format line of `stage` (waiting, within a deadline,
/// for its output to be read).
async fn metrics_line(function: &Function, stage: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = function.log().lines().rev().find_map(|line| {
            let value: Value = serde_json::from_str(line).ok()?;
            (value.get("_aws").is_some() && value["stage"] == stage).then_some(value)
        });
        if let Some(value) = found {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no metrics line of {stage} in:\n{}",
            function.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends a crawl request of `urls` for `offer` through the intake bootstrap, and the task it
/// queued in the first tier through `fetch`.
async fn crawl_through(
    stack: &Stack,
    intake: &mut Function,
    fetch: &mut Function,
    offer: &str,
    url: String,
) {
    let CrawlOnAws { sqs, urls, .. } = &stack.crawl;
    let request = json!({"client_id": "acme", "offer_id": offer, "urls": [url]});
    let response = answer(
        intake,
        &serde_json::to_value(intake_event(offer, &request)).unwrap(),
    )
    .await;
    no_failures(intake, &response);
    // A new host starts in the first tier: its queue holds the task.
    let tasks = take(sqs, &urls["fetch-0"], 1).await;
    let response = answer(fetch, &serde_json::to_value(tasks).unwrap()).await;
    no_failures(fetch, &response);
}

/// The crawl a fetch or process bootstrap settled (and may not finish) through the intake
/// bootstrap, from the settle queue.
async fn finish_through(stack: &Stack, intake: &mut Function) {
    let CrawlOnAws { sqs, urls, .. } = &stack.crawl;
    let settled = take(sqs, &urls["settle"], 1).await;
    let response = answer(intake, &serde_json::to_value(settled).unwrap()).await;
    no_failures(intake, &response);
}

/// The crawl's result on the results queue: its offer and one photo, ok with `image_id`.
async fn settled_ok(stack: &Stack, offer: &str, image_id: &str) {
    let CrawlOnAws { sqs, urls, app, .. } = &stack.crawl;
    let results = take(sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(result["offer_id"], offer, "{result}");
    assert_eq!(result["photos"][0]["status"], "ok", "{result}");
    assert_eq!(result["photos"][0]["image_id"], image_id);
    assert_eq!(
        photos_of(app, "acme", offer).await,
        vec![image_id.to_owned()]
    );
    assert_eq!(app.files_of(image_id).await.len(), 4);
    assert!(!app.files().await.iter().any(|f| f.starts_with("fetched/")));
}

#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn the_intake_fetch_and_process_bootstraps_crawl_a_url_from_a_local_host() {
    let stack = Stack::start("crawl bootstraps").await;
    let CrawlOnAws { sqs, urls, app, .. } = &stack.crawl;
    let (first, second) = (sample("storm.jpg"), sample("dune.jpg"));
    let host = PartnerHost::start([
        ("/a.jpg", Answer::photo(Bytes::from(first.clone()))),
        ("/b.jpg", Answer::photo(Bytes::from(second.clone()))),
    ])
    .await
    .unwrap();
    let mut intake = stack.function(INTAKE, &[]).await;
    let mut fetch = stack.function(FETCH, &[("IMGEST_FETCH_TIER", "0")]).await;

    // A photo the fetch function's memory holds is processed there: no hand-off.
    crawl_through(
        &stack,
        &mut intake,
        &mut fetch,
        "crawled",
        host.url("/a.jpg"),
    )
    .await;
    assert_eq!(host.requests(), 1);
    // The fetch function may not link offers: the intake function finishes the crawl.
    finish_through(&stack, &mut intake).await;
    settled_ok(&stack, "crawled", &ImageId::of_bytes(&first).to_string()).await;

    // One it does not (a fetch function with 8 MiB to work in) waits under fetched/ for the
    // process function.
    let mut small = stack
        .function(
            FETCH,
            &[
                ("IMGEST_FETCH_TIER", "0"),
                ("IMGEST_MEMORY_BUDGET", "72MiB"),
                ("IMGEST_MAX_BODY", "1MB"),
            ],
        )
        .await;
    crawl_through(
        &stack,
        &mut intake,
        &mut small,
        "handed-off",
        host.url("/b.jpg"),
    )
    .await;
    assert!(
        app.files().await.iter().any(|f| f.starts_with("fetched/")),
        "the download waits under fetched/"
    );
    let mut process = stack.function(PROCESS, &[]).await;
    let work = take(sqs, &urls["process"], 1).await;
    let response = answer(&mut process, &serde_json::to_value(work).unwrap()).await;
    no_failures(&process, &response);
    finish_through(&stack, &mut intake).await;
    settled_ok(
        &stack,
        "handed-off",
        &ImageId::of_bytes(&second).to_string(),
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn the_process_bootstrap_processes_a_presigned_upload_from_its_s3_notification() {
    let stack = Stack::start("process bootstrap").await;
    let app = &stack.crawl.app;
    // With a watermark, as a deployed stack has it (WatermarkKey): read from S3 at start-up.
    let (bucket, _) = app.aws.clone().unwrap();
    let watermark = watermark_aws::put_watermark("process bootstrap", &bucket).await;
    let mut process = stack
        .function(
            PROCESS,
            &[
                ("IMGEST_WATERMARK", &watermark),
                ("IMGEST_WATERMARK_OPACITY", "1"),
                ("IMGEST_WATERMARK_VARIANTS", "thumb"),
            ],
        )
        .await;
    let photo = sample("storm.jpg");
    let ticket = app
        .post_json("/v1/uploads", &json!({"size": photo.len()}))
        .await;
    assert_eq!(ticket.status, 201, "{}", ticket.json);
    let upload_id = ticket.json["upload_id"].as_str().unwrap().to_owned();
    let put = app
        .put_upload(ticket.json["upload_url"].as_str().unwrap(), photo.clone())
        .await;
    assert!(put.status().is_success(), "{}", put.status());

    let (bucket, _) = app.aws.clone().unwrap();
    let size = photo.len().to_string();
    let notification = event(
        "sqs-s3-object-created.json",
        &[
            ("fedcba9876543210fedcba9876543210", &upload_id),
            ("imgest-files-example", &bucket),
            ("12000000", &size),
        ],
    );
    let response = answer(&mut process, &serde_json::from_str(&notification).unwrap()).await;
    no_failures(&process, &response);
    let done = app.get(&format!("/v1/uploads/{upload_id}")).await;
    assert_eq!(done.json["state"], "done", "{}", done.json);
    let image_id = ImageId::of_bytes(&photo).to_string();
    assert_eq!(done.json["image"]["image_id"], image_id);
    let files = app.files_of(&image_id).await;
    assert_eq!(files.len(), 4);
    assert!(!app.files().await.iter().any(|f| f.starts_with("incoming/")));
    // The thumbnail carries the watermark in its bottom-right corner.
    let thumb = files.iter().find(|f| f.contains("thumb")).unwrap();
    let blob = &app.service.ports().blobs;
    let bytes = blob.get(&BlobKey::parse(thumb).unwrap()).await.unwrap();
    let thumb = image::load_from_memory(&bytes).unwrap().to_rgb8();
    let (w, h) = thumb.dimensions();
    assert!(watermark_aws::magenta(thumb.get_pixel(w - 10, h - 15)));
}

#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn the_ttl_cleanup_bootstrap_deletes_the_files_of_a_ttl_removed_record() {
    let stack = Stack::start("ttl-cleanup bootstrap").await;
    let app = &stack.crawl.app;
    let mut cleanup = stack.function(TTL_CLEANUP, &[]).await;
    // DynamoDB's TTL deleter removed the expired record; the stream delivers its old image.
    let TtlRemoval {
        kept,
        removed,
        stream,
    } = ttl_removal(app).await;

    let response = answer(&mut cleanup, &stream).await;
    no_failures(&cleanup, &response);
    assert!(app.files_of(&removed).await.is_empty());
    assert_eq!(app.files_of(&kept).await.len(), 4);
}

#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn the_scheduled_gc_bootstrap_sweeps_a_file_no_record_owns_and_keeps_the_rest() {
    let stack = Stack::start("scheduled-gc bootstrap").await;
    let app = &stack.crawl.app;
    // Every shard in one run, and no grace: the stray file is garbage at once (a grace under
    // the safe floor needs the test-only override, which real Lambda refuses).
    let mut scheduled = stack
        .launch(
            SCHEDULED_GC,
            &[
                ("IMGEST_SWEEP_SHARDS_PER_RUN", "256"),
                ("IMGEST_SWEEP_GRACE", "0s"),
                ("IMGEST_UNSAFE_SHORT_WINDOWS", "1"),
                ("IMGEST_AUDIT_SEGMENTS", "1"),
            ],
        )
        .timeout(template_timeout(SCHEDULED_GC.logical_id))
        .start()
        .await
        .unwrap();
    let live = app.upload_ok(&fixture("photo.jpg")).await;
    let stray_id = app.put_stray_original().await;

    let schedule: Value = serde_json::from_str(&event("schedule.json", &[])).unwrap();
    let report = answer(&mut scheduled, &schedule).await;
    assert_eq!(report["sweep"]["shards"], 256, "{report}");
    assert_eq!(report["sweep"]["files_deleted"], 1, "{report}");
    assert_eq!(report["gc"]["images_deleted"], 0, "{report}");
    assert!(app.files_of(stray_id.as_str()).await.is_empty());
    // The unlinked photo is an orphan within its window: kept, files and all.
    assert_eq!(app.files_of(&live).await.len(), 4);

    // The audit's schedule: one segment (here the only one) of the index.
    let audit = answer(&mut scheduled, &json!({"job": "audit"})).await;
    assert_eq!(
        (audit["segment"].clone(), audit["segments"].clone()),
        (json!(0), json!(1)),
        "{audit}"
    );
    assert_eq!(audit["audit"]["images_checked"], 1, "{audit}");
    assert_eq!(audit["audit"]["images_missing_files"], 0, "{audit}");
}

#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn the_erasure_bootstrap_erases_every_version_of_what_a_sellers_erasure_filed() {
    let stack = Stack::start("erasure bootstrap").await;
    let app = &stack.crawl.app;
    let id = app.upload_ok(&fixture("photo.jpg")).await;
    let image = ImageId::parse(&id).unwrap();
    // As the API does on AWS: the seller's (here the open API's one owner's) claim and the
    // record go at once, the files are filed for the erasure function (no other role may
    // delete a version).
    let seller = imgest_core::domain::Owner::open();
    app.service.note_uploader(&seller, &image).await.unwrap();
    app.service.erase_upload(&seller, &image).await.unwrap();
    assert!(
        app.service
            .erasure_status(&image)
            .await
            .unwrap()
            .files_pending
    );
    assert_eq!(app.files_of(&id).await.len(), 4);

    // With a CDN: the erased image's public paths are invalidated there.
    let config = imgest_testing::aws::sdk_config("erasure bootstrap")
        .await
        .unwrap();
    let cloudfront = aws_sdk_cloudfront::Client::new(&config);
    let (distribution, arn) = imgest_testing::aws::distribution(&cloudfront, "erasure").await;
    let mut erasure = stack
        .function(ERASURE, &[("IMGEST_CDN_DISTRIBUTION_ARN", &arn)])
        .await;
    let schedule: Value = serde_json::from_str(&event("schedule.json", &[])).unwrap();
    let report = answer(&mut erasure, &schedule).await;
    assert_eq!(
        (report["erased"].clone(), report["settled"].clone()),
        (json!(1), json!(0)),
        "{report}"
    );
    assert!(crate::erasure::gone_everywhere(app, &id).await);
    let status = app.service.erasure_status(&image).await.unwrap();
    assert!(!status.files_pending, "{status:?}");
    assert_eq!(status.receipts.len(), 1, "{status:?}");
    let invalidation = status.receipts[0].cdn_invalidation.clone().unwrap();
    let (_, paths) =
        imgest_testing::aws::invalidation(&cloudfront, &distribution, &invalidation).await;
    // Each public file by its path (the three variants the photo had).
    assert_eq!(paths.len(), 3, "{paths:?}");
    let prefix = format!("/public/{}/{id}/", image.shard());
    assert!(
        paths
            .iter()
            .all(|p| p.starts_with(&prefix) && !p.contains('*')),
        "{paths:?}"
    );
    // The next minute's run has nothing left to do.
    let report = answer(&mut erasure, &schedule).await;
    assert_eq!(report["erased"], 0, "{report}");
}

#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn the_backfill_bootstrap_enumerates_on_its_schedule_and_reprocesses_from_its_queue() {
    const WITH_TINY: &str =
        "large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200,tiny=fit:16x16";
    let stack = Stack::start("backfill bootstrap").await;
    let app = &stack.crawl.app;
    let id = app.upload_ok(&fixture("photo.jpg")).await;
    // The stack redeployed with a new size; the operator starts the run.
    let new = app.service_with_variants(WITH_TINY);
    new.confirm_variants(&[]).await.unwrap();
    new.backfill_start().await.unwrap();
    let mut backfill = stack
        .function(
            BACKFILL,
            &[
                ("IMGEST_VARIANTS", WITH_TINY),
                ("IMGEST_BACKFILL_RATE", "0"),
            ],
        )
        .await;

    let schedule: Value = serde_json::from_str(&event("schedule.json", &[])).unwrap();
    let report = answer(&mut backfill, &schedule).await;
    assert_eq!(report["queued"], 1, "{report}");
    let tasks = take(&stack.crawl.sqs, &stack.crawl.urls["backfill"], 1).await;
    let response = answer(&mut backfill, &serde_json::to_value(tasks).unwrap()).await;
    no_failures(&backfill, &response);
    let record = new
        .ports()
        .images
        .get(&ImageId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.variant_set(), Some(new.imaging().unwrap().version()));
    assert!(new.backfill_status().await.unwrap().finished);
}

/// A crawl that settles at once for a client with an endpoint: its result's delivery, taken
/// from the webhooks queue as Lambda's event source takes it, goes through the webhooks
/// bootstrap to the endpoint once, signed with the client's secret, the crawl's id as its
/// `webhook-id`.
#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn the_webhooks_bootstrap_posts_a_settled_crawls_result_to_its_clients_endpoint() {
    let stack = Stack::start("webhooks bootstrap").await;
    let CrawlOnAws {
        sqs, urls, crawler, ..
    } = &stack.crawl;
    let receiver = Receiver::start(&[]).await;
    let acme = ClientId::parse("acme").unwrap();
    let registered = crawler
        .register_webhook(&acme, &receiver.url(), None)
        .await
        .unwrap();
    let secret = registered.secrets[0].secret.clone();

    // No URL: the intake files the result in acme's feed, sends it and queues its delivery.
    let request = json!({"client_id": "acme", "offer_id": "hooked", "urls": []});
    let response = handlers::intake::handle(crawler, intake_event("hooked", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let results = take(sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    let crawl_id = result["crawl_id"].as_str().unwrap().to_owned();

    let mut webhooks = stack.function(WEBHOOKS, &[]).await;
    let deliveries = take(sqs, &urls["webhooks"], 1).await;
    let response = answer(&mut webhooks, &serde_json::to_value(deliveries).unwrap()).await;
    no_failures(&webhooks, &response);
    let got = receiver.received();
    assert_eq!(got.len(), 1, "{}", webhooks.log());
    assert_eq!(got[0].id(), crawl_id);
    assert!(got[0].verifies_with(&secret), "{:?}", got[0].headers);
    let body = got[0].json();
    assert_eq!(body["type"], "crawl.settled", "{body}");
    assert_eq!(body["data"]["offer_id"], "hooked", "{body}");
    // Delivered: no retry waits in the queue, due now or later.
    let queue = sqs
        .get_queue_attributes()
        .queue_url(&urls["webhooks"])
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap_or_default();
    for waiting in [
        aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages,
        aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed,
    ] {
        assert_eq!(queue[&waiting], "0", "{waiting:?}: {queue:?}");
    }
}

/// Every photo of the hostile corpus crawled through the fetch bootstrap (and, when it does not
/// fit the fetch function's memory, the process bootstrap), each function with its template
/// `MemorySize`: each photo settles as the hostile-input test of `imgest serve` says it must,
/// and neither process ever holds more memory than its function is given.
#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn hostile_photos_through_the_fetch_and_process_bootstraps_stay_within_their_memory_size() {
    let stack = Stack::start("hostile bootstraps").await;
    let CrawlOnAws { sqs, urls, app, .. } = &stack.crawl;
    // Deadlines for an emulated arm64 process: what is measured is memory, not speed.
    const TIERS: &str = "120s,240s,480s";
    const INVOCATION: Duration = Duration::from_secs(1800);
    let crawler = app.crawler(Processing::Handoff, &[("IMGEST_FETCH_TIERS", TIERS)]);
    let corpus = imgest_hosts::hostile::corpus();
    let host = PartnerHost::start(corpus.iter().map(|case| {
        (
            format!("/{}", case.file),
            Answer::photo(Bytes::from(case.bytes.clone())),
        )
    }))
    .await
    .unwrap();
    let offer: Vec<String> = corpus
        .iter()
        .map(|case| host.url(&format!("/{}", case.file)))
        .collect();
    let request = json!({"client_id": "acme", "offer_id": "hostile", "urls": offer});
    let response = handlers::intake::handle(&crawler, intake_event("hostile", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let vars = [("IMGEST_FETCH_TIERS", TIERS), ("IMGEST_FETCH_TIER", "0")];
    let mut fetch = stack.deployed(FETCH, &vars, INVOCATION).await;
    let tasks = take(sqs, &urls["fetch-0"], corpus.len()).await;
    let response = answer(&mut fetch, &serde_json::to_value(tasks).unwrap()).await;
    no_failures(&fetch, &response);
    within_memory_size(&fetch, FETCH);

    // What did not fit the fetch function waits under fetched/ for the process function.
    let mut process = stack.deployed(PROCESS, &[], INVOCATION).await;
    loop {
        let work = crate::crawl_aws::drain(sqs, &urls["process"]).await;
        if work.records.is_empty() {
            break;
        }
        let response = answer(&mut process, &serde_json::to_value(work).unwrap()).await;
        no_failures(&process, &response);
    }
    within_memory_size(&process, PROCESS);

    // The intake function finishes the crawl: each photo as `imgest serve` answers it.
    let settled = take(sqs, &urls["settle"], 1).await;
    let response = handlers::settle::handle(&crawler, settled).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let results = take(sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    for (case, photo) in corpus.iter().zip(result["photos"].as_array().unwrap()) {
        match case.refused {
            None => assert_eq!(photo["status"], "ok", "{}: {photo}", case.name),
            Some(kind) => assert_eq!(photo["error"]["kind"], kind, "{}: {photo}", case.name),
        }
    }
    assert!(!app.files().await.iter().any(|f| f.starts_with("fetched/")));
}

/// A fetch bootstrap killed mid-batch (as Lambda kills one out of time or memory) has answered
/// nothing, so SQS delivers its whole batch again after the visibility timeout: a new instance
/// downloads what was left, repeats harmlessly what was done, and the crawl settles with every
/// photo.
#[tokio::test]
#[ignore = "needs the Lambda bootstraps built: infra/lambda-smoke.sh"]
async fn a_fetch_bootstrap_killed_mid_batch_loses_none_of_its_messages() {
    let stack = Stack::start("killed bootstrap").await;
    let CrawlOnAws { sqs, urls, app, .. } = &stack.crawl;
    let (first, second) = (sample("storm.jpg"), sample("dune.jpg"));
    let gate = Gate::new();
    let host = PartnerHost::start([
        ("/a.jpg", Answer::photo(Bytes::from(first.clone()))),
        (
            "/b.jpg",
            Answer::held(&gate, Answer::photo(Bytes::from(second.clone()))),
        ),
    ])
    .await
    .unwrap();
    let request = json!({"client_id": "acme", "offer_id": "killed",
        "urls": [host.url("/a.jpg"), host.url("/b.jpg")]});
    let mut intake = stack.function(INTAKE, &[]).await;
    let event = serde_json::to_value(intake_event("killed", &request)).unwrap();
    let response = answer(&mut intake, &event).await;
    no_failures(&intake, &response);

    // The first instance takes both tasks and is killed while /b.jpg's download hangs.
    const VISIBILITY: i32 = 5;
    let batch = receive(sqs, &urls["fetch-0"], 2, VISIBILITY).await;
    // A first tier long enough that the hanging download is still waiting when it is killed.
    let vars = [
        ("IMGEST_FETCH_TIER", "0"),
        ("IMGEST_FETCH_TIERS", "60s,90s,120s"),
    ];
    let mut doomed = stack.function(FETCH, &vars).await;
    let event = serde_json::to_value(&batch).unwrap();
    let hung = async {
        for _ in 0..6000 {
            if host.hits("/b.jpg") > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the fetch bootstrap never asked for /b.jpg");
    };
    tokio::select! {
        answered = answer(&mut doomed, &event) => panic!("answered while /b.jpg hangs: {answered}"),
        () = hung => {}
    }
    doomed.kill().await;
    gate.open();

    // Nothing was acknowledged: both are delivered again, to a new instance.
    let again = receive(sqs, &urls["fetch-0"], 2, 60).await;
    for m in &again.records {
        assert_eq!(m.attributes["ApproximateReceiveCount"], "2", "{m:?}");
    }
    let mut fetch = stack.function(FETCH, &vars).await;
    let response = answer(&mut fetch, &serde_json::to_value(&again).unwrap()).await;
    no_failures(&fetch, &response);
    acknowledge(sqs, &urls["fetch-0"], &again, &response).await;
    assert_eq!(host.hits("/b.jpg"), 2, "asked again once");

    // The intake function finishes the crawl once, with both photos, as if nothing had died.
    finish_through(&stack, &mut intake).await;
    let results = take(sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    let ids = [first, second].map(|b| ImageId::of_bytes(&b).to_string());
    for (photo, id) in result["photos"].as_array().unwrap().iter().zip(&ids) {
        assert_eq!(photo["status"], "ok", "{result}");
        assert_eq!(photo["image_id"], id.as_str(), "{result}");
    }
    assert_eq!(photos_of(app, "acme", "killed").await, ids);
    for id in &ids {
        assert_eq!(app.files_of(id).await.len(), 4);
    }
    assert!(
        crate::crawl_aws::drain(sqs, &urls["fetch-0"])
            .await
            .records
            .is_empty()
    );
    assert!(
        crate::crawl_aws::drain(sqs, &urls["results"])
            .await
            .records
            .is_empty()
    );
}
