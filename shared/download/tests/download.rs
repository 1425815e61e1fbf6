//! The photo downloader against real HTTP servers on 127.0.0.1 (`imgest-hosts`): deadlines,
//! status mapping, redirects, the address guard, body limits and signatures, resets and
//! conditional requests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use imgest_core::domain::{ImageId, SourceFormat};
use imgest_download::{
    AllowedPorts, DownloadConfig, DownloadError, Downloaded, Downloader, FetchErrorKind,
    HostAllowlist, Validator,
};
use imgest_hosts::{Answer, PartnerHost, etag_of, redirect_chain};
use url::Url;

/// A real photo (`tests/fixtures/photo.jpg`, 70 kB).
const PHOTO: &[u8] = include_bytes!("../../../tests/fixtures/photo.jpg");
const DEADLINE: Duration = Duration::from_secs(5);

fn photo() -> Bytes {
    Bytes::from_static(PHOTO)
}

/// A downloader that may use any port (the hosts listen on random ones).
fn downloader(allow_private: bool) -> Downloader {
    Downloader::new(DownloadConfig {
        allow_private,
        ports: AllowedPorts::Any,
        ..DownloadConfig::default()
    })
    .unwrap()
}

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

async fn host(answers: Vec<(&str, Answer)>) -> PartnerHost {
    PartnerHost::start(answers).await.unwrap()
}

/// Fetches with the guard lifted (the hosts are on loopback); expects a body.
async fn fetch_ok(host: &PartnerHost, path: &str) -> imgest_download::Download {
    match downloader(true)
        .download(&url(&host.url(path)), DEADLINE, None, None)
        .await
    {
        Ok(Downloaded::Body(download)) => download,
        other => panic!("{path}: expected a body, got {other:?}"),
    }
}

async fn download_err(downloader: &Downloader, raw: &str, deadline: Duration) -> DownloadError {
    match downloader.download(&url(raw), deadline, None, None).await {
        Err(e) => e,
        Ok(ok) => panic!("{raw}: expected an error, got {ok:?}"),
    }
}

async fn kind_of(host: &PartnerHost, path: &str) -> DownloadError {
    download_err(&downloader(true), &host.url(path), DEADLINE).await
}

#[tokio::test]
async fn a_fast_photo_downloads_with_its_md5_as_image_id_and_its_etag() {
    let host = host(vec![("/a.jpg", Answer::photo(photo()))]).await;
    let got = fetch_ok(&host, "/a.jpg").await;
    assert_eq!(got.bytes, PHOTO);
    assert_eq!(got.image_id, ImageId::of_bytes(PHOTO));
    assert_eq!(got.format, SourceFormat::Jpeg);
    assert_eq!(got.final_url.as_str(), host.url("/a.jpg"));
    assert_eq!(got.validator.etag, Some(etag_of(PHOTO)));
    assert!(got.validator.last_modified.is_some());
    assert!(got.elapsed > Duration::ZERO);
    assert_eq!(host.requests(), 1);
}

