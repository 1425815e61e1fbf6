//! Retries and tiers through the real queues (SQS and DynamoDB on the emulator): a download that
//! settles in the second and third tier's functions, a 5xx retried through an SQS message
//! delay, and a permanent failure re-checked on schedule from its DynamoDB record. Each
//! function's handler gets the messages its queue holds, as Lambda would deliver them.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use bytes::Bytes;
use imgest_aws::sqs::DUE_ATTRIBUTE;
use imgest_core::domain::ImageId;
use imgest_crawl::{Crawler, Processing};
use imgest_hosts::{Answer, PartnerHost};
use imgest_lambda_crawl as handlers;
use serde_json::{Value, json};

use crate::crawl_aws::{CrawlOnAws, drain, intake_event, take};
use crate::support::{TestApp, sample};

/// The one message of `event`, as JSON.
pub(crate) fn only(event: &SqsEvent) -> Value {
    assert_eq!(event.records.len(), 1, "{event:?}");
    serde_json::from_str(event.records[0].body.as_deref().unwrap()).unwrap()
}

pub(crate) async fn intake(crawler: &Crawler, id: &str, request: &Value) {
    let response = handlers::intake::handle(crawler, intake_event(id, request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
}

pub(crate) async fn fetch(crawler: &Crawler, tasks: SqsEvent) {
    let response = handlers::fetch::handle(crawler, tasks).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
}

pub(crate) async fn process(crawler: &Crawler, work: SqsEvent) {
    let response = handlers::process::handle(crawler, work).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
}

#[tokio::test]
async fn a_slow_download_settles_in_the_third_tiers_function() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("retries: tiers").await else {
        return;
    };
    let crawler = app.crawler(
        Processing::Handoff,
        &[("IMGEST_FETCH_TIERS", "200ms,600ms,5s")],
    );
    let bytes = Bytes::from(sample("dune.jpg"));
    let host = PartnerHost::builder()
        .serve("/slow.jpg", Answer::photo(bytes.clone()))
        .latency(Duration::from_millis(1000))
        .start()
        .await
        .unwrap();
    let request = json!({"client_id": "acme", "offer_id": "slow", "urls": [host.url("/slow.jpg")]});
    intake(&crawler, "m-1", &request).await;

    // Cut in the first tier's function, then in the second's; each moves the task on, and
    // the third tier's function settles it.
    for (tier, queue) in ["fetch-0", "fetch-1", "fetch-2"].into_iter().enumerate() {
        let tasks = take(&sqs, &urls[queue], 1).await;
        assert_eq!(only(&tasks)["tier"], tier);
        fetch(&crawler, tasks).await;
    }
    assert_eq!(host.requests(), 3);
    process(&crawler, take(&sqs, &urls["process"], 1).await).await;
    let result = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(result["photos"][0]["status"], "ok", "{result}");
    let id = ImageId::of_bytes(&bytes).to_string();
    assert_eq!(result["photos"][0]["image_id"], id.as_str());
    let photos = app.get("/v1/offers/slow/photos").await;
    assert_eq!(photos.json["photos"][0]["image_id"], id.as_str());
}

#[tokio::test]
async fn a_5xx_then_200_is_retried_through_an_sqs_delay() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("retries: 5xx").await else {
        return;
    };
    let crawler = app.crawler(
        Processing::Handoff,
        &[("IMGEST_RETRY_BASE", "1s"), ("IMGEST_RETRY_CAP", "1s")],
    );
    let host = PartnerHost::start([(
        "/flaky.jpg",
        Answer::fail_times(1, 503, Answer::photo(Bytes::from(sample("storm.jpg")))),
    )])
    .await
    .unwrap();
    let request =
        json!({"client_id": "acme", "offer_id": "flaky", "urls": [host.url("/flaky.jpg")]});
    intake(&crawler, "m-1", &request).await;
    fetch(&crawler, take(&sqs, &urls["fetch-0"], 1).await).await;
    assert_eq!(host.hits("/flaky.jpg"), 1);

    // The retry is a new message on the same tier's queue, delayed by SQS.
    let retry = take(&sqs, &urls["fetch-0"], 1).await;
    assert_eq!(only(&retry)["attempt"], 1);
    fetch(&crawler, retry).await;
    assert_eq!(host.hits("/flaky.jpg"), 2);
    process(&crawler, take(&sqs, &urls["process"], 1).await).await;
    let result = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(result["photos"][0]["status"], "ok", "{result}");
}

#[tokio::test]
async fn a_permanent_failure_is_rechecked_on_schedule_from_its_dynamodb_record() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("retries: recheck").await
    else {
        return;
    };
    let crawler = app.crawler(Processing::Handoff, &[("IMGEST_RECHECK_BASE", "1h")]);
    let host = PartnerHost::start([("/gone.jpg", Answer::status(404))])
        .await
        .unwrap();
    let url = host.url("/gone.jpg");
    intake(
        &crawler,
        "m-1",
        &json!({"client_id": "acme", "offer_id": "o-1", "urls": [url]}),
    )
    .await;
    fetch(&crawler, take(&sqs, &urls["fetch-0"], 1).await).await;
    let result = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(
        result["photos"][0]["error"]["kind"], "not_found",
        "{result}"
    );
    assert!(result["photos"][0]["error"]["next_check_at"].is_string());

    // Within the hour another offer's crawl settles from the record: no task, no request.
    intake(
        &crawler,
        "m-2",
        &json!({"client_id": "acme", "offer_id": "o-2", "urls": [url]}),
    )
    .await;
    let result = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(
        result["photos"][0]["error"]["kind"], "not_found",
        "{result}"
    );
    assert!(drain(&sqs, &urls["fetch-0"]).await.records.is_empty());
    assert_eq!(host.requests(), 1);

    // Past the recheck time the URL is downloaded again.
    app.advance_clock(Duration::from_secs(3601));
    intake(
        &crawler,
        "m-3",
        &json!({"client_id": "acme", "offer_id": "o-3", "urls": [url]}),
    )
    .await;
    fetch(&crawler, take(&sqs, &urls["fetch-0"], 1).await).await;
    assert_eq!(host.requests(), 2);
    let result = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(
        result["photos"][0]["error"]["kind"], "not_found",
        "{result}"
    );
}

