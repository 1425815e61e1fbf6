//! Dead letters listed and redriven (`imgest dlq`) on both backends: the local task queue's
//! dead-letter list, and an SQS queue's dead-letter queue found through its redrive policy.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use imgest_core::ports::Reason;

use crate::crawl_aws::{CrawlOnAws, drain, with_dead_letter_queue};
use crate::support::TestApp;

#[tokio::test]
async fn dead_letters_are_listed_with_their_reasons_and_redriven_locally() {
    let app = TestApp::start().await;
    let service = &app.service;
    let queue = service.ports().queue.clone().unwrap();
    let now = service.ports().clock.now();
    for key in ["a", "b"] {
        queue
            .enqueue("process", key, &format!("{{\"task\": \"{key}\"}}"), now)
            .await
            .unwrap();
    }
    for d in queue
        .receive("process", now, 2, Duration::from_secs(60))
        .await
        .unwrap()
    {
        queue
            .dead_letter(&d, &Reason::new("storage_unavailable", "down"), now)
            .await
            .unwrap();
    }
    let queues = service.dead_letter_queues();
    assert!(queues.contains(&"process".to_owned()) && !queues.contains(&"results".to_owned()));
    let letters = service.dead_letters(&queues, 10).await.unwrap();
    let process = &letters.iter().find(|(q, _)| q == "process").unwrap().1;
    assert_eq!(process.len(), 2);
    assert_eq!(
        process[0].reason,
        Some(Reason::new("storage_unavailable", "down"))
    );

    assert_eq!(service.redrive("process", 1).await.unwrap(), 1);
    assert_eq!(service.redrive("process", 10).await.unwrap(), 1);
    let back = queue
        .receive("process", now, 10, Duration::from_secs(60))
        .await
        .unwrap();
    let mut keys: Vec<&str> = back.iter().map(|d| d.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["a", "b"]);
    assert!(
        service
            .dead_letters(&queues, 10)
            .await
            .unwrap()
            .iter()
            .all(|(_, l)| l.is_empty())
    );
}

#[tokio::test]
async fn dead_letters_are_listed_and_redriven_on_aws() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("dlq on aws").await else {
        return;
    };
    with_dead_letter_queue(&sqs, &urls["process"], 1).await;
    for body in ["one", "two"] {
        sqs.send_message()
            .queue_url(&urls["process"])
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    // Received once and never deleted: the next receive moves them to the dead-letter queue.
    for _ in 0..3 {
        sqs.receive_message()
            .queue_url(&urls["process"])
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .send()
            .await
            .unwrap();
    }
    let service = &app.service;
    let queues = vec!["process".to_owned(), "results".to_owned()];
    let letters = service.dead_letters(&queues, 10).await.unwrap();
    assert_eq!(
        letters.len(),
        1,
        "results has no dead-letter queue: {letters:?}"
    );
    let mut bodies: Vec<&str> = letters[0].1.iter().map(|l| l.body.as_str()).collect();
    bodies.sort_unstable();
    assert_eq!(bodies, ["one", "two"]);
    assert_eq!(
        service
            .ports()
            .messages
            .counts("process")
            .await
            .unwrap()
            .dead,
        2
    );

    assert_eq!(service.redrive("process", 1).await.unwrap(), 1);
    assert_eq!(service.redrive("process", 10).await.unwrap(), 1);
    assert_eq!(service.redrive("process", 10).await.unwrap(), 0);
    let mut back: Vec<String> = drain(&sqs, &urls["process"])
        .await
        .records
        .into_iter()
        .map(|m| m.body.unwrap())
        .collect();
    back.sort_unstable();
    assert_eq!(back, ["one", "two"]);
    assert!(
        service.dead_letters(&queues, 10).await.unwrap()[0]
            .1
            .is_empty()
    );
}

