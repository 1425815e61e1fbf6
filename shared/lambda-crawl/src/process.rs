//! The `process` function, on the process queue: S3 event notifications of presigned uploads
//! (`incoming/{upload_id}`), and the photos the fetch functions downloaded
//! (`{"downloaded": ...}`, the body under `fetched/{url_hash}`). Each is processed once; a
//! redelivered message finds the upload finished, or the download settled and its body gone,
//! and does nothing (idempotent).
//!
//! Who may send what: S3 sends the notifications (the queue's policy admits it for this
//! stack's bucket only, and a notification names a key in that bucket, which only presigned
//! uploads write); a downloaded photo is believed only from the stack's roles (the fetch
//! functions), any other sender's goes to the dead letters as `forbidden`.

use aws_lambda_events::event::sqs::SqsEvent;

use imgest_core::domain::{BlobKey, UploadId};
use imgest_crawl::messages::{DownloadedPhoto, ProcessMessage};
use imgest_crawl::{Crawler, PROCESS_QUEUE};
use imgest_lambda::batch::{BatchResponse, ItemError, run_batch_then};

/// What a process queue message asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    Uploads(Vec<UploadId>),
    Download(DownloadedPhoto),
}

/// Handles one SQS batch; failures are reported per message id. The downloads' URLs are
/// settled together once every photo of the batch is processed.
pub async fn handle(crawler: &Crawler, event: SqsEvent) -> BatchResponse {
    let items = imgest_lambda::sqs_items(event, &crawler.settings().senders);
    let work = items.iter().map(|item| (item.id.clone(), item)).collect();
    let outcomes = run_batch_then(
        work,
        |item| async move {
            let work = work_in(&item.body)?;
            if let Work::Download(_) = work {
                item.from_the_stack()?;
            }
            match work {
                Work::Uploads(uploads) => {
                    for upload in uploads {
                        crawler.service().process_incoming(&upload).await?;
                    }
                    Ok(None)
                }
                Work::Download(photo) => Ok(crawler.process_download(photo).await?),
            }
        },
        |processed| async move { Ok(crawler.settle_downloads(processed).await?) },
    )
    .await;
    outcomes
        .settle(
            &items,
            &imgest_lambda::dead_letters(crawler.service(), PROCESS_QUEUE),
        )
        .await
}

/// What a message body asks for. S3's `s3:TestEvent` (sent when notifications are configured)
/// names no upload.
pub fn work_in(body: &str) -> Result<Work, ItemError> {
    let value: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| ItemError::unusable(format!("message body is not JSON: {e}")))?;
    if value.get("downloaded").is_some() {
        let message: ProcessMessage = serde_json::from_value(value)
            .map_err(|e| ItemError::unusable(format!("not a downloaded photo: {e}")))?;
        return Ok(Work::Download(message.downloaded));
    }
    if value.get("Event").and_then(|e| e.as_str()) == Some("s3:TestEvent") {
        return Ok(Work::Uploads(Vec::new()));
    }
    // Only the object keys matter; the rest of the notification is not required to parse.
    let records = value
        .get("Records")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| ItemError::unusable("not an S3 notification: no Records"))?;
    records
        .iter()
        .map(|r| {
            // S3 URL-encodes keys in notifications; incoming keys are plain hex, so anything
            // that would need decoding is not ours.
            let key = r["s3"]["object"]["key"].as_str().unwrap_or_default();
            BlobKey::parse(key)
                .and_then(|k| k.incoming_upload())
                .ok_or_else(|| {
                    ItemError::unusable(format!("{key:?} is not an incoming upload key"))
                })
        })
        .collect::<Result<_, _>>()
        .map(Work::Uploads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_uploads_or_a_download_and_test_events_name_none() {
        let id = UploadId::random();
        let record = |key: &str| {
            serde_json::json!({"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
                "eventTime": "2024-03-12T14:05:40.118Z", "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": "b"}, "object": {"key": key, "size": 5}}})
        };
        let body = serde_json::json!({"Records": [record(&format!("incoming/{id}"))]}).to_string();
        assert_eq!(work_in(&body).unwrap(), Work::Uploads(vec![id]));
        assert_eq!(
            work_in(r#"{"Service":"Amazon S3","Event":"s3:TestEvent"}"#).unwrap(),
            Work::Uploads(Vec::new())
        );
        let hash = "0cc175b9c0f1b6a831c399e269772661";
        let download =
            serde_json::json!({"downloaded": {"url_hash": hash, "attempts": 2, "etag": "\"x\""}});
        let Work::Download(photo) = work_in(&download.to_string()).unwrap() else {
            panic!("a download");
        };
        assert_eq!((photo.url_hash.as_str(), photo.attempts), (hash, 2));
        assert_eq!(photo.validator.etag.as_deref(), Some("\"x\""));

        let unusable = |body: &str| match work_in(body) {
            Err(ItemError::NeverSucceeds(reason)) if reason.kind == "unusable" => reason.message,
            other => panic!("{body}: {other:?}"),
        };
        unusable("nonsense");
        let bad = serde_json::json!({"downloaded": {"url_hash": "xyz", "attempts": 1}});
        assert!(unusable(&bad.to_string()).contains("not a downloaded photo"));
        let foreign = serde_json::json!({"Records": [record("ab/other")]}).to_string();
        assert!(unusable(&foreign).contains("not an incoming upload key"));
    }
}
