//! `SqsSender` on the emulator: the `MessageSender` contract (one test per check, each on a
//! fresh queue of its own), batched sends with per-message delays on SQS, and delays past the
//! SQS threshold (long waits): through the delayed-send state machine
//! (`infra/statemachine/delayed-send.asl.json`) on Step Functions to the fetch queues, or
//! chained: sent with SQS's longest delay and their due instant.
//!
//! Messages are awaited with long-polling `ReceiveMessage` calls until a deadline, never with
//! sleeps. Without an emulator the tests say they skipped (unless `IMGEST_TEST_AWS=1` or `CI`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use imgest_aws::sqs::{DUE_ATTRIBUTE, MAX_CHAINED_DELAY};
use imgest_aws::{SqsSender, StepFunctionsDelay};
use imgest_core::ports::{MessageSender, OutgoingMessage, StoreError};
use imgest_testing as testing;
use imgest_testing::aws::{self, SqsQueueReader};
use imgest_testing::{Fixture, SenderPorts};

/// The logical name the tests send to.
const QUEUE: &str = "jobs";

/// A fresh queue and a client for it.
async fn fresh_queue(config: &SdkConfig) -> (aws_sdk_sqs::Client, String) {
    let sqs = aws_sdk_sqs::Client::new(config);
    let url = sqs
        .create_queue()
        .queue_name(aws::unique_name("imgest-test"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    (sqs, url)
}

/// A sender to a fresh queue (named [`QUEUE`]) that can be read back, or `None` when AWS
/// tests are skipped.
async fn sqs_sender_ports(test: &str) -> Option<SenderPorts> {
    let config = aws::sdk_config(test).await?;
    let (sqs, url) = fresh_queue(&config).await;
    aws::with_dead_letter_queue(&sqs, &url, 5).await;
    let sender = SqsSender::new(
        sqs.clone(),
        HashMap::from([(QUEUE.to_owned(), url.clone())]),
    );
    Some(SenderPorts {
        sender: Arc::new(sender),
        queue: QUEUE.to_owned(),
        reader: Arc::new(SqsQueueReader::new(sqs, url)),
        unknown_queue: Some("unknown".to_owned()),
    })
}

/// The contract's factory: each test gets a fresh queue of its own.
async fn sqs_sender(test: &str) -> Option<Fixture<SenderPorts>> {
    Some(Fixture::new(sqs_sender_ports(test).await?))
}

imgest_testing::message_sender_contract_tests!(sqs_sender, super::sqs_sender);

/// The whole suite on one queue, twice: checks must not trip over each other's messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_suite_twice_on_one_queue() {
    let Some(ports) = sqs_sender_ports("the_whole_suite_twice_on_one_queue").await else {
        return;
    };
    testing::message_sender::contract(ports.clone()).await;
    testing::message_sender::contract(ports).await;
}

fn message(body: &str, delay: Duration) -> OutgoingMessage {
    OutgoingMessage::delayed(body, delay)
}

/// Receives (and deletes) messages until `want` arrived or `within` passed; each body with its
/// due instant if it carries one and the time it was received, in order of arrival.
async fn receive(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    want: usize,
    within: Duration,
) -> Vec<(String, Option<String>, Instant)> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        // Long polling: the call returns as soon as a message is there, or after the wait.
        let wait = i32::try_from(left.as_secs().clamp(1, 5)).unwrap();
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(wait)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        let now = Instant::now();
        for m in out.messages() {
            let due = m
                .message_attributes()
                .and_then(|a| a.get(DUE_ATTRIBUTE))
                .and_then(|v| v.string_value().map(str::to_owned));
            got.push((m.body().unwrap_or_default().to_owned(), due, now));
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
    }
    got
}

