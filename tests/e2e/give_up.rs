//! Giving up on what keeps failing, on the embedded default with real hosts on 127.0.0.1: a URL
//! that failed transiently through every retry is not downloaded by every re-sent crawl, and a
//! host failing most of its requests gets none (its URLs settle as `host_unavailable`) until a
//! probe after the cool-down succeeds, while other hosts go on as usual.

use std::time::Duration;

use bytes::Bytes;
use imgest_hosts::{Answer, PartnerHost};
use serde_json::Value;

use crate::support::crawl::CrawlApp;
use crate::support::sample;

fn kind(result: &Value) -> &str {
    result["error"]["kind"].as_str().unwrap_or("")
}

fn photo(name: &str) -> Answer {
    Answer::photo(Bytes::from(sample(name)))
}

#[tokio::test]
async fn a_url_that_kept_failing_transiently_waits_for_its_recheck_time() {
    const RECHECK: Duration = Duration::from_secs(1);
    let app = CrawlApp::start(&[
        ("IMGEST_MAX_ATTEMPTS", "2"),
        ("IMGEST_TRANSIENT_RECHECK_BASE", "1s"),
    ])
    .await;
    let host = PartnerHost::start([("/flaky.jpg", Answer::fail_times(2, 503, photo("dune.jpg")))])
        .await
        .unwrap();
    let url = [host.url("/flaky.jpg")];

    let first = app.crawl_settled("acme", "first", &url).await;
    assert_eq!(kind(&first[0]), "server_error", "{first:?}");
    assert_eq!(first[0]["error"]["attempts"], 2);
    assert!(first[0]["error"]["next_check_at"].is_string(), "{first:?}");
    assert_eq!(host.hits("/flaky.jpg"), 2);

    // Re-sent at once, the URL settles from its record: no request.
    let again = app.crawl_settled("acme", "again", &url).await;
    assert_eq!(kind(&again[0]), "server_error", "{again:?}");
    assert_eq!(host.hits("/flaky.jpg"), 2);

    // Past its recheck time it is downloaded again (and the host works now).
    tokio::time::sleep(RECHECK).await;
    let later = app.crawl_settled("acme", "later", &url).await;
    assert_eq!(later[0]["status"], "ok", "{later:?}");
    assert_eq!(host.hits("/flaky.jpg"), 3);
}

#[tokio::test]
async fn a_failing_host_opens_its_circuit_and_a_probe_after_the_cool_down_closes_it() {
    const COOL_DOWN: Duration = Duration::from_secs(1);
    let app = CrawlApp::start(&[
        ("IMGEST_MAX_ATTEMPTS", "1"),
        ("IMGEST_CIRCUIT_MIN_REQUESTS", "4"),
        ("IMGEST_CIRCUIT_FAILURE_PERCENT", "75"),
        ("IMGEST_CIRCUIT_COOL_DOWN", "1s"),
    ])
    .await;
    let failing = (1..=5).map(|i| (format!("/{i}.jpg"), Answer::status(503)));
    let down = PartnerHost::start(failing.chain([
        ("/back.jpg".to_owned(), photo("dune.jpg")),
        ("/after.jpg".to_owned(), photo("storm.jpg")),
    ]))
    .await
    .unwrap();
    let up = PartnerHost::start([("/a.jpg", photo("ladybird.jpg"))])
        .await
        .unwrap();

    let urls: Vec<String> = (1..=4).map(|i| down.url(&format!("/{i}.jpg"))).collect();
    let first = app.crawl_settled("acme", "down-1", &urls).await;
    assert!(first.iter().all(|r| kind(r) == "server_error"), "{first:?}");
    assert_eq!(down.requests(), 4);

    // Open: the host's new URLs settle at once, with no request; another host is not slowed,
    // and another client's URLs on the failing host settle the same way.
    let second = app
        .crawl_settled("acme", "down-2", &[down.url("/5.jpg"), up.url("/a.jpg")])
        .await;
    assert_eq!(kind(&second[0]), "host_unavailable", "{second:?}");
    assert!(second[0]["error"].get("next_check_at").is_none());
    assert_eq!(second[1]["status"], "ok", "{second:?}");
    let other = app
        .crawl_settled("other", "down-3", &[down.url("/5.jpg")])
        .await;
    assert_eq!(kind(&other[0]), "host_unavailable", "{other:?}");
    assert_eq!(down.requests(), 4);
    assert_eq!(app.counts().circuit_refusals, 2);

    // After the cool-down one download goes through; it works, so the circuit closes.
    tokio::time::sleep(COOL_DOWN).await;
    let probe = app
        .crawl_settled("acme", "down-4", &[down.url("/back.jpg")])
        .await;
    assert_eq!(probe[0]["status"], "ok", "{probe:?}");
    let after = app
        .crawl_settled("acme", "down-5", &[down.url("/after.jpg")])
        .await;
    assert_eq!(after[0]["status"], "ok", "{after:?}");
    assert_eq!(down.requests(), 6);
}
