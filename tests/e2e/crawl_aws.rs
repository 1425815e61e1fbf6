//! The crawl path on the AWS adapters (S3, DynamoDB, SQS on the emulator `infra/test.sh`
//! starts): a crawl request through the intake handler, fetch tasks through the tier queues
//! and the fetch handler, the new photo through `fetched/`, the process queue and the process
//! handler, and the result on the results queue. Each function's handler gets its events as Lambda would
//! deliver them: messages received from the real queues.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use bytes::Bytes;
use imgest_core::domain::{BlobKey, ImageId};
use imgest_crawl::{Crawler, Processing};
use imgest_hosts::{Answer, PartnerHost};
use imgest_lambda_crawl as handlers;
use serde_json::{Value, json};

use crate::support::as_seen::AsSeen;
use crate::support::crawl::joiners_filed;
use crate::support::{TestApp, sample};

const QUEUES: [&str; 9] = [
    "intake", "fetch-0", "fetch-1", "fetch-2", "results", "process", "backfill", "settle",
    "webhooks",
];

/// The `SenderId` the tests' intake events carry, which [`TestApp::crawler`] lets act for
/// any client unless a test lists its own senders.
pub(crate) const TEST_SENDER: &str = crate::support::TEST_SENDER;

/// Takes what a queue holds now as one Lambda SQS event (empty once the queue is drained),
/// each message with its attributes as Lambda passes them (`SenderId`,
/// `ApproximateReceiveCount`, ...) and its message attributes.
pub(crate) async fn drain(sqs: &aws_sdk_sqs::Client, url: &str) -> SqsEvent {
    use aws_sdk_sqs::types::MessageSystemAttributeName;
    let received = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
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
        event.records.push(lambda_message(url, m));
    }
    event
}

/// A message received from the queue at `url` as Lambda's event carries it: its attributes,
/// its message attributes, and the queue it came from.
pub(crate) fn lambda_message(url: &str, m: aws_sdk_sqs::types::Message) -> SqsMessage {
    use aws_lambda_events::event::sqs::SqsMessageAttribute;
    let name = url.rsplit('/').next().unwrap_or_default();
    let mut message = SqsMessage::default();
    message.message_id = m.message_id;
    message.receipt_handle = m.receipt_handle;
    message.body = m.body;
    message.event_source_arn = Some(format!("arn:aws:sqs:us-east-1:123456789012:{name}"));
    for (name, value) in m.attributes.unwrap_or_default() {
        message.attributes.insert(name.as_str().to_owned(), value);
    }
    for (name, value) in m.message_attributes.unwrap_or_default() {
        let mut attribute = SqsMessageAttribute::default();
        attribute.data_type = Some(value.data_type);
        attribute.string_value = value.string_value;
        message.message_attributes.insert(name, attribute);
    }
    message
}

/// Takes `n` messages from a queue as one event, receiving until they are all there
/// (paced tasks carry delays of up to a second).
pub(crate) async fn take(sqs: &aws_sdk_sqs::Client, url: &str, n: usize) -> SqsEvent {
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

pub(crate) use imgest_testing::aws::with_dead_letter_queue;

/// Gives the queues at `urls` one dead-letter queue (as the template's crawl queues share
/// one), a redrive policy after `max_receives` receives each: its URL.
pub(crate) async fn with_shared_dead_letter_queue(
    sqs: &aws_sdk_sqs::Client,
    urls: &[&str],
    max_receives: u32,
) -> String {
    use aws_sdk_sqs::types::QueueAttributeName;
    let dead = with_dead_letter_queue(sqs, urls[0], max_receives).await;
    let policy = sqs
        .get_queue_attributes()
        .queue_url(urls[0])
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::RedrivePolicy]
        .clone();
    for url in &urls[1..] {
        sqs.set_queue_attributes()
            .queue_url(*url)
            .attributes(QueueAttributeName::RedrivePolicy, policy.clone())
            .send()
            .await
            .unwrap();
    }
    dead
}

/// A crawl request as the intake queue delivers it, sent by [`TEST_SENDER`].
pub(crate) fn intake_event(message_id: &str, request: &Value) -> SqsEvent {
    event_from(TEST_SENDER, message_id, request)
}

/// A message of one of the stack's functions to another (an internal queue's), as its queue
/// delivers it.
pub(crate) fn stack_event(message_id: &str, body: &Value) -> SqsEvent {
    event_from(crate::support::STACK_SENDER, message_id, body)
}

