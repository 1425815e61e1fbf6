//! A dedup hit is trusted only when the SHA-256 agrees with the MD5: an MD5 collision (two
//! different photos with one MD5) is refused (`409 hash_collision`, counted, never linked);
//! a record stored before strong hashes adopts one from its original on its first hit.
//! Real colliding pairs are not needed: the stored record is given another SHA-256.

#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use imgest_core::domain::{BlobKey, ContentHash, Generation, ImageId, VariantSetVersion};
use imgest_core::ports::ReadyImage;
use imgest_hosts::{Answer, PartnerHost};

use crate::support::crawl::CrawlApp;
use crate::support::{TestApp, fixture, sample};

/// A ready record of `id` whose original holds `original` and whose SHA-256 is `sha256`
/// (`None`: a record written before strong hashes), as if stored earlier.
async fn stored(
    service: &imgest_flows::Service,
    id: &ImageId,
    original: &[u8],
    sha256: Option<ContentHash>,
) {
    let ports = service.ports();
    let generation = Generation::random();
    ports
        .blobs
        .put(
            &BlobKey::original(id, &generation),
            Bytes::copy_from_slice(original),
            "image/jpeg",
        )
        .await
        .unwrap();
    let ready = ReadyImage {
        format: imgest_core::domain::SourceFormat::Jpeg,
        width: 10,
        height: 10,
        original_bytes: original.len() as u64,
        variants: Vec::new(),
        variant_set: VariantSetVersion::of(&[b"earlier"]),
        sha256,
        original_metadata: None,
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
}

#[tokio::test]
async fn an_upload_whose_md5_names_another_photo_is_refused_as_a_collision() {
    let app = TestApp::start().await;
    let photo = fixture("photo.jpg");
    let id = ImageId::of_bytes(&photo);
    // The attacker's picture, stored first under the same MD5.
    stored(
        &app.service,
        &id,
        b"the attacker's picture",
        Some(ContentHash::of_bytes(b"the attacker's picture")),
    )
    .await;
    let before = app.service.ports().images.get(&id).await.unwrap();

    let r = app.upload(&photo).await;
    assert_eq!((r.status, r.kind()), (409, "hash_collision"), "{}", r.json);
    assert_eq!(app.service.counts().hash_collisions, 1);
    assert_eq!(app.service.counts().uploads_deduplicated, 0);
    let after = app.service.ports().images.get(&id).await.unwrap().unwrap();
    assert_eq!(
        after.generation,
        before.unwrap().generation,
        "nothing replaced"
    );
    // Never linked: an offer naming the id is the attacker's picture only if the offer says
    // so; the upload gave the seller no id to link.
    assert!(r.json["image_id"].is_null(), "{}", r.json);
}

#[tokio::test]
async fn a_record_stored_before_strong_hashes_adopts_one_on_its_first_hit() {
    let app = TestApp::start().await;
    let photo = fixture("photo.jpg");
    let id = ImageId::of_bytes(&photo);
    stored(&app.service, &id, &photo, None).await;

    let r = app.upload(&photo).await;
    assert_eq!(
        (r.status, r.json["deduplicated"].clone()),
        (200, true.into()),
        "{}",
        r.json
    );
    let record = app.service.ports().images.get(&id).await.unwrap().unwrap();
    assert_eq!(record.sha256(), Some(&ContentHash::of_bytes(&photo)));

    // One whose original is other bytes is a collision, found from the original.
    let other = fixture("small.png");
    let other_id = ImageId::of_bytes(&other);
    stored(&app.service, &other_id, b"not these bytes", None).await;
    let r = app.upload(&other).await;
    assert_eq!((r.status, r.kind()), (409, "hash_collision"), "{}", r.json);
}

#[tokio::test]
async fn a_crawled_photo_whose_md5_names_another_photo_fails_as_a_collision() {
    let app = CrawlApp::start(&[]).await;
    let photo = Bytes::from(sample("dune.jpg"));
    let id = ImageId::of_bytes(&photo);
    stored(
        app.crawler.service(),
        &id,
        b"planted",
        Some(ContentHash::of_bytes(b"planted")),
    )
    .await;
    let host = PartnerHost::start([("/a.jpg", Answer::photo(photo))])
        .await
        .unwrap();

    let settled = app
        .crawl_settled("acme", "collided", &[host.url("/a.jpg")])
        .await;
    assert_eq!(settled[0]["status"], "failed", "{settled:?}");
    assert_eq!(settled[0]["error"]["kind"], "hash_collision", "{settled:?}");
    assert!(app.photo_ids("collided").await.is_empty(), "never linked");
}
