//! Backfill on the AWS adapters (DynamoDB's parallel scan, the `backfill` SQS queue, its
//! dead-letter queue) through the `backfill` function's handler, fed the batches Lambda would
//! deliver: messages received from the real queue.

#![allow(clippy::unwrap_used)]

use imgest_core::domain::ImageId;
use imgest_flows::backfill::RunState;
use imgest_lambda::backfill;

use crate::crawl_aws::{CrawlOnAws, drain, take, with_dead_letter_queue};

const WITH_TINY: &str = "large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200,tiny=fit:16x16";

#[tokio::test]
async fn a_backfill_runs_through_the_function_on_aws_and_a_pause_puts_its_tasks_back() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) =
        CrawlOnAws::start_with("backfill on aws", &[("IMGEST_BACKFILL_RATE", "0")]).await
    else {
        return;
    };
    let dead = with_dead_letter_queue(&sqs, &urls["backfill"], 3).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            app.upload_ok(&imgest_hosts::hostile::jpeg(40 + i, 30, false, None))
                .await,
        );
    }
    assert_eq!(app.link("a", &[&ids[0]]).await.status, 200);
    let new = app.service_with_variants(WITH_TINY);
    let current = |id: &str| {
        let new = new.clone();
        let id = ImageId::parse(id).unwrap();
        async move {
            let record = new.ports().images.get(&id).await.unwrap().unwrap();
            record.variant_set() == Some(new.pipeline().version())
        }
    };

    new.backfill_start().await.unwrap();
    // The schedule: every pass over every segment (3 records read per pass), all three queued.
    let report = backfill::enumerate(&new).await.unwrap();
    assert_eq!((report.scanned, report.queued), (12, 3), "{report:?}");
    let status = new.backfill_status().await.unwrap();
    assert!(status.run.as_ref().unwrap().enumerated());
    assert_eq!((status.pending, status.done), (3, 0), "{status:?}");

    // Paused: a batch re-processes nothing and its tasks go back on the queue, delayed.
    new.backfill_pause().await.unwrap();
    let batch = take(&sqs, &urls["backfill"], 3).await;
    let response = backfill::tasks(&new, batch).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    for id in &ids {
        assert!(!current(id).await);
    }
    assert_eq!(new.backfill_status().await.unwrap().pending, 3);
    assert!(
        drain(&sqs, &urls["backfill"]).await.records.is_empty(),
        "not due yet"
    );

    // The parked tasks are 15 minutes away: purge them and run again (a new run, as the old
    // one was enumerated), which queues the three again.
    sqs.purge_queue()
        .queue_url(&urls["backfill"])
        .send()
        .await
        .unwrap();
    new.backfill_resume().await.unwrap();
    assert_eq!(
        new.backfill_status().await.unwrap().run.unwrap().state,
        RunState::Running
    );
    new.backfill_start().await.unwrap();
    assert_eq!(backfill::enumerate(&new).await.unwrap().queued, 3);
    // A task that is not an image id goes to the dead letters with its reason; the rest are
    // re-processed once each.
    let mut batch = take(&sqs, &urls["backfill"], 3).await;
    let mut junk = batch.records[0].clone();
    junk.message_id = Some("junk".into());
    junk.body = Some("not-an-image-id".into());
    batch.records.push(junk);
    let response = backfill::tasks(&new, batch).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let letters = drain(&sqs, &dead).await.records;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].body.as_deref(), Some("not-an-image-id"));
    let kind = &letters[0].message_attributes["imgest.kind"];
    assert_eq!(kind.string_value.as_deref(), Some("unusable"));
    for id in &ids {
        assert!(current(id).await, "{id} re-processed");
    }
    assert_eq!(new.counts().backfill_runs, 3);
    let status = new.backfill_status().await.unwrap();
    assert_eq!((status.pending, status.done), (0, 3), "{status:?}");
    assert!(status.finished);
    // Nothing left to enumerate.
    assert_eq!(backfill::enumerate(&new).await.unwrap().scanned, 0);
}

#[tokio::test]
async fn backfill_status_on_aws_counts_the_dead_letter_queue() {
    let Some(CrawlOnAws { sqs, urls, app, .. }) = CrawlOnAws::start("backfill dlq on aws").await
    else {
        return;
    };
    let dead = with_dead_letter_queue(&sqs, &urls["backfill"], 3).await;
    sqs.send_message()
        .queue_url(&dead)
        .message_body("0123456789abcdef0123456789abcdef")
        .send()
        .await
        .unwrap();
    app.service.backfill_start().await.unwrap();
    let status = app.service.backfill_status().await.unwrap();
    let failed: u64 = status.failed.iter().map(|(_, n)| n).sum();
    assert_eq!(failed, 1, "{status:?}");
}
