//! Placeholders: each stored photo's ThumbHash, in every answer that shows its variants (the
//! image, the upload, the offer's photos), decoding as close to the photo as the reference
//! encoder's with the reference decoder; records made before placeholders get one from the
//! backfill.

#![allow(clippy::unwrap_used, clippy::panic)]

use bytes::Bytes;
use image::imageops::FilterType;
use serde_json::Value;

use crate::support::{TestApp, fixture, sample};
use imgest_core::domain::{BlobKey, Generation, ImageId, ImageRecord, ImageState, ThumbHash};
use imgest_core::ports::ReadyImage;

/// The URL of the smallest variant of the photo's shape (a thumbnail cropped to a square is
/// not a picture of the whole photo).
fn smallest_whole(image: &Value) -> String {
    let (width, height) = (
        image["width"].as_u64().unwrap(),
        image["height"].as_u64().unwrap(),
    );
    image["variants"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| {
            (
                v["width"].as_u64().unwrap(),
                v["height"].as_u64().unwrap(),
                v,
            )
        })
        .filter(|(w, h, _)| (w * height).abs_diff(h * width) <= width.max(height))
        .min_by_key(|(w, h, _)| w * h)
        .map(|(_, _, v)| v["url"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no variant of the photo's shape: {image}"))
}

/// How far a placeholder decoded with the reference decoder is from the photo: the mean
/// difference (0-255, over every channel of every pixel) from the photo's smallest whole
/// variant scaled to the placeholder's size; beside it, the same for the placeholder the
/// reference encoder makes of that variant. A placeholder is a blur of a few cosines (soft
/// edges, the colours of the photo's regions): what matters is that ours is as close as the
/// reference's.
async fn differences(app: &TestApp, image: &Value) -> (f64, f64) {
    let hash = image["thumbhash"]
        .as_str()
        .unwrap_or_else(|| panic!("no placeholder: {image}"));
    let ours = ThumbHash::parse(hash).unwrap().as_bytes().to_vec();
    assert!(ours.len() <= 25, "{} bytes", ours.len());
    let (status, body) = app.get_bytes(&smallest_whole(image)).await;
    assert_eq!(status, 200);
    let variant = image::load_from_memory(&body).unwrap().to_rgba8();
    let (vw, vh) = variant.dimensions();
    let scale = 100.0 / f64::from(vw.max(vh).max(100));
    let small = image::imageops::resize(
        &variant,
        ((f64::from(vw) * scale).round() as u32).max(1),
        ((f64::from(vh) * scale).round() as u32).max(1),
        FilterType::Triangle,
    );
    let reference = thumbhash::rgba_to_thumb_hash(
        small.width() as usize,
        small.height() as usize,
        small.as_raw(),
    );
    let difference = |hash: &[u8]| {
        let (w, h, rgba) = thumbhash::thumb_hash_to_rgba(hash).unwrap();
        let scaled = image::imageops::resize(&variant, w as u32, h as u32, FilterType::Triangle);
        let total: u64 = scaled
            .as_raw()
            .iter()
            .zip(&rgba)
            .map(|(a, b)| u64::from(a.abs_diff(*b)))
            .sum();
        total as f64 / rgba.len() as f64
    };
    (difference(&ours), difference(&reference))
}

/// Ours within a little of the reference encoder's, and both plainly the photo.
async fn assert_close(app: &TestApp, image: &Value, name: &str) {
    let (ours, reference) = differences(app, image).await;
    println!(
        "placeholder of {name}: mean difference {ours:.1} of 255 (the reference encoder's {reference:.1})"
    );
    assert!(
        ours <= reference + 3.0 && ours < 40.0,
        "{name}: {ours} against {reference}"
    );
}

async fn placeholders_everywhere(app: &TestApp) {
    // Landscape and portrait (one turned by its EXIF orientation), a PNG, a WebP.
    let photos = [
        ("dune.jpg", sample("dune.jpg")),
        (
            "garden-portrait-exif6.jpg",
            sample("garden-portrait-exif6.jpg"),
        ),
        ("small.png", fixture("small.png")),
        ("photo.webp", fixture("photo.webp")),
    ];
    let mut ids = Vec::new();
    for (name, bytes) in &photos {
        let uploaded = app.upload(bytes).await;
        assert!(uploaded.status == 201, "{name}: {}", uploaded.json);
        let id = uploaded.json["image_id"].as_str().unwrap().to_owned();
        let image = app.get(&format!("/v1/images/{id}")).await.json;
        assert_eq!(image["thumbhash"], uploaded.json["thumbhash"], "{name}");
        // The placeholder has the photo's shape (upright).
        let hash = ThumbHash::parse(image["thumbhash"].as_str().unwrap()).unwrap();
        let hash = hash.as_bytes();
        let ratio = thumbhash::thumb_hash_to_approximate_aspect_ratio(hash).unwrap();
        let (width, height) = (
            image["width"].as_f64().unwrap(),
            image["height"].as_f64().unwrap(),
        );
        assert_eq!(
            ratio > 1.0,
            width > height,
            "{name}: {ratio} for {width}x{height}"
        );
        assert_close(app, &image, name).await;
        ids.push(id);
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let offer = app.link("placeholders", &refs).await;
    assert_eq!(offer.status, 200, "{}", offer.json);
    for photo in offer.json["photos"].as_array().unwrap() {
        assert!(photo["thumbhash"].is_string(), "{photo}");
    }
    let photos = app.photos("placeholders").await.json;
    for photo in photos["photos"].as_array().unwrap() {
        assert!(photo["thumbhash"].is_string(), "{photo}");
    }
}

#[tokio::test]
async fn every_answer_has_a_placeholder_close_to_the_photo_on_the_embedded_backend() {
    placeholders_everywhere(&TestApp::start().await).await;
}

#[tokio::test]
async fn every_answer_has_a_placeholder_close_to_the_photo_on_the_aws_adapters() {
    let Some(app) = TestApp::start_aws("placeholders", &[]).await else {
        return;
    };
    placeholders_everywhere(&app).await;
}

/// Writes a ready record for `id` under a fresh generation without a placeholder, as records
/// were made before placeholders: its original `original`, and `like`'s variant files copied
/// under it (none when `like` is `None`). Returns its generation.
async fn legacy_record(
    app: &TestApp,
    id: &ImageId,
    original: &[u8],
    like: Option<&ImageRecord>,
) -> Generation {
    let ports = app.service.ports();
    let generation = Generation::random();
    let put = |key: BlobKey, body: Bytes| async move {
        ports
            .blobs
            .put(&key, body, "application/octet-stream")
            .await
            .unwrap();
    };
    put(
        BlobKey::original(id, &generation),
        Bytes::from(original.to_vec()),
    )
    .await;
    let (mut variants, mut size) = (Vec::new(), (10, 10));
    if let Some(like) = like
        && let ImageState::Ready {
            variants: made,
            width,
            height,
            ..
        } = &like.state
    {
        for v in made {
            let from = BlobKey::variant(&like.id, &like.generation, &v.name, v.format);
            let body = ports.blobs.get(&from).await.unwrap();
            put(BlobKey::variant(id, &generation, &v.name, v.format), body).await;
        }
        variants.clone_from(made);
        size = (*width, *height);
    }
    let ready = ReadyImage {
        format: imgest_core::domain::SourceFormat::Jpeg,
        width: size.0,
        height: size.1,
        original_bytes: original.len() as u64,
        variants,
        variant_set: app.service.imaging().unwrap().version().clone(),
        sha256: None,
        original_metadata: Some(app.service.imaging().unwrap().original_metadata()),
        thumbhash: None,
        signature: None,
    };
    let now = ports.clock.now();
    let ttl = std::time::Duration::from_secs(3600);
    ports
        .images
        .create_ready(id, &generation, ready, now, ttl, None)
        .await
        .unwrap()
        .unwrap();
    generation
}

/// Records made before placeholders get one from the backfill, and answer with it: from the
/// smallest whole variant's file when the variants are current (no new generation, no file
/// written), else by re-processing the original. A record signed before inner hashes were is
/// signed again the same way.
async fn the_backfill_adds_placeholders(app: &TestApp) {
    let original = sample("storm.jpg");
    let uploaded = app
        .service
        .upload_bytes(Bytes::from(original.clone()))
        .await
        .unwrap()
        .record;
    let id = ImageId::of_bytes(b"a photo stored before placeholders");
    let generation = legacy_record(app, &id, &original, Some(&uploaded)).await;
    let files = app.files_of(id.as_str()).await;
    let before = app.get(&format!("/v1/images/{id}")).await.json;
    assert!(before.get("thumbhash").is_none(), "{before}");
    assert_eq!(
        app.service.reprocess(&id).await.unwrap(),
        imgest_flows::backfill::Reprocessed::Done
    );
    let record = app.service.ports().images.get(&id).await.unwrap().unwrap();
    assert_eq!(record.generation, generation, "no new generation");
    assert_eq!(app.files_of(id.as_str()).await, files, "no file written");
    // Made of the variant's file (its pixels as decoded again): the upload's, or within
    // rounding of it.
    let (ours, upload) = (record.thumbhash().unwrap(), uploaded.thumbhash().unwrap());
    let apart = ours
        .as_bytes()
        .iter()
        .zip(upload.as_bytes())
        .filter(|(a, b)| a != b)
        .count();
    assert!(apart <= 3, "{ours:?} against the upload's {upload:?}");
    let after = app.get(&format!("/v1/images/{id}")).await.json;
    assert_close(app, &after, "storm.jpg").await;
    // Signed in the same pass, inner hash and all.
    assert!(record.signature().is_some_and(|s| s.inner.is_some()));
    assert_eq!(
        app.service.reprocess(&id).await.unwrap(),
        imgest_flows::backfill::Reprocessed::Current
    );

    // Signed before inner hashes and points were: signed again from the variant's file, in
    // place.
    let older_id = ImageId::of_bytes(b"a photo signed before inner hashes");
    let generation = legacy_record(app, &older_id, &original, Some(&uploaded)).await;
    let images = &app.service.ports().images;
    let older = imgest_core::domain::Signature {
        inner: None,
        points: None,
        ..uploaded.signature().unwrap().clone()
    };
    let thumbhash = uploaded.thumbhash().unwrap();
    assert!(
        images
            .set_thumbhash(&older_id, &generation, thumbhash)
            .await
            .unwrap()
    );
    assert!(
        images
            .set_signature(&older_id, &generation, &older)
            .await
            .unwrap()
    );
    let files = app.files_of(older_id.as_str()).await;
    assert_eq!(
        app.service.reprocess(&older_id).await.unwrap(),
        imgest_flows::backfill::Reprocessed::Done
    );
    let record = images.get(&older_id).await.unwrap().unwrap();
    assert_eq!(record.generation, generation, "no new generation");
    assert_eq!(
        app.files_of(older_id.as_str()).await,
        files,
        "no file written"
    );
    let signature = record.signature().unwrap();
    let (inner, uploaded_inner) = (
        signature.inner.unwrap(),
        uploaded.signature().unwrap().inner.unwrap(),
    );
    assert!(
        inner.distance(&uploaded_inner) <= 8,
        "{inner:?} against {uploaded_inner:?}"
    );
    // Its points too, from the same file (what finds a crop of it).
    assert!(
        signature.points().len() >= 8,
        "{} points",
        signature.points().len()
    );
    assert_eq!(
        app.service.reprocess(&older_id).await.unwrap(),
        imgest_flows::backfill::Reprocessed::Current
    );

    // No variant file to read it from: re-processed from the original.
    let bare = ImageId::of_bytes(&sample("ladybird.jpg"));
    let generation = legacy_record(app, &bare, &sample("ladybird.jpg"), None).await;
    assert_eq!(
        app.service.reprocess(&bare).await.unwrap(),
        imgest_flows::backfill::Reprocessed::Done
    );
    let record = app
        .service
        .ports()
        .images
        .get(&bare)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(record.generation, generation);
    let after = app.get(&format!("/v1/images/{bare}")).await.json;
    assert_close(app, &after, "ladybird.jpg").await;
}

#[tokio::test]
async fn the_backfill_adds_a_placeholder_to_an_older_record_on_the_embedded_backend() {
    the_backfill_adds_placeholders(&TestApp::start().await).await;
}

#[tokio::test]
async fn the_backfill_adds_a_placeholder_to_an_older_record_on_the_aws_adapters() {
    let Some(app) = TestApp::start_aws("placeholders by backfill", &[]).await else {
        return;
    };
    the_backfill_adds_placeholders(&app).await;
}