fn bodies(got: &[(String, Option<String>, Instant)]) -> BTreeSet<&str> {
    got.iter().map(|(b, _, _)| b.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_arrive_and_a_delayed_one_arrives_later() {
    let Some(config) = aws::sdk_config("messages_arrive_and_a_delayed_one_arrives_later").await
    else {
        return;
    };
    let (sqs, url) = fresh_queue(&config).await;
    let sender = SqsSender::new(
        sqs.clone(),
        HashMap::from([(QUEUE.to_owned(), url.clone())]),
    );
    let sent = Instant::now();
    sender
        .send(
            QUEUE,
            &[
                message("now-1", Duration::ZERO),
                message("later", Duration::from_secs(2)),
                message("now-2", Duration::ZERO),
            ],
        )
        .await
        .unwrap();
    let got = receive(&sqs, &url, 3, Duration::from_secs(30)).await;
    assert_eq!(bodies(&got), BTreeSet::from(["later", "now-1", "now-2"]));
    let (_, _, later_at) = got.iter().find(|(b, _, _)| b == "later").unwrap();
    assert!(
        later_at.duration_since(sent) >= Duration::from_millis(1500),
        "the delayed message came after {:?}",
        later_at.duration_since(sent)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_queue_names_are_not_found_and_missing_queues_are_failures() {
    let Some(config) =
        aws::sdk_config("unknown_queue_names_are_not_found_and_missing_queues_are_failures").await
    else {
        return;
    };
    let (sqs, url) = fresh_queue(&config).await;
    sqs.delete_queue().queue_url(&url).send().await.unwrap();
    let sender = SqsSender::new(sqs, HashMap::from([(QUEUE.to_owned(), url)]));
    let batch = [message("x", Duration::ZERO)];
    assert!(matches!(
        sender.send("other", &batch).await,
        Err(StoreError::NotFound(_))
    ));
    // A configured queue that does not exist is a configuration error, not a missing record.
    let err = sender.send(QUEUE, &batch).await.unwrap_err();
    assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_delays_are_chained_with_their_due_instant() {
    let Some(config) = aws::sdk_config("long_delays_are_chained_with_their_due_instant").await
    else {
        return;
    };
    let (sqs, url) = fresh_queue(&config).await;
    let sent_at = imgest_core::domain::Timestamp::from_millis(1_800_000_000_000);
    let clock = Arc::new(imgest_core::ports::ManualClock::new(sent_at));
    let sender = SqsSender::new(
        sqs.clone(),
        HashMap::from([(QUEUE.to_owned(), url.clone())]),
    )
    .with_max_sqs_delay(Duration::from_secs(1))
    .with_clock(clock);
    sender
        .send(
            QUEUE,
            &[
                message("direct", Duration::ZERO),
                message("chained", Duration::from_secs(3600)),
            ],
        )
        .await
        .unwrap();

    // Both arrive within the emulator's first seconds: the chained one after its first hop,
    // carrying the instant it is due (an hour after it was sent).
    let due = received_with_due(&sqs, &url, 2).await;
    assert_eq!(due.len(), 2, "{due:?}");
    assert_eq!(
        due["direct"], None,
        "a message within SQS's delay is not chained"
    );
    assert_eq!(
        due["chained"].as_deref(),
        Some((sent_at.as_millis() + 3_600_000).to_string().as_str())
    );
}

/// The bodies of up to `want` messages received from `url` within a minute (deleted), each with
/// its due instant if it carries one.
async fn received_with_due(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    want: usize,
) -> HashMap<String, Option<String>> {
    receive(sqs, url, want, Duration::from_secs(60))
        .await
        .into_iter()
        .map(|(body, due, _)| (body, due))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_waits_to_the_fetch_queues_go_through_the_state_machine_and_others_are_chained() {
    let test = "long_waits_to_the_fetch_queues_go_through_the_state_machine_and_others_are_chained";
    let Some(config) = aws::sdk_config(test).await else {
        return;
    };
    let (sqs, fetch) = fresh_queue(&config).await;
    let (_, webhooks) = fresh_queue(&config).await;
    let sfn = aws_sdk_sfn::Client::new(&config);
    // The state machine sends only to the fetch queues: here all three are this one.
    let arn = aws::delayed_send_state_machine(&sfn, [&fetch, &fetch, &fetch]).await;
    let sender = SqsSender::new(
        sqs.clone(),
        HashMap::from([
            ("fetch-1".to_owned(), fetch.clone()),
            ("webhooks".to_owned(), webhooks.clone()),
        ]),
    )
    .with_max_sqs_delay(Duration::from_secs(1))
    .with_step_functions(StepFunctionsDelay::new(sfn.clone(), arn.clone()));

    sender
        .send(
            "fetch-1",
            &[
                message("direct", Duration::ZERO),
                message("waited", Duration::from_secs(2)),
            ],
        )
        .await
        .unwrap();
    // The long wait went as an execution, which waited, then sent the body as it was: no hop,
    // no due instant for the fetch function to read.
    let got = received_with_due(&sqs, &fetch, 2).await;
    assert_eq!(
        got,
        HashMap::from([("direct".to_owned(), None), ("waited".to_owned(), None)])
    );
    assert_eq!(aws::executions(&sfn, &arn, None).await, 1);

    // A queue the state machine does not serve (the webhook deliveries) gets a chain.
    sender
        .send("webhooks", &[message("chained", Duration::from_secs(3600))])
        .await
        .unwrap();
    let chained = received_with_due(&sqs, &webhooks, 1).await;
    assert!(chained["chained"].is_some(), "{chained:?}");
    assert_eq!(aws::executions(&sfn, &arn, None).await, 1);

    // A wait beyond any the flows schedule is refused before anything starts.
    let refused = sender
        .send(
            "fetch-1",
            &[message(
                "too late",
                MAX_CHAINED_DELAY + Duration::from_secs(1),
            )],
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::Backend { .. })),
        "{refused:?}"
    );
    assert_eq!(aws::executions(&sfn, &arn, None).await, 1);
}
