//! Dead letters listed and redriven (`imgest dlq`) on both backends: the local task queue's
//! dead-letter list, and an SQS queue's dead-letter queue found through its redrive policy.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

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
            .dead_letter(&d, "store_unavailable: down", now)
            .await
            .unwrap();
    }
    let queues = service.dead_letter_queues();
    assert!(queues.contains(&"process".to_owned()) && !queues.contains(&"results".to_owned()));
    let letters = service.dead_letters(&queues, 10).await.unwrap();
    let process = &letters.iter().find(|(q, _)| q == "process").unwrap().1;
    assert_eq!(process.len(), 2);
    assert_eq!(
        process[0].reason.as_deref(),
        Some("store_unavailable: down")
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