/// A host whose photo is refused once with `Retry-After: retry_after` seconds, crawled
/// through intake and its first fetch (the refused attempt); the crawler and the host.
async fn refused_once(
    sqs: &aws_sdk_sqs::Client,
    fetch_0: &str,
    app: &TestApp,
    retry_after: &str,
) -> (Crawler, PartnerHost) {
    let crawler = app.crawler(Processing::Handoff, &[]);
    let busy_once = Answer::with_headers(
        [("retry-after", retry_after)],
        Answer::fail_times(1, 429, Answer::photo(Bytes::from(sample("ladybird.jpg")))),
    );
    let host = PartnerHost::start([("/busy.jpg", busy_once)])
        .await
        .unwrap();
    let request = json!({"client_id": "acme", "offer_id": "busy", "urls": [host.url("/busy.jpg")]});
    intake(&crawler, "m-1", &request).await;
    fetch(&crawler, take(sqs, fetch_0, 1).await).await;
    assert_eq!(host.hits("/busy.jpg"), 1);
    (crawler, host)
}

#[tokio::test]
async fn a_retry_after_longer_than_sqs_allows_is_sent_on_at_each_hop_until_it_is_due() {
    // SQS's limit shortened to a second: the host's minute is "longer than SQS allows". The
    // app's clock stands still unless the test moves it, so a hop arrives early until then.
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start_with(
        "retries: long retry-after",
        &[("IMGEST_SQS_MAX_DELAY", "1s")],
    )
    .await
    else {
        return;
    };
    let (crawler, host) = refused_once(&sqs, &urls["fetch-0"], &app, "60").await;

    // The retry arrives after its first hop, a minute early: the fetch function sends it on
    // with the rest of its wait and does not download.
    let due_of = |event: &SqsEvent| {
        event.records[0]
            .message_attributes
            .get(DUE_ATTRIBUTE)
            .and_then(|a| a.string_value.clone())
    };
    let hop = take(&sqs, &urls["fetch-0"], 1).await;
    assert_eq!(only(&hop)["attempt"], 1);
    let due = due_of(&hop).expect("a chained retry carries its due instant");
    fetch(&crawler, hop).await;
    assert_eq!(host.hits("/busy.jpg"), 1, "not before it is due");
    let next = take(&sqs, &urls["fetch-0"], 1).await;
    assert_eq!(
        due_of(&next),
        Some(due),
        "sent on, still due at the same instant"
    );

    // Once it is due, it runs.
    app.advance_clock(Duration::from_secs(120));
    fetch(&crawler, next).await;
    assert_eq!(host.hits("/busy.jpg"), 2);
    process(&crawler, take(&sqs, &urls["process"], 1).await).await;
    let result = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(result["photos"][0]["status"], "ok", "{result}");
}

#[tokio::test]
async fn a_retry_after_longer_than_sqs_allows_waits_in_a_step_functions_execution() {
    // SQS's limit shortened to a second: the host's two seconds are "longer than SQS allows",
    // and LongWaits=step-functions sends the retry through the delayed-send state machine,
    // which the emulator runs (its wait, then its send to the tier's queue).
    let Some((CrawlOnAws { sqs, urls, app, .. }, arn)) = CrawlOnAws::start_with_state_machine(
        "retries: long retry-after, step functions",
        &[("IMGEST_SQS_MAX_DELAY", "1s")],
    )
    .await
    else {
        return;
    };
    let (crawler, host) = refused_once(&sqs, &urls["fetch-0"], &app, "2").await;

    // The retry comes from the execution, as it was sent: no hop, no due instant; it runs at
    // once (the app's clock has not moved).
    let retry = take(&sqs, &urls["fetch-0"], 1).await;
    assert_eq!(only(&retry)["attempt"], 1);
    assert!(
        !retry.records[0]
            .message_attributes
            .contains_key(DUE_ATTRIBUTE),
        "{retry:?}"
    );
    let sfn = aws_sdk_sfn::Client::new(
        &imgest_testing::aws::sdk_config("step functions")
            .await
            .unwrap(),
    );
    assert_eq!(imgest_testing::aws::executions(&sfn, &arn, None).await, 1);
    fetch(&crawler, retry).await;
    assert_eq!(host.hits("/busy.jpg"), 2);
    process(&crawler, take(&sqs, &urls["process"], 1).await).await;
    let result = only(&take(&sqs, &urls["results"], 1).await);
    assert_eq!(result["photos"][0]["status"], "ok", "{result}");
}
