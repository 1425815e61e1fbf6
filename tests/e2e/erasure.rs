//! Privacy and erasure on both backends (the embedded one, and the AWS adapters on the
//! emulator, in a versioned bucket as the template's): stored originals carry no location;
//! a seller's erasure takes the content only when nothing else references it; an operator's
//! purge takes it from every client's offers and blocks it; a re-upload racing an erasure ends
//! kept or erased, never half.

#![allow(clippy::unwrap_used)]

use std::io::Cursor;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use exif::{Context, Field, In, Tag, Value as ExifValue};
use imgest_core::domain::{BlobKey, ContentHash, ImageId, OriginalMetadata};
use imgest_core::ports::TaskQueue;
use imgest_crawl::RESULTS_QUEUE;
use imgest_flows::FlowError;
use serde_json::{Value, json};

use crate::support::identity::Identity;
use crate::support::{AwsStorage, Body, TestApp, fixture};

/// `photo.jpg` with EXIF that locates and identifies its seller (GPS, a serial number, an
/// owner), orientation 6, and `salt` in a comment so each test has bytes of its own.
fn photo_with_gps(salt: &str) -> Vec<u8> {
    let fields = [
        (Tag::Orientation, ExifValue::Short(vec![6])),
        (Tag::Model, ExifValue::Ascii(vec![b"Phone 12".to_vec()])),
        (
            Tag::BodySerialNumber,
            ExifValue::Ascii(vec![b"SN-0042".to_vec()]),
        ),
        (
            Tag::CameraOwnerName,
            ExifValue::Ascii(vec![b"Jane Seller".to_vec()]),
        ),
        (Tag::GPSLatitudeRef, ExifValue::Ascii(vec![b"N".to_vec()])),
        (
            Tag::GPSLatitude,
            ExifValue::Rational(vec![(52, 1).into(), (31, 1).into(), (1234, 100).into()]),
        ),
        (Tag::GPSLongitudeRef, ExifValue::Ascii(vec![b"E".to_vec()])),
        (
            Tag::GPSLongitude,
            ExifValue::Rational(vec![(13, 1).into(), (24, 1).into(), (5678, 100).into()]),
        ),
    ]
    .map(|(tag, value)| Field {
        tag,
        ifd_num: In::PRIMARY,
        value,
    });
    let mut writer = exif::experimental::Writer::new();
    for f in &fields {
        writer.push_field(f);
    }
    let mut tiff = Cursor::new(Vec::new());
    writer.write(&mut tiff, false).unwrap();
    let block = [&b"Exif\0\0"[..], &tiff.into_inner()].concat();
    let segment = |marker: u8, body: &[u8]| {
        let mut s = vec![0xFF, marker];
        s.extend_from_slice(&u16::try_from(body.len() + 2).unwrap().to_be_bytes());
        s.extend_from_slice(body);
        s
    };
    let photo = fixture("photo.jpg");
    [
        &photo[..2],
        &segment(0xE1, &block),
        &segment(0xFE, salt.as_bytes()),
        &photo[2..],
    ]
    .concat()
}

fn gps_fields(bytes: &[u8]) -> Vec<Tag> {
    exif::Reader::new()
        .read_from_container(&mut Cursor::new(bytes))
        .map(|e| {
            e.fields()
                .filter(|f| {
                    f.tag.context() == Context::Gps
                        || [Tag::BodySerialNumber, Tag::CameraOwnerName].contains(&f.tag)
                })
                .map(|f| f.tag)
                .collect()
        })
        .unwrap_or_default()
}

fn orientation(bytes: &[u8]) -> Option<u32> {
    let read = exif::Reader::new()
        .read_from_container(&mut Cursor::new(bytes))
        .ok()?;
    read.get_field(Tag::Orientation, In::PRIMARY)?
        .value
        .get_uint(0)
}

/// The stored original of `id`, and its record's variants made again from it.
async fn stored_original(app: &TestApp, id: &str) -> Vec<u8> {
    let id = ImageId::parse(id).unwrap();
    let record = app.service.ports().images.get(&id).await.unwrap().unwrap();
    let key = BlobKey::original(&id, &record.generation);
    app.service.ports().blobs.get(&key).await.unwrap().to_vec()
}

