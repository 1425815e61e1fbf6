//! Presigned uploads on the local runner: the URL points at the runner itself.

#![allow(clippy::unwrap_used)]

use crate::support::{TestApp, fixture};

/// A 12 MB JPEG (noise does not compress), larger than API Gateway's 6 MB request limit.
pub fn twelve_megabyte_jpeg() -> Vec<u8> {
    let (w, h) = (3000u32, 2100u32);
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let pixels: Vec<u8> = (0..w * h * 3)
        .map(|_| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 24) as u8
        })
        .collect();
    let mut out = Vec::new();
    let mut encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 92);
    encoder
        .encode(&pixels, w, h, image::ExtendedColorType::Rgb8)
        .unwrap();
    out
}

#[tokio::test]
async fn a_12_mb_photo_goes_through_the_presigned_path() {
    let app = TestApp::start().await;
    let photo = twelve_megabyte_jpeg();
    assert!(photo.len() > 12_000_000, "{} bytes", photo.len());

    let ticket = app
        .post_json("/v1/uploads", &serde_json::json!({"size": photo.len()}))
        .await;
    assert_eq!(ticket.status, 201, "{}", ticket.json);
    assert_eq!(ticket.json["method"], "PUT");
    let upload_id = ticket.json["upload_id"].as_str().unwrap().to_owned();
    let url = ticket.json["upload_url"].as_str().unwrap();
    assert!(url.starts_with(&app.base));

    let pending = app.get(&format!("/v1/uploads/{upload_id}")).await;
    assert_eq!(pending.json["state"], "pending");

    assert_eq!(
        ticket.json["headers"]["content-type"], "application/octet-stream",
        "the URL is signed for a content type"
    );
    let put = app.put_upload(url, photo.clone()).await;
    assert_eq!(put.status().as_u16(), 200);

    let done = app.get(&format!("/v1/uploads/{upload_id}")).await;
    assert_eq!(done.status, 200, "{}", done.json);
    assert_eq!(done.json["state"], "done", "{}", done.json);
    let image = &done.json["image"];
    assert_eq!(
        image["image_id"],
        imgest_core::domain::ImageId::of_bytes(&photo).to_string()
    );
    assert_eq!(
        (image["width"].as_u64(), image["height"].as_u64()),
        (Some(3000), Some(2100))
    );
    assert_eq!(image["variants"]["large"]["width"], 1280);
    // The body is not kept twice: only the image's own files remain.
    assert!(
        app.files()
            .await
            .iter()
            .all(|f| !f.starts_with("incoming/")),
        "{:?}",
        app.files().await
    );

    // The same bytes through the direct path are a dedup hit.
    let again = app.upload(&photo).await;
    assert_eq!(
        (again.status, again.json["deduplicated"].as_bool()),
        (200, Some(true))
    );
}

#[tokio::test]
async fn presigned_uploads_refuse_bad_sizes_bodies_and_ids() {
    let app = TestApp::start_with(&[("IMGEST_MAX_BODY", "1MB")]).await;
    let too_big = app
        .post_json("/v1/uploads", &serde_json::json!({"size": 2_000_000}))
        .await;
    assert_eq!((too_big.status, too_big.kind()), (413, "too_large"));
    let empty = app
        .post_json("/v1/uploads", &serde_json::json!({"size": 0}))
        .await;
    assert_eq!((empty.status, empty.kind()), (400, "empty_body"));
    let junk = app
        .post_json("/v1/uploads", &serde_json::json!({"bytes": 5}))
        .await;
    assert_eq!((junk.status, junk.kind()), (400, "invalid_body"));
    let unknown = app
        .get("/v1/uploads/0123456789abcdef0123456789abcdef")
        .await;
    assert_eq!((unknown.status, unknown.kind()), (404, "upload_not_found"));
    let bad = app.get("/v1/uploads/xyz").await;
    assert_eq!((bad.status, bad.kind()), (400, "invalid_upload_id"));

    let photo = fixture("photo.jpg");
    let ticket = app
        .post_json("/v1/uploads", &serde_json::json!({"size": photo.len() + 1}))
        .await;
    let url = ticket.json["upload_url"].as_str().unwrap().to_owned();
    let put = app.put_upload(&url, photo.clone()).await;
    assert_eq!(
        put.status().as_u16(),
        400,
        "a body of another size is refused"
    );
    let untyped = app
        .client
        .put(&url)
        .header("content-type", "image/jpeg")
        .body(vec![0u8; photo.len() + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(
        untyped.status().as_u16(),
        400,
        "a body of another content type than signed is refused"
    );

    let text = b"not an image".to_vec();
    let ticket = app
        .post_json("/v1/uploads", &serde_json::json!({"size": text.len()}))
        .await;
    let id = ticket.json["upload_id"].as_str().unwrap().to_owned();
    let url = ticket.json["upload_url"].as_str().unwrap().to_owned();
    let put = app.put_upload(&url, text.clone()).await;
    assert_eq!(put.status().as_u16(), 200);
    let failed = app.get(&format!("/v1/uploads/{id}")).await;
    assert_eq!(failed.json["state"], "failed");
    assert_eq!(failed.json["error"]["kind"], "unsupported_format");
    // What happened is in the log under the request id; nothing else is said.
    let request_id = failed.json["error"]["request_id"].as_str().unwrap();
    assert!(
        request_id.len() == 16 && request_id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{}",
        failed.json
    );
    assert_eq!(
        failed.json["error"].as_object().unwrap().len(),
        2,
        "only the kind and the request id: {}",
        failed.json
    );
    let again = app.put_upload(&url, text).await;
    assert_eq!(again.status().as_u16(), 409, "an upload URL is used once");
    assert!(app.files().await.is_empty(), "{:?}", app.files().await);
}

/// A processing message whose body expired under `incoming/` (redriven from the dead-letter
/// queue too late) says so: the upload fails as `body_gone` for its client, and so does the
/// message, instead of passing for a message delivered again.
#[tokio::test]
async fn a_presigned_upload_whose_body_is_gone_fails_as_body_gone() {
    let app = TestApp::start().await;
    let ticket = app
        .post_json("/v1/uploads", &serde_json::json!({"size": 1234}))
        .await;
    assert_eq!(ticket.status, 201, "{}", ticket.json);
    let upload_id = ticket.json["upload_id"].as_str().unwrap().to_owned();
    let id = imgest_core::domain::UploadId::parse(&upload_id).unwrap();

    let err = app.service.process_incoming(&id).await.unwrap_err();
    assert_eq!(err.kind(), "body_gone");
    assert!(!err.is_retryable());
    let failed = app.get(&format!("/v1/uploads/{upload_id}")).await;
    assert_eq!(failed.json["state"], "failed", "{}", failed.json);
    assert_eq!(failed.json["error"]["kind"], "body_gone", "{}", failed.json);
    // Delivered again: the upload is no longer pending, nothing more happens.
    let again = app.service.process_incoming(&id).await.unwrap().state;
    assert!(
        matches!(&again, imgest_core::ports::UploadState::Failed { kind, .. } if kind == "body_gone"),
        "{again:?}"
    );
}
