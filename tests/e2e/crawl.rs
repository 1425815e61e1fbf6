//! Crawls end to end: crawl requests over HTTP, downloads from real partner hosts on 127.0.0.1
//! (fast, slow in each tier, dripping, failing, redirecting, lying about types and sizes),
//! and the offer's photos, crawl status and result messages that come out.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use imgest_core::domain::ImageId;
use imgest_hosts::{Answer, Gate, PartnerHost, redirect_chain};
use serde_json::Value;

use crate::support::as_seen::AsSeen;
use crate::support::crawl::{CrawlApp, SLOW_IN_TIER, joiners_filed};
use crate::support::{fixture, sample};

fn photo(name: &str) -> Bytes {
    Bytes::from(sample(name))
}

fn id_of(bytes: &[u8]) -> String {
    ImageId::of_bytes(bytes).to_string()
}

fn kind(result: &Value) -> &str {
    result["error"]["kind"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_crawl_of_fast_photos_links_them_in_order_and_sends_one_result() {
    let app = CrawlApp::start(&[]).await;
    let (a, b) = (photo("dune.jpg"), photo("storm.jpg"));
    let host = PartnerHost::start([
        ("/a.jpg", Answer::photo(a.clone())),
        ("/b.jpg", Answer::photo(b.clone())),
    ])
    .await
    .unwrap();
    let urls = vec![host.url("/b.jpg"), host.url("/a.jpg")];

    let results = app.crawl_settled("acme", "offer-1", &urls).await;

    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r["status"] == "ok"), "{results:?}");
    assert_eq!(app.photo_ids("offer-1").await, vec![id_of(&b), id_of(&a)]);
    let messages = app.results().await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["offer_id"], "offer-1");
    assert_eq!(messages[0]["client_id"], "acme");
    assert_eq!(messages[0]["photos"][0]["url"], urls[0].as_str());
    assert_eq!(messages[0]["photos"][0]["image_id"], id_of(&b).as_str());
}

#[tokio::test]
async fn slow_hosts_settle_in_the_tier_that_fits_and_later_photos_start_there() {
    let app = CrawlApp::start(&[]).await;
    let mut hosts = Vec::new();
    for (tier, delay) in SLOW_IN_TIER.iter().enumerate() {
        let host = PartnerHost::builder()
            .serve("/1.jpg", Answer::photo(photo("dune.jpg")))
            .serve("/2.jpg", Answer::photo(photo("ladybird.jpg")))
            .latency(*delay)
            .start()
            .await
            .unwrap();
        let results = app
            .crawl_settled("acme", &format!("tier-{tier}-a"), &[host.url("/1.jpg")])
            .await;
        assert_eq!(results[0]["status"], "ok", "tier {tier}: {results:?}");
        hosts.push(host);
    }
    let before = app.counts().download_attempts;
    for (tier, host) in hosts.iter().enumerate() {
        let results = app
            .crawl_settled("acme", &format!("tier-{tier}-b"), &[host.url("/2.jpg")])
            .await;
        assert_eq!(results[0]["status"], "ok", "tier {tier}: {results:?}");
    }
    assert_eq!(
        app.counts().download_attempts - before,
        3,
        "after one photo, each host's downloads start in the tier that fits it"
    );
}

#[tokio::test]
async fn a_dripping_host_is_cut_at_each_deadline_and_fails_with_timeout() {
    let app = CrawlApp::start(&[]).await;
    let host = PartnerHost::start([(
        "/drip.jpg",
        Answer::drip(photo("dune.jpg"), Duration::from_millis(50)),
    )])
    .await
    .unwrap();
    let results = app
        .crawl_settled("acme", "drip", &[host.url("/drip.jpg")])
        .await;
    assert_eq!(results[0]["status"], "failed");
    assert_eq!(kind(&results[0]), "timeout");
    assert_eq!(results[0]["error"]["attempts"], 3, "one per tier");
}