/// One message from `sender`, as SQS delivers it.
fn event_from(sender: &str, message_id: &str, request: &Value) -> SqsEvent {
    let mut message = SqsMessage::default();
    message.message_id = Some(message_id.into());
    message.body = Some(request.to_string());
    message.attributes.insert("SenderId".into(), sender.into());
    message
        .attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    let mut event = SqsEvent::default();
    event.records.push(message);
    event
}

/// Runs the `n` tasks of the first tier through the fetch handler and their `n` new photos
/// through the process handler, one event each.
pub(crate) async fn fetch_then_process(
    sqs: &aws_sdk_sqs::Client,
    urls: &HashMap<&'static str, String>,
    crawler: &Crawler,
    n: usize,
) {
    let tasks = take(sqs, &urls["fetch-0"], n).await;
    let response = handlers::fetch::handle(crawler, tasks).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let work = take(sqs, &urls["process"], n).await;
    let response = handlers::process::handle(crawler, work).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
}

/// The offers of these result messages, sorted, each result's first photo checked ok.
fn ok_offers(results: &SqsEvent) -> Vec<String> {
    let mut offers: Vec<String> = results
        .records
        .iter()
        .map(|m| {
            let result: Value = serde_json::from_str(m.body.as_deref().unwrap()).unwrap();
            assert_eq!(result["photos"][0]["status"], "ok", "{result}");
            result["offer_id"].as_str().unwrap().to_owned()
        })
        .collect();
    offers.sort();
    offers
}

/// `IMGEST_QUEUES` for these queues: each one's name and URL.
fn queues_of(urls: &HashMap<&'static str, String>) -> String {
    QUEUES
        .iter()
        .map(|n| format!("{n}={}", urls[n]))
        .collect::<Vec<_>>()
        .join(",")
}

/// A queue of its own for each of [`QUEUES`], by name.
async fn create_queues(sqs: &aws_sdk_sqs::Client) -> HashMap<&'static str, String> {
    let mut urls = HashMap::new();
    for queue in QUEUES {
        let url = sqs
            .create_queue()
            .queue_name(imgest_testing::aws::unique_name(queue))
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        urls.insert(queue, url);
    }
    urls
}

/// The AWS app with queues of its own, and a crawler handing downloads to the process queue.
pub(crate) struct CrawlOnAws {
    pub sqs: aws_sdk_sqs::Client,
    pub urls: HashMap<&'static str, String>,
    pub app: TestApp,
    pub crawler: Crawler,
    /// The app's `IMGEST_QUEUES` (each queue's name and URL), for processes of its own.
    pub queues: String,
}

impl CrawlOnAws {
    /// `None` (the test skips) without an emulator.
    pub async fn start(name: &str) -> Option<Self> {
        Self::start_with(name, &[]).await
    }

    /// [`start`](Self::start), with the app's settings `vars` besides its queues.
    pub async fn start_with(name: &str, vars: &[(&str, &str)]) -> Option<Self> {
        Self::start_running(name, vars, true).await
    }

    /// [`start_with`](Self::start_with), the long waits going through a delayed-send state
    /// machine of the app's own (as `LongWaits=step-functions` deploys it) on the emulator,
    /// which runs its executions; the state machine's ARN beside.
    pub async fn start_with_state_machine(
        name: &str,
        vars: &[(&str, &str)],
    ) -> Option<(Self, String)> {
        let config = imgest_testing::aws::sdk_config(name).await?;
        let sfn = aws_sdk_sfn::Client::new(&config);
        let sqs = aws_sdk_sqs::Client::new(&config);
        let urls = create_queues(&sqs).await;
        let arn = imgest_testing::aws::delayed_send_state_machine(
            &sfn,
            [&urls["fetch-0"], &urls["fetch-1"], &urls["fetch-2"]],
        )
        .await;
        let mut vars = vars.to_vec();
        vars.push(("IMGEST_LONG_WAITS", "step-functions"));
        vars.push(("IMGEST_DELAY_STATE_MACHINE_ARN", &arn));
        let app = Self::start_on(name, sqs, urls, &vars, true).await?;
        Some((app, arn))
    }

    /// [`start`](Self::start) for the bootstraps' tests: the erasures under way are left to
    /// the erasure function's bootstrap (see [`TestApp::start_aws_beside_functions`]).
    pub async fn start_beside_functions(name: &str) -> Option<Self> {
        Self::start_running(name, &[], false).await
    }

