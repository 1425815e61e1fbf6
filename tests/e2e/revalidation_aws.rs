//! What spares a download's body, on the AWS adapters (the URL records on DynamoDB, the tasks on
//! SQS, through the functions' handlers), as on the embedded backend: a trusted host's hash
//! header naming a stored photo, a `304` to the validators a URL record keeps, and an offer
//! re-sent unchanged past the URL window, answered at once and revalidated behind its answer.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::Bytes;
use imgest_core::domain::ImageId;
use imgest_crawl::{Crawler, Processing};
use imgest_hosts::{Answer, PartnerHost};
use serde_json::json;

use crate::crawl_aws::{CrawlOnAws, drain, take};
use crate::retries_aws::{fetch, only, process};
use crate::support::sample;

fn photo(name: &str) -> Bytes {
    Bytes::from(sample(name))
}

fn id_of(bytes: &[u8]) -> String {
    ImageId::of_bytes(bytes).to_string()
}

/// Sends `urls` for `offer` through the intake handler.
async fn intake(crawler: &Crawler, id: &str, offer: &str, urls: &[String]) {
    let request = json!({"client_id": "acme", "offer_id": offer, "urls": urls});
    crate::retries_aws::intake(crawler, id, &request).await;
}

#[tokio::test]
async fn a_trusted_hosts_hash_header_naming_a_stored_photo_settles_from_dynamodb_unread() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("hash header on aws").await
    else {
        return;
    };
    let crawler = app.crawler(
        Processing::Handoff,
        &[("IMGEST_HASH_HEADERS", "127.0.0.1=etag")],
    );
    let (known, unknown) = (photo("dune.jpg"), photo("storm.jpg"));
    let host = PartnerHost::start(crate::crawl::hash_header_answers(&known, &unknown))
        .await
        .unwrap();
    intake(&crawler, "m-1", "original", &[host.url("/a.jpg")]).await;
    fetch(&crawler, take(&sqs, &urls["fetch-0"], 1).await).await;
    process(&crawler, take(&sqs, &urls["process"], 1).await).await;
    take(&sqs, &urls["results"], 1).await;

    // Another instance, which never saw the photo: the header names it in the table.
    let other = app.crawler(
        Processing::Handoff,
        &[("IMGEST_HASH_HEADERS", "127.0.0.1=etag")],
    );
    let mirrored = [host.url("/mirror.jpg"), host.url("/new.jpg")];
    intake(&other, "m-2", "mirrored", &mirrored).await;
    fetch(&other, take(&sqs, &urls["fetch-0"], 2).await).await;
    process(&other, take(&sqs, &urls["process"], 1).await).await;
    let result = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(
        result["photos"][0]["image_id"],
        id_of(&known).as_str(),
        "{result}"
    );
    assert_eq!(
        result["photos"][1]["image_id"],
        id_of(&unknown).as_str(),
        "{result}"
    );
    // The mirror's body was never read; its photo is the stored one.
    let counts = other.counts();
    assert_eq!(
        (
            counts.bodies_skipped,
            counts.photos_deduplicated,
            counts.downloads_ok
        ),
        (1, 1, 1),
        "{counts:?}"
    );
}

#[tokio::test]
async fn an_expired_url_is_asked_again_with_the_validators_its_dynamodb_record_keeps() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("304 on aws").await else {
        return;
    };
    let vars = [("IMGEST_URL_TTL", "1s")];
    let crawler = app.crawler(Processing::Handoff, &vars);
    let bytes = photo("dune.jpg");
    let host = PartnerHost::start([("/a.jpg", Answer::photo(bytes.clone()))])
        .await
        .unwrap();
    let url = [host.url("/a.jpg")];
    intake(&crawler, "m-1", "o1", &url).await;
    fetch(&crawler, take(&sqs, &urls["fetch-0"], 1).await).await;
    process(&crawler, take(&sqs, &urls["process"], 1).await).await;
    take(&sqs, &urls["results"], 1).await;

    // Past the URL window, another instance asks again, with the ETag and Last-Modified the
    // record kept: a 304 settles the URL with its image, and nothing is processed.
    app.advance_clock(Duration::from_secs(2));
    let other = app.crawler(Processing::Handoff, &vars);
    intake(&other, "m-2", "o2", &url).await;
    fetch(&other, take(&sqs, &urls["fetch-0"], 1).await).await;
    assert_eq!(host.requests(), 2);
    assert_eq!(other.counts().not_modified, 1, "{:?}", other.counts());
    assert!(drain(&sqs, &urls["process"]).await.records.is_empty());
    let result = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(result["photos"][0]["status"], "ok", "{result}");
    assert_eq!(result["photos"][0]["image_id"], id_of(&bytes).as_str());
}

#[tokio::test]
async fn an_unchanged_offer_past_the_url_window_is_answered_at_once_and_revalidated_through_sqs() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("revalidation on aws").await
    else {
        return;
    };
    // Revalidations are queued half this delay to all of it later: an SQS delay of 2 to 4 s.
    let vars = [
        ("IMGEST_URL_TTL", "1s"),
        ("IMGEST_REVALIDATION_DELAY", "4s"),
        ("IMGEST_MAX_ATTEMPTS", "1"),
    ];
    let crawler = app.crawler(Processing::Handoff, &vars);
    let (kept, replacement) = (photo("dune.jpg"), photo("ladybird.jpg"));
    let host = PartnerHost::start([
        ("/a.jpg", Answer::photo(kept.clone())),
        (
            "/b.jpg",
            Answer::switch_after(
                1,
                Answer::photo(photo("storm.jpg")),
                Answer::photo(replacement.clone()),
            ),
        ),
    ])
    .await
    .unwrap();
    let offer = [host.url("/a.jpg"), host.url("/b.jpg")];
    intake(&crawler, "m-1", "o1", &offer).await;
    fetch(&crawler, take(&sqs, &urls["fetch-0"], 2).await).await;
    process(&crawler, take(&sqs, &urls["process"], 2).await).await;
    let first = only(&take(&sqs, &urls["results"], 1).await);

    // Re-sent past the window: the crawl record answers at once (its result told again), and
    // the downloads go on the queue, delayed, behind that answer.
    app.advance_clock(Duration::from_secs(2));
    intake(&crawler, "m-2", "o1", &offer).await;
    let told = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(told["crawl_id"], first["crawl_id"]);
    assert_eq!(told["photos"], first["photos"]);
    assert_eq!(crawler.counts().offers_revalidated, 1);
    assert!(
        drain(&sqs, &urls["fetch-0"]).await.records.is_empty(),
        "revalidations wait their delay"
    );

    // The kept photo answers 304; the replaced one is a new photo, linked, with a new result.
    fetch(&crawler, take(&sqs, &urls["fetch-0"], 2).await).await;
    process(&crawler, take(&sqs, &urls["process"], 1).await).await;
    assert_eq!(host.requests(), 4, "each URL asked again once");
    let counts = crawler.counts();
    assert_eq!(
        (counts.not_modified, counts.revalidations_changed),
        (1, 1),
        "{counts:?}"
    );
    let changed = only(&take(&sqs, &urls["results"], 1).await);
    assert_ne!(changed["crawl_id"], first["crawl_id"]);
    assert_eq!(
        changed["photos"][1]["image_id"],
        id_of(&replacement).as_str()
    );
    let photos = app.get("/v1/offers/o1/photos").await;
    assert_eq!(photos.photo_ids(), [id_of(&kept), id_of(&replacement)]);
}
