//! Uploading photos: content ids, dedup, variants, orientation, multipart.

#![allow(clippy::unwrap_used)]

use crate::support::{TestApp, fixture};

fn md5_hex(bytes: &[u8]) -> String {
    imgest_shared::domain::ImageId::of_bytes(bytes).to_string()
}

#[tokio::test]
async fn uploading_the_same_bytes_twice_returns_the_same_id_created_then_deduplicated() {
    let app = TestApp::start().await;
    let photo = fixture("photo.jpg");

    let first = app.upload(&photo).await;
    assert_eq!(first.status, 201, "{}", first.json);
    assert_eq!(first.json["image_id"], md5_hex(&photo));
    assert_eq!(first.json["deduplicated"], false);
    assert_eq!(first.json["format"], "jpeg");

    let second = app.upload(&photo).await;
    assert_eq!(second.status, 200, "{}", second.json);
    assert_eq!(second.json["image_id"], first.json["image_id"]);
    assert_eq!(second.json["deduplicated"], true);
    assert_eq!(second.json["variants"], first.json["variants"]);

    let m = app.service.metrics().snapshot();
    assert_eq!(m.pipeline_runs, 1, "a dedup hit must not decode");
    assert_eq!(m.uploads_deduplicated, 1);
}

#[tokio::test]
async fn variants_have_the_configured_sizes_and_are_served() {
    let app = TestApp::start().await;
    let photo = fixture("photo.jpg");
    let source = image::load_from_memory(&photo).unwrap();
    let r = app.upload(&photo).await;
    assert_eq!(r.status, 201, "{}", r.json);

    let (w, h) = (
        r.json["width"].as_u64().unwrap(),
        r.json["height"].as_u64().unwrap(),
    );
    assert_eq!(
        (w, h),
        (u64::from(source.width()), u64::from(source.height()))
    );

    let variants = r.json["variants"].as_object().unwrap();
    let names: Vec<&str> = variants.keys().map(String::as_str).collect();
    assert_eq!(names, ["large", "medium", "thumb"]);
    for (name, v) in variants {
        let (status, bytes) = app.get_bytes(v["url"].as_str().unwrap()).await;
        assert_eq!(status, 200, "{name} is served");
        let img = image::load_from_memory_with_format(&bytes, image::ImageFormat::Jpeg).unwrap();
        assert_eq!(
            u64::from(img.width()),
            v["width"].as_u64().unwrap(),
            "{name} width"
        );
        assert_eq!(
            u64::from(img.height()),
            v["height"].as_u64().unwrap(),
            "{name} height"
        );
    }
    assert_eq!(
        (
            variants["thumb"]["width"].as_u64(),
            variants["thumb"]["height"].as_u64()
        ),
        (Some(200), Some(200))
    );
    for name in ["large", "medium"] {
        let (vw, vh) = (
            variants[name]["width"].as_u64().unwrap(),
            variants[name]["height"].as_u64().unwrap(),
        );
        let bound = if name == "large" { 1280 } else { 640 };
        assert!(
            vw <= bound && vh <= bound && vw <= w && vh <= h,
            "{name} {vw}x{vh} fits"
        );
        assert!(
            vw == bound.min(w) || vh == bound.min(h),
            "{name} {vw}x{vh} touches the box"
        );
    }

    let got = app
        .get(&format!(
            "/v1/images/{}",
            r.json["image_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json["variants"], r.json["variants"]);
    assert_eq!(got.json["offers"], 0);
}

#[tokio::test]
async fn a_small_image_is_never_upscaled() {
    let app = TestApp::start().await;
    let r = app.upload(&fixture("small.png")).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json["format"], "png");
    let v = &r.json["variants"];
    assert_eq!(
        (v["large"]["width"].as_u64(), v["large"]["height"].as_u64()),
        (Some(120), Some(80))
    );
    assert!(v["thumb"]["width"].as_u64().unwrap() <= 200);
}

#[tokio::test]
async fn an_exif_rotated_photo_comes_out_upright() {
    let app = TestApp::start().await;
    let bytes = fixture("rotated-exif6.jpg");
    let stored = image::load_from_memory(&bytes).unwrap();
    let r = app.upload(&bytes).await;
    assert_eq!(r.status, 201, "{}", r.json);
    // Stored sideways (landscape), shown upright (portrait).
    assert!(stored.width() > stored.height());
    assert_eq!(
        r.json["width"].as_u64().unwrap(),
        u64::from(stored.height())
    );
    assert_eq!(
        r.json["height"].as_u64().unwrap(),
        u64::from(stored.width())
    );
    let large = &r.json["variants"]["large"];
    assert!(large["height"].as_u64() > large["width"].as_u64());
    let (_, jpeg) = app.get_bytes(large["url"].as_str().unwrap()).await;
    let out = image::load_from_memory(&jpeg).unwrap();
    assert!(out.height() > out.width(), "the served file is upright too");
}

#[tokio::test]
async fn a_multipart_upload_uses_the_file_part() {
    let app = TestApp::start().await;
    let photo = fixture("photo.jpg");
    let form = reqwest::multipart::Form::new()
        .text("note", "ignored")
        .part(
            "file",
            reqwest::multipart::Part::bytes(photo.clone())
                .file_name("x.png")
                .mime_str("image/png")
                .unwrap(),
        );
    let r = app
        .client
        .post(app.url("/v1/images"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let json: serde_json::Value = r.json().await.unwrap();
    assert_eq!(json["image_id"], md5_hex(&photo));
    assert_eq!(
        json["format"], "jpeg",
        "the format comes from the bytes, not the name or type"
    );

    let form = reqwest::multipart::Form::new().text("other", "x");
    let r = app
        .client
        .post(app.url("/v1/images"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let json: serde_json::Value = r.json().await.unwrap();
    assert_eq!(json["error"]["kind"], "missing_file");
}

#[tokio::test]
async fn unknown_and_malformed_image_ids_are_told_apart() {
    let app = TestApp::start().await;
    let missing = app.get("/v1/images/0cc175b9c0f1b6a831c399e269772661").await;
    assert_eq!((missing.status, missing.kind()), (404, "image_not_found"));
    let bad = app.get("/v1/images/NOT-AN-ID").await;
    assert_eq!((bad.status, bad.kind()), (400, "invalid_image_id"));
    let route = app.get("/v2/nothing").await;
    assert_eq!((route.status, route.kind()), (404, "route_not_found"));
    let health = app.get("/healthz").await;
    assert_eq!(health.status, 200);
}
