//! Near-duplicates (`IMGEST_SIMILAR`): photos that are the same picture re-encoded and resized,
//! mirrored, padded, cropped or stamped with a shop's name are found across uploads and crawls, by the operator among every image
//! and by a seller or a partner only among its own; the upload of a new photo names its
//! near-duplicates under other clients' offers; an unrelated photo is never among them; a
//! collected image drops out. The same scenario on the embedded backend and on the AWS adapters.

#![allow(clippy::unwrap_used)]

use std::io::Cursor;

use image::imageops::{self, FilterType};
use image::{DynamicImage, ImageFormat, Rgb, RgbImage};
use serde_json::{Value, json};

use crate::support::identity::Identity;
use crate::support::{Body, TestApp, sample};
use imgest_core::domain::{ImageId, Signal};
use imgest_flows::similar::Scope;

fn jpeg(image: &RgbImage, quality: u8) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .encode_image(image)
        .unwrap();
    out.into_inner()
}

fn decoded(bytes: &[u8]) -> RgbImage {
    image::load_from_memory_with_format(bytes, ImageFormat::Jpeg)
        .unwrap()
        .to_rgb8()
}

/// The photo re-encoded at quality 60 and resized to 60 %.
fn reencoded(photo: &RgbImage) -> Vec<u8> {
    let (w, h) = photo.dimensions();
    let small = imageops::resize(photo, w * 6 / 10, h * 6 / 10, FilterType::Triangle);
    jpeg(&small, 60)
}

/// The photo with a 10 % white border around it.
fn padded(photo: &RgbImage) -> Vec<u8> {
    let (w, h) = photo.dimensions();
    let mut out = RgbImage::from_pixel(w + w / 5, h + h / 5, Rgb([255, 255, 255]));
    imageops::replace(&mut out, photo, i64::from(w / 10), i64::from(h / 10));
    jpeg(&out, 90)
}

/// The photo with a shop's name in its top left corner (dark strokes on a light box, a
/// sixteenth of the photo high, two fifths wide), the way sellers stamp photos.
fn stamped(photo: &RgbImage) -> Vec<u8> {
    let mut out = photo.clone();
    let (w, h) = photo.dimensions();
    let (x0, y0, bw, bh) = (w / 40, h / 40, w * 2 / 5, h / 16);
    for y in y0..y0 + bh {
        for x in x0..x0 + bw {
            let stroke = (x - x0) % 9 < 3 && (y - y0) % (bh / 2).max(1) > 1;
            out.put_pixel(
                x,
                y,
                Rgb(if stroke {
                    [20, 20, 20]
                } else {
                    [250, 250, 250]
                }),
            );
        }
    }
    jpeg(&out, 90)
}

/// The photo with 12 % of each side cut, most of it from the left and the bottom (no resize).
fn cropped(photo: &RgbImage) -> Vec<u8> {
    let (w, h) = photo.dimensions();
    let (cw, ch) = (w * 12 / 100, h * 12 / 100);
    let crop = imageops::crop_imm(photo, cw * 7 / 10, ch / 4, w - cw, h - ch).to_image();
    jpeg(&crop, 90)
}

struct Photos {
    original: Vec<u8>,
    cropped: Vec<u8>,
    reencoded: Vec<u8>,
    mirrored: Vec<u8>,
    padded: Vec<u8>,
    unrelated: Vec<u8>,
    /// The unrelated photo stamped: its whole hash is tens of bits off, its inner part's not.
    unrelated_stamped: Vec<u8>,
}

fn photos() -> Photos {
    let original = sample("dune.jpg");
    let pixels = decoded(&original);
    Photos {
        reencoded: reencoded(&pixels),
        mirrored: jpeg(&imageops::flip_horizontal(&pixels), 90),
        padded: padded(&pixels),
        cropped: cropped(&pixels),
        unrelated: sample("storm.jpg"),
        unrelated_stamped: stamped(&decoded(&sample("storm.jpg"))),
        original,
    }
}

async fn upload(app: &TestApp, token: &str, bytes: &[u8]) -> Value {
    let reply = app
        .call(
            "POST",
            "/v1/images",
            Some(token),
            Body::Bytes(bytes.to_vec(), "image/jpeg"),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.json);
    reply.json
}