#[tokio::test]
async fn a_host_slower_than_the_deadline_times_out() {
    let host = host(vec![(
        "/slow.jpg",
        Answer::delay(Duration::from_secs(3), Answer::photo(photo())),
    )])
    .await;
    let e = download_err(
        &downloader(true),
        &host.url("/slow.jpg"),
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(e.kind, FetchErrorKind::Timeout);
    assert_eq!(e.http_status, None);
}

#[tokio::test]
async fn a_host_that_drips_is_cut_at_the_deadline() {
    // Headers arrive at once; the body never would within the deadline.
    let host = host(vec![(
        "/drip.jpg",
        Answer::drip(photo(), Duration::from_millis(20)),
    )])
    .await;
    let e = download_err(
        &downloader(true),
        &host.url("/drip.jpg"),
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(e.kind, FetchErrorKind::Timeout);
}

#[tokio::test]
async fn error_statuses_map_to_their_kinds_and_keep_the_status() {
    let host = host(vec![
        ("/404", Answer::status(404)),
        ("/410", Answer::status(410)),
        ("/401", Answer::status(401)),
        ("/403", Answer::status(403)),
        ("/418", Answer::status(418)),
        ("/408", Answer::status(408)),
        ("/500", Answer::status(500)),
        ("/503", Answer::status(503)),
    ])
    .await;
    for (path, kind, status) in [
        ("/404", FetchErrorKind::NotFound, 404),
        ("/410", FetchErrorKind::NotFound, 410),
        ("/401", FetchErrorKind::Forbidden, 401),
        ("/403", FetchErrorKind::Forbidden, 403),
        ("/418", FetchErrorKind::HttpError, 418),
        ("/408", FetchErrorKind::ServerError, 408),
        ("/500", FetchErrorKind::ServerError, 500),
        ("/503", FetchErrorKind::ServerError, 503),
    ] {
        let e = kind_of(&host, path).await;
        assert_eq!((e.kind, e.http_status), (kind, Some(status)), "{path}");
        assert_eq!(e.retry_after, None, "{path}");
    }
}

#[tokio::test]
async fn a_429_with_retry_after_seconds_is_rate_limited_with_the_delay() {
    let host = host(vec![("/busy.jpg", Answer::retry_after(429, "7"))]).await;
    let e = kind_of(&host, "/busy.jpg").await;
    assert_eq!(e.kind, FetchErrorKind::RateLimited);
    assert_eq!(e.http_status, Some(429));
    assert_eq!(e.retry_after, Some(Duration::from_secs(7)));
    assert!(e.is_retryable());
}

#[tokio::test]
async fn a_503_with_retry_after_as_an_http_date_gives_the_delay_until_then() {
    let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    let host = host(vec![("/later.jpg", Answer::retry_after(503, at))]).await;
    let e = kind_of(&host, "/later.jpg").await;
    assert_eq!(
        (e.kind, e.http_status),
        (FetchErrorKind::ServerError, Some(503))
    );
    let delay = e.retry_after.unwrap();
    // The date has a one-second resolution.
    assert!(
        delay > Duration::from_secs(115) && delay <= Duration::from_secs(120),
        "{delay:?}"
    );
}

#[tokio::test]
async fn a_host_that_fails_twice_then_serves_gives_two_server_errors_then_the_photo() {
    let host = host(vec![(
        "/flaky.jpg",
        Answer::fail_times(2, 500, Answer::photo(photo())),
    )])
    .await;
    for _ in 0..2 {
        assert_eq!(
            kind_of(&host, "/flaky.jpg").await.kind,
            FetchErrorKind::ServerError
        );
    }
    assert_eq!(
        fetch_ok(&host, "/flaky.jpg").await.image_id,
        ImageId::of_bytes(PHOTO)
    );
    assert_eq!(host.hits("/flaky.jpg"), 3);
}

#[tokio::test]
async fn a_chain_of_three_redirects_ends_at_the_photo_with_its_final_url() {
    let mut answers = redirect_chain("/r", 3, "/photo.jpg");
    answers.push(("/photo.jpg".into(), Answer::photo(photo())));
    // Relative, absolute-path and 301/307/308 forms along the way.
    let host = PartnerHost::builder()
        .serve_all(answers)
        .serve(
            "/start",
            Answer::Redirect {
                status: 301,
                location: "r/0".into(),
            },
        )
        .start()
        .await
        .unwrap();
    let got = fetch_ok(&host, "/r/0").await;
    assert_eq!(got.final_url.as_str(), host.url("/photo.jpg"));
    assert_eq!(got.image_id, ImageId::of_bytes(PHOTO));
    let via_relative = fetch_ok(&host, "/start").await;
    assert_eq!(via_relative.final_url.as_str(), host.url("/photo.jpg"));
}

#[tokio::test]
async fn five_redirects_are_followed_and_a_sixth_is_too_many() {
    let mut answers = redirect_chain("/five", 5, "/photo.jpg");
    answers.extend(redirect_chain("/six", 6, "/photo.jpg"));
    answers.push(("/photo.jpg".into(), Answer::photo(photo())));
    let host = PartnerHost::start(answers).await.unwrap();
    assert_eq!(
        fetch_ok(&host, "/five/0").await.final_url.as_str(),
        host.url("/photo.jpg")
    );
    let e = kind_of(&host, "/six/0").await;
    assert_eq!(e.kind, FetchErrorKind::TooManyRedirects);
    assert_eq!(host.hits("/six/5"), 1, "the sixth redirect was received");
    assert_eq!(
        host.hits("/photo.jpg"),
        1,
        "only the five-hop chain got there"
    );
}

#[tokio::test]
async fn loopback_literals_in_any_notation_are_refused_before_any_request() {
    let host = host(vec![("/a.jpg", Answer::photo(photo()))]).await;
    let port = host.addr().port();
    let guarded = downloader(false);
    for raw in [
        format!("http://127.0.0.1:{port}/a.jpg"),
        format!("http://2130706433:{port}/a.jpg"),
        format!("http://0x7f.1:{port}/a.jpg"),
        format!("http://0177.0.0.1:{port}/a.jpg"),
        format!("http://[::ffff:127.0.0.1]:{port}/a.jpg"),
        format!("http://[::1]:{port}/a.jpg"),
    ] {
        let e = download_err(&guarded, &raw, DEADLINE).await;
        assert_eq!(e.kind, FetchErrorKind::ForbiddenAddress, "{raw}: {e}");
    }
    assert_eq!(host.requests(), 0);
    // The same notations reach the host once private networks are allowed.
    let open = downloader(true);
    for raw in [
        format!("http://2130706433:{port}/a.jpg"),
        format!("http://0x7f.1:{port}/a.jpg"),
    ] {
        assert!(matches!(
            open.download(&url(&raw), DEADLINE, None, None).await,
            Ok(Downloaded::Body(_))
        ));
    }
    assert_eq!(host.requests(), 2);
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_by_the_resolver() {
    let host = host(vec![("/a.jpg", Answer::photo(photo()))]).await;
    let raw = format!("http://localhost:{}/a.jpg", host.addr().port());
    let e = download_err(&downloader(false), &raw, DEADLINE).await;
    assert_eq!(e.kind, FetchErrorKind::ForbiddenAddress, "{e}");
    assert_eq!(host.requests(), 0);
    // With the guard lifted the resolved address is used (tried in order, IPv6 first or not).
    assert!(matches!(
        downloader(true)
            .download(&url(&raw), DEADLINE, None, None)
            .await,
        Ok(Downloaded::Body(_))
    ));
    assert_eq!(host.requests(), 1);
}

#[tokio::test]
async fn redirects_to_forbidden_addresses_are_refused_at_the_hop() {
    // Allowing private networks (the host is on loopback) never allows the metadata service
    // or 0.0.0.0 (which would connect to this machine).
    let host = PartnerHost::builder()
        .serve("/a.jpg", Answer::photo(photo()))
        .serve(
            "/to-metadata",
            Answer::redirect("http://169.254.169.254/latest/meta-data/"),
        )
        .serve(
            "/to-v6-metadata",
            Answer::redirect("http://[fd00:ec2::254]/"),
        )
        .serve(
            "/to-mapped-metadata",
            Answer::redirect("http://0xa9fea9fe/"),
        )
        .start()
        .await
        .unwrap();
    let zero = format!("http://0.0.0.0:{}/a.jpg", host.addr().port());
    let host_with_zero = PartnerHost::builder()
        .serve("/to-zero", Answer::redirect(zero))
        .start()
        .await
        .unwrap();
    for path in ["/to-metadata", "/to-v6-metadata", "/to-mapped-metadata"] {
        let e = kind_of(&host, path).await;
        assert_eq!(e.kind, FetchErrorKind::ForbiddenAddress, "{path}: {e}");
        assert_eq!(e.http_status, None);
    }
    let e = kind_of(&host_with_zero, "/to-zero").await;
    assert_eq!(e.kind, FetchErrorKind::ForbiddenAddress, "{e}");
    assert_eq!(host.hits("/a.jpg"), 0);
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_a_dns_error() {
    // `.invalid` never resolves (RFC 2606).
    let e = download_err(
        &downloader(false),
        "http://photos.imgest.invalid/a.jpg",
        DEADLINE,
    )
    .await;
    assert_eq!(e.kind, FetchErrorKind::Dns, "{e}");
    assert!(e.is_retryable());
}

#[tokio::test]
async fn a_real_photo_with_a_wrong_content_type_is_accepted() {
    let host = host(vec![("/a.jpg", Answer::WrongContentType(photo()))]).await;
    let got = fetch_ok(&host, "/a.jpg").await;
    assert_eq!(got.image_id, ImageId::of_bytes(PHOTO));
}

#[tokio::test]
async fn an_html_page_or_an_empty_body_is_an_unsupported_format() {
    let page = "<!doctype html><html><body>Photo not found</body></html>".repeat(100);
    let host = host(vec![
        ("/page.jpg", Answer::body(page, "image/jpeg")),
        ("/empty.jpg", Answer::body(Bytes::new(), "image/jpeg")),
        ("/short.jpg", Answer::body(&b"\xff\xd8"[..], "image/jpeg")),
    ])
    .await;
    for path in ["/page.jpg", "/empty.jpg", "/short.jpg"] {
        let e = kind_of(&host, path).await;
        assert_eq!(e.kind, FetchErrorKind::UnsupportedFormat, "{path}: {e}");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_too_large_with_or_without_content_length() {
    let limit = u64::try_from(PHOTO.len()).unwrap() - 1;
    let small = Downloader::new(DownloadConfig {
        allow_private: true,
        max_body: limit,
        ports: AllowedPorts::Any,
        ..DownloadConfig::default()
    })
    .unwrap();
    let host = host(vec![
        ("/declared.jpg", Answer::photo(photo())),
        ("/chunked.jpg", Answer::NoContentLength(photo())),
    ])
    .await;
    // Refused by the declared length before reading, or while reading when none is declared.
    for (path, how) in [
        ("/declared.jpg", "Content-Length"),
        ("/chunked.jpg", "passed the limit"),
    ] {
        let e = download_err(&small, &host.url(path), DEADLINE).await;
        assert_eq!(e.kind, FetchErrorKind::TooLarge, "{path}: {e}");
        assert!(e.message.contains(how), "{path}: {e}");
    }
    // A body of exactly the limit is fine, chunked too.
    let exact = Downloader::new(DownloadConfig {
        max_body: limit + 1,
        ..small.config().clone()
    })
    .unwrap();
    for path in ["/declared.jpg", "/chunked.jpg"] {
        let got = exact
            .download(&url(&host.url(path)), DEADLINE, None, None)
            .await;
        assert!(matches!(got, Ok(Downloaded::Body(_))), "{path}: {got:?}");
    }
}

#[tokio::test]
async fn a_connection_reset_mid_body_is_a_connection_error() {
    let host = host(vec![(
        "/reset.jpg",
        Answer::Reset {
            bytes: photo(),
            after: 4096,
        },
    )])
    .await;
    let e = kind_of(&host, "/reset.jpg").await;
    assert_eq!(e.kind, FetchErrorKind::Connection, "{e}");
    // Broken while reading the body, after the headers came.
    assert!(e.message.contains("body"), "{e}");
    assert!(e.is_retryable());
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let e = download_err(
        &downloader(true),
        &format!("http://127.0.0.1:{port}/a.jpg"),
        DEADLINE,
    )
    .await;
    assert_eq!(e.kind, FetchErrorKind::Connection, "{e}");
    assert!(e.message.contains("refused"), "{e}");
}

#[tokio::test]
async fn a_second_download_with_the_validator_is_not_modified() {
    let host = host(vec![("/a.jpg", Answer::photo(photo()))]).await;
    let downloader = downloader(true);
    let first = fetch_ok(&host, "/a.jpg").await;
    let again = downloader
        .download(&first.final_url, DEADLINE, Some(&first.validator), None)
        .await
        .unwrap();
    let Downloaded::NotModified {
        final_url,
        validator,
        ..
    } = again
    else {
        panic!("expected not modified, got {again:?}");
    };
    assert_eq!(final_url, first.final_url);
    assert_eq!(validator.etag, first.validator.etag);
    // Last-Modified alone works too; an empty validator is an ordinary download.
    let by_date = Validator {
        etag: None,
        last_modified: first.validator.last_modified.clone(),
    };
    let again = downloader
        .download(&first.final_url, DEADLINE, Some(&by_date), None)
        .await;
    assert!(
        matches!(again, Ok(Downloaded::NotModified { .. })),
        "{again:?}"
    );
    let plain = downloader
        .download(
            &first.final_url,
            DEADLINE,
            Some(&Validator::default()),
            None,
        )
        .await;
    assert!(matches!(plain, Ok(Downloaded::Body(_))), "{plain:?}");
    assert_eq!(host.hits("/a.jpg"), 4);
}

#[tokio::test]
async fn urls_with_credentials_are_refused_without_quoting_them() {
    let host = host(vec![("/a.jpg", Answer::photo(photo()))]).await;
    let raw = format!("http://partner:s3cret@{}/a.jpg", host.addr());
    let e = download_err(&downloader(true), &raw, DEADLINE).await;
    assert_eq!(e.kind, FetchErrorKind::InvalidUrl);
    assert!(!e.to_string().contains("s3cret"), "{e}");
    assert_eq!(host.requests(), 0);
}

#[tokio::test]
async fn https_to_a_plain_http_server_fails_its_handshake_as_a_connection_error() {
    // Exercises the TLS stack (rustls on aws-lc-rs) as far as a loopback test can.
    let host = host(vec![("/a.jpg", Answer::photo(photo()))]).await;
    let raw = format!("https://{}/a.jpg", host.addr());
    let e = download_err(&downloader(true), &raw, DEADLINE).await;
    assert_eq!(e.kind, FetchErrorKind::Connection, "{e}");
}

#[tokio::test]
async fn a_port_that_is_not_allowed_is_refused_without_a_connection() {
    let photo_host = host(vec![("/a.jpg", Answer::photo(photo()))]).await;
    let web_only = Downloader::new(DownloadConfig {
        allow_private: true,
        ..DownloadConfig::default()
    })
    .unwrap();
    let e = download_err(&web_only, &photo_host.url("/a.jpg"), DEADLINE).await;
    assert_eq!(e.kind, FetchErrorKind::ForbiddenAddress, "{e}");
    assert_eq!(photo_host.requests(), 0);

    // A redirect from an allowed port to another one is refused the same way.
    let other = host(vec![("/b.jpg", Answer::photo(photo()))]).await;
    let hop = host(vec![("/r", Answer::redirect(other.url("/b.jpg")))]).await;
    let hop_port = url(&hop.url("/")).port().unwrap();
    let listed = Downloader::new(DownloadConfig {
        allow_private: true,
        ports: AllowedPorts::Only(vec![hop_port]),
        ..DownloadConfig::default()
    })
    .unwrap();
    let e = download_err(&listed, &hop.url("/r"), DEADLINE).await;
    assert_eq!(e.kind, FetchErrorKind::ForbiddenAddress, "{e}");
    assert_eq!(hop.hits("/r"), 1);
    assert_eq!(other.requests(), 0, "no request reached the refused port");
}

#[tokio::test]
async fn a_host_off_the_clients_list_is_refused_also_after_a_redirect_without_a_connection() {
    let refused = host(vec![("/b.jpg", Answer::photo(photo()))]).await;
    // The same machine under another name: the list is of names, not addresses.
    let elsewhere = refused.url("/b.jpg").replace("127.0.0.1", "localhost");
    let listed = host(vec![
        ("/a.jpg", Answer::photo(photo())),
        ("/away", Answer::redirect(elsewhere.clone())),
    ])
    .await;
    let only_loopback_literal = HostAllowlist::parse("127.0.0.1").unwrap();
    let downloader = downloader(true);
    let fetched = downloader
        .download(
            &url(&listed.url("/a.jpg")),
            DEADLINE,
            None,
            Some(&only_loopback_literal),
        )
        .await;
    assert!(matches!(fetched, Ok(Downloaded::Body(_))), "{fetched:?}");
    // Asked for directly, and reached by a redirect from a listed host.
    for refused_url in [elsewhere, listed.url("/away")] {
        let e = downloader
            .download(
                &url(&refused_url),
                DEADLINE,
                None,
                Some(&only_loopback_literal),
            )
            .await
            .unwrap_err();
        assert_eq!(e.kind, FetchErrorKind::ForbiddenHost, "{refused_url}: {e}");
    }
    assert_eq!(listed.hits("/away"), 1);
    assert_eq!(refused.requests(), 0, "no request reached the refused host");
}
