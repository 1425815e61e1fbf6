//! Every JSON body the service accepts from outside: the first byte picks the body type (`'0'`
//! and on, modulo the number of types), the rest is parsed with serde_json as the route or
//! queue handler parses it, then checked the way the route or handler goes on to check it.
//!
//! | byte | body | from |
//! |---|---|---|
//! | `0` | `CreateUpload` | `POST /v1/uploads` |
//! | `1` | `SetPhotos`, then its image ids | `PUT /v1/offers/{id}/photos` |
//! | `2` | `CrawlRequest`, then each URL normalised and redacted, as intake does | `POST /v1/crawl`, the intake queue |
//! | `3` | `FetchTask`, then its URL as the fetch function reads it | the tier queues |
//! | `4` | `ProcessMessage` (a downloaded photo) | the process queue |
//! | `5` | `CrawlResult` | the results queue, stored crawl records |
//!
//! Besides not panicking: each crawl message type that parsed serialises and parses back to an
//! equal value (queues and the records store carry them as JSON).
#![no_main]

use std::fmt::Debug;

use imgest_http::{CreateUpload, SetPhotos};
use imgest_core::domain::{NormalizationRules, NormalizedUrl, redacted};
use imgest_crawl::messages::{CrawlRequest, CrawlResult, FetchTask, ProcessMessage};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

const KINDS: u8 = 6;

fuzz_target!(|bytes: &[u8]| {
    let Some((&kind, body)) = bytes.split_first() else {
        return;
    };
    match kind.wrapping_sub(b'0') % KINDS {
        0 => {
            let _ = serde_json::from_slice::<CreateUpload>(body);
        }
        1 => {
            if let Ok(photos) = serde_json::from_slice::<SetPhotos>(body) {
                let _ = photos.ids();
            }
        }
        2 => {
            if let Some(request) = parsed::<CrawlRequest>(body) {
                let rules = NormalizationRules::default();
                for raw in &request.urls {
                    let _ = NormalizedUrl::parse(raw, &rules);
                    assert!(redacted(raw).len() <= NormalizedUrl::MAX_LEN);
                }
            }
        }
        3 => {
            if let Some(task) = parsed::<FetchTask>(body) {
                let _ = url::Url::parse(&task.url);
            }
        }
        4 => {
            let _ = parsed::<ProcessMessage>(body);
        }
        _ => {
            let _ = parsed::<CrawlResult>(body);
        }
    }
});

/// The body parsed as a `T`, which then goes through JSON and back unchanged.
fn parsed<T: Serialize + DeserializeOwned + PartialEq + Debug>(body: &[u8]) -> Option<T> {
    let value = serde_json::from_slice::<T>(body).ok()?;
    let json = match serde_json::to_vec(&value) {
        Ok(json) => json,
        Err(e) => panic!("{value:?} does not serialise: {e}"),
    };
    match serde_json::from_slice::<T>(&json) {
        Ok(back) => assert_eq!(back, value, "through {}", String::from_utf8_lossy(&json)),
        Err(e) => panic!(
            "{value:?} serialises to {} which does not parse: {e}",
            String::from_utf8_lossy(&json)
        ),
    }
    Some(value)
}