/// Runs the handler of `queue` on `event` (each fetch tier's with a crawler of that tier).
async fn handle(
    app: &TestApp,
    queue: &str,
    event: aws_lambda_events::event::sqs::SqsEvent,
) -> imgest_lambda::BatchResponse {
    use imgest_crawl::Processing;
    use imgest_lambda as handlers;
    match queue {
        "intake" => {
            imgest_lambda_crawl::intake::handle(&app.crawler(Processing::Handoff, &[]), event).await
        }
        "process" => {
            imgest_lambda_crawl::process::handle(&app.crawler(Processing::Handoff, &[]), event)
                .await
        }
        "backfill" => {
            handlers::backfill::tasks(&app.service, &crate::support::stack_senders(), event).await
        }
        fetch => {
            let tier = fetch.trim_start_matches("fetch-");
            let crawler = app.crawler(Processing::Handoff, &[("IMGEST_FETCH_TIER", tier)]);
            imgest_lambda_crawl::fetch::handle(&crawler, event).await
        }
    }
}

/// The one dead letter of `queue`, with its reason (which must be `unusable`).
async fn the_dead_letter(app: &TestApp, queue: &str) -> imgest_core::ports::DeadMessage {
    let mut letters = app
        .service
        .dead_letters(&[queue.to_owned()], 10)
        .await
        .unwrap();
    let letters = letters.remove(0).1;
    assert_eq!(letters.len(), 1, "{queue}: {letters:?}");
    let letter = letters.into_iter().next().unwrap();
    let reason = letter
        .reason
        .clone()
        .unwrap_or_else(|| panic!("{queue}: no reason"));
    assert_eq!(reason.kind, Reason::UNUSABLE, "{queue}: {reason:?}");
    assert!(!reason.message.is_empty(), "{queue}");
    letter
}

#[tokio::test]
async fn every_queue_gives_up_on_a_poison_message_with_its_reason_and_a_redrive_keeps_it() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) =
        CrawlOnAws::start("dead letters of every queue").await
    else {
        return;
    };
    // As the template has them: the crawl's queues share one dead-letter queue.
    crate::crawl_aws::with_shared_dead_letter_queue(
        &sqs,
        &[
            &urls["intake"],
            &urls["fetch-0"],
            &urls["fetch-1"],
            &urls["fetch-2"],
        ],
        5,
    )
    .await;
    with_dead_letter_queue(&sqs, &urls["process"], 5).await;
    with_dead_letter_queue(&sqs, &urls["backfill"], 3).await;
    for queue in [
        "intake", "fetch-0", "fetch-1", "fetch-2", "process", "backfill",
    ] {
        let poison = format!("poison for {queue}");
        sqs.send_message()
            .queue_url(&urls[queue])
            .message_body(&poison)
            .send()
            .await
            .unwrap();
        let event = crate::crawl_aws::take(&sqs, &urls[queue], 1).await;
        let response = handle(&app, queue, event).await;
        assert!(
            response.batch_item_failures.is_empty(),
            "{queue}: {response:?}"
        );
        let letter = the_dead_letter(&app, queue).await;
        assert_eq!(letter.body, poison);
        assert_eq!(letter.attempts, Some(1), "{queue}");

        // Redriven, the message carries its original sender back onto its queue (nothing
        // else it said); given up on again, it is one dead letter again, with its reason.
        assert_eq!(app.service.redrive(queue, 10).await.unwrap(), 1, "{queue}");
        let back = crate::crawl_aws::take(&sqs, &urls[queue], 1).await;
        let kept = &back.records[0].message_attributes;
        assert_eq!(
            kept["imgest.sender"].string_value.as_deref(),
            Some(crate::support::STACK_SENDER),
            "{queue}"
        );
        assert!(!kept.contains_key("imgest.kind"), "{queue}: {kept:?}");
        let response = handle(&app, queue, back).await;
        assert!(
            response.batch_item_failures.is_empty(),
            "{queue}: {response:?}"
        );
        assert_eq!(the_dead_letter(&app, queue).await.body, poison);
        // Emptied for the next queue's letters (the crawl's queues share one).
        assert_eq!(app.service.redrive(queue, 10).await.unwrap(), 1);
        crate::crawl_aws::take(&sqs, &urls[queue], 1).await;
    }
    assert_eq!(app.service.counts().messages_dead_lettered, 12);
}
