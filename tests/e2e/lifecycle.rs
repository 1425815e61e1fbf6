//! Orphans, expiry, GC and the sweeper, with the clock moved by the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use imgest_core::domain::{BlobKey, Generation, ImageId, ImageState, JobPart};
use imgest_flows::sweep::{STOP_FLOOR, SweepOptions, SweepReport};
use imgest_lambda as handlers;

use crate::support::{TestApp, fixture, sweep_shards_of};

const TTL: Duration = Duration::from_secs(2);

#[tokio::test]
async fn gc_removes_unreferenced_images_after_the_ttl_and_nothing_else() {
    let app = TestApp::start_with(&[("IMGEST_ORPHAN_TTL", "2s")]).await;
    let shared = app.upload_ok(&fixture("photo.jpg")).await;
    let only_a = app.upload_ok(&fixture("small.png")).await;
    let never_linked = app.upload_ok(&fixture("animated.gif")).await;
    let kept_by_b = app.upload_ok(&fixture("rgba16.png")).await;
    app.link("a", &[&shared, &only_a]).await;
    app.link("b", &[&kept_by_b, &shared]).await;
    app.delete("/v1/offers/a").await;

    // Before the TTL, nothing is collected.
    app.advance_clock(TTL - Duration::from_millis(100));
    assert_eq!(app.gc().await.images_deleted, 0);

    app.advance_clock(Duration::from_millis(200));
    // A run whose time is spent collects nothing and says so; the next one goes on.
    let spent = app
        .service
        .gc_watched(JobPart::WHOLE, Some(std::time::Instant::now()), |_| {})
        .await
        .unwrap();
    assert!(spent.out_of_time && spent.examined == 0, "{spent:?}");
    // Watched (as `imgest gc` draws its progress): told after each record it examined.
    let mut so_far = Vec::new();
    let report = app
        .service
        .gc_watched(JobPart::WHOLE, None, |r| so_far.push(*r))
        .await
        .unwrap();
    assert_eq!(report.images_deleted, 2, "{report:?}");
    let examined: Vec<u64> = so_far.iter().map(|r| r.examined).collect();
    assert_eq!(examined, (1..=report.examined).collect::<Vec<_>>());
    assert_eq!(so_far.last(), Some(&report));
    for gone in [&only_a, &never_linked] {
        assert_eq!(app.get(&format!("/v1/images/{gone}")).await.status, 404);
        assert!(
            app.files_of(gone).await.is_empty(),
            "files of {gone} are deleted"
        );
    }
    for kept in [&shared, &kept_by_b] {
        let r = app.get(&format!("/v1/images/{kept}")).await;
        assert_eq!(r.status, 200);
        for v in r.json["variants"].as_object().unwrap().values() {
            assert_eq!(app.get_bytes(v["url"].as_str().unwrap()).await.0, 200);
        }
        assert_eq!(
            app.files_of(kept).await.len(),
            4,
            "original + 3 variants of {kept}"
        );
    }
    assert_eq!(
        app.photos("b").await.json["photos"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(app.gc().await.examined, 0, "a second run finds nothing");
}

#[tokio::test]
async fn re_use_before_expiry_keeps_an_orphan() {
    let app = TestApp::start_with(&[("IMGEST_ORPHAN_TTL", "2s")]).await;
    let photo = fixture("photo.jpg");
    let relinked = app.upload_ok(&fixture("small.png")).await;
    let reuploaded = app.upload_ok(&photo).await;
    app.advance_clock(Duration::from_millis(1500));
    app.link("o", &[&relinked]).await;
    assert_eq!(app.upload(&photo).await.status, 200);
    app.advance_clock(Duration::from_millis(1500));
    assert_eq!(app.gc().await.images_deleted, 0);
    assert_eq!(
        app.get(&format!("/v1/images/{reuploaded}")).await.status,
        200
    );
    // Unlinking starts the window again from the unlink.
    app.delete("/v1/offers/o").await;
    app.advance_clock(Duration::from_millis(1500));
    assert_eq!(
        app.gc().await.images_deleted,
        1,
        "only the re-uploaded one, whose window ended"
    );
    assert_eq!(app.get(&format!("/v1/images/{relinked}")).await.status, 200);
}

#[tokio::test]
async fn an_expired_image_uploaded_again_before_gc_is_revived_and_gc_keeps_it() {
    let app = TestApp::start_with(&[("IMGEST_ORPHAN_TTL", "2s")]).await;
    let photo = fixture("photo.jpg");
    let id = app.upload_ok(&photo).await;
    app.advance_clock(TTL * 2);
    // Expired but not yet collected: reads treat it as gone.
    assert_eq!(app.get(&format!("/v1/images/{id}")).await.status, 404);
    let again = app.upload(&photo).await;
    assert_eq!(
        again.status, 200,
        "revived without decoding: {}",
        again.json
    );
    assert_eq!(app.gc().await.images_deleted, 0);
    assert_eq!(app.service.counts().pipeline_runs, 1);
    for v in again.json["variants"].as_object().unwrap().values() {
        assert_eq!(app.get_bytes(v["url"].as_str().unwrap()).await.0, 200);
    }
}

#[tokio::test]
async fn gc_racing_a_re_upload_never_deletes_the_new_generation() {
    let app = TestApp::start_with(&[("IMGEST_ORPHAN_TTL", "2s")]).await;
    let photo = fixture("photo.jpg");
    let id = ImageId::parse(&app.upload_ok(&photo).await).unwrap();
    app.advance_clock(TTL * 2);
    let images = &app.service.ports().images;
    let old = images.get(&id).await.unwrap().unwrap();

    // GC deletes the record (step one of two) ...
    let now = app.service.ports().clock.now();
    assert!(
        images
            .delete_if_expired(&id, &old.generation, now)
            .await
            .unwrap()
    );
    // ... the same bytes arrive before GC deletes the files: a new generation is written ...
    let again = app.upload(&photo).await;
    assert_eq!(again.status, 201, "{}", again.json);
    let new = images.get(&id).await.unwrap().unwrap();
    assert_ne!(new.generation, old.generation);
    // ... and GC finishes by deleting the files of the generation whose record it removed.
    let ImageState::Ready { variants, .. } = &old.state else {
        panic!("old record was ready")
    };
    let mut old_keys = vec![BlobKey::original(&id, &old.generation)];
    old_keys.extend(
        variants
            .iter()
            .map(|v| BlobKey::variant(&id, &old.generation, &v.name, v.format)),
    );
    app.service.ports().blobs.delete(&old_keys).await.unwrap();

    for v in again.json["variants"].as_object().unwrap().values() {
        assert_eq!(
            app.get_bytes(v["url"].as_str().unwrap()).await.0,
            200,
            "new files survive"
        );
    }
    assert!(
        app.files_of(id.as_str())
            .await
            .iter()
            .all(|f| f.contains(new.generation.as_str()))
    );
}

#[tokio::test]
async fn the_sweeper_deletes_only_old_files_that_no_record_owns() {
    let app = TestApp::start_with(&[("IMGEST_SWEEP_GRACE", "1h")]).await;
    let id = app.upload_ok(&fixture("photo.jpg")).await;
    let owned = app.files_of(&id).await;
    let blobs = &app.service.ports().blobs;
    // A stale generation of a live image and files of an image with no record at all.
    let live = ImageId::parse(&id).unwrap();
    let stale = BlobKey::original(&live, &Generation::parse("00000001").unwrap());
    let orphan_id = ImageId::of_bytes(b"never recorded");
    let orphan = BlobKey::original(&orphan_id, &Generation::parse("00000002").unwrap());
    blobs
        .put(&stale, Bytes::from_static(b"x"), "application/octet-stream")
        .await
        .unwrap();
    blobs
        .put(
            &orphan,
            Bytes::from_static(b"y"),
            "application/octet-stream",
        )
        .await
        .unwrap();

    let young = app.sweep().await;
    assert_eq!(
        (young.files_deleted, young.young_unowned_files),
        (0, 2),
        "{young:?}"
    );

    app.advance_clock(Duration::from_secs(2 * 3600));
    let dry = app.service.sweep(true).await.unwrap();
    assert_eq!((dry.garbage_files, dry.files_deleted), (2, 0));
    let report = app.sweep().await;
    assert_eq!(report.files_deleted, 2, "{report:?}");
    assert_eq!(
        app.files_of(&id).await,
        owned,
        "the live generation is untouched"
    );
    assert!(app.files_of(orphan_id.as_str()).await.is_empty());
    assert_eq!(app.upload(&fixture("photo.jpg")).await.status, 200);
}

/// A scheduled run's time: far more than these tests need.
const RUN: Duration = Duration::from_secs(600);

/// Where the scheduled sweep resumes, as saved.
async fn sweep_place(app: &TestApp) -> serde_json::Value {
    let saved = app
        .service
        .ports()
        .checkpoints
        .load_checkpoint("sweep.next_shard")
        .await
        .unwrap()
        .unwrap();
    serde_json::from_str(&saved).unwrap()
}

/// Files of `n` images of shard `ab` whose records are gone (lost, or the wrong table): what
/// makes a sweep judge a whole shard garbage at once.
async fn files_without_records(app: &TestApp, n: usize) -> Vec<BlobKey> {
    files_without_records_in(app, n, 0, false).await
}

/// [`files_without_records`], ids numbered from `from`, in the originals' area or the
/// variants'.
async fn files_without_records_in(
    app: &TestApp,
    n: usize,
    from: usize,
    originals: bool,
) -> Vec<BlobKey> {
    let blobs = &app.service.ports().blobs;
    let mut keys = Vec::new();
    for i in from..from + n {
        let id = ImageId::parse(&format!("ab{i:030x}")).unwrap();
        let generation = Generation::parse("0000000a").unwrap();
        let key = if originals {
            BlobKey::original(&id, &generation)
        } else {
            BlobKey::variant(
                &id,
                &generation,
                &imgest_core::domain::VariantName::parse("large").unwrap(),
                imgest_core::domain::OutputFormat::Jpeg,
            )
        };
        blobs
            .put(&key, Bytes::from_static(b"x"), "image/jpeg")
            .await
            .unwrap();
        keys.push(key);
    }
    keys
}

#[tokio::test]
async fn a_sweep_out_of_time_resumes_at_its_page_and_counts_its_share_over_the_whole_shard() {
    let app = TestApp::start().await;
    // Shard ab: a few leftovers in each area, each area under the floor, together over it.
    let half = STOP_FLOOR as usize - 5;
    let variants = files_without_records_in(&app, half, 0, false).await;
    let originals = files_without_records_in(&app, half, half, true).await;
    app.advance_clock(Duration::from_secs(2 * 86_400));
    let (shards, dry_run) = (256, false);
    // The place as saved before places had pages: a shard alone.
    app.service
        .ports()
        .checkpoints
        .save_checkpoint(
            "sweep.next_shard",
            r#"{"shard":"ab","prefix":0,"cursor":null,"scanned":0,"garbage":0}"#,
        )
        .await
        .unwrap();
    // A run whose time is spent at once still sweeps a page, then saves where it is.
    let report = app
        .service
        .sweep_batch(
            JobPart::WHOLE,
            shards,
            dry_run,
            Some(std::time::Instant::now()),
        )
        .await
        .unwrap();
    assert!(report.out_of_time, "{report:?}");
    assert_eq!(report.files_deleted, half as u64, "{report:?}");
    let place = sweep_place(&app).await;
    assert_eq!(
        (place["shard"].as_str(), place["prefix"].as_u64()),
        (Some("ab"), Some(1))
    );
    assert_eq!(
        (place["scanned"].as_u64(), place["garbage"].as_u64()),
        (Some(half as u64), Some(half as u64))
    );
    for key in &variants {
        assert!(app.service.ports().blobs.get(key).await.is_err(), "{key}");
    }
    // The next run goes on at the originals: their garbage and what the first run deleted
    // pass the share together, so it stops there, deleting none of them.
    let report = app
        .service
        .sweep_batch(JobPart::WHOLE, shards, dry_run, None)
        .await
        .unwrap();
    let stop = report
        .stopped
        .expect("the share counted over the whole shard");
    assert_eq!(
        (stop.prefix().as_str(), stop.scanned, stop.garbage),
        ("ab", 2 * half as u64, 2 * half as u64)
    );
    for key in &originals {
        assert!(app.service.ports().blobs.get(key).await.is_ok(), "{key}");
    }
    assert_eq!(sweep_place(&app).await["prefix"], 1);
}

#[tokio::test]
async fn a_sweep_that_would_delete_most_of_a_shard_stops_until_told_to_go_on() {
    a_sweep_that_would_delete_most_of_a_shard_stops_on(&TestApp::start().await).await;
}

/// The sweep's stop at a mass deletion, and going on past it once told, on `app`'s backend.
pub(crate) async fn a_sweep_that_would_delete_most_of_a_shard_stops_on(app: &TestApp) {
    // The default share: 10% of a shard's files, at least `STOP_FLOOR`.
    let keys = files_without_records(app, STOP_FLOOR as usize + 5).await;
    app.advance_clock(Duration::from_secs(2 * 86_400));

    // Every file is in shard ab: the one a sweep can find anything in.
    let report = sweep_shards_of(&app.service, &["ab"], false).await;
    let stop = report.stopped.expect("the sweep stops at shard ab");
    assert_eq!(
        (
            stop.prefix().as_str(),
            stop.scanned,
            stop.garbage,
            stop.max_share
        ),
        ("ab", keys.len() as u64, keys.len() as u64, 10),
        "{report:?}"
    );
    assert_eq!(report.files_deleted, 0);
    for key in &keys {
        assert!(
            app.service.ports().blobs.get(key).await.is_ok(),
            "{key} kept"
        );
    }

    // The scheduled run, where the last one left it, fails (its alarm fires) and keeps its
    // place at that shard.
    app.service
        .ports()
        .checkpoints
        .save_checkpoint(
            "sweep.next_shard",
            r#"{"shard":"ab","prefix":0,"cursor":null,"scanned":0,"garbage":0}"#,
        )
        .await
        .unwrap();
    let run = imgest_lambda::scheduled_gc::handle(&app.service, 1, RUN).await;
    assert_eq!(run.unwrap_err().kind(), "sweep_stopped");
    assert_eq!(sweep_place(app).await["shard"], "ab");

    // An operator checked: go on, for that shard.
    let mut report = SweepReport::default();
    let go_on = SweepOptions {
        dry_run: false,
        go_on: true,
    };
    app.service
        .sweep_shard("ab", go_on, &mut report)
        .await
        .unwrap();
    assert_eq!(
        (report.files_deleted, report.stopped),
        (keys.len() as u64, None)
    );
    assert!(
        imgest_lambda::scheduled_gc::handle(&app.service, 1, RUN)
            .await
            .is_ok()
    );

    // A few leftovers (under the floor) are swept as always.
    let few = files_without_records(app, 3).await;
    app.advance_clock(Duration::from_secs(2 * 86_400));
    let report = sweep_shards_of(&app.service, &["ab"], false).await;
    assert_eq!(report.files_deleted, few.len() as u64);
}

/// Whether the part `index` of `parts` ran, after parts 0 to `index` did: `id`'s part (by its
/// first hex digit) is one of them.
fn part_ran(id: &ImageId, index: u64, parts: u64) -> bool {
    let digit = id.as_str().chars().next().and_then(|c| c.to_digit(16));
    u64::from(digit.unwrap()) % parts <= index
}

/// GC and the sweep as the template's schedules send their parts (`GcParts`, `SweepParts`):
/// each run does its own share, and together they do all of it.
pub async fn runs_side_by_side_each_collect_and_sweep_their_own_part_on(app: &TestApp) {
    let mut strays = Vec::new();
    for i in 0..8 {
        strays.push(
            app.put_stray_original_of(format!("stray {i}").as_bytes())
                .await,
        );
    }
    // Photos of distinct bytes (so distinct ids, whose first digits fall where they fall).
    let mut orphans = Vec::new();
    for i in 0..12u8 {
        let mut png = image::RgbImage::new(4, 4);
        png.put_pixel(0, 0, image::Rgb([i, 255 - i, 7]));
        let mut bytes = Vec::new();
        png.write_to(
            &mut std::io::Cursor::new(&mut bytes),
            image::ImageFormat::Png,
        )
        .unwrap();
        orphans.push(ImageId::parse(&app.upload_ok(&bytes).await).unwrap());
    }
    app.advance_clock(Duration::from_secs(15 * 86_400));
    let budget = Duration::from_secs(600);

    // The sweep in two parts, as the template's schedules send them: each deletes the strays
    // of its own shards (and no orphan's files: their records own them).
    let parts = 2;
    for index in 0..parts {
        let event = serde_json::json!({"job": "sweep", "part": index, "parts": parts});
        let handlers::scheduled_gc::Job::Sweep(part) = handlers::scheduled_gc::job(&event).unwrap()
        else {
            panic!("{event} is a sweeping run");
        };
        let swept = handlers::scheduled_gc::sweep(&app.service, part, 256, budget)
            .await
            .unwrap();
        let mine = strays.iter().filter(|id| part.holds(id)).count() as u64;
        assert_eq!(swept.files_deleted, mine, "{part}: {swept:?}");
        assert_eq!(swept.shards, 128, "{part} sweeps half of the shards");
        for id in &strays {
            let gone = app.files_of(id.as_str()).await.is_empty();
            assert_eq!(gone, part_ran(id, index, parts), "after {part}: {id}");
        }
    }
    for id in &orphans {
        assert_eq!(
            app.files_of(id.as_str()).await.len(),
            4,
            "the sweep left {id}"
        );
    }

    // GC in three parts: each collects the orphans of its own ids.
    let parts = 3;
    for index in 0..parts {
        let event = serde_json::json!({"job": "collect", "part": index, "parts": parts});
        let handlers::scheduled_gc::Job::Collect(part) =
            handlers::scheduled_gc::job(&event).unwrap()
        else {
            panic!("{event} is a collecting run");
        };
        let mine: Vec<&ImageId> = orphans.iter().filter(|id| part.holds(id)).collect();
        let collected = handlers::scheduled_gc::collect(&app.service, part, budget)
            .await
            .unwrap();
        assert_eq!(
            collected.images_deleted,
            mine.len() as u64,
            "{part}: {collected:?}"
        );
        for id in &orphans {
            let gone = app.files_of(id.as_str()).await.is_empty();
            assert_eq!(gone, part_ran(id, index, parts), "after {part}: {id}");
        }
    }
}

#[tokio::test]
async fn runs_side_by_side_each_collect_and_sweep_their_own_part() {
    runs_side_by_side_each_collect_and_sweep_their_own_part_on(&TestApp::start().await).await;
}
