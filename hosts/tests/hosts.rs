//! The simulated hosts' own knobs: latency, the per-second limit, counters, 304s and drop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use imgest_hosts::{Answer, PartnerHost, etag_of};

const JPEG: &[u8] = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01fake jpeg body";

/// reqwest needs a default rustls provider in this workspace (it is built without one).
fn client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    reqwest::Client::builder()
}

#[tokio::test]
async fn a_host_over_its_per_second_limit_answers_429_and_timestamps_every_request() {
    let host = PartnerHost::builder()
        .serve("/a.jpg", Answer::photo(JPEG))
        .max_requests_per_second(3)
        .start()
        .await
        .unwrap();
    let client = client_builder().build().unwrap();
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let r = client.get(host.url("/a.jpg")).send().await.unwrap();
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    assert_eq!(host.requests(), 5);
    assert_eq!(host.request_times().len(), 5);
    // Refused requests never reach the answer.
    assert_eq!(host.hits("/a.jpg"), 3);
}

#[tokio::test]
async fn latency_delays_every_answer_and_unknown_paths_are_404() {
    let host = PartnerHost::builder()
        .serve("/a.jpg", Answer::photo(JPEG))
        .latency(Duration::from_millis(150))
        .start()
        .await
        .unwrap();
    let started = Instant::now();
    let r = reqwest::get(host.url("/nope")).await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn photos_carry_their_etag_and_answer_304_to_it() {
    let host = PartnerHost::start([("/a.jpg", Answer::photo(JPEG))])
        .await
        .unwrap();
    let client = client_builder().build().unwrap();
    let r = client.get(host.url("/a.jpg")).send().await.unwrap();
    assert_eq!(r.headers()["content-type"], "image/jpeg");
    assert_eq!(r.headers()["etag"], etag_of(JPEG).as_str());
    let r = client
        .get(host.url("/a.jpg"))
        .header("if-none-match", format!("W/{}", etag_of(JPEG)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
}

#[tokio::test]
async fn a_dropped_host_refuses_new_connections() {
    let host = PartnerHost::start([("/a.jpg", Answer::photo(JPEG))])
        .await
        .unwrap();
    let url = host.url("/a.jpg");
    drop(host);
    let client = client_builder().pool_max_idle_per_host(0).build().unwrap();
    // The listener closes as the aborted server task unwinds: wait for that, not a set time.
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.get(&url).send().await.is_ok() {
        assert!(Instant::now() < deadline, "the dropped host still answers");
        tokio::task::yield_now().await;
    }
}
