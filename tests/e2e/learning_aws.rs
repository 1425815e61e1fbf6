//! Learning shared across instances, on the AWS adapters (DynamoDB and SQS on the emulator):
//! what one fetch function's instance observes of a host changes what another instance (an
//! intake function, another fetch instance) does: the tier it starts in, the concurrency it
//! allows, and whether the host's circuit lets it download at all. Each crawler here is a separate instance
//! with nothing in memory in common with the other; only the table joins them.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::Bytes;
use imgest_crawl::Processing;
use imgest_hosts::{Answer, PartnerHost};
use imgest_lambda_crawl as handlers;
use serde_json::json;

use crate::crawl_aws::{CrawlOnAws, drain, intake_event, take};
use crate::support::sample;

/// Tiers short enough for a test: the slow host answers in the second.
const TIERS: [(&str, &str); 1] = [("IMGEST_FETCH_TIERS", "300ms,3s,6s")];

#[tokio::test]
async fn a_slow_host_seen_by_a_fetch_instance_makes_another_intake_start_in_the_tier_that_fits() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("learning: tiers").await else {
        return;
    };
    let fetcher = app.crawler(Processing::Handoff, &TIERS);
    let photo = Answer::photo(Bytes::from(sample("dune.jpg")));
    let host = PartnerHost::builder()
        .serve("/1.jpg", photo.clone())
        .serve("/2.jpg", photo)
        .latency(Duration::from_millis(1000))
        .start()
        .await
        .unwrap();

    // An unknown host starts in the first tier; the fetch instance sees it time out there.
    let first = json!({"client_id": "acme", "offer_id": "slow-1", "urls": [host.url("/1.jpg")]});
    let response = handlers::intake::handle(&fetcher, intake_event("m-1", &first)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let tasks = take(&sqs, &urls["fetch-0"], 1).await;
    let response = handlers::fetch::handle(&fetcher, tasks).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let moved = take(&sqs, &urls["fetch-1"], 1).await;
    assert_eq!(moved.records.len(), 1, "moved to the next tier");

    // Another instance, which never saw the host, starts its next download in the second tier.
    let intake = app.crawler(Processing::Handoff, &TIERS);
    let second = json!({"client_id": "acme", "offer_id": "slow-2", "urls": [host.url("/2.jpg")]});
    let response = handlers::intake::handle(&intake, intake_event("m-2", &second)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let started = take(&sqs, &urls["fetch-1"], 1).await;
    let task: serde_json::Value =
        serde_json::from_str(started.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(task["tier"], 1, "{task}");
    assert!(
        drain(&sqs, &urls["fetch-0"]).await.records.is_empty(),
        "nothing starts in the first tier"
    );
    // Another client's statistics are its own.
    let other = app.crawler(Processing::Handoff, &TIERS);
    let domain = host.base_url().trim_start_matches("http://").to_owned();
    let acme = imgest_core::domain::ClientId::parse("acme").unwrap();
    let tiny = imgest_core::domain::ClientId::parse("tiny").unwrap();
    assert_eq!(other.start_tier(&acme, &domain).await, 1);
    assert_eq!(other.start_tier(&tiny, &domain).await, 0);
}

#[tokio::test]
async fn a_429_seen_by_one_fetch_instance_lowers_the_concurrency_another_uses() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("learning: 429").await else {
        return;
    };
    let vars = [("IMGEST_DOMAIN_CONCURRENCY", "8")];
    let one = app.crawler(Processing::Handoff, &vars);
    let another = app.crawler(Processing::Handoff, &vars);
    let host = PartnerHost::start([("/busy.jpg", Answer::retry_after(429, "1"))])
        .await
        .unwrap();
    let domain = host.base_url().trim_start_matches("http://").to_owned();
    assert_eq!(another.host_concurrency(&domain).await, 8);

    let request = json!({"client_id": "acme", "offer_id": "busy", "urls": [host.url("/busy.jpg")]});
    let response = handlers::intake::handle(&one, intake_event("m-1", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let tasks = take(&sqs, &urls["fetch-0"], 1).await;
    let response = handlers::fetch::handle(&one, tasks).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(host.requests(), 1);
    assert_eq!(one.host_concurrency(&domain).await, 4);

    // The other instance read the host's health before the 429; once its copy is older than
    // FRESH_FOR it reads the shared one again.
    app.advance_clock(imgest_crawl::FRESH_FOR);
    let fresh = app.crawler(Processing::Handoff, &vars);
    assert_eq!(fresh.host_concurrency(&domain).await, 4, "a new instance");
    assert_eq!(
        another.host_concurrency(&domain).await,
        4,
        "a warm instance"
    );
}

#[tokio::test]
async fn a_circuit_opened_by_one_fetch_instance_is_honoured_by_another_until_a_probe_closes_it() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("learning: circuit").await
    else {
        return;
    };
    let vars = [
        ("IMGEST_MAX_ATTEMPTS", "1"),
        ("IMGEST_CIRCUIT_MIN_REQUESTS", "4"),
        ("IMGEST_CIRCUIT_FAILURE_PERCENT", "75"),
        ("IMGEST_CIRCUIT_COOL_DOWN", "30s"),
    ];
    let one = app.crawler(Processing::Handoff, &vars);
    let failing = (1..=5).map(|i| (format!("/{i}.jpg"), Answer::status(503)));
    let down = PartnerHost::start(failing.chain([
        (
            "/back.jpg".to_owned(),
            Answer::photo(Bytes::from(sample("dune.jpg"))),
        ),
        (
            "/after.jpg".to_owned(),
            Answer::photo(Bytes::from(sample("storm.jpg"))),
        ),
    ]))
    .await
    .unwrap();
    let result_of = |event: &aws_lambda_events::event::sqs::SqsEvent| -> serde_json::Value {
        assert_eq!(event.records.len(), 1, "{event:?}");
        serde_json::from_str(event.records[0].body.as_deref().unwrap()).unwrap()
    };

    // One instance downloads four URLs of the host; all fail, and its flush opens the circuit.
    let urls_down: Vec<String> = (1..=4).map(|i| down.url(&format!("/{i}.jpg"))).collect();
    let request = json!({"client_id": "acme", "offer_id": "down-1", "urls": urls_down});
    let response = handlers::intake::handle(&one, intake_event("m-1", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let tasks = take(&sqs, &urls["fetch-0"], 4).await;
    let response = handlers::fetch::handle(&one, tasks).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(down.requests(), 4);
    let first = result_of(&take(&sqs, &urls["results"], 1).await);
    assert!(
        first["photos"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["error"]["kind"] == "server_error"),
        "{first}"
    );

    // Another instance, with nothing of the first in memory, reads the circuit from the
    // table: the host's next URL settles at once, with no task and no request.
    let another = app.crawler(Processing::Handoff, &vars);
    let request = json!({"client_id": "acme", "offer_id": "down-2", "urls": [down.url("/5.jpg")]});
    let response = handlers::intake::handle(&another, intake_event("m-2", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let refused = result_of(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(
        refused["photos"][0]["error"]["kind"], "host_unavailable",
        "{refused}"
    );
    assert!(drain(&sqs, &urls["fetch-0"]).await.records.is_empty());
    assert_eq!(down.requests(), 4);
    assert_eq!(another.counts().circuit_refusals, 1);

    // After the cool-down, one download goes (a probe, claimed through the host's record); it
    // works, so the circuit closes for every instance.
    app.advance_clock(Duration::from_secs(31));
    let request = json!({"client_id": "acme", "offer_id": "back", "urls": [down.url("/back.jpg")]});
    let response = handlers::intake::handle(&another, intake_event("m-3", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let tasks = take(&sqs, &urls["fetch-0"], 1).await;
    let third = app.crawler(Processing::Handoff, &vars);
    let response = handlers::fetch::handle(&third, tasks).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(down.requests(), 5);
    let work = take(&sqs, &urls["process"], 1).await;
    let response = handlers::process::handle(&third, work).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let probe = result_of(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(probe["photos"][0]["status"], "ok", "{probe}");
    // A new instance starts the host's next download as usual.
    let fresh = app.crawler(Processing::Handoff, &vars);
    let request =
        json!({"client_id": "acme", "offer_id": "after", "urls": [down.url("/after.jpg")]});
    let response = handlers::intake::handle(&fresh, intake_event("m-4", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    take(&sqs, &urls["fetch-0"], 1).await;
    assert!(drain(&sqs, &urls["results"]).await.records.is_empty());
}