    async fn start_running(name: &str, vars: &[(&str, &str)], erasures: bool) -> Option<Self> {
        let config = imgest_testing::aws::sdk_config(name).await?;
        let sqs = aws_sdk_sqs::Client::new(&config);
        let urls = create_queues(&sqs).await;
        Self::start_on(name, sqs, urls, vars, erasures).await
    }

    async fn start_on(
        name: &str,
        sqs: aws_sdk_sqs::Client,
        urls: HashMap<&'static str, String>,
        vars: &[(&str, &str)],
        erasures: bool,
    ) -> Option<Self> {
        let queues = queues_of(&urls);
        let mut vars = vars.to_vec();
        vars.push(("IMGEST_QUEUES", &queues));
        let app = if erasures {
            TestApp::start_aws(name, &vars).await
        } else {
            TestApp::start_aws_beside_functions(name, &vars).await
        }
        .unwrap();
        let crawler = app.crawler(Processing::Handoff, &[]);
        Some(Self {
            sqs,
            urls,
            app,
            crawler,
            queues,
        })
    }
}

#[tokio::test]
async fn a_crawl_goes_through_intake_fetch_process_and_results_on_aws() {
    let Some(CrawlOnAws {
        sqs,
        urls,
        app,
        crawler,
        ..
    }) = CrawlOnAws::start("crawl on aws").await
    else {
        return;
    };
    let photo = Bytes::from(sample("dune.jpg"));
    let host = PartnerHost::start([
        ("/a.jpg", Answer::photo(photo.clone())),
        ("/gone.jpg", Answer::status(404)),
        ("/b.jpg", Answer::photo(Bytes::from(sample("storm.jpg")))),
        ("/c.jpg", Answer::photo(Bytes::from(sample("ladybird.jpg")))),
    ])
    .await
    .unwrap();

    // Intake: the crawl request as the intake queue delivers it.
    let request = json!({"client_id": "acme", "offer_id": "aws-offer",
        "urls": [host.url("/a.jpg"), host.url("/gone.jpg")]});
    let intake = intake_event("intake-1", &request);
    let response = handlers::intake::handle(&crawler, intake).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    // Fetch: every task the first tier's queue holds (new hosts start there).
    let tasks = take(&sqs, &urls["fetch-0"], 2).await;
    let response = handlers::fetch::handle(&crawler, tasks.clone()).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(host.requests(), 2);

    // The new photo waits under fetched/, and the process queue holds its message.
    let fetched: Vec<String> = app
        .files()
        .await
        .into_iter()
        .filter(|k| k.starts_with("fetched/"))
        .collect();
    assert_eq!(fetched.len(), 1, "{fetched:?}");
    let status = app.get("/v1/offers/aws-offer/photos").await;
    assert_eq!(
        status.status, 404,
        "not linked before the photo is processed"
    );

    // A fetch task delivered again before the photo is processed downloads it again and hands
    // it off again; it is still processed, linked and reported once.
    let again = handlers::fetch::handle(&crawler, tasks).await;
    assert!(again.batch_item_failures.is_empty(), "{again:?}");
    assert_eq!(host.requests(), 3, "the 404 settled: only the photo again");
    let work = take(&sqs, &urls["process"], 2).await;
    for message in work.records {
        let mut one = SqsEvent::default();
        one.records.push(message);
        let response = handlers::process::handle(&crawler, one).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    assert!(
        !app.files().await.iter().any(|k| k.starts_with("fetched/")),
        "the downloaded body is deleted once processed"
    );

    let results = take(&sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(result["offer_id"], "aws-offer");
    let image_id = ImageId::of_bytes(&photo).to_string();
    assert_eq!(result["photos"][0]["status"], "ok");
    assert_eq!(result["photos"][0]["image_id"], image_id.as_str());
    assert_eq!(result["photos"][1]["error"]["kind"], "not_found");
    let photos = app.get("/v1/offers/aws-offer/photos").await;
    assert_eq!(photos.json["photos"][0]["image_id"], image_id.as_str());

    // The same request again: settled at intake from the crawl record, result sent, no download.
    let intake = intake_event("intake-2", &request);
    assert!(
        handlers::intake::handle(&crawler, intake)
            .await
            .batch_item_failures
            .is_empty()
    );
    assert!(drain(&sqs, &urls["fetch-0"]).await.records.is_empty());
    take(&sqs, &urls["results"], 1).await;
    assert!(drain(&sqs, &urls["results"]).await.records.is_empty());

    // Another offer: two new photos and the known one. The new ones are processed in one batch
    // and settle the crawl together: one result, every photo linked in the request's order.
    let request = json!({"client_id": "acme", "offer_id": "aws-offer-2",
        "urls": [host.url("/b.jpg"), host.url("/a.jpg"), host.url("/c.jpg")]});
    let intake = intake_event("intake-3", &request);
    let response = handlers::intake::handle(&crawler, intake).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    fetch_then_process(&sqs, &urls, &crawler, 2).await;
    let results = take(&sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    let ids: Vec<&str> = (0..3)
        .map(|i| {
            assert_eq!(result["photos"][i]["status"], "ok", "{result}");
            result["photos"][i]["image_id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(ids[1], image_id.as_str());
    let photos = app.get("/v1/offers/aws-offer-2/photos").await;
    let linked: Vec<&str> = (0..3)
        .map(|i| photos.json["photos"][i]["image_id"].as_str().unwrap())
        .collect();
    assert_eq!(linked, ids);
    assert!(drain(&sqs, &urls["results"]).await.records.is_empty());

    // The new photos' records were created with their crawl's link counted, which the crawl's
    // change used: every count is exact, and none expires.
    for (id, count) in [(ids[0], 1), (ids[1], 2), (ids[2], 1)] {
        let id = ImageId::parse(id).unwrap();
        let record = app.service.ports().images.get(&id).await.unwrap().unwrap();
        assert_eq!(
            (record.link_count, record.expires_at),
            (count, None),
            "{id}"
        );
    }
}

#[tokio::test]
async fn an_intake_delivered_again_sends_its_downloads_again_and_other_crawls_join_them() {
    let Some(CrawlOnAws {
        sqs,
        urls,
        app,
        crawler,
        ..
    }) = CrawlOnAws::start("intake delivered again").await
    else {
        return;
    };
    let host = PartnerHost::start([("/a.jpg", Answer::photo(Bytes::from(sample("dune.jpg"))))])
        .await
        .unwrap();
    let request = json!({"client_id": "acme", "offer_id": "again-offer",
        "urls": [host.url("/a.jpg")]});

    // The intake leased the URL, but its task is lost (as when the intake fails between the
    // lease and the send): the queue is emptied without running it.
    let intake = || intake_event("intake-again", &request);
    let response = handlers::intake::handle(&crawler, intake()).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    take(&sqs, &urls["fetch-0"], 1).await;

    // Another crawl of the URL (another message) joins the leased download: nothing is sent.
    let other = json!({"client_id": "acme", "offer_id": "other-offer",
        "urls": [host.url("/a.jpg")]});
    let response = handlers::intake::handle(&crawler, intake_event("intake-other", &other)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(drain(&sqs, &urls["fetch-0"]).await.records.is_empty());

    // The same message delivered again is the same crawl: it sends the download again.
    let response = handlers::intake::handle(&crawler, intake()).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    fetch_then_process(&sqs, &urls, &crawler, 1).await;
    assert_eq!(host.requests(), 1);

    // One download settled both crawls.
    let results = take(&sqs, &urls["results"], 2).await;
    assert_eq!(ok_offers(&results), ["again-offer", "other-offer"]);
    for offer in ["again-offer", "other-offer"] {
        let photos = app.get(&format!("/v1/offers/{offer}/photos")).await;
        assert_eq!(photos.status, 200, "{offer}");
    }
}

#[tokio::test]
async fn the_fetch_function_processes_a_photo_that_fits_its_memory_and_hands_off_one_that_does_not()
{
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("inline fetch").await else {
        return;
    };
    let (fits, too_big) = (sample("storm.jpg"), sample("dune.jpg"));
    let host = PartnerHost::start([
        ("/fits.jpg", Answer::photo(Bytes::from(fits.clone()))),
        ("/big.jpg", Answer::photo(Bytes::from(too_big.clone()))),
    ])
    .await
    .unwrap();
    let crawler = app.crawler(Processing::InlineWhenItFits, &[]);

    // Processed where it was downloaded: nothing under fetched/, nothing for the process queue.
    let request = json!({"client_id": "acme", "offer_id": "here", "urls": [host.url("/fits.jpg")]});
    let response = handlers::intake::handle(&crawler, intake_event("m-1", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let response = handlers::fetch::handle(&crawler, take(&sqs, &urls["fetch-0"], 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(crawler.counts().processed_here, 1);
    let id = ImageId::of_bytes(&fits).to_string();
    assert_eq!(app.files_of(&id).await.len(), 4);
    assert!(!app.files().await.iter().any(|k| k.starts_with("fetched/")));
    assert!(drain(&sqs, &urls["process"]).await.records.is_empty());
    let result: Value = serde_json::from_str(
        take(&sqs, &urls["results"], 1).await.records[0]
            .body
            .as_deref()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(result["photos"][0]["image_id"], id.as_str(), "{result}");

    // A fetch function whose memory cannot hold the decode hands the photo off.
    let small = TestApp::start_aws(
        "inline fetch, small",
        &[
            ("IMGEST_QUEUES", &queues_of(&urls)),
            ("IMGEST_MEMORY_BUDGET", "72MiB"),
            ("IMGEST_MAX_BODY", "1MB"),
        ],
    )
    .await
    .unwrap();
    let crawler = small.crawler(Processing::InlineWhenItFits, &[]);
    let request = json!({"client_id": "acme", "offer_id": "there", "urls": [host.url("/big.jpg")]});
    let response = handlers::intake::handle(&crawler, intake_event("m-2", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let response = handlers::fetch::handle(&crawler, take(&sqs, &urls["fetch-0"], 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(crawler.counts().processed_here, 0);
    assert!(
        small
            .files()
            .await
            .iter()
            .any(|k| k.starts_with("fetched/"))
    );
    take(&sqs, &urls["process"], 1).await;
}

#[tokio::test]
async fn crawls_settled_where_offers_may_not_be_written_are_finished_by_the_intake_function() {
    let Some(CrawlOnAws {
        sqs,
        urls,
        app,
        crawler,
        ..
    }) = CrawlOnAws::start("settle hand-off on aws").await
    else {
        return;
    };
    let host = PartnerHost::start([
        ("/fits.jpg", Answer::photo(Bytes::from(sample("storm.jpg")))),
        ("/big.jpg", Answer::photo(Bytes::from(sample("dune.jpg")))),
    ])
    .await
    .unwrap();
    // The fetch and process functions as deployed: they hand settled crawls on.
    let fetching = app
        .crawler(Processing::InlineWhenItFits, &[])
        .finishing_elsewhere();
    let request = json!({"client_id": "acme", "offer_id": "settle-here",
        "urls": [host.url("/fits.jpg")]});
    let response = handlers::intake::handle(&crawler, intake_event("s-1", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let response = handlers::fetch::handle(&fetching, take(&sqs, &urls["fetch-0"], 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(fetching.counts().processed_here, 1);

    // Settled, not finished: no photos linked, no result; the settle queue holds the crawl.
    assert_eq!(app.get("/v1/offers/settle-here/photos").await.status, 404);
    assert!(drain(&sqs, &urls["results"]).await.records.is_empty());
    let settled = take(&sqs, &urls["settle"], 1).await;
    let body: Value = serde_json::from_str(settled.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(body["settle"]["offer"], "settle-here", "{body}");

    // The intake function finishes it (delivered twice: once).
    for _ in 0..2 {
        let response = handlers::settle::handle(&crawler, settled.clone()).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    let photos = app.get("/v1/offers/settle-here/photos").await;
    assert_eq!(photos.status, 200, "{}", photos.json);
    let results = take(&sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(result["offer_id"], "settle-here");
    assert!(drain(&sqs, &urls["results"]).await.records.is_empty());

    // The same through the process function, for a photo too large for the fetch function.
    let small = TestApp::start_aws(
        "settle hand-off, small",
        &[
            ("IMGEST_QUEUES", &queues_of(&urls)),
            ("IMGEST_MEMORY_BUDGET", "72MiB"),
            ("IMGEST_MAX_BODY", "1MB"),
        ],
    )
    .await
    .unwrap();
    let (small_intake, small_fetch, small_process) = (
        small.crawler(Processing::Handoff, &[]),
        small
            .crawler(Processing::InlineWhenItFits, &[])
            .finishing_elsewhere(),
        small
            .crawler(Processing::Handoff, &[])
            .finishing_elsewhere(),
    );
    let request = json!({"client_id": "acme", "offer_id": "settle-there",
        "urls": [host.url("/big.jpg")]});
    let response = handlers::intake::handle(&small_intake, intake_event("s-2", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let response =
        handlers::fetch::handle(&small_fetch, take(&sqs, &urls["fetch-0"], 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let response =
        handlers::process::handle(&small_process, take(&sqs, &urls["process"], 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(drain(&sqs, &urls["results"]).await.records.is_empty());
    let response =
        handlers::settle::handle(&small_intake, take(&sqs, &urls["settle"], 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    take(&sqs, &urls["results"], 1).await;

    // A settle message sent to the intake queue (by a partner) is no crawl request: a dead
    // letter, which finishes nothing.
    let dead = with_dead_letter_queue(&sqs, &urls["intake"], 5).await;
    let forged = json!({"settle": {"offer": "settle-here", "crawl_id": "0000000000000000"}});
    let response = handlers::intake::handle(&crawler, intake_event("s-3", &forged)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(drain(&sqs, &urls["results"]).await.records.is_empty());
    let letters = take(&sqs, &dead, 1).await;
    let kind = &letters.records[0].message_attributes["imgest.kind"];
    assert_eq!(kind.string_value.as_deref(), Some("unusable"));
}

/// A process message whose downloaded body expired under `fetched/` (redriven from the
/// dead-letter queue too late) settles its URL as `body_gone`, so the crawl finishes and says
/// why, instead of passing for a message delivered again and leaving the crawl waiting.
#[tokio::test]
async fn a_crawl_whose_downloaded_body_is_gone_settles_as_body_gone() {
    let Some(CrawlOnAws {
        sqs,
        urls,
        app,
        crawler,
        ..
    }) = CrawlOnAws::start("crawl body gone on aws").await
    else {
        return;
    };
    let host = PartnerHost::start([("/a.jpg", Answer::photo(Bytes::from(sample("dune.jpg"))))])
        .await
        .unwrap();
    let request = json!({"client_id": "acme", "offer_id": "gone-offer",
        "urls": [host.url("/a.jpg")]});
    let response = handlers::intake::handle(&crawler, intake_event("gone-1", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let tasks = take(&sqs, &urls["fetch-0"], 1).await;
    assert!(
        handlers::fetch::handle(&crawler, tasks)
            .await
            .batch_item_failures
            .is_empty()
    );
    let fetched: Vec<BlobKey> = app
        .files()
        .await
        .into_iter()
        .filter(|k| k.starts_with("fetched/"))
        .map(|k| BlobKey::parse(&k).unwrap())
        .collect();
    assert_eq!(fetched.len(), 1);
    app.service.ports().blobs.delete(&fetched).await.unwrap();

    let work = take(&sqs, &urls["process"], 1).await;
    let response = handlers::process::handle(&crawler, work).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let results = take(&sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(result["photos"][0]["status"], "failed", "{result}");
    assert_eq!(
        result["photos"][0]["error"]["kind"], "body_gone",
        "{result}"
    );
}

/// The AWS app and a partner host serving one banner photo at `/banner.jpg`.
async fn with_banner(name: &str) -> Option<(CrawlOnAws, PartnerHost)> {
    let aws = CrawlOnAws::start(name).await?;
    let host = PartnerHost::start([(
        "/banner.jpg",
        Answer::photo(Bytes::from(sample("storm.jpg"))),
    )])
    .await
    .unwrap();
    Some((aws, host))
}

/// A popular URL on AWS: the crawls that joined its download are told a page per invocation.
/// The fetch function that finished the download tells about a page and hands the rest of its
/// groups on to the settle queue, where the intake function tells each page and hands on the
/// one after; every crawl gets its result once, the host sees one request, and no filing is
/// left.
#[tokio::test]
async fn a_popular_urls_joined_crawls_are_told_a_page_per_invocation() {
    const JOINERS: usize = 205;
    let Some((
        CrawlOnAws {
            sqs,
            urls,
            app,
            crawler,
            ..
        },
        host,
    )) = with_banner("popular url on aws").await
    else {
        return;
    };
    let crawl = |offer: String| json!({"client_id": "acme", "offer_id": offer, "urls": [host.url("/banner.jpg")]});
    let response =
        handlers::intake::handle(&crawler, intake_event("p-0", &crawl("first".into()))).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    // The others join while its task waits on the tier queue.
    use futures_util::StreamExt;
    let joined: Vec<usize> = futures_util::stream::iter(0..JOINERS)
        .map(|i| {
            let (crawler, request) = (&crawler, crawl(format!("joiner-{i}")));
            async move {
                let event = intake_event(&format!("p-{}", i + 1), &request);
                handlers::intake::handle(crawler, event)
                    .await
                    .batch_item_failures
                    .len()
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(joined.iter().all(|&failed| failed == 0));
    assert_eq!(crawler.counts().urls_joined, JOINERS as u64);

    let fetching = app
        .crawler(Processing::InlineWhenItFits, &[])
        .finishing_elsewhere();
    let response = handlers::fetch::handle(&fetching, take(&sqs, &urls["fetch-0"], 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(host.requests(), 1);

    // The settle queue: the crawls the fetch function settled, and the pages handed on.
    let mut pages = 0;
    loop {
        let event = drain(&sqs, &urls["settle"]).await;
        if event.records.is_empty() {
            break;
        }
        pages += event
            .records
            .iter()
            .filter(|m| {
                m.body
                    .as_deref()
                    .unwrap_or_default()
                    .contains("\"joiners\"")
            })
            .count();
        let response = handlers::settle::handle(&crawler, event).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    // The fetch function told about a page and handed the other groups on, each group's
    // pages one after another: at least the pages beyond the first, at most a page more
    // than the groups (a group of more than a page hands on its second).
    let at_least = JOINERS.div_ceil(imgest_crawl::JOINERS_PER_PAGE) - 1;
    assert!(
        (at_least..=imgest_crawl::JOINER_GROUPS + at_least).contains(&pages),
        "{pages} pages handed on"
    );

    let mut results = SqsEvent::default();
    loop {
        let event = drain(&sqs, &urls["results"]).await;
        if event.records.is_empty() {
            break;
        }
        results.records.extend(event.records);
    }
    let mut offers = ok_offers(&results);
    assert_eq!(offers.len(), JOINERS + 1);
    offers.dedup();
    assert_eq!(offers.len(), JOINERS + 1, "a crawl told twice");
    let documents = &app.service.ports().documents;
    let now = app.service.ports().clock.now();
    let hash = imgest_core::domain::NormalizedUrl::parse(
        &host.url("/banner.jpg"),
        &crawler.settings().normalization,
    )
    .unwrap()
    .hash();
    let left = joiners_filed(documents.as_ref(), &hash, 10, now).await;
    assert!(left.iter().all(|&n| n == 0), "{left:?}");
}

/// A fetch function that dies after recording a popular URL's outcome, before telling the
/// crawls that joined: its task is delivered again, finds the URL settled, and tells them.
#[tokio::test]
async fn joined_crawls_a_dead_finisher_left_untold_are_told_by_its_task_delivered_again() {
    let Some((
        CrawlOnAws {
            sqs,
            urls,
            app,
            crawler,
            ..
        },
        host,
    )) = with_banner("popular url, finisher dies").await
    else {
        return;
    };
    for (i, offer) in ["first", "second", "third"].iter().enumerate() {
        let request = json!({"client_id": "acme", "offer_id": offer,
            "urls": [host.url("/banner.jpg")]});
        let event = intake_event(&format!("d-{i}"), &request);
        let response = handlers::intake::handle(&crawler, event).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    assert_eq!(crawler.counts().urls_joined, 2);

    let mut ports = app.service.ports().clone();
    ports.documents = std::sync::Arc::new(AsSeen::over(ports.documents.clone()).dying());
    let dying = imgest_crawl::Crawler::new(
        std::sync::Arc::new(app.service_over(ports, app.pipeline_config())),
        crawler.settings().clone(),
        Processing::Inline,
    );
    let task = take(&sqs, &urls["fetch-0"], 1).await;
    let response = handlers::fetch::handle(&dying, task.clone()).await;
    assert_eq!(response.batch_item_failures.len(), 1, "{response:?}");
    // The crawl that started the download was told with the outcome; the joiners were not.
    let results = take(&sqs, &urls["results"], 1).await;
    let first: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(first["offer_id"], "first");

    let response = handlers::fetch::handle(&crawler, task).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(host.requests(), 1);
    let results = take(&sqs, &urls["results"], 2).await;
    assert_eq!(ok_offers(&results), ["second", "third"]);
}

/// A crawl whose intake reads a popular URL's record from before its download ended (a peek
/// behind, as DynamoDB's eventually consistent read may be) still settles: over a record whose
/// download nobody had joined yet, its mark conflicts and it reads again; over one already
/// joined, it files itself, finds its group's end mark the finisher wrote before telling, and
/// settles from the recorded outcome itself. Neither waits for a finisher that has gone.
#[tokio::test]
async fn crawls_joining_over_a_stale_read_as_the_download_ends_settle_themselves() {
    let Some((
        CrawlOnAws {
            sqs,
            urls,
            app,
            crawler,
            ..
        },
        host,
    )) = with_banner("popular url, stale joins").await
    else {
        return;
    };
    let documents = app.service.ports().documents.clone();
    let hash = imgest_core::domain::NormalizedUrl::parse(
        &host.url("/banner.jpg"),
        &crawler.settings().normalization,
    )
    .unwrap()
    .hash();
    let request = |offer: &str| json!({"client_id": "acme", "offer_id": offer, "urls": [host.url("/banner.jpg")]});
    let record = || async {
        let now = app.service.ports().clock.now();
        documents
            .get_document("url", hash.as_str(), now)
            .await
            .unwrap()
    };
    async fn intake(crawler: &Crawler, offer: &str, request: Value) {
        let event = intake_event(&format!("stale-{offer}"), &request);
        let response = handlers::intake::handle(crawler, event).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    intake(&crawler, "first", request("first")).await;
    let running = record().await;
    intake(&crawler, "second", request("second")).await;
    assert_eq!(crawler.counts().urls_joined, 1);
    let joined = record().await;
    assert_ne!(
        running, joined,
        "the first joiner marks the download joined"
    );
    fetch_then_process(&sqs, &urls, &crawler, 1).await;
    let told = take(&sqs, &urls["results"], 2).await;
    assert_eq!(ok_offers(&told), ["first", "second"]);

    for (offer, seen) in [("third", running), ("fourth", joined)] {
        let mut ports = app.service.ports().clone();
        ports.documents =
            std::sync::Arc::new(AsSeen::over(documents.clone()).behind(hash.as_str(), seen));
        let behind = imgest_crawl::Crawler::new(
            std::sync::Arc::new(app.service_over(ports, app.pipeline_config())),
            crawler.settings().clone(),
            Processing::Inline,
        );
        intake(&behind, offer, request(offer)).await;
        assert_eq!(behind.counts().urls_joined, 0, "{offer} waits for nobody");
        let result = take(&sqs, &urls["results"], 1).await;
        assert_eq!(ok_offers(&result), [offer]);
    }
    assert_eq!(host.requests(), 1);
    let now = app.service.ports().clock.now();
    let left = joiners_filed(documents.as_ref(), &hash, 10, now).await;
    assert!(left.iter().all(|&n| n == 0), "{left:?}");
}

/// The settle queue's pages of joined crawls are input like any other: a page a partner sent
/// is refused, and one of the stack's naming no URL hash, or starting at a cursor the store
/// never gave, is a dead letter with its reason, and nobody is told; a page of a URL with
/// nothing recorded tells nobody.
#[tokio::test]
async fn forged_pages_of_joined_crawls_are_dead_letters_with_their_reasons() {
    let Some((
        CrawlOnAws {
            sqs, urls, crawler, ..
        },
        host,
    )) = with_banner("forged pages of joiners").await
    else {
        return;
    };
    let dead = with_dead_letter_queue(&sqs, &urls["settle"], 5).await;
    // A URL with its outcome recorded (nobody joined it).
    let request =
        json!({"client_id": "acme", "offer_id": "banner", "urls": [host.url("/banner.jpg")]});
    let response = handlers::intake::handle(&crawler, intake_event("f-1", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    fetch_then_process(&sqs, &urls, &crawler, 1).await;
    take(&sqs, &urls["results"], 1).await;
    let hash = imgest_core::domain::NormalizedUrl::parse(
        &host.url("/banner.jpg"),
        &crawler.settings().normalization,
    )
    .unwrap()
    .hash();

    let page = |url_hash: &str, from: &str| {
        stack_event(
            "forged",
            &json!({"joiners": {"url_hash": url_hash, "from": from}}),
        )
    };
    // A partner's page is refused before it is read.
    let partners = intake_event(
        "forged",
        &json!({"joiners": {"url_hash": hash.as_str(), "from": "x"}}),
    );
    let cases = [
        (partners, Some("forbidden")),
        (page("not a url hash", "x"), Some("unusable")),
        (page(hash.as_str(), "not a cursor"), Some("bad_cursor")),
        (
            stack_event(
                "forged",
                &json!({"joiners": {"url_hash": hash.as_str(), "group": 16, "from": ""}}),
            ),
            Some("unusable"),
        ),
        (
            page("0cc175b9c0f1b6a831c399e269772661", "not a cursor"),
            None,
        ),
    ];
    for (event, kind) in cases {
        let response = handlers::settle::handle(&crawler, event).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        match kind {
            Some(kind) => {
                let letters = take(&sqs, &dead, 1).await;
                let got = &letters.records[0].message_attributes["imgest.kind"];
                assert_eq!(got.string_value.as_deref(), Some(kind));
            }
            None => assert!(drain(&sqs, &dead).await.records.is_empty()),
        }
    }
    assert!(drain(&sqs, &urls["results"]).await.records.is_empty());
    assert_eq!(host.requests(), 1);
}
