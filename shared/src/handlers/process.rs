//! The `process` function: SQS messages whose bodies are S3 event notifications of objects
//! under `incoming/`: presigned uploads (`incoming/{upload_id}`) and new photos the fetch
//! functions downloaded (`incoming/url-{url_hash}`). Each is processed once; a redelivered
//! notification finds the upload finished, or the download settled and its body gone, and
//! does nothing (idempotent).

use aws_lambda_events::event::sqs::SqsEvent;

use super::batch::{BatchResponse, ItemError, run_batch};
use crate::domain::{BlobKey, UploadId};
use crate::feed::UrlHash;
use crate::flows::crawl::Crawler;

/// What an object under `incoming/` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Upload(UploadId),
    Download(UrlHash),
}

/// Handles one SQS batch; failures are reported per message id.
pub async fn handle(crawler: &Crawler, event: SqsEvent) -> BatchResponse {
    let items = super::sqs_items(event);
    run_batch(items, |body| async move {
        for incoming in incoming_in(&body)? {
            match incoming {
                Incoming::Upload(upload) => {
                    crawler.service().process_incoming(&upload).await?;
                }
                Incoming::Download(hash) => crawler.process_download(&hash).await?,
            }
        }
        Ok(())
    })
    .await
}

/// The objects an S3 notification names. S3's `s3:TestEvent` (sent when notifications are
/// configured) names none.
pub fn incoming_in(body: &str) -> Result<Vec<Incoming>, ItemError> {
    let value: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| ItemError::Unusable(format!("message body is not JSON: {e}")))?;
    if value.get("Event").and_then(|e| e.as_str()) == Some("s3:TestEvent") {
        return Ok(Vec::new());
    }
    // Only the object keys matter; the rest of the notification is not required to parse.
    let records = value
        .get("Records")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| ItemError::Unusable("not an S3 notification: no Records".into()))?;
    records
        .iter()
        .map(|r| {
            // S3 URL-encodes keys in notifications; incoming keys are plain hex, so anything
            // that would need decoding is not ours.
            let key = r["s3"]["object"]["key"].as_str().unwrap_or_default();
            let parsed = BlobKey::parse(key);
            let upload = parsed.as_ref().and_then(BlobKey::incoming_upload);
            let download = parsed
                .as_ref()
                .and_then(BlobKey::incoming_download_hash)
                .and_then(|h| UrlHash::parse(h).ok());
            match (upload, download) {
                (Some(upload), _) => Ok(Incoming::Upload(upload)),
                (None, Some(hash)) => Ok(Incoming::Download(hash)),
                (None, None) => Err(ItemError::Unusable(format!(
                    "{key:?} is not an incoming upload or download key"
                ))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_name_their_uploads_and_downloads_and_test_events_name_none() {
        let id = UploadId::random();
        let record = |key: &str| {
            serde_json::json!({"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
                "eventTime": "2024-03-12T14:05:40.118Z", "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": "b"}, "object": {"key": key, "size": 5}}})
        };
        let hash = "0cc175b9c0f1b6a831c399e269772661";
        let body = serde_json::json!({"Records": [
            record(&format!("incoming/{id}")),
            record(&format!("incoming/url-{hash}")),
        ]})
        .to_string();
        assert_eq!(
            incoming_in(&body).unwrap(),
            vec![
                Incoming::Upload(id),
                Incoming::Download(UrlHash::parse(hash).unwrap())
            ]
        );
        assert!(
            incoming_in(r#"{"Service":"Amazon S3","Event":"s3:TestEvent"}"#)
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            incoming_in("nonsense"),
            Err(ItemError::Unusable(_))
        ));
        let foreign = serde_json::json!({"Records": [record("ab/other")]}).to_string();
        let bad_hash = serde_json::json!({"Records": [record("incoming/url-xyz")]}).to_string();
        assert!(matches!(
            incoming_in(&bad_hash),
            Err(ItemError::Unusable(_))
        ));
        assert!(
            matches!(incoming_in(&foreign), Err(ItemError::Unusable(m)) if m.contains("not an incoming upload or download key"))
        );
    }
}