#[tokio::test]
async fn http_failures_get_their_stable_kinds_and_permanent_ones_a_recheck_time() {
    let app = CrawlApp::start(&[("IMGEST_MAX_ATTEMPTS", "3")]).await;
    let host = PartnerHost::start([
        ("/gone.jpg", Answer::status(404)),
        ("/deleted.jpg", Answer::status(410)),
        ("/secret.jpg", Answer::status(403)),
        ("/teapot.jpg", Answer::status(418)),
        ("/broken.jpg", Answer::status(500)),
    ])
    .await
    .unwrap();
    let urls: Vec<String> = [
        "/gone.jpg",
        "/deleted.jpg",
        "/secret.jpg",
        "/teapot.jpg",
        "/broken.jpg",
    ]
    .iter()
    .map(|p| host.url(p))
    .collect();
    let results = app.crawl_settled("acme", "failing", &urls).await;
    let kinds: Vec<&str> = results.iter().map(kind).collect();
    assert_eq!(
        kinds,
        [
            "not_found",
            "not_found",
            "forbidden",
            "http_error",
            "server_error"
        ]
    );
    assert_eq!(results[0]["error"]["http_status"], 404);
    assert_eq!(
        results[4]["error"]["attempts"], 3,
        "5xx retried up to the limit"
    );
    assert_eq!(host.hits("/broken.jpg"), 3);
    assert!(results[0]["error"]["next_check_at"].is_string());
    assert!(
        results[4]["error"]["next_check_at"].is_string(),
        "transient failures through every retry get a recheck time too"
    );

    // The next crawl within the recheck interval does not download permanent failures.
    let before = host.hits("/gone.jpg");
    let again = app.crawl_settled("acme", "failing-again", &urls[..1]).await;
    assert_eq!(kind(&again[0]), "not_found");
    assert_eq!(host.hits("/gone.jpg"), before);
    assert!(app.photo_ids("failing").await.is_empty());
}

#[tokio::test]
async fn transient_failures_are_retried_and_retry_after_is_honoured() {
    let app = CrawlApp::start(&[]).await;
    let host = PartnerHost::start([
        (
            "/flaky.jpg",
            Answer::fail_times(1, 500, Answer::photo(photo("dune.jpg"))),
        ),
        (
            "/busy.jpg",
            Answer::FailTimes {
                times: 1,
                status: 429,
                then: Box::new(Answer::photo(photo("storm.jpg"))),
            },
        ),
        ("/later.jpg", Answer::retry_after(429, "1")),
    ])
    .await
    .unwrap();
    let results = app
        .crawl_settled(
            "acme",
            "flaky",
            &[host.url("/flaky.jpg"), host.url("/busy.jpg")],
        )
        .await;
    assert!(results.iter().all(|r| r["status"] == "ok"), "{results:?}");
    assert_eq!(host.hits("/flaky.jpg"), 2);
    assert_eq!(host.hits("/busy.jpg"), 2);

    let app = CrawlApp::start(&[("IMGEST_MAX_ATTEMPTS", "2")]).await;
    let results = app
        .crawl_settled("acme", "later", &[host.url("/later.jpg")])
        .await;
    assert_eq!(kind(&results[0]), "rate_limited");
    assert_eq!(results[0]["error"]["http_status"], 429);
    let times = host.request_times();
    let last_two = &times[times.len() - 2..];
    assert!(
        last_two[1].duration_since(last_two[0]) >= Duration::from_millis(900),
        "Retry-After: 1 keeps the retry at least a second after the 429"
    );
}

#[tokio::test]
async fn redirects_are_followed_up_to_five_hops() {
    let app = CrawlApp::start(&[]).await;
    let bytes = photo("ladybird.jpg");
    let mut answers = redirect_chain("/r5", 5, "/photo.jpg");
    answers.extend(redirect_chain("/r6", 6, "/photo.jpg"));
    answers.push(("/photo.jpg".into(), Answer::photo(bytes.clone())));
    let host = PartnerHost::start(answers).await.unwrap();
    let results = app
        .crawl_settled("acme", "redirects", &[host.url("/r5/0"), host.url("/r6/0")])
        .await;
    assert_eq!(
        results[0]["image_id"],
        id_of(&bytes).as_str(),
        "{results:?}"
    );
    assert_eq!(kind(&results[1]), "too_many_redirects");
}

