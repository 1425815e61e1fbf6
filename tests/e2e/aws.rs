//! The AWS adapters (S3, DynamoDB) on the emulator `infra/test.sh` starts: the core scenario as
//! on the embedded backend, and each function's handler fed its sample event from `events/`.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use imgest_aws::dynamodb;
use imgest_core::domain::{ImageId, JobPart};
use imgest_crawl::Processing;
use imgest_lambda as handlers;
use serde_json::Value;
use tower::ServiceExt;

use crate::scenario::{SCENARIO_VARS, core_scenario};
use crate::support::{TestApp, fixture};

/// A sample event with its placeholders replaced.
pub(crate) fn event(name: &str, replacements: &[(&str, &str)]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../events")
        .join(name);
    let mut text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (from, to) in replacements {
        assert!(text.contains(from), "{name} has no {from}");
        text = text.replace(from, to);
    }
    text
}

#[tokio::test]
async fn the_core_scenario_passes_on_the_aws_adapters() {
    let Some(app) = TestApp::start_aws("core scenario", SCENARIO_VARS).await else {
        return;
    };
    core_scenario(&app).await;
}

/// Two ready images, and the stream event of `removed`'s record once DynamoDB's TTL deleter
/// has removed it (the clock moved past its expiry): its old image is the item as stored (its
/// perceptual signature a binary attribute among the rest); `kept` keeps its record.
pub(crate) struct TtlRemoval {
    pub kept: String,
    pub removed: String,
    pub stream: Value,
}

pub(crate) async fn ttl_removal(app: &TestApp) -> TtlRemoval {
    let kept = app.upload_ok(&fixture("photo.jpg")).await;
    let removed = app.upload_ok(&fixture("small.png")).await;
    let id = ImageId::parse(&removed).unwrap();
    let images = &app.service.ports().images;
    let record = images.get(&id).await.unwrap().unwrap();
    assert!(record.is_ready(), "not ready: {record:?}");
    let Some((_, table)) = app.aws.clone() else {
        panic!("not on the AWS adapters")
    };
    let config = imgest_testing::aws::sdk_config("ttl removal")
        .await
        .unwrap();
    let client = aws_sdk_dynamodb::Client::new(&config);
    let pk = format!("image#{removed}");
    let Some(item) = imgest_testing::aws::raw_item(&client, &table, &pk, "image").await else {
        panic!("no item for image {removed}")
    };
    assert!(matches!(item.get("signature"), Some(AttributeValue::B(_))));
    app.advance_clock(Duration::from_secs(15 * 86_400));
    let now = app.service.ports().clock.now();
    assert!(
        images
            .delete_if_expired(&id, &record.generation, now)
            .await
            .unwrap()
    );
    let mut stream: Value = serde_json::from_str(&event("dynamodb-ttl-remove.json", &[])).unwrap();
    stream["Records"][0]["dynamodb"]["Keys"]["pk"]["S"] = Value::from(format!("image#{removed}"));
    stream["Records"][0]["dynamodb"]["OldImage"] = dynamodb::stream_json(&item).unwrap();
    assert_eq!(app.files_of(&removed).await.len(), 4);
    TtlRemoval {
        kept,
        removed,
        stream,
    }
}

