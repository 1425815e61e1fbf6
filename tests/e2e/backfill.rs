//! Re-processing stored photos under a new variant set (backfill) and retiring a size dropped
//! from the configuration (the sweep), on the embedded backend.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use imgest_core::domain::VariantName;
use imgest_core::domain::{BlobKey, ImageId, ImageRecord, ImageState};
use imgest_core::ports::Reason;
use imgest_flows::backfill::RunState;
use imgest_flows::{FlowError, Service};

use crate::support::{TestApp, sweep_shards_of};

const WITH_TINY: &str = "large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200,tiny=fit:16x16";
const WITHOUT_MEDIUM: &str = "large=fit:1280x1280,thumb=cover:200x200";

/// Distinct small photos (their sizes differ, so their bytes do).
fn photos(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| imgest_hosts::hostile::jpeg(40 + i, 30, false, None))
        .collect()
}

async fn record(service: &Service, id: &str) -> ImageRecord {
    let id = ImageId::parse(id).unwrap();
    service.ports().images.get(&id).await.unwrap().unwrap()
}

async fn variant_names(service: &Service, id: &str) -> Vec<String> {
    let ImageState::Ready { variants, .. } = record(service, id).await.state else {
        panic!("{id} is ready");
    };
    variants.iter().map(|v| v.name.to_string()).collect()
}

async fn is_current(service: &Service, id: &str) -> bool {
    record(service, id).await.variant_set() == Some(service.imaging().unwrap().version())
}