#[tokio::test]
async fn the_address_guard_refuses_private_hosts_before_connecting() {
    let app = CrawlApp::start(&[("IMGEST_ALLOW_PRIVATE_NETWORKS", "false")]).await;
    let host = PartnerHost::start([("/a.jpg", Answer::photo(photo("dune.jpg")))])
        .await
        .unwrap();
    let port = host.addr().port();
    let urls = vec![
        host.url("/a.jpg"),
        format!("http://localhost:{port}/a.jpg"),
        format!("http://2130706433:{port}/a.jpg"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ];
    let results = app.crawl_settled("acme", "guarded", &urls).await;
    let kinds: Vec<&str> = results.iter().map(kind).collect();
    assert_eq!(kinds, ["forbidden_address"; 4]);
    assert_eq!(host.requests(), 0);
}

#[tokio::test]
async fn bodies_are_judged_by_their_bytes_and_size_not_their_headers() {
    let app = CrawlApp::start(&[("IMGEST_MAX_BODY", "200kB")]).await;
    let small = Bytes::from(fixture("photo.jpg"));
    assert!(small.len() < 200_000);
    let big = photo("dune.jpg");
    assert!(big.len() > 200_000);
    let host = PartnerHost::start([
        ("/mislabelled.jpg", Answer::WrongContentType(small.clone())),
        (
            "/page.jpg",
            Answer::body(&b"<html>not a photo</html>"[..], "image/jpeg"),
        ),
        ("/big.jpg", Answer::photo(big.clone())),
        ("/big-chunked.jpg", Answer::NoContentLength(big.clone())),
        (
            "/reset.jpg",
            Answer::Reset {
                bytes: small.clone(),
                after: 1000,
            },
        ),
        (
            "/truncated.jpg",
            Answer::photo(Bytes::from(fixture("truncated.jpg"))),
        ),
    ])
    .await
    .unwrap();
    let paths = [
        "/mislabelled.jpg",
        "/page.jpg",
        "/big.jpg",
        "/big-chunked.jpg",
        "/reset.jpg",
        "/truncated.jpg",
    ];
    let urls: Vec<String> = paths.iter().map(|p| host.url(p)).collect();
    let results = app.crawl_settled("acme", "bodies", &urls).await;
    let outcome: Vec<&str> = results
        .iter()
        .map(|r| if r["status"] == "ok" { "ok" } else { kind(r) })
        .collect();
    assert_eq!(
        outcome,
        [
            "ok",
            "unsupported_format",
            "too_large",
            "too_large",
            "connection",
            "corrupt_image"
        ]
    );
    assert_eq!(app.photo_ids("bodies").await, vec![id_of(&small)]);
}

#[tokio::test]
async fn downloads_start_only_while_their_bodies_fit_the_memory_budget() {
    // A body pool of 48 MiB (a quarter of what is left after the process's own 64 MiB), and
    // 12 MB held per download before its request: four fit at once, of eight workers.
    let app = CrawlApp::start(&[
        ("IMGEST_MEMORY_BUDGET", "256MiB"),
        ("IMGEST_FETCH_RESERVE", "12MB"),
        ("IMGEST_FETCH_TIERS", "10s,20s,30s"),
    ])
    .await;
    let gate = Gate::new();
    let body = Bytes::from(fixture("photo.jpg"));
    let paths: Vec<String> = (0..8).map(|i| format!("/{i}.jpg")).collect();
    let host = PartnerHost::start(
        paths
            .iter()
            .map(|p| (p.clone(), Answer::held(&gate, Answer::photo(body.clone())))),
    )
    .await
    .unwrap();
    let urls: Vec<String> = paths.iter().map(|p| host.url(p)).collect();
    let accepted = app.crawl("acme", "memory", &urls).await;
    assert_eq!(accepted.status, 202, "{}", accepted.json);
    app.until("the downloads that fit reach the host", || {
        host.requests() >= 4
    })
    .await;
    // Every task taken by a worker: the four that do not fit wait for room, not for the host.
    let queue = imgest_crawl::tier_queue(0);
    loop {
        let now = app.crawler.service().ports().clock.now();
        if app.queue.counts(&queue, now).await.unwrap().in_flight == 8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gate.open();
    let done = app.settled("memory").await;
    let photos = done["photos"].as_array().unwrap();
    assert!(photos.iter().all(|p| p["status"] == "ok"), "{photos:?}");
    assert!(host.most_at_once() <= 4, "{} at once", host.most_at_once());
    // The others waited for room before their requests: none was sent twice, none timed out.
    assert_eq!(host.requests(), 8);
    assert_eq!(app.counts().timeouts, 0);
}

#[tokio::test]
async fn the_same_photo_under_two_urls_is_stored_once_and_one_url_is_downloaded_once() {
    let app = CrawlApp::start(&[]).await;
    let bytes = photo("storm.jpg");
    let host = PartnerHost::builder()
        .serve("/a.jpg", Answer::photo(bytes.clone()))
        .serve("/mirror/a.jpg", Answer::photo(bytes.clone()))
        .serve("/shared.jpg", Answer::photo(photo("dune.jpg")))
        .latency(Duration::from_millis(150))
        .start()
        .await
        .unwrap();
    let both = app
        .crawl_settled(
            "acme",
            "two-urls",
            &[host.url("/a.jpg"), host.url("/mirror/a.jpg")],
        )
        .await;
    assert_eq!(both[0]["image_id"], both[1]["image_id"]);
    assert_eq!(
        app.photo_ids("two-urls").await.len(),
        1,
        "one image, linked once"
    );
    assert_eq!(app.counts().photos_new, 1);

    // Two offers with the same URL at once: one download, both settle with it.
    let shared = vec![host.url("/shared.jpg?utm_source=feed")];
    let other = vec![host.url("/shared.jpg")];
    let (first, second) = tokio::join!(
        app.crawl("acme", "x", &shared),
        app.crawl("beta", "y", &other)
    );
    assert_eq!((first.status, second.status), (202, 202));
    let (x, y) = tokio::join!(app.settled("x"), app.settled("y"));
    assert_eq!(x["photos"][0]["status"], "ok");
    assert_eq!(x["photos"][0]["image_id"], y["photos"][0]["image_id"]);
    assert_eq!(host.hits("/shared.jpg"), 1);
}

/// A crawl app whose tiers outlast the test, and a host holding its banner (`dune.jpg`, at
/// `/banner.jpg`) until the gate opens: the download is held at the host, not cut.
async fn held_banner() -> (CrawlApp, Gate, Bytes, PartnerHost) {
    let app = CrawlApp::start(&[("IMGEST_FETCH_TIERS", "100s,110s,120s")]).await;
    let gate = Gate::new();
    let banner = photo("dune.jpg");
    let host = PartnerHost::builder()
        .serve(
            "/banner.jpg",
            Answer::held(&gate, Answer::photo(banner.clone())),
        )
        .start()
        .await
        .unwrap();
    (app, gate, banner, host)
}

/// A crawl whose intake reads a popular URL's record from before its download ended (a read
/// behind, as an instance's reused one or DynamoDB's eventually consistent one may be) still
/// settles, on the embedded backend too: over a record whose download nobody had joined yet,
/// its mark conflicts and it reads again; over one already joined, it files itself, finds its
/// group's end mark and settles from the recorded outcome itself.
#[tokio::test]
async fn crawls_joining_over_a_stale_read_as_the_download_ends_settle_themselves() {
    let (app, gate, banner, host) = held_banner().await;
    let urls = vec![host.url("/banner.jpg")];
    let service = app.crawler.service();
    let documents = service.ports().documents.clone();
    let record = || async {
        let now = service.ports().clock.now();
        let page = documents
            .scan_documents("url", None, 10, now)
            .await
            .unwrap();
        let [(key, _)] = page.documents.as_slice() else {
            panic!("one URL record: {page:?}");
        };
        let stored = documents.get_document("url", key, now).await.unwrap();
        (key.clone(), stored)
    };
    assert_eq!(app.crawl("dealer", "first", &urls).await.status, 202);
    app.until("the download reaches the host", || {
        host.hits("/banner.jpg") == 1
    })
    .await;
    let (key, running) = record().await;
    assert_eq!(app.crawl("dealer", "second", &urls).await.status, 202);
    assert_eq!(app.counts().urls_joined, 1);
    let (_, joined) = record().await;
    assert_ne!(
        running, joined,
        "the first joiner marks the download joined"
    );
    gate.open();
    app.until("both crawls settle", || app.counts().offers_settled == 2)
        .await;

    for (offer, seen) in [("third", running), ("fourth", joined)] {
        let mut ports = service.ports().clone();
        ports.documents = std::sync::Arc::new(AsSeen::over(documents.clone()).behind(&key, seen));
        let behind = imgest_crawl::Crawler::new(
            std::sync::Arc::new(
                imgest_flows::Service::new(ports, service.policy().clone())
                    .with_imaging(service.imaging().unwrap().clone()),
            ),
            app.crawler.settings().clone(),
            imgest_crawl::Processing::Inline,
        );
        let request = serde_json::from_value(
            serde_json::json!({"client_id": "dealer", "offer_id": offer, "urls": &urls}),
        )
        .unwrap();
        let state = behind.intake_trusted(request).await.unwrap();
        assert_eq!(state, imgest_crawl::messages::CrawlState::Done, "{offer}");
        assert_eq!(behind.counts().urls_joined, 0, "{offer} waits for nobody");
        assert_eq!(app.photo_ids(offer).await, [id_of(&banner)], "{offer}");
    }
    assert_eq!(host.requests(), 1);
    let hash = imgest_core::domain::UrlHash::parse(&key).unwrap();
    let now = service.ports().clock.now();
    let left = joiners_filed(documents.as_ref(), &hash, 10, now).await;
    assert!(left.iter().all(|&n| n == 0), "{left:?}");
}

/// A popular URL (a dealer's banner in every offer): thousands of crawls join its one running
/// download, each with a small write of its own, so the URL's record does not grow with them;
/// the host sees one request, and every crawl settles once the download ends.
#[tokio::test]
async fn thousands_of_crawls_joining_one_slow_url_settle_from_its_one_download() {
    const JOINERS: usize = 10_000;
    let (app, gate, banner, host) = held_banner().await;
    let urls = vec![host.url("/banner.jpg")];
    assert_eq!(app.crawl("dealer", "offer-first", &urls).await.status, 202);
    app.until("the download reaches the host", || {
        host.hits("/banner.jpg") == 1
    })
    .await;

    let offers: Vec<String> = (0..JOINERS).map(|i| format!("offer-{i}")).collect();
    let accepted: Vec<u16> = futures_util::stream::iter(&offers)
        .map(|offer| async { app.crawl("dealer", offer, &urls).await.status })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(accepted.iter().all(|&s| s == 202), "{accepted:?}");
    assert_eq!(app.counts().urls_joined, JOINERS as u64);
    // The URL's record holds the download and the crawl that started it, not the joiners.
    let documents = &app.crawler.service().ports().documents;
    let now = app.crawler.service().ports().clock.now();
    let records = documents
        .scan_documents("url", None, 10, now)
        .await
        .unwrap();
    let [(_, record)] = records.documents.as_slice() else {
        panic!("one URL record: {records:?}");
    };
    assert!(record.body.len() < 512, "{} bytes", record.body.len());
    assert_eq!(app.crawl_status("offer-7").await.json["state"], "pending");
    // Spread over the URL's groups (a partition each on DynamoDB), none holding much more
    // than its share: the URL's hash alone keys none of them.
    let hash = imgest_core::domain::UrlHash::parse(&records.documents[0].0).unwrap();
    let filed = joiners_filed(documents.as_ref(), &hash, JOINERS, now).await;
    assert_eq!(filed.iter().sum::<usize>(), JOINERS, "{filed:?}");
    assert_eq!(filed[0], 0, "the URL's one group of before: {filed:?}");
    let share = JOINERS / imgest_crawl::JOINER_GROUPS;
    assert!(
        filed[1..]
            .iter()
            .all(|&n| n > share / 2 && n < share * 3 / 2),
        "{filed:?}"
    );

    gate.open();
    let total = JOINERS as u64 + 1;
    app.until("every crawl settles", || {
        app.counts().offers_settled == total
    })
    .await;
    assert_eq!(host.requests(), 1);
    let results = app.results().await;
    assert_eq!(results.len(), JOINERS + 1);
    let id = id_of(&banner);
    for result in &results {
        assert_eq!(result["photos"][0]["image_id"], id.as_str(), "{result}");
    }
    assert_eq!(app.photo_ids("offer-9999").await, [id]);
    // Every joiner told is no longer filed, in any of the URL's groups.
    let left = joiners_filed(documents.as_ref(), &hash, 10, now).await;
    assert!(left.iter().all(|&n| n == 0), "{left:?}");
}

/// A host trusted to name its photos' MD5 in their ETag: `/a.jpg` is `known`; `/mirror.jpg`
/// is the same photo under another URL, dripping far slower than the last tier (only its
/// header can settle it in time); `/new.jpg` is `unknown`, whose body is read as usual.
pub(crate) fn hash_header_answers(known: &Bytes, unknown: &Bytes) -> [(&'static str, Answer); 3] {
    [
        ("/a.jpg", Answer::photo(known.clone())),
        (
            "/mirror.jpg",
            Answer::with_headers(
                [("etag", format!("\"{}\"", id_of(known)))],
                Answer::drip(known.clone(), Duration::from_millis(100)),
            ),
        ),
        ("/new.jpg", Answer::photo(unknown.clone())),
    ]
}

#[tokio::test]
async fn a_trusted_hosts_hash_header_naming_a_known_photo_saves_reading_the_body() {
    let app = CrawlApp::start(&[("IMGEST_HASH_HEADERS", "127.0.0.1=etag")]).await;
    let (known, unknown) = (photo("dune.jpg"), photo("storm.jpg"));
    let host = PartnerHost::start(hash_header_answers(&known, &unknown))
        .await
        .unwrap();
    let first = app
        .crawl_settled("acme", "original", &[host.url("/a.jpg")])
        .await;
    assert_eq!(first[0]["status"], "ok", "{first:?}");

    let urls = [host.url("/mirror.jpg"), host.url("/new.jpg")];
    let results = app.crawl_settled("acme", "mirrored", &urls).await;
    assert!(results.iter().all(|r| r["status"] == "ok"), "{results:?}");
    assert_eq!(
        app.photo_ids("mirrored").await,
        vec![id_of(&known), id_of(&unknown)]
    );
    let counts = app.counts();
    assert_eq!(counts.bodies_skipped, 1, "{counts:?}");
    assert_eq!(counts.photos_new, 2, "{counts:?}");
}

#[tokio::test]
async fn recent_urls_and_unchanged_offers_settle_without_a_download() {
    let app = CrawlApp::start(&[]).await;
    let host = PartnerHost::start([
        ("/a.jpg", Answer::photo(photo("dune.jpg"))),
        ("/b.jpg", Answer::photo(photo("storm.jpg"))),
    ])
    .await
    .unwrap();
    let urls = vec![host.url("/a.jpg"), host.url("/b.jpg")];
    app.crawl_settled("acme", "o1", &urls).await;
    assert_eq!(host.requests(), 2);

    // The same offer again: settled at intake (202 with state done), nothing downloaded.
    let again = app.crawl("acme", "o1", &urls).await;
    assert_eq!(again.status, 202);
    assert_eq!(again.json["state"], "done");
    // Another offer reusing a URL within IMGEST_URL_TTL: no download either.
    app.crawl_settled("acme", "o2", &urls[1..]).await;
    assert_eq!(host.requests(), 2);
    assert_eq!(
        app.results().await.len(),
        3,
        "one result per crawl, unchanged ones included"
    );

    // Deleting the offer through the API: the same crawl request links its photos again (from
    // the URL records: still no download).
    assert_eq!(app.delete_offer("o1").await, 204);
    app.crawl_settled("acme", "o1", &urls).await;
    assert_eq!(app.photo_ids("o1").await.len(), 2);
    assert_eq!(host.requests(), 2);
}

#[tokio::test]
async fn an_expired_url_is_downloaded_again_with_its_etag() {
    let app = CrawlApp::start(&[("IMGEST_URL_TTL", "1ms")]).await;
    let bytes = photo("dune.jpg");
    let host = PartnerHost::start([("/a.jpg", Answer::photo(bytes.clone()))])
        .await
        .unwrap();
    app.crawl_settled("acme", "o1", &[host.url("/a.jpg")]).await;
    let results = app.crawl_settled("acme", "o2", &[host.url("/a.jpg")]).await;
    assert_eq!(results[0]["image_id"], id_of(&bytes).as_str());
    assert_eq!(host.requests(), 2);
    assert_eq!(
        app.counts().not_modified,
        1,
        "the second download was a 304"
    );
}

/// An offer re-sent with its last crawl's URLs after the URL window (1 ms here): answered at
/// once from its crawl record, and crawled again behind that answer.
async fn revalidating_app() -> CrawlApp {
    CrawlApp::start(&[
        ("IMGEST_URL_TTL", "1ms"),
        ("IMGEST_REVALIDATION_DELAY", "1ms"),
        ("IMGEST_MAX_ATTEMPTS", "1"),
    ])
    .await
}

#[tokio::test]
async fn an_unchanged_offer_past_the_url_window_is_answered_at_once_and_revalidated_behind() {
    let app = revalidating_app().await;
    let kept = photo("dune.jpg");
    let host = PartnerHost::start([
        ("/a.jpg", Answer::photo(kept.clone())),
        // Down when the revalidation asks: a transient failure does not unlink the photo.
        (
            "/b.jpg",
            Answer::switch_after(1, Answer::photo(photo("storm.jpg")), Answer::status(503)),
        ),
    ])
    .await
    .unwrap();
    let urls = vec![host.url("/a.jpg"), host.url("/b.jpg")];
    app.crawl_settled("acme", "o1", &urls).await;
    let first = app.results().await;
    assert_eq!(first.len(), 1);
    let linked = app.photo_ids("o1").await;

    let again = app.crawl("acme", "o1", &urls).await;
    assert_eq!(again.status, 202);
    assert_eq!(
        again.json["state"], "done",
        "answered from the crawl record"
    );
    app.until("the revalidation ends", || {
        let c = app.counts();
        c.revalidations_unchanged + c.revalidations_changed == 1
    })
    .await;
    let counts = app.counts();
    assert_eq!(counts.offers_revalidated, 1, "{counts:?}");
    assert_eq!(counts.revalidations_unchanged, 1, "{counts:?}");
    assert_eq!(
        counts.not_modified, 1,
        "the kept photo's ETag was sent: {counts:?}"
    );
    assert_eq!(host.requests(), 4, "each URL asked again once");

    // One result more: the first one told again (the same crawl id and photos); nothing else.
    let told = app.results().await;
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0]["crawl_id"], first[0]["crawl_id"]);
    assert_eq!(told[0]["photos"], first[0]["photos"]);
    assert_eq!(app.photo_ids("o1").await, linked);
    let status = app.settled("o1").await;
    assert_eq!(status["crawl_id"], first[0]["crawl_id"]);
}

#[tokio::test]
async fn a_revalidation_that_finds_a_photo_replaced_links_it_and_sends_a_new_result() {
    let app = revalidating_app().await;
    let kept = photo("dune.jpg");
    let replacement = photo("ladybird.jpg");
    let host = PartnerHost::start([
        ("/a.jpg", Answer::photo(kept.clone())),
        (
            "/b.jpg",
            Answer::switch_after(
                1,
                Answer::photo(photo("storm.jpg")),
                Answer::photo(replacement.clone()),
            ),
        ),
    ])
    .await
    .unwrap();
    let urls = vec![host.url("/a.jpg"), host.url("/b.jpg")];
    app.crawl_settled("acme", "o1", &urls).await;
    let first = app.results().await;

    let again = app.crawl("acme", "o1", &urls).await;
    assert_eq!(again.json["state"], "done");
    app.until("the revalidation ends", || {
        app.counts().revalidations_changed == 1
    })
    .await;
    assert_eq!(
        app.photo_ids("o1").await,
        vec![id_of(&kept), id_of(&replacement)]
    );
    // The told result, then the revalidation's, under a crawl id of its own.
    let results = app.results().await;
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["crawl_id"], first[0]["crawl_id"]);
    assert_ne!(results[1]["crawl_id"], first[0]["crawl_id"]);
    assert_eq!(
        results[1]["photos"][1]["image_id"],
        id_of(&replacement).as_str()
    );
    assert_eq!(app.counts().revalidations_unchanged, 0);
}

