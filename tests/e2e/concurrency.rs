//! Concurrent and crashed uploads: one decode per content, claims that expire are taken over.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use imgest_core::domain::{Generation, ImageId};
use imgest_core::ports::Claim;

use crate::support::{TestApp, fixture};

#[tokio::test]
async fn concurrent_uploads_of_the_same_new_bytes_decode_once_and_agree_on_the_id() {
    let app = TestApp::start().await;
    let photo = fixture("photo.jpg");
    let uploads = (0..12).map(|_| app.upload(&photo));
    let replies = futures_util::future::join_all(uploads).await;

    let expected = ImageId::of_bytes(&photo).to_string();
    let created = replies.iter().filter(|r| r.status == 201).count();
    assert_eq!(created, 1, "exactly one caller created it");
    for r in &replies {
        assert!(
            r.status == 201 || r.status == 200,
            "{} {}",
            r.status,
            r.json
        );
        assert_eq!(r.json["image_id"], expected.as_str());
    }
    let m = app.service.counts();
    assert_eq!(m.pipeline_runs, 1);
    assert_eq!(m.files_written, 4);
    assert_eq!(app.files_of(&expected).await.len(), 4);
}

#[tokio::test]
async fn a_crashed_claim_expires_and_is_taken_over() {
    let app = TestApp::start_with(&[("IMGEST_CLAIM_TTL", "30s")]).await;
    let photo = fixture("photo.jpg");
    let id = ImageId::of_bytes(&photo);
    let ports = app.service.ports();
    // A worker claims the bytes and dies without completing.
    let now = ports.clock.now();
    let claim = ports
        .images
        .claim(
            &id,
            &Generation::random(),
            now,
            Duration::from_secs(30),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert!(matches!(claim, Claim::New { .. }));

    app.advance_clock(Duration::from_secs(31));
    let r = app.upload(&photo).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(app.service.counts().pipeline_runs, 1);
}