#[tokio::test]
async fn a_backfill_adds_a_size_hottest_first_once_per_image_and_survives_a_pause() {
    // No rate limit: tasks are due at once (the test's clock moves only when it says so).
    let app =
        TestApp::start_with(&[("IMGEST_SWEEP_GRACE", "1h"), ("IMGEST_BACKFILL_RATE", "0")]).await;
    let mut ids = Vec::new();
    for photo in photos(10) {
        ids.push(app.upload_ok(&photo).await);
    }
    // Two hot images (linked), eight orphans.
    assert_eq!(app.link("a", &[&ids[0], &ids[1]]).await.status, 200);
    assert_eq!(app.link("b", &[&ids[1]]).await.status, 200);
    let old_url = app.get(&format!("/v1/images/{}", ids[2])).await.json["variants"]["large"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let decodes_before = app.service.counts().pipeline_runs;

    let new = app.service_with_variants(WITH_TINY);
    assert!(!is_current(&new, &ids[0]).await);
    // A backfill runs only under a confirmed set.
    assert!(matches!(
        new.backfill_start().await,
        Err(FlowError::VariantSetUnconfirmed(_))
    ));
    new.confirm_variants(&[]).await.unwrap();
    new.backfill_start().await.unwrap();
    // Passes of 16 and 4 links find nothing; the pass of linked images takes the two hot ones.
    for _ in 0..3 {
        new.backfill_step(8).await.unwrap();
    }
    assert!(is_current(&new, &ids[0]).await && is_current(&new, &ids[1]).await);
    for id in &ids[2..] {
        assert!(!is_current(&new, id).await, "orphans come last");
    }

    // Paused: a batch does nothing, and the status says so.
    new.backfill_pause().await.unwrap();
    let step = new.backfill_step(8).await.unwrap();
    assert_eq!(step, Default::default());
    let status = new.backfill_status().await.unwrap();
    assert_eq!(status.run.unwrap().state, RunState::Paused);
    assert!(!status.finished);

    new.backfill_resume().await.unwrap();
    // Progress: two done in the 10 s since the start, eight pending once all are queued.
    app.advance_clock(Duration::from_secs(10));
    new.backfill_step(0).await.unwrap();
    let status = new.backfill_status().await.unwrap();
    assert_eq!((status.done, status.pending), (2, 8), "{status:?}");
    assert!((status.rate_per_second - 0.2).abs() < 1e-9, "{status:?}");
    assert_eq!(status.eta_seconds, Some(40));
    let mut steps = 0;
    while !new.backfill_status().await.unwrap().finished {
        new.backfill_step(3).await.unwrap();
        steps += 1;
        assert!(steps < 20, "the backfill finishes");
    }
    let status = new.backfill_status().await.unwrap();
    assert_eq!((status.done, status.pending), (10, 0), "{status:?}");
    assert!(status.failed.is_empty());
    for id in &ids {
        assert!(is_current(&new, id).await);
        assert!(variant_names(&new, id).await.contains(&"tiny".to_owned()));
    }
    // Each image decoded once, however many offers link it.
    let snapshot = new.counts();
    assert_eq!(snapshot.backfill_runs, 10);
    assert_eq!(app.service.counts().pipeline_runs, decodes_before);

    // A second run finds every record current and decodes nothing.
    new.backfill_start().await.unwrap();
    while !new.backfill_status().await.unwrap().finished {
        new.backfill_step(8).await.unwrap();
    }
    assert_eq!(new.counts().backfill_runs, 10);

    // The API serves the new size; the old URLs still work until the sweep grace has passed.
    let image = app.get(&format!("/v1/images/{}", ids[2])).await;
    assert!(
        image.json["variants"]["tiny"]["url"].is_string(),
        "{}",
        image.json
    );
    assert_eq!(app.get_bytes(&old_url).await.0, 200);
    assert_eq!(new.sweep(false).await.unwrap().files_deleted, 0);
    app.advance_clock(Duration::from_secs(2 * 3600));
    let swept = new.sweep(false).await.unwrap();
    assert_eq!(swept.previous_files, 40, "{swept:?}");
    assert_eq!(app.get_bytes(&old_url).await.0, 404);
    for id in &ids {
        assert_eq!(
            app.files_of(id).await.len(),
            5,
            "an original and four variants"
        );
    }
    assert_eq!(swept.files_deleted, swept.garbage_files);
}

#[tokio::test]
async fn a_backfill_keeps_to_its_rate_limit() {
    let app = TestApp::start_with(&[("IMGEST_BACKFILL_RATE", "2")]).await;
    let mut ids = Vec::new();
    for photo in photos(6) {
        ids.push(app.upload_ok(&photo).await);
    }
    let new = app.service_with_variants(WITH_TINY);
    new.confirm_variants(&[]).await.unwrap();
    new.backfill_start().await.unwrap();
    // Three passes of linked images find nothing; the fourth queues the six orphans, due
    // 0.5 s apart, and the first is due now.
    let mut reprocessed = 0;
    for _ in 0..4 {
        reprocessed += new.backfill_step(8).await.unwrap().reprocessed;
    }
    assert_eq!(reprocessed, 1);
    let status = new.backfill_status().await.unwrap();
    assert_eq!((status.done, status.pending), (1, 5), "{status:?}");
    app.advance_clock(Duration::from_millis(1000));
    assert_eq!(new.backfill_step(8).await.unwrap().reprocessed, 2);
    app.advance_clock(Duration::from_secs(10));
    assert_eq!(new.backfill_step(8).await.unwrap().reprocessed, 3);
    for id in &ids {
        assert!(is_current(&new, id).await);
    }
}

#[tokio::test]
async fn a_size_dropped_from_the_configuration_is_swept_and_nothing_else() {
    let app = TestApp::start_with(&[("IMGEST_SWEEP_GRACE", "1h")]).await;
    a_size_dropped_from_the_configuration_is_swept_on(&app).await;
}

/// A size dropped from the configuration kept until its drop is confirmed, then retired and
/// swept, and nothing else; `app`'s sweep grace is an hour.
pub(crate) async fn a_size_dropped_from_the_configuration_is_swept_on(app: &TestApp) {
    let mut ids = Vec::new();
    for photo in photos(3) {
        ids.push(app.upload_ok(&photo).await);
    }
    assert_eq!(app.link("a", &[&ids[0]]).await.status, 200);
    let before: Vec<Vec<String>> = {
        let mut all = Vec::new();
        for id in &ids {
            all.push(app.files_of(id).await);
        }
        all
    };
    app.service.confirm_variants(&[]).await.unwrap();
    let new = app.service_with_variants(WITHOUT_MEDIUM);
    // The images' shards are all a sweep can find anything in.
    let shards: Vec<&str> = ids.iter().map(String::as_str).collect();

    // Dropped from the configuration, not yet from the confirmed set: kept, and counted.
    let kept = sweep_shards_of(&new, &shards, false).await;
    assert_eq!(
        (
            kept.variants_kept_unconfirmed,
            kept.garbage_files,
            kept.files_deleted
        ),
        (3, 0, 0),
        "{kept:?}"
    );
    let medium = VariantName::parse("medium").unwrap();
    assert!(matches!(
        new.confirm_variants(&[]).await,
        Err(FlowError::VariantDropUnconfirmed(names)) if names == [medium.clone()]
    ));
    let status = new.confirm_variants(&[medium]).await.unwrap();
    assert!(status.is_confirmed(), "{status:?}");

    // Young files are never deleted.
    let young = sweep_shards_of(&new, &shards, true).await;
    assert_eq!((young.garbage_files, young.young_unowned_files), (0, 3));

    app.advance_clock(Duration::from_secs(2 * 3600));
    let dry = sweep_shards_of(&new, &shards, true).await;
    assert_eq!(
        (
            dry.unlisted_files,
            dry.garbage_files,
            dry.files_deleted,
            dry.records_retired
        ),
        (3, 3, 0, 0),
        "{dry:?}"
    );
    for (id, files) in ids.iter().zip(&before) {
        assert_eq!(&app.files_of(id).await, files, "a dry run deletes nothing");
    }

    let report = sweep_shards_of(&new, &shards, false).await;
    assert_eq!(
        (
            report.records_retired,
            report.unlisted_files,
            report.files_deleted
        ),
        (3, 3, 3),
        "{report:?}"
    );
    for (id, files) in ids.iter().zip(&before) {
        let expected: Vec<String> = files
            .iter()
            .filter(|f| !f.ends_with("/medium.jpg"))
            .cloned()
            .collect();
        assert_eq!(app.files_of(id).await, expected);
        assert_eq!(variant_names(&new, id).await, ["large", "thumb"]);
        let image = app.get(&format!("/v1/images/{id}")).await;
        assert!(image.json["variants"]["medium"].is_null(), "{}", image.json);
        for v in image.json["variants"].as_object().unwrap().values() {
            assert_eq!(app.get_bytes(v["url"].as_str().unwrap()).await.0, 200);
        }
    }
    // The offer is untouched, and another sweep finds nothing.
    assert_eq!(app.photos("a").await.photo_ids(), [ids[0].clone()]);
    let again = sweep_shards_of(&new, &shards, false).await;
    assert_eq!((again.garbage_files, again.records_retired), (0, 0));
}

#[tokio::test]
async fn the_sweeper_deletes_keys_it_does_not_recognise_after_the_grace() {
    let app = TestApp::start_with(&[("IMGEST_SWEEP_GRACE", "1h")]).await;
    the_sweeper_deletes_keys_it_does_not_recognise_on(&app).await;
}

/// Keys that are no image file's, kept for the grace, then deleted; `app`'s sweep grace is an
/// hour.
pub(crate) async fn the_sweeper_deletes_keys_it_does_not_recognise_on(app: &TestApp) {
    let id = app.upload_ok(&photos(1)[0]).await;
    let owned = app.files_of(&id).await;
    let blobs = &app.service.ports().blobs;
    let stray = [
        // The layout before areas, and a file that is no image file key under a shard.
        format!("{}/{id}/0badcafe/large.jpg", &id[..2]),
        format!("public/{}/not-an-id/x.jpg", &id[..2]),
    ];
    for key in &stray {
        blobs
            .put(
                &BlobKey::parse(key).unwrap(),
                bytes::Bytes::from_static(b"x"),
                "image/jpeg",
            )
            .await
            .unwrap();
    }
    assert_eq!(
        sweep_shards_of(&app.service, &[&id], false)
            .await
            .files_deleted,
        0
    );
    app.advance_clock(Duration::from_secs(2 * 3600));
    let report = sweep_shards_of(&app.service, &[&id], false).await;
    assert_eq!(
        (report.unrecognised_files, report.files_deleted),
        (2, 2),
        "{report:?}"
    );
    let files = app.files().await;
    assert!(stray.iter().all(|k| !files.contains(k)));
    assert_eq!(app.files_of(&id).await, owned);
}

#[tokio::test]
async fn backfill_waits_while_live_work_is_due_and_the_queue_shows_both() {
    let app = TestApp::start().await;
    let id = app.upload_ok(&photos(1)[0]).await;
    let queue = app.service.ports().queue.clone().unwrap();
    let now = app.service.ports().clock.now();
    // A downloaded photo waiting for processing (the runner's own workers poll the fetch
    // queues, not this one, so it stays there until the test takes it).
    queue
        .enqueue("process", "a-photo", "{}", now)
        .await
        .unwrap();

    let new = app.service_with_variants(WITH_TINY);
    new.confirm_variants(&[]).await.unwrap();
    new.backfill_start().await.unwrap();
    let mut step = Default::default();
    for _ in 0..5 {
        step = new.backfill_step(8).await.unwrap();
    }
    assert!(step.deferred, "{step:?}");
    assert!(
        !is_current(&new, &id).await,
        "no backfill task starts before live work"
    );
    let overview = new.queue_overview(10).await.unwrap();
    let row = |name: &str| {
        overview
            .queues
            .iter()
            .find(|q| q.queue == name)
            .unwrap()
            .clone()
    };
    assert_eq!((row("process").ready, row("process").tier), (1, None));
    assert_eq!((row("fetch-0").ready, row("fetch-0").tier), (0, Some(0)));
    assert_eq!(row("backfill").ready, 1);

    // The photo is taken: backfill goes on.
    let taken = queue
        .receive("process", now, 1, Duration::from_secs(60))
        .await
        .unwrap();
    queue
        .dead_letter(&taken[0], &Reason::new("http_404", "gone"), now)
        .await
        .unwrap();
    let step = new.backfill_step(8).await.unwrap();
    assert_eq!((step.deferred, step.reprocessed), (false, 1), "{step:?}");
    assert!(is_current(&new, &id).await);
    let overview = new.queue_overview(10).await.unwrap();
    assert_eq!(overview.dead_letters.len(), 1);
    assert_eq!(overview.dead_letters[0].reason, "http_404: gone");
}

#[tokio::test]
async fn the_backfill_function_reprocesses_the_image_its_sample_event_names() {
    let app = TestApp::start_with(&[("IMGEST_BACKFILL_RATE", "0")]).await;
    let id = app.upload_ok(&photos(1)[0]).await;
    let new = app.service_with_variants(WITH_TINY);
    new.confirm_variants(&[]).await.unwrap();
    new.backfill_start().await.unwrap();
    let sample = crate::aws::event(
        "sqs-backfill.json",
        &[("0123456789abcdef0123456789abcdef", &id)],
    );
    let event = imgest_lambda::backfill::Event::of(serde_json::from_str(&sample).unwrap()).unwrap();
    let imgest_lambda::backfill::Event::Tasks(batch) = event else {
        panic!("an SQS batch reads as tasks: {event:?}");
    };
    let response =
        imgest_lambda::backfill::tasks(&new, &crate::support::stack_senders(), batch).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(is_current(&new, &id).await);
    assert!(variant_names(&new, &id).await.contains(&"tiny".to_owned()));
}

/// A typo in the variant set (`lage` for `large`) deletes nothing: the misspelled size is made
/// for new photos only, the confirmed `large` files stay, and neither a backfill nor the
/// confirmation of the typo goes through without naming the drop.
pub async fn a_variant_set_typo_deletes_nothing_on(app: &TestApp) {
    let mut ids = Vec::new();
    for photo in photos(3) {
        ids.push(app.upload_ok(&photo).await);
    }
    app.service.confirm_variants(&[]).await.unwrap();
    let typo =
        app.service_with_variants("lage=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200");
    let before = {
        let mut all = Vec::new();
        for id in &ids {
            all.push((record(&typo, id).await, app.files_of(id).await));
        }
        all
    };
    // Past every grace: the sweep could delete anything it judged garbage.
    app.advance_clock(Duration::from_secs(3 * 86_400));
    let mut shards: Vec<&str> = ids.iter().map(|id| &id[..2]).collect();
    shards.sort_unstable();
    shards.dedup();
    let mut report = imgest_flows::sweep::SweepReport::default();
    for shard in shards {
        typo.sweep_shard(shard, Default::default(), &mut report)
            .await
            .unwrap();
    }
    assert_eq!(
        (
            report.files_deleted,
            report.records_retired,
            report.variants_kept_unconfirmed
        ),
        (0, 0, 3),
        "{report:?}"
    );
    for (id, (record_before, files)) in ids.iter().zip(&before) {
        assert_eq!(&record(&typo, id).await, record_before);
        assert_eq!(&app.files_of(id).await, files);
        assert!(files.iter().any(|f| f.ends_with("/large.jpg")), "{files:?}");
        let image = app.get(&format!("/v1/images/{id}")).await;
        let large = image.json["variants"]["large"]["url"].as_str().unwrap();
        assert_eq!(app.get_bytes(large).await.0, 200);
    }
    assert!(matches!(
        typo.backfill_start().await,
        Err(FlowError::VariantSetUnconfirmed(_))
    ));
    assert!(matches!(
        typo.confirm_variants(&[]).await,
        Err(FlowError::VariantDropUnconfirmed(names)) if names == [VariantName::parse("large").unwrap()]
    ));
}

#[tokio::test]
async fn a_variant_set_typo_deletes_nothing() {
    a_variant_set_typo_deletes_nothing_on(&TestApp::start().await).await;
}
