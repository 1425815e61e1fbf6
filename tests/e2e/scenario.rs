//! The core scenario, run on the embedded backend and on the AWS adapters alike: upload, dedup,
//! link, reorder, delete, expire, GC, sweep.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::Bytes;
use imgest_core::domain::{BlobKey, Generation, ImageId};

use crate::support::{TestApp, fixture};

pub const SCENARIO_VARS: &[(&str, &str)] =
    &[("IMGEST_ORPHAN_TTL", "1h"), ("IMGEST_SWEEP_GRACE", "3h")];

/// Runs the scenario; returns the ids of (kept, collected) images for backend-specific checks.
pub async fn core_scenario(app: &TestApp) -> (Vec<String>, Vec<String>) {
    // Upload three photos; the same bytes again are a dedup hit that decodes nothing.
    let photo = fixture("photo.jpg");
    let first = app.upload(&photo).await;
    assert_eq!(first.status, 201, "{}", first.json);
    let a = first.json["image_id"].as_str().unwrap().to_owned();
    let again = app.upload(&photo).await;
    assert_eq!(
        (again.status, again.json["deduplicated"].as_bool()),
        (200, Some(true))
    );
    let b = app.upload_ok(&fixture("small.png")).await;
    let c = app.upload_ok(&fixture("animated.gif")).await;
    assert_eq!(app.service.counts().pipeline_runs, 3);
    for v in first.json["variants"].as_object().unwrap().values() {
        assert_eq!(app.get_bytes(v["url"].as_str().unwrap()).await.0, 200);
    }

    // Link, reorder, share, delete.
    assert_eq!(
        app.link("o1", &[&a, &b]).await.photo_ids(),
        [a.clone(), b.clone()]
    );
    assert_eq!(
        app.link("o1", &[&b, &a]).await.photo_ids(),
        [b.clone(), a.clone()]
    );
    app.link("o2", &[&a]).await;
    let unknown = app
        .link("o2", &[&a, "0cc175b9c0f1b6a831c399e269772661"])
        .await;
    assert_eq!((unknown.status, unknown.kind()), (422, "unknown_image"));
    assert_eq!(app.photos("o2").await.photo_ids(), vec![a.clone()]);
    let files_before = app.files().await;
    assert_eq!(app.delete("/v1/offers/o1").await.status, 204);
    assert_eq!(app.delete("/v1/offers/o1").await.status, 204);
    assert_eq!(
        app.files().await,
        files_before,
        "deleting an offer touches no file"
    );
    assert_eq!(app.get(&format!("/v1/images/{a}")).await.json["offers"], 1);

    // Expire: b (unlinked by o1's deletion) and c (never linked) go; a (linked by o2) stays.
    app.advance_clock(Duration::from_secs(2 * 3600));
    let report = app.gc().await;
    assert_eq!(report.images_deleted, 2, "{report:?}");
    for gone in [&b, &c] {
        assert_eq!(app.get(&format!("/v1/images/{gone}")).await.status, 404);
        assert!(app.files_of(gone).await.is_empty());
    }
    assert_eq!(app.files_of(&a).await.len(), 4);

    // Sweep: a file no record owns goes once older than the grace period; a's files stay.
    let stray = BlobKey::original(
        &ImageId::of_bytes(b"stray"),
        &Generation::parse("00000001").unwrap(),
    );
    app.service
        .ports()
        .blobs
        .put(&stray, Bytes::from_static(b"x"), "application/octet-stream")
        .await
        .unwrap();
    assert_eq!(app.sweep().await.files_deleted, 0, "too young");
    app.advance_clock(Duration::from_secs(2 * 3600));
    assert_eq!(app.sweep().await.files_deleted, 1);
    assert_eq!(app.files_of(&a).await.len(), 4);
    assert_eq!(app.upload(&photo).await.status, 200);
    (vec![a], vec![b, c])
}

#[tokio::test]
async fn the_core_scenario_passes_on_the_embedded_backend() {
    let app = TestApp::start_with(SCENARIO_VARS).await;
    core_scenario(&app).await;
}