#[tokio::test]
async fn an_offer_changed_through_the_api_during_its_revalidation_is_not_linked_over() {
    let app = revalidating_app().await;
    let gate = Gate::new();
    let bytes = photo("dune.jpg");
    let host = PartnerHost::start([(
        "/a.jpg",
        Answer::switch_after(
            1,
            Answer::photo(bytes.clone()),
            Answer::held(&gate, Answer::photo(bytes.clone())),
        ),
    )])
    .await
    .unwrap();
    let urls = vec![host.url("/a.jpg")];
    app.crawl_settled("acme", "o1", &urls).await;
    app.results().await;
    assert_eq!(app.crawl("acme", "o1", &urls).await.json["state"], "done");
    app.until("the revalidation's request", || host.requests() == 2)
        .await;

    // The seller deletes the offer while its revalidation waits on the host.
    assert_eq!(app.delete_offer("o1").await, 204);
    gate.open();
    app.until("the revalidation's download settles", || {
        app.counts().not_modified == 1
    })
    .await;
    // Its outcome reaches no crawl: the offer stays deleted, and nothing more is sent.
    let status = app.settled("o1").await;
    assert_eq!(status["state"], "done");
    let photos = app
        .client
        .get(app.url("/v1/offers/o1/photos"))
        .send()
        .await
        .unwrap();
    assert_eq!(photos.status(), 404, "not linked again by the revalidation");
    assert_eq!(app.results().await.len(), 1, "the told answer only");
    // The feed again: a crawl of its own (from the fresh URL record), linked again.
    app.crawl_settled("acme", "o1", &urls).await;
    assert_eq!(app.photo_ids("o1").await, vec![id_of(&bytes)]);
}

