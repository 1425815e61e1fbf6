//! Backfill on the AWS adapters (DynamoDB's parallel scan, the `backfill` SQS queue, its
//! dead-letter queue) through the `backfill` function's handler, fed the batches Lambda would
//! deliver: messages received from the real queue. And record writes whose answer is lost
//! (applied, then refused when the SDK makes them again) keeping their files.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use imgest_aws::DynamoStore;
use imgest_core::domain::{ImageId, ImageRecord};
use imgest_flows::Service;
use imgest_flows::backfill::{Reprocessed, RunState};
use imgest_lambda::backfill;
use imgest_testing::aws::LoseAnswer;

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
            record.variant_set() == Some(new.imaging().unwrap().version())
        }
    };

    new.confirm_variants(&[]).await.unwrap();
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
    let response = backfill::tasks(&new, &crate::support::stack_senders(), batch).await;
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
    new.confirm_variants(&[]).await.unwrap();
    new.backfill_start().await.unwrap();
    assert_eq!(backfill::enumerate(&new).await.unwrap().queued, 3);
    // A task that is not an image id goes to the dead letters with its reason; the rest are
    // re-processed once each.
    let mut batch = take(&sqs, &urls["backfill"], 3).await;
    let mut junk = batch.records[0].clone();
    junk.message_id = Some("junk".into());
    junk.body = Some("not-an-image-id".into());
    batch.records.push(junk);
    let response = backfill::tasks(&new, &crate::support::stack_senders(), batch).await;
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
    app.service.confirm_variants(&[]).await.unwrap();
    app.service.backfill_start().await.unwrap();
    let status = app.service.backfill_status().await.unwrap();
    let failed: u64 = status.failed.iter().map(|(_, n)| n).sum();
    assert_eq!(failed, 1, "{status:?}");
}

/// The app's service with its image index on a DynamoDB client that loses the answer of its
/// `nth` request of `target`, and the pipeline making `variants` (the app's own when `None`).
fn losing_answers(
    app: &crate::support::TestApp,
    config: &aws_config::SdkConfig,
    lose: &Arc<LoseAnswer>,
    variants: Option<&str>,
) -> Service {
    let (_, table) = app.aws.clone().unwrap();
    let mut ports = app.service.ports().clone();
    ports.images = Arc::new(DynamoStore::new(LoseAnswer::dynamodb(lose, config), table));
    let mut pipeline = app.pipeline_config();
    if let Some(variants) = variants {
        pipeline.variants = variants.parse().unwrap();
    }
    app.service_over(ports, pipeline)
}

/// Every file the record of `id` names is readable.
async fn files_readable(service: &Service, id: &ImageId) -> ImageRecord {
    let record = service.ports().images.get(id).await.unwrap().unwrap();
    assert!(record.is_ready());
    for key in record.file_keys() {
        assert!(
            service.ports().blobs.get(&key).await.is_ok(),
            "{key} of {id} is missing"
        );
    }
    record
}

#[tokio::test]
async fn a_backfill_whose_record_write_is_applied_then_refused_keeps_its_files() {
    let test = "backfill answer lost on aws";
    let Some(config) = imgest_testing::aws::sdk_config(test).await else {
        return;
    };
    let app = crate::support::TestApp::start_aws(test, &[]).await.unwrap();
    let id = ImageId::parse(
        &app.upload_ok(&imgest_hosts::hostile::jpeg(48, 32, false, None))
            .await,
    )
    .unwrap();
    let before = app.service.ports().images.get(&id).await.unwrap().unwrap();

    // The re-processing's one UpdateItem is its record write (`replace_files`): applied, its
    // answer lost, made again by the SDK and refused by its own result.
    let lose = LoseAnswer::new("DynamoDB_20120810.UpdateItem", 1);
    let new = losing_answers(&app, &config, &lose, Some(WITH_TINY));
    assert_eq!(new.reprocess(&id).await.unwrap(), Reprocessed::Done);
    assert_eq!(lose.lost(), 1);
    assert_eq!(new.counts().record_answers_lost, 1);
    let after = files_readable(&new, &id).await;
    assert_ne!(after.generation, before.generation);
    assert_eq!(after.variant_set(), Some(new.imaging().unwrap().version()));
}

