//! The `erasure` function, every minute: works through the erasures under way
//! ([`Service::erase_pending`]). The API and the other functions erase an image's record (on
//! its generation, as GC does) and file its files here, because no other role of the stack
//! may delete an object version (the bucket policy refuses it): this function deletes the
//! files, every earlier version no record owns, tells the CDN and writes the receipt. It also
//! settles sellers' erasures that were waiting for the offers linking their image to drop it.
//! A failed run is not retried: the next minute's starts where it left off (a request leaves
//! the list only once its files are gone).

use std::time::{Duration, Instant};

use super::scheduled_gc;
use imgest_flows::erase::PendingReport;
use imgest_flows::{FlowError, Service};

/// The service as this function runs it: deleting erased files (and their versions) here,
/// rather than filing them for itself.
pub fn eraser(service: Service) -> Service {
    service.erasing_files_here()
}

/// One run, with `time_left` until the invocation's deadline: the erasures under way, until
/// the run's budget ([`scheduled_gc::budget`]) is spent (the next run goes on). Erasures
/// that failed stay filed and fail the run once the others are done, so that the function's
/// error alarm fires while one keeps failing.
pub async fn handle(service: &Service, time_left: Duration) -> Result<PendingReport, FlowError> {
    if !service.policy().erase_files_here {
        return Err(FlowError::Internal(
            "the erasure function runs a service that erases files here (erasure::eraser)".into(),
        ));
    }
    let deadline = Instant::now() + scheduled_gc::budget(time_left);
    let report = service.erase_pending_until(Some(deadline)).await?;
    if report.failed > 0 {
        return Err(FlowError::Internal(format!(
            "{} erasure(s) under way failed and stay filed (their errors are logged); {} erased, {} settled",
            report.failed, report.erased, report.settled
        )));
    }
    Ok(report)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;
    use imgest_core::domain::{ImageId, Owner};
    use imgest_core::ports::SystemClock;
    use imgest_flows::Policy;
    use imgest_settings::Settings;

    /// A run's time, as the template gives it (`Timeout`).
    const RUN: Duration = Duration::from_secs(60);

    /// The scheduled event's body is not read: any event runs the erasures under way.
    const SCHEDULE: &str = include_str!("../../../events/schedule.json");

    /// A service on the embedded store in `dir`; with `erase_here` false, one that files
    /// erased files for this function, as the API and the other functions on AWS do.
    async fn service(dir: &std::path::Path, erase_here: bool) -> Service {
        let vars = HashMap::from([("IMGEST_DATA_DIR".to_owned(), dir.display().to_string())]);
        let settings = Settings::from_map(&vars).unwrap();
        let ports = imgest_embedded::ports(dir, "http://127.0.0.1", Arc::new(SystemClock))
            .await
            .unwrap();
        let mut policy = Policy::from_settings(&settings);
        policy.erase_files_here = erase_here;
        let pipeline = imgest_pipeline::configure::imaging(&settings, None).unwrap();
        Service::new(ports, policy).with_imaging(pipeline)
    }

    /// `sample`'s bytes uploaded by a seller, then erased by them through `filing` (which
    /// files the files, as on AWS): the image's id.
    async fn filed_erasure(filing: &Service, sample: &[u8]) -> ImageId {
        let id = ImageId::of_bytes(sample);
        filing
            .upload(id.clone(), bytes::Bytes::from(sample.to_vec()))
            .await
            .unwrap();
        let seller = Owner::of_subject("seller-1");
        filing.note_uploader(&seller, &id).await.unwrap();
        filing.erase_upload(&seller, &id).await.unwrap();
        id
    }

    /// The first filed request: its member name and body.
    async fn first_filed(filing: &Service) -> (String, String) {
        let now = filing.ports().clock.now();
        let page = filing
            .ports()
            .documents
            .list_members(imgest_flows::erase::QUEUE_KIND, "requests", None, 10, now)
            .await
            .unwrap();
        page.members.into_iter().next().unwrap()
    }

    #[tokio::test]
    async fn a_run_erases_what_a_seller_filed_and_then_has_nothing_left() {
        let _: serde_json::Value = serde_json::from_str(SCHEDULE).unwrap();
        let dir = tempfile::tempdir().unwrap();
        // As on AWS: the API erases the record and files the files for this function.
        let filing = service(dir.path(), false).await;
        let id = filed_erasure(&filing, include_bytes!("../../../samples/dune.jpg")).await;
        let filed = filing.erasure_status(&id).await.unwrap();
        assert!(filed.files_pending, "{filed:?}");

        // A service that files them cannot run here: it would only file them again.
        assert!(handle(&filing, RUN).await.is_err());
        let eraser = eraser(service(dir.path(), false).await);
        let report = handle(&eraser, RUN).await.unwrap();
        assert_eq!(report.erased, 1, "{report:?}");
        let done = eraser.erasure_status(&id).await.unwrap();
        assert!(!done.files_pending, "{done:?}");
        assert_eq!(done.receipts.len(), 1, "{done:?}");
        let again = handle(&eraser, RUN).await.unwrap();
        assert_eq!((again.erased, again.settled), (0, 0));
    }

    #[tokio::test]
    async fn an_erasure_that_keeps_failing_holds_up_none_of_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let filing = service(dir.path(), false).await;
        // A filed request that does not read, listed before the good one.
        let now = filing.ports().clock.now();
        filing
            .ports()
            .documents
            .put_member(
                imgest_flows::erase::QUEUE_KIND,
                "requests",
                "00000000000000000000000000000000",
                "{not an erasure",
                now.plus(Duration::from_secs(3600)),
                now,
            )
            .await
            .unwrap();
        let id = filed_erasure(&filing, include_bytes!("../../../samples/ladybird.jpg")).await;

        let eraser = eraser(service(dir.path(), false).await);
        let report = eraser.erase_pending().await.unwrap();
        assert_eq!((report.erased, report.failed), (1, 1), "{report:?}");
        assert!(!eraser.erasure_status(&id).await.unwrap().files_pending);
        // The run fails (the alarm fires) while the bad one stays filed.
        let err = handle(&eraser, RUN).await.unwrap_err();
        assert!(err.to_string().contains("1 erasure(s)"), "{err}");
    }

    /// A filed request proves nothing about itself: one naming a live image and the
    /// generation its record owns (as a role that may file erasures could write) leaves the
    /// image, its record and its files as they were.
    #[tokio::test]
    async fn a_filed_request_naming_a_live_generation_erases_none_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let filing = service(dir.path(), false).await;
        let erased = filed_erasure(&filing, include_bytes!("../../../samples/dune.jpg")).await;
        let live = include_bytes!("../../../samples/storm.jpg");
        let live_id = ImageId::of_bytes(live);
        filing
            .upload(live_id.clone(), bytes::Bytes::from(live.to_vec()))
            .await
            .unwrap();
        let record = filing.ports().images.get(&live_id).await.unwrap().unwrap();
        let files = |id: ImageId| {
            let blobs = filing.ports().blobs.clone();
            async move {
                let prefix = format!("public/{}/{id}/", id.shard());
                blobs.list(&prefix, None, 100).await.unwrap().blobs.len()
            }
        };
        let before = files(live_id.clone()).await;
        assert!(before > 0);
        // The real request's body, turned on the live image.
        let (docs, now) = (&filing.ports().documents, filing.ports().clock.now());
        let (member, body) = first_filed(&filing).await;
        assert_eq!(member, erased.as_str());
        let mut forged: serde_json::Value = serde_json::from_str(&body).unwrap();
        forged["image_id"] = live_id.as_str().into();
        forged["generations"] = serde_json::json!([record.generation.as_str()]);
        docs.put_member(
            imgest_flows::erase::QUEUE_KIND,
            "requests",
            live_id.as_str(),
            &forged.to_string(),
            now.plus(Duration::from_secs(3600)),
            now,
        )
        .await
        .unwrap();

        let eraser = eraser(service(dir.path(), false).await);
        let report = handle(&eraser, RUN).await.unwrap();
        assert_eq!(report.erased, 2, "{report:?}");
        let kept = eraser.ports().images.get(&live_id).await.unwrap().unwrap();
        assert_eq!(kept.generation, record.generation);
        assert_eq!(files(live_id).await, before);
        assert_eq!(files(erased).await, 0);
    }
    /// The same filed erasure worked twice (a run stopped between its receipt and its
    /// dequeue, or two erasers at once: an operator's `imgest erase --pending` beside this
    /// function) leaves one receipt.
    #[tokio::test]
    async fn an_erasure_worked_twice_leaves_one_receipt() {
        let dir = tempfile::tempdir().unwrap();
        let filing = service(dir.path(), false).await;
        let id = filed_erasure(&filing, include_bytes!("../../../samples/dune.jpg")).await;
        let (docs, now) = (&filing.ports().documents, filing.ports().clock.now());
        let (member, body) = first_filed(&filing).await;

        let eraser = eraser(service(dir.path(), false).await);
        assert_eq!(handle(&eraser, RUN).await.unwrap().erased, 1);
        // Filed again as it was: as if the first run had stopped before taking it off.
        docs.put_member(
            imgest_flows::erase::QUEUE_KIND,
            "requests",
            &member,
            &body,
            now.plus(Duration::from_secs(3600)),
            now,
        )
        .await
        .unwrap();
        assert_eq!(handle(&eraser, RUN).await.unwrap().erased, 1);
        let status = eraser.erasure_status(&id).await.unwrap();
        assert_eq!(status.receipts.len(), 1, "{status:?}");
        assert!(!status.files_pending, "{status:?}");
    }
}
