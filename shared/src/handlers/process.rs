//! The `process` function: SQS messages whose bodies are S3 event notifications for
//! `incoming/{upload_id}` objects (presigned uploads, and new photos the fetch functions
//! downloaded). Each upload is processed once; a redelivered notification finds the upload
//! finished and does nothing but settle its URL again (idempotent).

use aws_lambda_events::event::sqs::SqsEvent;

use super::batch::{BatchResponse, ItemError, run_batch};
use crate::domain::{BlobKey, UploadId};
use crate::flows::crawl::Crawler;

/// Handles one SQS batch; failures are reported per message id. A body a fetch function
/// downloaded settles its URL once processed.
pub async fn handle(crawler: &Crawler, event: SqsEvent) -> BatchResponse {
    let items = super::sqs_items(event);
    run_batch(items, |body| async move {
        for upload in uploads_in(&body)? {
            let record = crawler.service().process_incoming(&upload).await?;
            crawler.after_incoming(&record).await?;
        }
        Ok(())
    })
    .await
}

/// The upload ids an S3 notification names. S3's `s3:TestEvent` (sent when notifications are
/// configured) names none.
pub fn uploads_in(body: &str) -> Result<Vec<UploadId>, ItemError> {
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
            BlobKey::parse(key)
                .and_then(|k| k.incoming_upload())
                .ok_or_else(|| {
                    ItemError::Unusable(format!("{key:?} is not an incoming upload key"))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_name_their_uploads_and_test_events_name_none() {
        let id = UploadId::random();
        let record = |key: &str| {
            serde_json::json!({"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
                "eventTime": "2024-03-12T14:05:40.118Z", "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": "b"}, "object": {"key": key, "size": 5}}})
        };
        let body = serde_json::json!({"Records": [record(&format!("incoming/{id}"))]}).to_string();
        assert_eq!(uploads_in(&body).unwrap(), vec![id]);
        assert!(
            uploads_in(r#"{"Service":"Amazon S3","Event":"s3:TestEvent"}"#)
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            uploads_in("nonsense"),
            Err(ItemError::Unusable(_))
        ));
        let foreign = serde_json::json!({"Records": [record("ab/other")]}).to_string();
        assert!(
            matches!(uploads_in(&foreign), Err(ItemError::Unusable(m)) if m.contains("not an incoming upload key"))
        );
    }
}
