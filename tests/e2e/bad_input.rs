//! The bad-input corpus: every file gets its documented status and kind, nothing half-written
//! stays behind, and the server keeps serving.

#![allow(clippy::unwrap_used)]

use crate::support::{TestApp, fixture};

#[tokio::test]
async fn each_bad_input_gets_its_documented_error_and_leaves_nothing_behind() {
    let app = TestApp::start_with(&[("IMGEST_MAX_PIXELS", "50M")]).await;
    let cases = [
        ("empty.jpg", "image/jpeg", 400, "empty_body"),
        ("truncated.jpg", "image/jpeg", 422, "corrupt_image"),
        ("text.jpg", "image/jpeg", 415, "unsupported_format"),
        ("huge-declared.png", "image/png", 422, "too_many_pixels"),
    ];
    for (name, content_type, status, kind) in cases {
        let r = app.upload_as(&fixture(name), content_type).await;
        assert_eq!((r.status, r.kind()), (status, kind), "{name}: {}", r.json);
        assert!(!r.json["error"]["message"].as_str().unwrap().is_empty());
    }
    // A HEIC photo (an iPhone's own format) is refused with what to send instead.
    let heic = b"\0\0\0\x18ftypheic\0\0\0\0mif1heic\0\0\0\x08meta";
    let r = app.upload_as(heic, "image/heic").await;
    assert_eq!(
        (r.status, r.kind()),
        (415, "unsupported_format"),
        "{}",
        r.json
    );
    let message = r.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("send the photo as JPEG"), "{message}");
    assert!(
        app.files().await.is_empty(),
        "no file stays behind: {:?}",
        app.files().await
    );
    assert_eq!(app.gc().await.examined, 0, "no claim stays behind");
    assert_eq!(app.get("/healthz").await.status, 200);
    assert_eq!(
        app.upload(&fixture("photo.jpg")).await.status,
        201,
        "still serving"
    );
}

#[tokio::test]
async fn unusual_but_valid_images_are_processed() {
    let app = TestApp::start().await;
    for (name, format) in [
        ("corrupt-exif.jpg", "jpeg"),
        ("cmyk.jpg", "jpeg"),
        ("animated.gif", "gif"),
        ("rgba16.png", "png"),
        ("photo.webp", "webp"),
        ("alpha.avif", "avif"),
        ("grid.avif", "avif"),
    ] {
        let r = app.upload(&fixture(name)).await;
        assert_eq!(r.status, 201, "{name}: {}", r.json);
        assert_eq!(r.json["format"], format, "{name}");
        assert_eq!(
            r.json["variants"]["thumb"]["width"]
                .as_u64()
                .unwrap()
                .min(200),
            r.json["variants"]["thumb"]["width"].as_u64().unwrap()
        );
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_or_without_content_length() {
    let app = TestApp::start_with(&[("IMGEST_MAX_BODY", "1000")]).await;
    let big = vec![0xffu8; 5000];
    let r = app.upload(&big).await;
    assert_eq!((r.status, r.kind()), (413, "too_large"));

    // Chunked, with no Content-Length: cut while streaming.
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = (0..10)
        .map(|_| Ok(bytes::Bytes::from(vec![0u8; 500])))
        .collect();
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    let resp = app
        .client
        .post(app.url("/v1/images"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    let json: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(json["error"]["kind"], "too_large");
    assert!(app.files().await.is_empty());
}
