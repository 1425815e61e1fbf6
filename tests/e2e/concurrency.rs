//! Concurrent and crashed uploads: one decode per content, claims that expire are taken over.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use imgest_core::domain::{Generation, ImageId};
use imgest_core::ports::Claim;

use tower::ServiceExt;

use crate::support::{Body, TestApp, fixture};

#[tokio::test]
async fn concurrent_uploads_of_the_same_new_bytes_decode_once_and_agree_on_the_id() {
    concurrent_uploads_of_the_same_new_bytes_decode_once_on(&TestApp::start().await).await;
}

/// Twelve uploads of the same new bytes at once: one creates, the others are told it exists.
pub(crate) async fn concurrent_uploads_of_the_same_new_bytes_decode_once_on(app: &TestApp) {
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

/// Behind API Gateway a request has 30 s: an upload of bytes another request is processing
/// waits `IMGEST_DEDUP_WAIT` at most, then answers `503 still_processing` with `Retry-After`
/// (the claim's time left, 1 to 5 s), on the local runner and through the API function alike.
#[tokio::test]
async fn a_same_bytes_upload_behind_a_held_claim_answers_503_in_time() {
    let app = TestApp::start_with(&[("IMGEST_DEDUP_WAIT", "1s")]).await;
    a_same_bytes_upload_behind_a_held_claim_answers_503_on(&app).await;
}

/// The 503 waiter deadline, on `app`'s backend (its `IMGEST_DEDUP_WAIT` is a second).
pub(crate) async fn a_same_bytes_upload_behind_a_held_claim_answers_503_on(app: &TestApp) {
    let photo = fixture("photo.jpg");
    let id = ImageId::of_bytes(&photo);
    let ports = app.service.ports();
    // Another request holds the claim for ten minutes (a slow decode, a stuck worker).
    let holder = Generation::random();
    let claim = ports
        .images
        .claim(
            &id,
            &holder,
            ports.clock.now(),
            Duration::from_secs(600),
            Duration::from_secs(3600),
        )
        .await
        .unwrap();
    assert!(matches!(claim, Claim::New { .. }));

    let r = app
        .call_raw(
            "POST",
            "/v1/images",
            None,
            Body::Bytes(photo.clone(), "image/jpeg"),
        )
        .await;
    assert_eq!(r.status(), 503);
    let retry_after: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=5).contains(&retry_after), "{retry_after}");
    let reply = crate::support::reply(r).await;
    assert_eq!(reply.kind(), "still_processing", "{}", reply.json);

    let event = crate::identity_aws::api_event(
        "seller-a",
        "POST",
        "/v1/images",
        Some((&photo, "image/jpeg")),
    );
    let lambda = app
        .api_function()
        .oneshot(lambda_http::request::from_str(&event.to_string()).unwrap())
        .await
        .unwrap();
    assert_eq!(lambda.status(), 503);
    assert!(lambda.headers().contains_key("retry-after"));

    // The holder gives up: the next upload claims and processes the bytes.
    ports.images.abandon(&id, &holder).await.unwrap();
    assert_eq!(app.upload(&photo).await.status, 201);
}