#[tokio::test]
async fn an_upload_and_a_crawled_photo_whose_record_write_is_applied_then_refused_keep_their_files()
{
    let test = "record answer lost on aws";
    let Some(config) = imgest_testing::aws::sdk_config(test).await else {
        return;
    };
    let app = crate::support::TestApp::start_aws(test, &[]).await.unwrap();
    // An upload's record write is its first UpdateItem (`complete`; the claim is a PutItem).
    let lose = LoseAnswer::new("DynamoDB_20120810.UpdateItem", 1);
    let service = losing_answers(&app, &config, &lose, None);
    let uploaded = service
        .upload_bytes(imgest_hosts::hostile::jpeg(50, 34, false, None).into())
        .await
        .unwrap();
    assert!(!uploaded.deduplicated);
    assert_eq!(lose.lost(), 1);
    files_readable(&service, &uploaded.record.id).await;

    // A crawled photo's is its first PutItem (`create_ready`: no claim).
    let lose = LoseAnswer::new("DynamoDB_20120810.PutItem", 1);
    let service = losing_answers(&app, &config, &lose, None);
    let body = bytes::Bytes::from(imgest_hosts::hostile::jpeg(52, 36, false, None));
    let fetched = service
        .store_fetched(ImageId::of_bytes(&body), body, None)
        .await
        .unwrap();
    assert!(!fetched.deduplicated);
    assert_eq!(lose.lost(), 1);
    assert_eq!(service.counts().record_answers_lost, 1);
    files_readable(&service, &fetched.record.id).await;
}

/// The enumeration on AWS queues the hottest images first, each task due one rate interval
/// after the last (an SQS delay): they arrive in that order, at that rate.
#[tokio::test]
async fn a_backfill_on_aws_queues_the_hottest_images_first_at_its_rate() {
    use aws_sdk_sqs::types::QueueAttributeName;
    let vars = [("IMGEST_BACKFILL_RATE", "1")];
    let Some(CrawlOnAws { sqs, urls, app, .. }) =
        CrawlOnAws::start_with("backfill rate on aws", &vars).await
    else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(
            app.upload_ok(&imgest_hosts::hostile::jpeg(40 + i, 30, false, None))
                .await,
        );
    }
    // One image linked by four offers, one by one, two orphans.
    for offer in ["a", "b", "c", "d"] {
        assert_eq!(app.link(offer, &[&ids[0]]).await.status, 200);
    }
    assert_eq!(app.link("e", &[&ids[1]]).await.status, 200);
    let new = app.service_with_variants(WITH_TINY);
    new.confirm_variants(&[]).await.unwrap();
    new.backfill_start().await.unwrap();
    assert_eq!(backfill::enumerate(&new).await.unwrap().queued, 4);

    // At one a second: the first is due now, the others later.
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&urls["backfill"])
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    let count = |name: QueueAttributeName| attributes[&name].parse::<u32>().unwrap();
    assert_eq!(
        (
            count(QueueAttributeName::ApproximateNumberOfMessages),
            count(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        ),
        (1, 3)
    );
    // They arrive one by one, hottest first.
    let mut order = Vec::new();
    for _ in 0..20 {
        if order.len() == ids.len() {
            break;
        }
        let received = sqs
            .receive_message()
            .queue_url(&urls["backfill"])
            .max_number_of_messages(1)
            .wait_time_seconds(2)
            .send()
            .await
            .unwrap();
        for m in received.messages.unwrap_or_default() {
            order.push(m.body.unwrap());
        }
    }
    assert_eq!(order.len(), 4, "{order:?}");
    assert_eq!(order[..2], ids[..2], "the most linked first");
    let mut orphans = order[2..].to_vec();
    orphans.sort();
    let mut expected = ids[2..].to_vec();
    expected.sort();
    assert_eq!(orphans, expected);
    assert!(drain(&sqs, &urls["backfill"]).await.records.is_empty());
}
