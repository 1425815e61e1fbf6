//! `imgest stats` on the AWS adapters: images, links and files counted from the table and the
//! bucket, each queue's counts, and the crawl failures from the crawl records (the embedded
//! backend's are in the CLI's tests).

#![allow(clippy::unwrap_used)]

use imgest_crawl::stats::HostFailures;
use imgest_hosts::{Answer, PartnerHost};
use imgest_lambda_crawl as handlers;
use serde_json::json;

use crate::crawl_aws::{CrawlOnAws, intake_event, take};

#[tokio::test]
async fn stats_count_images_files_queues_and_crawl_failures_on_aws() {
    let Some(CrawlOnAws {
        app,
        sqs,
        urls,
        crawler,
        ..
    }) = CrawlOnAws::start("stats on aws").await
    else {
        return;
    };
    // A crawl whose one download fails (404) and whose other URL does not parse (settled at
    // intake, under no host).
    let host = PartnerHost::start([("/gone.jpg", Answer::status(404))])
        .await
        .unwrap();
    let request = json!({"client_id": "acme", "offer_id": "failing",
        "urls": [host.url("/gone.jpg"), "not a url"]});
    let response = handlers::intake::handle(&crawler, intake_event("intake-1", &request)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let response = handlers::fetch::handle(&crawler, take(&sqs, &urls["fetch-0"], 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    take(&sqs, &urls["results"], 1).await;

    let a = app
        .upload_ok(&imgest_hosts::hostile::jpeg(40, 30, false, None))
        .await;
    app.upload_ok(&imgest_hosts::hostile::jpeg(41, 30, false, None))
        .await;
    assert_eq!(app.link("o", &[&a]).await.status, 200);
    let stats = imgest_crawl::stats::stats(&app.service).await.unwrap();
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
    assert_eq!(
        (stats.crawled_offers, stats.crawled_photos),
        (1, 2),
        "{stats:?}"
    );
    assert_eq!(
        stats.crawl_failures_by_kind,
        [("invalid_url".to_owned(), 1), ("not_found".to_owned(), 1)].into(),
        "{stats:?}"
    );
    assert_eq!(
        stats.top_failing_hosts,
        [HostFailures {
            host: host.addr().to_string(),
            failed: 1,
            photos: 1
        }],
        "{stats:?}"
    );
    assert_eq!(stats.unreadable_crawl_records, 0);
}