/// The ids of `image`'s near-duplicates `token`'s caller sees, each with its match.
async fn similar(app: &TestApp, token: &str, image: &str) -> Vec<(String, Value)> {
    let reply = app
        .call(
            "GET",
            &format!("/v1/images/{image}/similar"),
            Some(token),
            Body::None,
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.json);
    assert_eq!(reply.json["searched"], true, "{}", reply.json);
    reply.json["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["image_id"].as_str().unwrap().to_owned(), m.clone()))
        .collect()
}

fn ids(matches: &[(String, Value)]) -> Vec<&str> {
    let mut ids: Vec<&str> = matches.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    ids
}

fn id_of(bytes: &[u8]) -> String {
    ImageId::of_bytes(bytes).to_string()
}

fn vars(identity: &Identity) -> Vec<(&'static str, String)> {
    let mut vars = identity.vars();
    vars.push(("IMGEST_SIMILAR", "report".into()));
    vars
}

pub(crate) async fn finds_near_duplicates_within_each_callers_images(
    app: &TestApp,
    identity: &Identity,
) {
    let p = photos();
    let seller_a = identity.seller("seller-a");
    let seller_b = identity.seller("seller-b");
    let acme = identity.partner("backend-a", "acme");
    let globex = identity.partner("backend-b", "globex");
    let operator = identity.token("ops", "imgest:operator", None);
    let original = id_of(&p.original);

    // A seller uploads the photo and its mirror image; acme's offer links the photo.
    let first = upload(app, &seller_a, &p.original).await;
    assert_eq!(first["near_duplicates"], json!([]), "nothing stored before");
    upload(app, &seller_a, &p.mirrored).await;
    let linked = app
        .call(
            "PUT",
            "/v1/offers/o1/photos",
            Some(&acme),
            Body::Json(json!({"image_ids": [original]})),
        )
        .await;
    assert_eq!(linked.status, 200, "{}", linked.json);

    // globex uploads a re-encoded, smaller copy: the answer names the photo acme's offer
    // links (for moderation), not the mirror image no offer links.
    let copy = upload(app, &globex, &p.reencoded).await;
    let reported = copy["near_duplicates"].as_array().unwrap();
    assert_eq!(reported.len(), 1, "{copy}");
    assert_eq!(reported[0]["image_id"], original.as_str());
    assert!(reported[0]["distance"].as_u64().unwrap() <= 31);
    // acme uploading the same kind of copy is told nothing: the match is its own offer's.
    let own = upload(app, &acme, &jpeg(&decoded(&p.reencoded), 75)).await;
    assert_eq!(own["near_duplicates"], json!([]), "{own}");
    let padded = upload(app, &seller_a, &p.padded).await;
    // A crop moves every hash: it is found by its points, and finds the photo it was cut from.
    let crop = upload(app, &seller_a, &p.cropped).await;
    let crop_id = crop["image_id"].as_str().unwrap();
    let of_crop = similar(app, &operator, crop_id).await;
    let to_original = of_crop.iter().find(|(id, _)| *id == original);
    let to_original = to_original.map(|(_, m)| m);
    assert_eq!(
        to_original.map(|m| &m["signal"]),
        Some(&json!("cropped")),
        "{of_crop:?}"
    );
    upload(app, &seller_b, &p.unrelated).await;
    // The other photo stamped with a shop's name: found by the inner parts' hashes alone.
    let stamped = upload(app, &seller_b, &p.unrelated_stamped).await;
    let of_unrelated = similar(app, &operator, &id_of(&p.unrelated)).await;
    assert_eq!(
        ids(&of_unrelated),
        vec![stamped["image_id"].as_str().unwrap()],
        "{of_unrelated:?}"
    );
    assert_eq!(of_unrelated[0].1["signal"], "inner", "{of_unrelated:?}");
    assert_eq!(of_unrelated[0].1["mirrored"], false, "{of_unrelated:?}");

    let copy_id = copy["image_id"].as_str().unwrap();
    // The operator sees every near-duplicate of the photo, and how each matched.
    let all = similar(app, &operator, &original).await;
    let want = {
        let mut want = vec![
            id_of(&p.mirrored),
            copy_id.to_owned(),
            own["image_id"].as_str().unwrap().to_owned(),
            padded["image_id"].as_str().unwrap().to_owned(),
            crop_id.to_owned(),
        ];
        want.sort_unstable();
        want
    };
    assert_eq!(ids(&all), want, "{all:?}");
    // Crops come after the hashes' matches.
    assert_eq!(
        all.last().map(|(id, _)| id.as_str()),
        Some(crop_id),
        "{all:?}"
    );
    for (id, m) in &all {
        let distance = m["distance"].as_u64().unwrap();
        assert!(distance <= 31, "{m}");
        let (signal, mirrored) = (m["signal"].as_str().unwrap(), m["mirrored"] == true);
        if *id == id_of(&p.mirrored) {
            assert_eq!((signal, mirrored), ("whole", true), "{m}");
        } else if Some(id.as_str()) == padded["image_id"].as_str() {
            assert_eq!((signal, mirrored), ("trimmed", false), "{m}");
        } else if id == crop_id {
            assert_eq!((signal, mirrored), ("cropped", false), "{m}");
            assert!(distance <= 6, "{m}");
        } else {
            assert_eq!((signal, mirrored), ("whole", false), "{m}");
        }
    }
    for unrelated in [&p.unrelated, &p.unrelated_stamped] {
        assert!(
            !ids(&all).contains(&id_of(unrelated).as_str()),
            "an unrelated photo is no near-duplicate"
        );
    }

    // Each caller sees only its own: seller-a its uploads, acme what its offers link and its
    // own uploads, globex its upload, seller-b nothing.
    let mut seller_a_sees = vec![
        original.clone(),
        id_of(&p.mirrored),
        padded["image_id"].as_str().unwrap().to_owned(),
        crop_id.to_owned(),
    ];
    seller_a_sees.sort_unstable();
    assert_eq!(ids(&similar(app, &seller_a, copy_id).await), seller_a_sees);
    let mut acme_sees = vec![
        original.clone(),
        own["image_id"].as_str().unwrap().to_owned(),
    ];
    acme_sees.sort_unstable();
    assert_eq!(ids(&similar(app, &acme, copy_id).await), acme_sees);
    assert_eq!(
        ids(&similar(app, &seller_b, copy_id).await),
        Vec::<&str>::new()
    );
    assert_eq!(ids(&similar(app, &globex, &original).await), vec![copy_id]);

    // The operator's command and the flow agree; an image collected drops out of lookups.
    let found = app
        .service
        .similar(&ImageId::parse(copy_id).unwrap(), &Scope::All)
        .await
        .unwrap();
    let signature = found_signature(&p.reencoded);
    assert!(
        found.buckets_read <= imgest_flows::similar::lookup_reads(&signature),
        "{} buckets",
        found.buckets_read
    );
    assert!(found.matches.iter().any(|m| m.signal == Signal::Trimmed));
    // A process without the pipeline (the one that settles crawls) finds the crop by the
    // points kept when it was stored in report mode.
    let undecoding =
        imgest_flows::Service::new(app.service.ports().clone(), app.service.policy().clone());
    let crop_record = app
        .service
        .image(&ImageId::parse(crop_id).unwrap())
        .await
        .unwrap();
    assert!(undecoding.imaging().is_err());
    let kept = undecoding.lookup_points(&crop_record).await.unwrap();
    assert!(
        kept.is_some(),
        "report mode keeps a new photo's lookup points"
    );
    let reported = undecoding.report_similar(&crop_record, None).await.unwrap();
    assert!(
        reported
            .iter()
            .any(|m| m.image_id.as_str() == original && m.signal == Signal::Cropped),
        "{reported:?}"
    );
    let unlinked = app
        .call("DELETE", "/v1/offers/o1", Some(&acme), Body::None)
        .await;
    assert_eq!(unlinked.status, 204, "{}", unlinked.json);
    app.advance_clock(app.settings.orphan_ttl * 2);
    let collected = app.gc().await;
    assert_eq!(collected.images_deleted, 8, "{collected:?}");
    let after = app
        .service
        .similar_to(&signature, None, None, &Scope::All)
        .await
        .unwrap();
    assert_eq!(after.matches, vec![], "every image was collected");
    assert_eq!(after.entries_read, 0, "GC removed their entries");
}

/// The signature the pipeline makes of `bytes`.
fn found_signature(bytes: &[u8]) -> imgest_core::domain::Signature {
    let pipeline = imgest_pipeline::Pipeline::new(imgest_pipeline::PipelineConfig::default());
    pipeline.process(bytes).unwrap().signature.unwrap()
}

/// A flat photo gets a signature that is not looked up with (its hash means nothing).
pub(crate) async fn a_flat_photo_is_not_searched(app: &TestApp, identity: &Identity) {
    let flat = jpeg(
        &DynamicImage::ImageRgb8(RgbImage::from_pixel(400, 300, Rgb([120, 130, 140]))).to_rgb8(),
        90,
    );
    let seller = identity.seller("seller-flat");
    let stored = upload(app, &seller, &flat).await;
    let id = stored["image_id"].as_str().unwrap();
    let reply = app
        .call(
            "GET",
            &format!("/v1/images/{id}/similar"),
            Some(&seller),
            Body::None,
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json["searched"], false, "{}", reply.json);
    let missing = app
        .call(
            "GET",
            &format!("/v1/images/{}/similar", "0".repeat(32)),
            Some(&seller),
            Body::None,
        )
        .await;
    assert_eq!(missing.status, 404);
    let bad = app
        .call(
            "GET",
            "/v1/images/not-an-id/similar",
            Some(&seller),
            Body::None,
        )
        .await;
    assert_eq!(bad.status, 400);
    let observer = identity.token("metrics", "imgest:metrics", None);
    let refused = app
        .call(
            "GET",
            &format!("/v1/images/{id}/similar"),
            Some(&observer),
            Body::None,
        )
        .await;
    assert_eq!(refused.status, 403);
}

async fn embedded() -> (TestApp, Identity) {
    let identity = Identity::new();
    let vars = vars(&identity);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    (TestApp::start_with(&vars).await, identity)
}

pub(crate) async fn on_aws(test: &str) -> Option<(TestApp, Identity)> {
    let identity = Identity::new();
    let vars = vars(&identity);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Some((TestApp::start_aws(test, &vars).await?, identity))
}

#[tokio::test]
async fn finds_near_duplicates_within_each_callers_images_on_the_embedded_backend() {
    let (app, identity) = embedded().await;
    finds_near_duplicates_within_each_callers_images(&app, &identity).await;
}

#[tokio::test]
async fn finds_near_duplicates_within_each_callers_images_on_aws() {
    let Some((app, identity)) = on_aws("similar on aws").await else {
        return;
    };
    finds_near_duplicates_within_each_callers_images(&app, &identity).await;
}

#[tokio::test]
async fn a_flat_photo_is_not_searched_on_the_embedded_backend() {
    let (app, identity) = embedded().await;
    a_flat_photo_is_not_searched(&app, &identity).await;
}

/// Links `image` to an offer of `client`'s, as its partner's change would.
async fn link_for(service: &imgest_flows::Service, client: &str, image: &str) {
    use imgest_core::domain::{ClientId, OfferId, OfferKey, Tenant};
    let offer = OfferKey::new(
        Tenant::Client(ClientId::parse(client).unwrap()),
        OfferId::parse("theirs").unwrap(),
    );
    let now = service.ports().clock.now();
    service
        .ports()
        .offers
        .set_photos(
            &offer,
            &[ImageId::parse(image).unwrap()],
            now,
            std::time::Duration::from_secs(3600),
        )
        .await
        .unwrap();
}

/// Each of a crawl's photos (its copies, in order) is stored and its result names the
/// near-duplicate another client's offer links.
fn assert_reports(result: &Value, copies: &[&[u8]], original: &str) {
    for (i, copy) in copies.iter().enumerate() {
        let photo = &result["photos"][i];
        assert_eq!(photo["status"], "ok", "{result}");
        assert_eq!(photo["image_id"], id_of(copy).as_str());
        let reported = photo["near_duplicates"].as_array().unwrap();
        assert_eq!(reported.len(), 1, "photo {i}: {result}");
        assert_eq!(reported[0]["image_id"], original);
        assert!(reported[0]["distance"].as_u64().unwrap() <= 31);
    }
}

#[tokio::test]
async fn a_crawled_photos_result_names_its_near_duplicates_on_the_embedded_backend() {
    use crate::support::crawl::CrawlApp;
    use imgest_hosts::{Answer, PartnerHost};
    let app = CrawlApp::start(&[("IMGEST_SIMILAR", "report")]).await;
    let p = photos();
    let original = id_of(&p.original);
    let stored = app
        .client
        .post(app.url("/v1/images"))
        .body(p.original.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), 201);
    link_for(app.crawler.service(), "globex", &original).await;
    let host = PartnerHost::start([
        ("/copy.jpg", Answer::photo(p.reencoded.clone())),
        ("/crop.jpg", Answer::photo(p.cropped.clone())),
    ])
    .await
    .unwrap();
    app.crawl_settled(
        "acme",
        "o1",
        &[host.url("/copy.jpg"), host.url("/crop.jpg")],
    )
    .await;
    let results = app.results().await;
    assert_eq!(results.len(), 1, "{results:?}");
    assert_reports(&results[0], &[&p.reencoded, &p.cropped], &original);
}

#[tokio::test]
async fn a_crawled_photos_result_names_its_near_duplicates_on_aws() {
    use crate::crawl_aws::{CrawlOnAws, fetch_then_process, intake_event, take};
    use imgest_hosts::{Answer, PartnerHost};
    let Some(CrawlOnAws {
        sqs,
        urls,
        app,
        crawler,
        ..
    }) = CrawlOnAws::start_with("similar crawl on aws", &[("IMGEST_SIMILAR", "report")]).await
    else {
        return;
    };
    let p = photos();
    let original = app.upload_ok(&p.original).await;
    link_for(&app.service, "globex", &original).await;
    let host = PartnerHost::start([
        ("/copy.jpg", Answer::photo(p.reencoded.clone())),
        ("/crop.jpg", Answer::photo(p.cropped.clone())),
    ])
    .await
    .unwrap();
    let request = json!({"client_id": "acme", "offer_id": "o1",
        "urls": [host.url("/copy.jpg"), host.url("/crop.jpg")]});
    let response =
        imgest_lambda_crawl::intake::handle(&crawler, intake_event("intake-1", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    fetch_then_process(&sqs, &urls, &crawler, 2).await;
    let results = take(&sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    assert_reports(&result, &[&p.reencoded, &p.cropped], &original);
}