#[tokio::test]
async fn crawl_status_shows_pending_urls_while_a_download_runs() {
    let app = CrawlApp::start(&[]).await;
    let host = PartnerHost::start([
        ("/fast.jpg", Answer::photo(photo("dune.jpg"))),
        (
            "/slow.jpg",
            Answer::delay(
                Duration::from_millis(1000),
                Answer::photo(photo("storm.jpg")),
            ),
        ),
    ])
    .await
    .unwrap();
    let urls = vec![host.url("/fast.jpg"), host.url("/slow.jpg")];
    let accepted = app.crawl("acme", "pending", &urls).await;
    assert_eq!(accepted.status, 202);
    let status = app.crawl_status("pending").await;
    assert_eq!(status.status, 200);
    assert_eq!(status.json["state"], "pending");
    assert_eq!(status.json["photos"][1]["status"], "pending");
    let done = app.settled("pending").await;
    assert_eq!(done["photos"][1]["status"], "ok");

    let unknown = app.crawl_status("never-crawled").await;
    assert_eq!(
        (unknown.status, unknown.json["error"]["kind"].as_str()),
        (404, Some("crawl_not_found"))
    );
}

#[tokio::test]
async fn bad_requests_are_refused_and_bad_urls_fail_alone() {
    let app = CrawlApp::start(&[]).await;
    let r = app
        .client
        .post(app.url("/v1/crawl"))
        .json(&serde_json::json!({"client_id": "a b", "offer_id": "o", "urls": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let host = PartnerHost::start([("/a.jpg", Answer::photo(photo("dune.jpg")))])
        .await
        .unwrap();
    let results = app
        .crawl_settled(
            "acme",
            "mixed",
            &[
                "ftp://x/a.jpg".to_owned(),
                "not a url".to_owned(),
                host.url("/a.jpg"),
            ],
        )
        .await;
    let kinds: Vec<&str> = results
        .iter()
        .map(|r| if r["status"] == "ok" { "ok" } else { kind(r) })
        .collect();
    assert_eq!(kinds, ["invalid_url", "invalid_url", "ok"]);
}

#[tokio::test]
async fn a_client_never_exceeds_its_rate_limit_in_any_window() {
    let window = Duration::from_millis(1000);
    let app = CrawlApp::start(&[
        ("IMGEST_CLIENT_RPM", "4"),
        ("IMGEST_RATE_WINDOW", "1s"),
        ("IMGEST_CLIENT_RPM_OVERRIDES", "big=1000"),
    ])
    .await;
    let names: Vec<String> = (0..10).map(|i| format!("/{i}.jpg")).collect();
    let host = PartnerHost::start(names.iter().enumerate().map(|(i, n)| {
        (
            n.clone(),
            Answer::photo(Bytes::from(vec![0xFF, 0xD8, 0xFF, i as u8])),
        )
    }))
    .await
    .unwrap();
    let urls: Vec<String> = names.iter().map(|n| host.url(n)).collect();
    app.crawl_settled("small", "limited", &urls).await;
    let times = host.request_times();
    assert_eq!(times.len(), 10);
    // The host sees requests a little after the limiter grants them; a small slack keeps
    // that jitter from reading as a violation, while a real burst (10 in one go) still fails.
    let slack = Duration::from_millis(50);
    for (i, start) in times.iter().enumerate() {
        let in_window = times[i..]
            .iter()
            .take_while(|t| t.duration_since(*start) + slack < window)
            .count();
        assert!(
            in_window <= 4,
            "{in_window} requests within a window from request {i}"
        );
    }
}

#[tokio::test]
async fn urls_off_the_clients_host_list_fail_as_forbidden_host_and_their_host_sees_nothing() {
    // acme may download from 127.0.0.1 only; other clients from anywhere.
    let app = CrawlApp::start(&[("IMGEST_CLIENT_HOSTS", "acme=127.0.0.1")]).await;
    let refused = PartnerHost::start([("/b.jpg", Answer::photo(photo("storm.jpg")))])
        .await
        .unwrap();
    // The same machine by another name is another host.
    let elsewhere = format!("http://localhost:{}/b.jpg", refused.addr().port());
    let listed = PartnerHost::start([
        ("/a.jpg", Answer::photo(photo("dune.jpg"))),
        ("/away", Answer::redirect(elsewhere.clone())),
    ])
    .await
    .unwrap();
    let urls = vec![listed.url("/a.jpg"), elsewhere.clone(), listed.url("/away")];
    let results = app.crawl_settled("acme", "listed", &urls).await;
    let kinds: Vec<&str> = results.iter().map(kind).collect();
    assert_eq!(kinds, ["", "forbidden_host", "forbidden_host"]);
    assert_eq!(results[0]["status"], "ok");
    assert_eq!(refused.requests(), 0, "no request reached the refused host");
    // Another client is not limited to acme's list.
    let other = app.crawl_settled("globex", "anywhere", &[elsewhere]).await;
    assert_eq!(other[0]["status"], "ok", "{other:?}");
    assert_eq!(refused.requests(), 1);
}

#[tokio::test]
async fn urls_on_ports_downloads_may_not_use_fail_without_a_request() {
    let app = CrawlApp::start(&[("IMGEST_FETCH_PORTS", "80,443")]).await;
    let host = PartnerHost::start([("/a.jpg", Answer::photo(photo("dune.jpg")))])
        .await
        .unwrap();
    let results = app
        .crawl_settled("acme", "ported", &[host.url("/a.jpg")])
        .await;
    assert_eq!(kind(&results[0]), "forbidden_address");
    assert_eq!(host.requests(), 0);
}

#[tokio::test]
async fn urls_with_credentials_or_past_the_length_cap_are_refused_and_never_echoed_whole() {
    let app = CrawlApp::start(&[]).await;
    let host = PartnerHost::start([("/a.jpg", Answer::photo(photo("dune.jpg")))])
        .await
        .unwrap();
    let secret = host.url("/a.jpg").replace("http://", "http://user:s3cr3t@");
    let long = format!("{}?pad={}", host.url("/a.jpg"), "x".repeat(3000));
    let results = app.crawl_settled("acme", "creds", &[secret, long]).await;
    assert_eq!(kind(&results[0]), "invalid_url");
    assert_eq!(kind(&results[1]), "invalid_url");
    assert_eq!(host.requests(), 0);
    let status = app.crawl_status("creds").await;
    let echoed = status.json.to_string()
        + &app
            .results()
            .await
            .iter()
            .map(Value::to_string)
            .collect::<String>();
    assert!(!echoed.contains("s3cr3t"), "{echoed}");
    assert!(!echoed.contains("user:"), "{echoed}");
    let stored = results[1]["url"].as_str().unwrap();
    assert!(stored.len() <= 2048, "{} bytes", stored.len());
}