#[tokio::test]
async fn the_ttl_cleanup_function_deletes_the_files_of_a_ttl_removed_record() {
    let Some(app) = TestApp::start_aws("ttl-cleanup handler", &[]).await else {
        return;
    };
    let TtlRemoval {
        kept,
        removed,
        stream,
    } = ttl_removal(&app).await;
    let response =
        handlers::ttl_cleanup::handle(&app.service, dynamodb::removed_images(&stream)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(app.files_of(&removed).await.is_empty());
    assert_eq!(app.files_of(&kept).await.len(), 4);
    // Redelivery is harmless.
    assert!(
        handlers::ttl_cleanup::handle(&app.service, dynamodb::removed_images(&stream))
            .await
            .batch_item_failures
            .is_empty()
    );
}

#[tokio::test]
async fn a_12_mb_photo_goes_through_the_presigned_path_on_aws() {
    let Some(app) = TestApp::start_aws("presigned on aws", &[]).await else {
        return;
    };
    let photo = crate::presigned::twelve_megabyte_jpeg();
    let ticket = app
        .post_json("/v1/uploads", &serde_json::json!({"size": photo.len()}))
        .await;
    assert_eq!(ticket.status, 201, "{}", ticket.json);
    let upload_id = ticket.json["upload_id"].as_str().unwrap().to_owned();
    let url = ticket.json["upload_url"].as_str().unwrap().to_owned();
    assert!(url.contains("X-Amz-Signature"), "a presigned S3 URL: {url}");
    let put = app.put_upload(&url, photo.clone()).await;
    assert!(put.status().is_success(), "{}", put.status());
    assert_eq!(
        app.get(&format!("/v1/uploads/{upload_id}")).await.json["state"],
        "pending"
    );

    // S3 notifies the queue; the process function gets the sample event for this key.
    let body = event(
        "sqs-s3-object-created.json",
        &[("fedcba9876543210fedcba9876543210", &upload_id)],
    );
    let sqs: SqsEvent = serde_json::from_str(&body).unwrap();
    let crawler = app.crawler(Processing::Handoff, &[]);
    let response = imgest_lambda_crawl::process::handle(&crawler, sqs.clone()).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let done = app.get(&format!("/v1/uploads/{upload_id}")).await;
    assert_eq!(done.json["state"], "done", "{}", done.json);
    assert_eq!(
        done.json["image"]["image_id"],
        ImageId::of_bytes(&photo).to_string()
    );
    assert!(
        app.files()
            .await
            .iter()
            .all(|f| !f.starts_with("incoming/"))
    );
    // A redelivered notification finds the upload finished.
    assert!(
        imgest_lambda_crawl::process::handle(&crawler, sqs.clone())
            .await
            .batch_item_failures
            .is_empty()
    );
    // A second PUT to the used URL (still valid) is removed when its notification comes.
    let again = app.put_upload(&url, photo.clone()).await;
    assert!(again.status().is_success(), "{}", again.status());
    assert!(app.files().await.iter().any(|f| f.starts_with("incoming/")));
    let response = imgest_lambda_crawl::process::handle(&crawler, sqs).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(
        app.files()
            .await
            .iter()
            .all(|f| !f.starts_with("incoming/")),
        "the second body is gone"
    );
    assert_eq!(
        app.get(&format!("/v1/uploads/{upload_id}")).await.json["state"],
        "done"
    );
}

#[tokio::test]
async fn the_api_function_answers_its_sample_events() {
    let Some(app) = TestApp::start_aws("api handler", &[]).await else {
        return;
    };
    let router = app.api_function();
    let missing = lambda_http::request::from_str(&event("api-get-image.json", &[])).unwrap();
    let response = router.clone().oneshot(missing).await.unwrap();
    assert_eq!(response.status(), 404);

    let id = app.upload_ok(&fixture("photo.jpg")).await;
    let found = lambda_http::request::from_str(&event(
        "api-get-image.json",
        &[("0123456789abcdef0123456789abcdef", &id)],
    ))
    .unwrap();
    let response = router.clone().oneshot(found).await.unwrap();
    assert_eq!(response.status(), 200);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(
        json["variants"]["large"]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://cdn.example.com/")
    );

    let upload = lambda_http::request::from_str(&event("api-upload.json", &[])).unwrap();
    let response = router.oneshot(upload).await.unwrap();
    assert_eq!(response.status(), 201);
}

#[tokio::test]
async fn the_scheduled_gc_function_collects_and_sweeps_on_its_schedule() {
    let Some(app) = TestApp::start_aws("scheduled-gc handler", &[]).await else {
        return;
    };
    let _: aws_lambda_events::event::eventbridge::EventBridgeEvent<Value> =
        serde_json::from_str(&event("schedule.json", &[])).unwrap();
    // Something to collect (an orphan past its window), something to sweep (a file no record
    // owns, past the grace), and something to keep (a linked photo).
    let orphan = app.upload_ok(&fixture("small.png")).await;
    let linked = app.upload_ok(&fixture("photo.jpg")).await;
    assert_eq!(app.link("kept", &[&linked]).await.status, 200);
    let stray_id = app.put_stray_original().await;
    app.advance_clock(Duration::from_secs(15 * 86_400));

    let first = handlers::scheduled_gc::handle(&app.service, 128, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(first.sweep.shards, 128);
    assert_eq!(
        (first.gc.images_deleted, first.gc.files_deleted),
        (1, 4),
        "{first:?}"
    );
    let second = handlers::scheduled_gc::handle(&app.service, 128, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(second.gc.images_deleted, 0, "{second:?}");
    assert_eq!(
        first.sweep.files_scanned + second.sweep.files_scanned,
        5,
        "the two halves cover every shard once: the linked photo's 4 files and the stray"
    );
    assert_eq!(
        first.sweep.files_deleted + second.sweep.files_deleted,
        1,
        "{first:?} {second:?}"
    );
    assert!(app.files_of(&orphan).await.is_empty(), "collected");
    assert!(app.files_of(stray_id.as_str()).await.is_empty(), "swept");
    assert_eq!(app.files_of(&linked).await.len(), 4, "kept");
    let images = &app.service.ports().images;
    assert!(
        images
            .get(&ImageId::parse(&orphan).unwrap())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        images
            .get(&ImageId::parse(&linked).unwrap())
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn the_scheduled_gc_functions_collecting_and_sweeping_runs_each_do_only_their_job() {
    let Some(app) = TestApp::start_aws("scheduled-gc jobs", &[]).await else {
        return;
    };
    let orphan = app.upload_ok(&fixture("small.png")).await;
    let stray_id = app.put_stray_original().await;
    app.advance_clock(Duration::from_secs(15 * 86_400));
    let budget = Duration::from_secs(600);
    let job =
        |json: &str| handlers::scheduled_gc::job(&serde_json::from_str(json).unwrap()).unwrap();

    // The sweeping run, as the template's Maintenance schedule sends it: the stray goes, the
    // orphan's record and files stay for the collecting run.
    assert_eq!(
        job(r#"{"job": "sweep"}"#),
        handlers::scheduled_gc::Job::Sweep(JobPart::WHOLE)
    );
    let swept = handlers::scheduled_gc::sweep(&app.service, JobPart::WHOLE, 256, budget)
        .await
        .unwrap();
    assert_eq!(swept.files_deleted, 1, "{swept:?}");
    assert!(app.files_of(stray_id.as_str()).await.is_empty(), "swept");
    assert_eq!(app.files_of(&orphan).await.len(), 4, "left to GC");

    // The collecting run (the Collect schedule): the orphan goes.
    assert_eq!(
        job(r#"{"job": "collect"}"#),
        handlers::scheduled_gc::Job::Collect(JobPart::WHOLE)
    );
    let collected = handlers::scheduled_gc::collect(&app.service, JobPart::WHOLE, budget)
        .await
        .unwrap();
    assert_eq!(
        (collected.images_deleted, collected.files_deleted),
        (1, 4),
        "{collected:?}"
    );
    assert!(app.files_of(&orphan).await.is_empty(), "collected");
}

#[tokio::test]
async fn runs_side_by_side_each_collect_and_sweep_their_own_part_on_aws() {
    let Some(app) = TestApp::start_aws("scheduled-gc parts", &[]).await else {
        return;
    };
    crate::lifecycle::runs_side_by_side_each_collect_and_sweep_their_own_part_on(&app).await;
}

#[tokio::test]
async fn a_variant_set_typo_deletes_nothing_on_aws() {
    let Some(app) = TestApp::start_aws("variant typo on aws", &[]).await else {
        return;
    };
    crate::backfill::a_variant_set_typo_deletes_nothing_on(&app).await;
}
