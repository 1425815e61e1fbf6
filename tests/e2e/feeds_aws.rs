//! The feed path on the AWS adapters (S3, DynamoDB, SQS on the emulator `infra/test.sh`
//! starts): a crawl request through the intake handler, fetch tasks through the tier queues
//! and the fetch handler, the new photo through `incoming/` and the process handler, and the
//! result on the results queue. Each function's handler gets its events as Lambda would
//! deliver them: messages received from the real queues.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use bytes::Bytes;
use imgest_hosts::{PartnerHost, Route};
use imgest_shared::domain::ImageId;
use imgest_shared::flows::crawl::{Crawler, Processing};
use imgest_shared::handlers;
use serde_json::{Value, json};

use crate::support::{TestApp, sample};

const QUEUES: [&str; 4] = ["fetch-0", "fetch-1", "fetch-2", "results"];

/// Takes what a queue holds now as one Lambda SQS event (empty once the queue is drained).
async fn drain(sqs: &aws_sdk_sqs::Client, url: &str) -> SqsEvent {
    let received = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let mut event = SqsEvent::default();
    for m in received.messages.unwrap_or_default() {
        sqs.delete_message()
            .queue_url(url)
            .receipt_handle(m.receipt_handle.clone().unwrap())
            .send()
            .await
            .unwrap();
        let mut message = SqsMessage::default();
        message.message_id = m.message_id;
        message.body = m.body;
        event.records.push(message);
    }
    event
}

/// Takes `n` messages from a queue as one event, receiving until they are all there
/// (paced tasks carry delays of up to a second).
async fn take(sqs: &aws_sdk_sqs::Client, url: &str, n: usize) -> SqsEvent {
    let mut event = SqsEvent::default();
    for _ in 0..10 {
        event.records.extend(drain(sqs, url).await.records);
        if event.records.len() >= n {
            break;
        }
    }
    assert_eq!(event.records.len(), n, "messages on {url}");
    event
}

/// An S3 notification of `incoming/{upload_id}`, as the bucket sends it to the process queue.
fn notification(upload_id: &str) -> SqsEvent {
    let record = json!({"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": "files"}, "object": {"key": format!("incoming/{upload_id}")}}});
    let mut message = SqsMessage::default();
    message.message_id = Some(format!("n-{upload_id}"));
    message.body = Some(json!({"Records": [record]}).to_string());
    let mut event = SqsEvent::default();
    event.records.push(message);
    event
}

#[tokio::test]
async fn a_feed_goes_through_intake_fetch_process_and_results_on_aws() {
    let Some(config) = imgest_shared::testing::aws::sdk_config("feeds on aws").await else {
        return;
    };
    let sqs = aws_sdk_sqs::Client::new(&config);
    let mut urls = HashMap::new();
    for name in QUEUES {
        let url = sqs
            .create_queue()
            .queue_name(imgest_shared::testing::aws::unique_name(name))
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        urls.insert(name, url);
    }
    let queues = QUEUES
        .iter()
        .map(|n| format!("{n}={}", urls[n]))
        .collect::<Vec<_>>()
        .join(",");
    let app = TestApp::start_aws("feeds on aws", &[("IMGEST_QUEUES", &queues)])
        .await
        .unwrap();
    let crawler: Crawler = app.crawler(Processing::Handoff, &[]);
    let photo = Bytes::from(sample("dune.jpg"));
    let host = PartnerHost::start([
        ("/a.jpg", Route::photo(photo.clone())),
        ("/gone.jpg", Route::status(404)),
    ])
    .await
    .unwrap();

    // Intake: the crawl request as the intake queue delivers it.
    let request = json!({"client_id": "acme", "offer_id": "aws-offer",
        "urls": [host.url("/a.jpg"), host.url("/gone.jpg")]});
    let mut message = SqsMessage::default();
    message.message_id = Some("intake-1".into());
    message.body = Some(request.to_string());
    let mut intake = SqsEvent::default();
    intake.records.push(message);
    let response = handlers::intake::handle(&crawler, intake).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    // Fetch: every task the first tier's queue holds (new hosts start there).
    let tasks = take(&sqs, &urls["fetch-0"], 2).await;
    let response = handlers::fetch::handle(&crawler, tasks.clone()).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(host.requests(), 2);

    // The new photo waits under incoming/ for the process function.
    let incoming: Vec<String> = app
        .files()
        .await
        .into_iter()
        .filter_map(|k| k.strip_prefix("incoming/").map(str::to_owned))
        .collect();
    assert_eq!(incoming.len(), 1, "{incoming:?}");
    let status = app.get("/v1/offers/aws-offer/photos").await;
    assert_eq!(
        status.status, 404,
        "not linked before the photo is processed"
    );

    // A redelivered fetch task downloads nothing more and stores nothing more.
    let again = handlers::fetch::handle(&crawler, tasks).await;
    assert!(again.batch_item_failures.is_empty(), "{again:?}");
    assert_eq!(host.requests(), 2);

    let response = handlers::process::handle(&crawler, notification(&incoming[0])).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let results = take(&sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(result["offer_id"], "aws-offer");
    let image_id = ImageId::of_bytes(&photo).to_string();
    assert_eq!(result["photos"][0]["status"], "ok");
    assert_eq!(result["photos"][0]["image_id"], image_id.as_str());
    assert_eq!(result["photos"][1]["error"]["kind"], "not_found");
    let photos = app.get("/v1/offers/aws-offer/photos").await;
    assert_eq!(photos.json["photos"][0]["image_id"], image_id.as_str());

    // The same feed again: settled at intake from the crawl record, result sent, no download.
    let mut message = SqsMessage::default();
    message.message_id = Some("intake-2".into());
    message.body = Some(request.to_string());
    let mut intake = SqsEvent::default();
    intake.records.push(message);
    assert!(
        handlers::intake::handle(&crawler, intake)
            .await
            .batch_item_failures
            .is_empty()
    );
    assert!(drain(&sqs, &urls["fetch-0"]).await.records.is_empty());
    take(&sqs, &urls["results"], 1).await;
}
