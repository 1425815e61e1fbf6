//! A download's body held in the process's memory budget, against real HTTP servers on
//! 127.0.0.1: the hold grows to the body (declared or not) and is given back when dropped; a
//! download that finds no room within its deadline blames nobody.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use bytes::Bytes;
use imgest_core::budget::BodyHold;
use imgest_core::budget::{BASE, MemoryBudget};
use imgest_download::{
    AllowedPorts, DownloadConfig, DownloadError, Downloaded, Downloader, FetchErrorKind,
};
use imgest_hosts::{Answer, PartnerHost};
use url::Url;

const MB: u64 = 1 << 20;

/// A real photo padded to `len` bytes: the signature is all the downloader reads of it.
fn photo_of(len: usize) -> Bytes {
    let mut bytes = include_bytes!("../../../tests/fixtures/photo.jpg").to_vec();
    bytes.resize(len, 0);
    Bytes::from(bytes)
}

fn downloader() -> Downloader {
    Downloader::new(DownloadConfig {
        allow_private: true,
        ports: AllowedPorts::Any,
        ..DownloadConfig::default()
    })
    .unwrap()
}

/// Downloads `url` holding its body in `hold`.
async fn fetch(
    url: &str,
    deadline: Duration,
    hold: &mut BodyHold,
) -> Result<Downloaded, DownloadError> {
    downloader()
        .download_unless_known(
            &Url::parse(url).unwrap(),
            deadline,
            None,
            None,
            None,
            Some(hold),
        )
        .await
}

/// A host serving `body` at `/declared.jpg` with its length and at `/chunked.jpg` without.
async fn declared_and_chunked(body: &Bytes) -> PartnerHost {
    PartnerHost::start(vec![
        ("/declared.jpg", Answer::photo(body.clone())),
        ("/chunked.jpg", Answer::NoContentLength(body.clone())),
    ])
    .await
    .unwrap()
}

/// A budget whose body pool is 10 MiB.
fn budget() -> MemoryBudget {
    let budget = MemoryBudget::new(BASE + 40 * MB);
    assert_eq!(budget.body_pool(), 10 * MB);
    budget
}

#[tokio::test]
async fn a_body_is_held_while_it_is_kept_whether_its_length_was_declared_or_not() {
    let body = photo_of(3 * MB as usize + 123);
    let host = declared_and_chunked(&body).await;
    let budget = budget();
    for path in ["/declared.jpg", "/chunked.jpg"] {
        let mut hold = budget.body_hold(MB, Duration::ZERO).await.unwrap();
        let got = fetch(&host.url(path), Duration::from_secs(5), &mut hold)
            .await
            .unwrap();
        let Downloaded::Body(download) = got else {
            panic!("{path}: expected a body");
        };
        assert_eq!(download.bytes, body, "{path}");
        assert!(
            hold.bytes() >= body.len() as u64,
            "{path}: {}",
            hold.bytes()
        );
        assert!(hold.bytes() <= DownloadConfig::default().max_body, "{path}");
        // Held in KiB, rounded up.
        assert!(budget.available().0 <= 10 * MB - hold.bytes(), "{path}");
        drop(hold);
        assert_eq!(budget.available().0, 10 * MB, "{path}: given back");
    }
}

#[tokio::test]
async fn a_download_without_room_for_its_body_blames_nobody_and_succeeds_once_there_is() {
    let body = photo_of(3 * MB as usize);
    let host = declared_and_chunked(&body).await;
    let budget = budget();
    for path in ["/declared.jpg", "/chunked.jpg"] {
        let url = host.url(path);
        // Other bodies hold all but the first hold's mebibyte.
        let others = budget.body(9 * MB, Duration::ZERO).await.unwrap();
        let mut hold = budget.body_hold(MB, Duration::ZERO).await.unwrap();
        let err = fetch(url.as_str(), Duration::from_millis(300), &mut hold)
            .await
            .unwrap_err();
        assert!(err.is_no_room(), "{path}: {err}");
        assert_ne!(err.kind, FetchErrorKind::Timeout, "{path}: not the host's");
        assert!(err.to_string().contains("no memory"), "{path}: {err}");
        drop(others);
        let got = fetch(url.as_str(), Duration::from_secs(5), &mut hold)
            .await
            .unwrap();
        assert!(
            matches!(got, Downloaded::Body(d) if d.bytes == body),
            "{path}"
        );
    }
}

#[tokio::test]
async fn a_slow_host_with_room_to_spare_is_still_a_timeout() {
    let host = PartnerHost::start(vec![(
        "/slow.jpg",
        Answer::drip(photo_of(64 * 1024), Duration::from_millis(50)),
    )])
    .await
    .unwrap();
    let budget = budget();
    let mut hold = budget.body_hold(MB, Duration::ZERO).await.unwrap();
    let err = fetch(
        &host.url("/slow.jpg"),
        Duration::from_millis(300),
        &mut hold,
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::Timeout);
    assert!(!err.is_no_room());
}