/// The originals of an uploaded and of a crawled photo with GPS keep none of it, keep their
/// orientation and render the same (the variants made from them are the stored ones); the id
/// and the strong hash stay those of the bytes sent.
async fn originals_keep_no_location(app: &TestApp) {
    for (how, sent) in [
        ("uploaded", photo_with_gps("upload")),
        ("crawled", photo_with_gps("crawl")),
    ] {
        assert!(!gps_fields(&sent).is_empty());
        let id = ImageId::of_bytes(&sent);
        if how == "uploaded" {
            assert_eq!(app.upload_ok(&sent).await, id.to_string());
        } else {
            // The crawl's store step, as a downloaded photo takes it.
            let stored = app
                .service
                .store_fetched(id.clone(), Bytes::from(sent.clone()), None)
                .await
                .unwrap();
            assert!(!stored.deduplicated);
        }
        let original = stored_original(app, id.as_str()).await;
        assert_eq!(gps_fields(&original), Vec::<Tag>::new(), "{how}");
        assert_eq!(orientation(&original), Some(6), "{how}");
        let record = app.service.ports().images.get(&id).await.unwrap().unwrap();
        assert_eq!(
            record.sha256(),
            Some(&ContentHash::of_bytes(&sent)),
            "{how}"
        );
        assert_eq!(
            record.original_metadata(),
            Some(OriginalMetadata::StripPrivate)
        );
        // Rendering unchanged: the variants made again from the stored original are the
        // stored variants, byte for byte (orientation and colours included).
        let again = app.service.imaging().unwrap().process(&original).unwrap();
        for v in &again.variants {
            let key = BlobKey::variant(&id, &record.generation, &v.name, v.format);
            let stored = app.service.ports().blobs.get(&key).await.unwrap();
            assert_eq!(stored.as_ref(), &v.bytes[..], "{how}: {}", v.name);
            assert_eq!(gps_fields(&stored), Vec::<Tag>::new());
        }
        assert_eq!((again.width, again.height), (1000, 1500), "{how}: turned");
        // The same bytes again are a dedup hit on the id of the bytes sent.
        let hit = app.upload(&sent).await;
        assert_eq!(
            (hit.status, hit.json["deduplicated"].as_bool()),
            (200, Some(true))
        );
    }
}

#[tokio::test]
async fn stored_originals_keep_no_location_on_the_embedded_backend() {
    originals_keep_no_location(&TestApp::start().await).await;
}

#[tokio::test]
async fn stored_originals_keep_no_location_on_the_aws_adapters() {
    let Some(app) = TestApp::start_aws("originals keep no location", &[]).await else {
        return;
    };
    originals_keep_no_location(&app).await;
}

