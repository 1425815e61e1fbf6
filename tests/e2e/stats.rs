//! `imgest stats` on the AWS adapters: images, links and files counted from the table and the
//! bucket, and each queue's counts (the embedded backend's are in the CLI's tests).

#![allow(clippy::unwrap_used)]

use crate::crawl_aws::CrawlOnAws;

#[tokio::test]
async fn stats_count_images_files_and_queues_on_aws() {
    let Some(CrawlOnAws { app, .. }) = CrawlOnAws::start("stats on aws").await else {
        return;
    };
    let a = app
        .upload_ok(&imgest_hosts::hostile::jpeg(40, 30, false, None))
        .await;
    app.upload_ok(&imgest_hosts::hostile::jpeg(41, 30, false, None))
        .await;
    assert_eq!(app.link("o", &[&a]).await.status, 200);
    let stats = app.service.stats().await.unwrap();
    assert_eq!(
        (
            stats.images,
            stats.orphans,
            stats.links,
            stats.original_files
        ),
        (2, 1, 1, 2),
        "{stats:?}"
    );
    assert_eq!(stats.variant_files, 6, "{stats:?}");
    assert!(stats.variant_bytes > 0 && stats.original_bytes > 0);
    assert!(stats.queues.contains_key("process") && stats.queues.contains_key("backfill"));
}
