//! Uploading photos: content ids, dedup, variants, orientation, multipart.

#![allow(clippy::unwrap_used)]

use imgest_core::domain::ContentHash;

use crate::support::{Body, TestApp, fixture};

fn md5_hex(bytes: &[u8]) -> String {
    imgest_core::domain::ImageId::of_bytes(bytes).to_string()
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

    let m = app.service.counts();
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

#[tokio::test]
async fn a_precheck_answers_the_stored_photos_refreshed_and_claims_nothing_for_the_others() {
    let app = TestApp::start_with(&[("IMGEST_ORPHAN_TTL", "1h")]).await;
    let stored = fixture("photo.jpg");
    let stored_id = app.upload_ok(&stored).await;
    let never_sent = md5_hex(b"bytes nobody uploaded");

    // Near the end of the orphan's hour, a client that hashed its photos asks first.
    app.advance_clock(std::time::Duration::from_secs(55 * 60));
    let sha = |bytes: &[u8]| ContentHash::of_bytes(bytes).to_string();
    let photos = serde_json::json!({"images": [
        {"image_id": stored_id, "sha256": sha(&stored)},
        {"image_id": never_sent, "sha256": sha(b"bytes nobody uploaded")},
        {"image_id": stored_id, "sha256": sha(&stored)},
        // The stored MD5 with another SHA-256 (an MD5 collision): not known.
        {"image_id": stored_id, "sha256": sha(b"other bytes, same md5")},
    ]});
    let r = app.post_json("/v1/images/known", &photos).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let known = r.json["known"].as_array().unwrap();
    assert_eq!(known.len(), 1, "{}", r.json);
    assert_eq!(known[0]["image_id"], stored_id.as_str());
    assert_eq!(known[0]["deduplicated"], true);
    assert!(
        known[0]["variants"]["thumb"]["url"].is_string(),
        "{}",
        r.json
    );

    // Refreshed as a re-upload would be: past the first hour, GC keeps it.
    app.advance_clock(std::time::Duration::from_secs(10 * 60));
    assert_eq!(app.gc().await.images_deleted, 0);
    assert_eq!(
        app.get(&format!("/v1/images/{stored_id}")).await.status,
        200
    );
    // The unknown id got no record, and nothing was decoded again.
    let r = app.get(&format!("/v1/images/{never_sent}")).await;
    assert_eq!(r.status, 404, "{}", r.json);
    assert_eq!(app.service.counts().pipeline_runs, 1);
}

#[tokio::test]
async fn a_hostile_precheck_is_refused_before_any_read() {
    let app = TestApp::start().await;
    let photo = |id: &str| serde_json::json!({"image_id": id, "sha256": "ab".repeat(32)});
    let too_many: Vec<serde_json::Value> =
        (0..101).map(|i| photo(&md5_hex(&[i as u8, 1]))).collect();
    let r = app
        .post_json("/v1/images/known", &serde_json::json!({"images": too_many}))
        .await;
    assert_eq!((r.status, r.kind()), (400, "invalid_body"), "{}", r.json);

    let padded = format!(r#"{{"images": []{}}}"#, " ".repeat(30 * 1024));
    let body = Body::Bytes(padded.into_bytes(), "application/json");
    let r = app.call("POST", "/v1/images/known", None, body).await;
    assert_eq!((r.status, r.kind()), (413, "too_large"), "{}", r.json);

    let id = "0cc175b9c0f1b6a831c399e269772661";
    for body in [
        serde_json::json!({"images": [{"image_id": id, "sha256": "not-a-sha"}]}),
        serde_json::json!({"images": [{"image_id": id}]}),
        serde_json::json!({"images": [photo(id)], "offer": "x"}),
        serde_json::json!([photo(id)]),
    ] {
        let r = app.post_json("/v1/images/known", &body).await;
        assert_eq!(
            (r.status, r.kind()),
            (400, "invalid_body"),
            "{body}: {}",
            r.json
        );
    }
    let r = app
        .post_json(
            "/v1/images/known",
            &serde_json::json!({"images": [photo("Z")]}),
        )
        .await;
    assert_eq!(r.kind(), "invalid_image_id", "{}", r.json);
    // An old client's form (MD5s alone) is refused, saying what the precheck takes.
    let r = app
        .post_json("/v1/images/known", &serde_json::json!({"image_ids": [id]}))
        .await;
    assert_eq!((r.status, r.kind()), (400, "invalid_body"), "{}", r.json);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sha256"),
        "{}",
        r.json
    );
}

/// Variants in each format `IMGEST_VARIANTS` may name: listed with their format, served with
/// its content type, read back as stored, and owned (the sweep keeps them).
async fn variants_in_each_format(app: &TestApp) {
    let r = app.upload(&fixture("photo.jpg")).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let id = r.json["image_id"].as_str().unwrap().to_owned();
    for (name, format, mime) in [
        ("large", "jpeg", "image/jpeg"),
        ("small_webp", "webp", "image/webp"),
        ("small_avif", "avif", "image/avif"),
    ] {
        let v = &r.json["variants"][name];
        assert_eq!(v["format"], format, "{v}");
        let url = v["url"].as_str().unwrap();
        let extension = if format == "jpeg" { "jpg" } else { format };
        assert!(url.ends_with(&format!("/{name}.{extension}")), "{url}");
        let served = reqwest::get(url).await.unwrap();
        assert_eq!(served.status(), 200, "{url}");
        assert_eq!(served.headers()["content-type"], mime, "{url}");
        let bytes = served.bytes().await.unwrap();
        if format == "webp" {
            let img = image::load_from_memory_with_format(&bytes, image::ImageFormat::WebP);
            assert_eq!(img.unwrap().width(), v["width"].as_u64().unwrap() as u32);
        }
    }
    let again = app.get(&format!("/v1/images/{id}")).await;
    assert_eq!(again.json["variants"], r.json["variants"]);
    app.advance_clock(std::time::Duration::from_secs(3 * 86_400));
    let swept = app.sweep().await;
    assert_eq!(swept.garbage_files, 0, "{swept:?}");
    assert_eq!(app.files_of(&id).await.len(), 4);
}

const EACH_FORMAT: &str =
    "large=fit:1280x1280,small_webp=fit:320x320:webp,small_avif=fit:320x320:avif:50";

#[tokio::test]
async fn variants_may_be_webp_or_avif_and_are_listed_and_served_as_such() {
    let app = TestApp::start_with(&[("IMGEST_VARIANTS", EACH_FORMAT)]).await;
    variants_in_each_format(&app).await;
}

#[tokio::test]
async fn variants_may_be_webp_or_avif_on_the_aws_adapters() {
    let vars = [("IMGEST_VARIANTS", EACH_FORMAT)];
    let Some(app) = TestApp::start_aws("variants in each format", &vars).await else {
        return;
    };
    variants_in_each_format(&app).await;
}