/// The app on a versioned bucket (as the template's) on the emulator, with a results queue
/// of its own (its URL returned too), or on the embedded backend; with token checks.
async fn app_with(identity: &Identity, aws: bool, test: &str) -> Option<(TestApp, String)> {
    let mut vars = identity.vars();
    if !aws {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        return Some((TestApp::start_with(&vars).await, String::new()));
    }
    let config = imgest_testing::aws::sdk_config(test).await?;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let (results, _) = imgest_testing::aws::queue(&sqs, "erasure-results").await;
    vars.push(("IMGEST_QUEUES", format!("results={results}")));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let storage = AwsStorage::create(&config).await;
    storage
        .s3
        .put_bucket_versioning()
        .bucket(&storage.bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    Some((
        TestApp::start_aws_in(&vars, (storage.bucket, storage.table)).await,
        results,
    ))
}

/// `POST /v1/images` as the bearer of `token`.
async fn upload_with(app: &TestApp, token: &str, bytes: &[u8]) -> crate::support::Reply {
    app.call(
        "POST",
        "/v1/images",
        Some(token),
        Body::Bytes(bytes.to_vec(), "image/jpeg"),
    )
    .await
}

async fn upload_ok_with(app: &TestApp, token: &str, bytes: &[u8]) -> String {
    let r = upload_with(app, token, bytes).await;
    assert!(
        r.status == 201 || r.status == 200,
        "{} {}",
        r.status,
        r.json
    );
    r.json["image_id"].as_str().unwrap().to_owned()
}

/// Waits until `done` answers true (every 50 ms), for at most 20 s.
async fn until<F, Fut>(what: &str, done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !done().await {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never happened: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Nothing of `id` is left: no record, no file, and (on the emulator) no version or marker.
pub(crate) async fn gone_everywhere(app: &TestApp, id: &str) -> bool {
    let image = ImageId::parse(id).unwrap();
    if app
        .service
        .ports()
        .images
        .get(&image)
        .await
        .unwrap()
        .is_some()
        || !app.files_of(id).await.is_empty()
    {
        return false;
    }
    let Some((bucket, _)) = &app.aws else {
        return true;
    };
    let config = imgest_testing::aws::sdk_config("versions").await.unwrap();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    for area in ["public", "originals"] {
        let out = s3
            .list_object_versions()
            .bucket(bucket)
            .prefix(format!("{area}/{}/{id}/", image.shard()))
            .send()
            .await
            .unwrap();
        if !out.versions().is_empty() || !out.delete_markers().is_empty() {
            return false;
        }
    }
    true
}

async fn receipts(app: &TestApp, id: &str) -> Vec<imgest_flows::erase::Receipt> {
    let id = ImageId::parse(id).unwrap();
    app.service.erasure_status(&id).await.unwrap().receipts
}

async fn sellers_erasures(aws: bool) {
    let identity = Identity::new();
    let Some((app, _)) = app_with(&identity, aws, "sellers' erasures").await else {
        return;
    };
    let (ann, bob) = (identity.seller("ann"), identity.seller("bob"));
    let partner = identity.partner("shop", "acme");
    let upload = |token: String, bytes: Vec<u8>| {
        let app = &app;
        async move {
            let r = app
                .call(
                    "POST",
                    "/v1/images",
                    Some(&token),
                    Body::Bytes(bytes, "image/jpeg"),
                )
                .await;
            assert!(
                r.status == 201 || r.status == 200,
                "{} {}",
                r.status,
                r.json
            );
            (
                r.json["image_id"].as_str().unwrap().to_owned(),
                r.json["variants"]["large"]["url"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        }
    };
    let erase = |token: String, id: String| {
        let app = &app;
        async move {
            app.call(
                "DELETE",
                &format!("/v1/images/{id}"),
                Some(&token),
                Body::None,
            )
            .await
        }
    };

    // Ann's own photo, referenced by nothing else: gone at once, everywhere.
    let (own, url) = upload(ann.clone(), photo_with_gps("ann's own")).await;
    assert_eq!(app.get_bytes(&url).await.0, 200);
    let r = erase(bob.clone(), own.clone()).await;
    assert_eq!((r.status, r.kind()), (404, "not_uploaded"), "not Bob's");
    let r = erase(ann.clone(), own.clone()).await;
    assert_eq!(
        (r.status, r.json["status"].as_str()),
        (200, Some("erased")),
        "{}",
        r.json
    );
    until("Ann's photo erased everywhere", || {
        gone_everywhere(&app, &own)
    })
    .await;
    assert_eq!(app.get_bytes(&url).await.0, 404);
    let r = app
        .call("GET", &format!("/v1/images/{own}"), Some(&ann), Body::None)
        .await;
    assert_eq!(r.status, 404);
    until("its receipt", || async {
        !receipts(&app, &own).await.is_empty()
    })
    .await;
    let receipt = &receipts(&app, &own).await[0];
    assert_eq!(receipt.files, 4, "{receipt:?}");
    assert_eq!(receipt.uploaders_removed, 1);
    assert_eq!(receipt.generations.len(), 1);

    // The same bytes uploaded by Ann and Bob: Ann's erasure leaves it to Bob; Bob's takes it.
    let shared = photo_with_gps("shared");
    let (both, url) = upload(ann.clone(), shared.clone()).await;
    upload(bob.clone(), shared).await;
    let r = erase(ann.clone(), both.clone()).await;
    assert_eq!(
        (r.json["status"].as_str(), r.json["uploaders"].as_u64()),
        (Some("kept"), Some(1)),
        "{}",
        r.json
    );
    assert_eq!(app.get_bytes(&url).await.0, 200, "still Bob's");
    assert_eq!(
        erase(ann.clone(), both.clone()).await.kind(),
        "not_uploaded"
    );
    let r = erase(bob.clone(), both.clone()).await;
    assert_eq!(r.json["status"].as_str(), Some("erased"), "{}", r.json);
    until("the shared photo erased", || gone_everywhere(&app, &both)).await;

    // Linked by an offer: kept until the offer drops it, then erased at once.
    let (linked, url) = upload(ann.clone(), photo_with_gps("linked")).await;
    let set = |ids: Vec<String>| {
        let app = &app;
        let partner = partner.clone();
        async move {
            app.call(
                "PUT",
                "/v1/offers/car-1/photos",
                Some(&partner),
                Body::Json(json!({ "image_ids": ids })),
            )
            .await
        }
    };
    assert_eq!(set(vec![linked.clone()]).await.status, 200);
    let r = erase(ann.clone(), linked.clone()).await;
    assert_eq!(
        (r.json["status"].as_str(), r.json["awaiting"].as_bool()),
        (Some("kept"), Some(true)),
        "{}",
        r.json
    );
    assert_eq!(app.get_bytes(&url).await.0, 200, "the offer still shows it");
    assert_eq!(set(Vec::new()).await.status, 200);
    until("the dropped photo erased", || {
        gone_everywhere(&app, &linked)
    })
    .await;
    assert_eq!(app.get_bytes(&url).await.0, 404);
}

#[tokio::test]
async fn a_sellers_erasure_takes_only_what_nothing_else_references_on_the_embedded_backend() {
    sellers_erasures(false).await;
}

#[tokio::test]
async fn a_sellers_erasure_takes_only_what_nothing_else_references_on_the_aws_adapters() {
    sellers_erasures(true).await;
}

async fn operator_purge(aws: bool) {
    let identity = Identity::new();
    let Some((app, results_url)) = app_with(&identity, aws, "operator purge").await else {
        return;
    };
    let sam = identity.seller("sam");
    let bytes = photo_with_gps("purged");
    let id = upload_ok_with(&app, &sam, &bytes).await;
    let other = upload_ok_with(&app, &sam, &fixture("small.png")).await;
    for (client, offer) in [("acme", "a-1"), ("globex", "g-7")] {
        let r = app
            .call(
                "PUT",
                &format!("/v1/offers/{offer}/photos"),
                Some(&identity.partner("shop", client)),
                Body::Json(json!({ "image_ids": [id.clone(), other.clone()] })),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.json);
    }
    let image = ImageId::parse(&id).unwrap();
    let outcome = app
        .service
        .purge(&image, true, Some("court order".into()))
        .await
        .unwrap();
    assert!(matches!(
        outcome,
        imgest_flows::erase::Erasure::Erased { .. }
    ));
    until("purged everywhere", || gone_everywhere(&app, &id)).await;
    for (client, offer) in [("acme", "a-1"), ("globex", "g-7")] {
        let r = app
            .call(
                "GET",
                &format!("/v1/offers/{offer}/photos"),
                Some(&identity.partner("shop", client)),
                Body::None,
            )
            .await;
        assert_eq!(
            r.photo_ids(),
            std::slice::from_ref(&other),
            "{client}'s offer keeps its other photo"
        );
    }
    until("the receipt", || async {
        !receipts(&app, &id).await.is_empty()
    })
    .await;
    let receipt = &receipts(&app, &id).await[0];
    assert_eq!(
        (
            receipt.offers_unlinked,
            receipt.clients_told.len(),
            receipt.blocked
        ),
        (2, 2, true),
        "{receipt:?}"
    );
    {
        let told = match app.service.ports().queue.clone() {
            Some(queue) => results(queue.as_ref(), &app).await,
            None => sqs_results(&results_url).await,
        };
        let mut clients: Vec<&str> = told
            .iter()
            .filter(|m| m["event"] == "photo_erased" && m["image_id"] == id.as_str())
            .map(|m| m["client_id"].as_str().unwrap())
            .collect();
        clients.sort_unstable();
        assert_eq!(clients, ["acme", "globex"], "{told:?}");
        assert!(
            told.iter()
                .all(|m| m["event"] != "photo_erased" || m["reason"] == "court order")
        );
    }
    // Blocked: the same bytes are refused, uploaded or crawled.
    let r = upload_with(&app, &sam, &bytes).await;
    assert_eq!((r.status, r.kind()), (410, "erased"), "{}", r.json);
    let crawled = app
        .service
        .store_fetched(image.clone(), Bytes::from(bytes.clone()), None)
        .await;
    assert!(matches!(crawled, Err(FlowError::Erased(_))), "{crawled:?}");
    assert!(gone_everywhere(&app, &id).await);
}

/// The messages on the emulator's queue at `url`.
async fn sqs_results(url: &str) -> Vec<Value> {
    let config = imgest_testing::aws::sdk_config("results").await.unwrap();
    let sqs = aws_sdk_sqs::Client::new(&config);
    let mut got = Vec::new();
    loop {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        let messages = out.messages.unwrap_or_default();
        if messages.is_empty() {
            return got;
        }
        got.extend(
            messages
                .iter()
                .map(|m| serde_json::from_str(m.body().unwrap()).unwrap()),
        );
    }
}

async fn results(queue: &dyn TaskQueue, app: &TestApp) -> Vec<Value> {
    let now = app.service.ports().clock.now();
    let batch = queue
        .receive(RESULTS_QUEUE, now, 100, Duration::from_secs(30))
        .await
        .unwrap();
    batch
        .iter()
        .map(|d| serde_json::from_str(&d.payload).unwrap())
        .collect()
}

#[tokio::test]
async fn an_operator_purge_unlinks_every_clients_offer_erases_and_blocks_on_the_embedded_backend() {
    operator_purge(false).await;
}

#[tokio::test]
async fn an_operator_purge_unlinks_every_clients_offer_erases_and_blocks_on_the_aws_adapters() {
    operator_purge(true).await;
}

/// A record and its files agree: the record's files all exist, or there is no record and no
/// file of it (erased).
async fn whole_or_gone(app: &TestApp, id: &str) -> &'static str {
    let image = ImageId::parse(id).unwrap();
    match app.service.ports().images.get(&image).await.unwrap() {
        Some(record) if record.is_live(app.service.ports().clock.now()) => {
            for key in record.file_keys() {
                assert!(
                    app.service.ports().blobs.get(&key).await.is_ok(),
                    "half: {key} of a live record is gone"
                );
            }
            "kept"
        }
        Some(record) => panic!("half: a record left expired by an erasure: {record:?}"),
        None => {
            assert!(
                gone_everywhere(app, id).await,
                "half: files without a record"
            );
            "erased"
        }
    }
}

/// Erasures racing uploads of the same bytes: a seller's erasure against another seller's
/// upload ends kept (the upload's); a blocked purge against an upload ends erased and
/// refused, or (the upload first) kept and then erased by the purge's next round.
async fn races(aws: bool) {
    let identity = Identity::new();
    let Some((app, _)) = app_with(&identity, aws, "erasure races").await else {
        return;
    };
    let app = Arc::new(app);
    let (ann, bob) = (identity.seller("ann"), identity.seller("bob"));
    for round in 0..4 {
        let bytes = photo_with_gps(&format!("race {round}"));
        let r = app
            .call(
                "POST",
                "/v1/images",
                Some(&ann),
                Body::Bytes(bytes.clone(), "image/jpeg"),
            )
            .await;
        let id = r.json["image_id"].as_str().unwrap().to_owned();
        let erase = {
            let (app, ann, id) = (Arc::clone(&app), ann.clone(), id.clone());
            tokio::spawn(async move {
                app.call(
                    "DELETE",
                    &format!("/v1/images/{id}"),
                    Some(&ann),
                    Body::None,
                )
                .await
                .status
            })
        };
        let upload = {
            let (app, bob, bytes) = (Arc::clone(&app), bob.clone(), bytes.clone());
            tokio::spawn(async move {
                app.call(
                    "POST",
                    "/v1/images",
                    Some(&bob),
                    Body::Bytes(bytes, "image/jpeg"),
                )
                .await
                .status
            })
        };
        let (erased, uploaded) = (erase.await.unwrap(), upload.await.unwrap());
        assert!(matches!(uploaded, 200 | 201), "round {round}: {uploaded}");
        assert_eq!(erased, 200);
        until("the erasure's files settled", || async {
            app.service.erase_pending().await.is_ok()
        })
        .await;
        assert_eq!(
            whole_or_gone(&app, &id).await,
            "kept",
            "round {round}: Bob's upload"
        );
    }
    for round in 0..4 {
        let bytes = photo_with_gps(&format!("purge race {round}"));
        let id = upload_ok_with(&app, &ann, &bytes).await;
        let image = ImageId::parse(&id).unwrap();
        let purge = {
            let app = Arc::clone(&app);
            tokio::spawn(async move { app.service.purge(&image, true, None).await })
        };
        let upload = {
            let (app, bob, bytes) = (Arc::clone(&app), bob.clone(), bytes.clone());
            tokio::spawn(async move {
                app.call(
                    "POST",
                    "/v1/images",
                    Some(&bob),
                    Body::Bytes(bytes, "image/jpeg"),
                )
                .await
                .status
            })
        };
        purge.await.unwrap().unwrap();
        let uploaded = upload.await.unwrap();
        assert!(
            matches!(uploaded, 200 | 201 | 410),
            "round {round}: {uploaded}"
        );
        until("the purge's files gone", || gone_everywhere(&app, &id)).await;
        assert_eq!(whole_or_gone(&app, &id).await, "erased", "round {round}");
        let again = upload_with(&app, &bob, &bytes).await;
        assert_eq!(again.status, 410, "round {round}: refused from now on");
    }
}

#[tokio::test]
async fn an_upload_racing_an_erasure_ends_kept_or_erased_never_half_on_the_embedded_backend() {
    races(false).await;
}

#[tokio::test]
async fn an_upload_racing_an_erasure_ends_kept_or_erased_never_half_on_the_aws_adapters() {
    races(true).await;
}

/// Originals stored as sent (before stripping, or under `keep`) are rewritten by the backfill
/// under the configured policy: a new generation, the record switched to it, the old one left
/// to the sweep; the strong hash stays the bytes sent's.
async fn backfill_rewrites_originals(app: &TestApp) {
    let sent = photo_with_gps("kept as sent");
    let id = ImageId::of_bytes(&sent);
    let mut keeping = app.pipeline_config();
    keeping.original_metadata = OriginalMetadata::Keep;
    let service = |config: imgest_pipeline::PipelineConfig| {
        app.service_over(app.service.ports().clone(), config)
    };
    let kept = service(keeping)
        .upload_bytes(Bytes::from(sent.clone()))
        .await
        .unwrap();
    let before = kept.record.generation.clone();
    assert_eq!(
        kept.record.original_metadata(),
        Some(OriginalMetadata::Keep)
    );
    assert!(!gps_fields(&stored_original(app, id.as_str()).await).is_empty());
    // A deployment that strips: the backfill rewrites the original, once.
    let stripping = service(app.pipeline_config());
    assert_eq!(
        stripping.reprocess(&id).await.unwrap(),
        imgest_flows::backfill::Reprocessed::Done
    );
    let record = app.service.ports().images.get(&id).await.unwrap().unwrap();
    assert_ne!(record.generation, before);
    assert_eq!(
        record.previous.as_ref().map(|p| &p.generation),
        Some(&before)
    );
    assert_eq!(
        record.original_metadata(),
        Some(OriginalMetadata::StripPrivate)
    );
    assert_eq!(record.sha256(), Some(&ContentHash::of_bytes(&sent)));
    let original = stored_original(app, id.as_str()).await;
    assert_eq!(gps_fields(&original), Vec::<Tag>::new());
    assert_eq!(orientation(&original), Some(6));
    assert_eq!(
        stripping.reprocess(&id).await.unwrap(),
        imgest_flows::backfill::Reprocessed::Current
    );
}

#[tokio::test]
async fn the_backfill_rewrites_existing_originals_on_the_embedded_backend() {
    backfill_rewrites_originals(&TestApp::start().await).await;
}

#[tokio::test]
async fn the_backfill_rewrites_existing_originals_on_the_aws_adapters() {
    let Some(app) = TestApp::start_aws("backfill rewrites originals", &[]).await else {
        return;
    };
    backfill_rewrites_originals(&app).await;
}
