//! Photo URL normalisation (`domain/url.rs`): `NormalizedUrl::parse` with the default rules and
//! with a set of configured ones, `redacted`, and `UrlHash::parse`, on any text.
//!
//! Invariants checked besides not panicking, each one the module documents or the crawl relies
//! on:
//! - an accepted URL is `http(s)://host…`, without credentials or fragment, at most
//!   `MAX_LEN` bytes, and its key is the fetch URL without its scheme;
//! - normalising is idempotent: the fetch URL parses (with the `url` crate, as the fetch
//!   function reads a task) to itself, and normalises to itself, with the same key and hash;
//! - `redacted` is at most `MAX_LEN` bytes and never carries credentials: when the input holds
//!   a NUL, the text `s3cr3t@` is put in its place, and wherever the URL parser reads that
//!   password as userinfo (as it would in `{before}s3cr3t@h.example/`), neither `redacted` nor
//!   an error message may show it, whether the whole text parses or not.
#![no_main]

use imgest_core::domain::{NormalizationRules, NormalizedUrl, UrlHash, redacted};
use libfuzzer_sys::fuzz_target;
use url::{Position, Url};

/// Stands for a password: plain characters that no step escapes or lowercases.
const SECRET: &str = "s3cr3t";
/// Another password, as plain.
const OTHER_SECRET: &str = "x9y8z7";

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let configured = NormalizationRules {
        extra_tracking_params: vec!["ref".to_owned(), "Session".to_owned()],
        host_rewrites: vec![
            ("img2.cdn.example".to_owned(), "img.cdn.example".to_owned()),
            ("mirror.example.".to_owned(), "[::1]".to_owned()),
        ],
    };
    match text.split_once('\0') {
        None => {
            check(text, &NormalizationRules::default());
            check(text, &configured);
        }
        Some((before, after)) => {
            let raw = format!("{before}{SECRET}@{after}");
            check(&raw, &NormalizationRules::default());
            check_secret_kept_out(before, after);
        }
    }
    if let Ok(hash) = UrlHash::parse(text) {
        assert_eq!(hash.as_str(), text);
    }
});

/// The invariants of one normalisation.
fn check(raw: &str, rules: &NormalizationRules) {
    let shown = redacted(raw);
    assert!(shown.len() <= NormalizedUrl::MAX_LEN, "{raw:?}");
    if let Ok(url) = Url::parse(&shown) {
        assert!(
            url.username().is_empty() && url.password().is_none(),
            "redacted({raw:?}) = {shown:?} has credentials"
        );
    }

    let Ok(normalized) = NormalizedUrl::parse(raw, rules) else {
        return;
    };
    let fetch = normalized.fetch_url();
    assert!(matches!(fetch.scheme(), "http" | "https"), "{raw:?}");
    assert!(fetch.host_str().is_some_and(|h| !h.is_empty()), "{raw:?}");
    assert!(fetch.username().is_empty() && fetch.password().is_none());
    assert!(fetch.fragment().is_none(), "{raw:?} -> {fetch}");
    assert!(fetch.as_str().len() <= NormalizedUrl::MAX_LEN, "{raw:?}");
    assert_eq!(
        normalized.key(),
        format!("//{}", &fetch[Position::BeforeHost..Position::AfterQuery]),
        "{raw:?}"
    );
    assert_eq!(normalized.hash().as_str().len(), 32);
    assert!(UrlHash::parse(normalized.hash().as_str()).is_ok());

    // The fetch function reads the task's URL back with the `url` crate.
    match Url::parse(fetch.as_str()) {
        Ok(again) => assert_eq!(again.as_str(), fetch.as_str(), "{raw:?}"),
        Err(e) => panic!("{raw:?} normalised to {fetch}, which does not parse: {e}"),
    }
    match NormalizedUrl::parse(fetch.as_str(), rules) {
        Ok(again) => {
            assert_eq!(again.key(), normalized.key(), "{raw:?} -> {fetch}");
            assert_eq!(again.fetch_url(), fetch, "{raw:?}");
            assert_eq!(again.hash(), normalized.hash());
        }
        Err(e) => panic!("{raw:?} normalised to {fetch}, which is refused: {e}"),
    }
}

/// `before` + password + `@` + `after`: if the URL parser reads the password as userinfo, it
/// must not show. It shows if putting another one in its place
/// changes what `redacted` or an error message says (looking for the text itself would also
/// find it where parsing makes it anew, e.g. in the punycode of a host `s3cr3фотtp`).
fn check_secret_kept_out(before: &str, after: &str) {
    // It is userinfo if the URL's userinfo changes with it (`before` may hold the text too).
    let userinfo = |secret: &str| {
        Url::parse(&format!("{before}{secret}@h.example/"))
            .ok()
            .map(|url| (url.username().to_owned(), url.password().map(str::to_owned)))
    };
    let probe = userinfo(SECRET);
    if probe.is_none() || probe == userinfo(OTHER_SECRET) {
        return;
    }
    let shown = |secret: &str| {
        let raw = format!("{before}{secret}@{after}");
        let error = NormalizedUrl::parse(&raw, &NormalizationRules::default()).err();
        (redacted(&raw), error.map(|e| e.to_string()))
    };
    assert_eq!(
        shown(SECRET),
        shown(OTHER_SECRET),
        "the password shows: {before:?} + password + @{after:?}"
    );
}
