//! The Lambda functions' event parsers: the first byte picks the function (`'0'` and on, modulo
//! the number of kinds), the rest is its event as the Lambda runtime hands it over, read into
//! the handler's typed input exactly as the function's `main` and handler read it.
//!
//! | byte | function | event, and what is read from it |
//! |---|---|---|
//! | `0` | process | an SQS batch; each body an S3 notification or a downloaded photo (`work_in`) |
//! | `1` | intake | an SQS batch; each body a crawl request, whose URLs intake normalises |
//! | `2` | fetch | an SQS batch; each body a fetch task, whose URL the fetch reads |
//! | `3` | ttl-cleanup | a DynamoDB stream batch; the image records TTL removed (`removed_images`) |
//! | `4` | scheduled-gc | an EventBridge scheduled event, taken as any JSON (the handler ignores it) |
//! | `5` | api | an API Gateway HTTP API request (payload 2.0), as lambda_http reads it; then the JWT authorizer's claims and the caller they make |
//! | `6` | backfill | its schedule's event or an SQS batch of backfill tasks (`Event::of`); each task's body an image id |
//! | `7` | erasure | an EventBridge scheduled event, taken as any JSON (the handler ignores it) |
//! | `8` | webhooks | an SQS batch; each body a webhook delivery (`WebhookMessage`): the client, crawl and feed position it names |
//!
//! One known third-party panic is let through (see [`tolerate_lambda_http_panics`]); any other
//! panic is a finding.
#![no_main]

use std::cell::Cell;

use aws_lambda_events::event::sqs::SqsEvent;
use imgest_aws::dynamodb::removed_images;
use imgest_http::auth::{Caller, gateway};
use imgest_core::domain::{ImageId, NormalizationRules, NormalizedUrl, redacted};
use imgest_crawl::messages::{CrawlRequest, FetchTask};
use imgest_crawl::webhooks::WebhookMessage;
use imgest_lambda::backfill::Event;
use imgest_lambda_crawl::process::{Work, work_in};
use imgest_lambda::sqs_items;
use imgest_settings::QueueSenders;
use libfuzzer_sys::fuzz_target;

const KINDS: u8 = 9;

thread_local! {
    /// Whether lambda_http is building a request on this thread.
    static IN_LAMBDA_HTTP: Cell<bool> = const { Cell::new(false) };
}

fuzz_target!(init: tolerate_lambda_http_panics(), |bytes: &[u8]| {
    let Some((&kind, event)) = bytes.split_first() else {
        return;
    };
    match kind.wrapping_sub(b'0') % KINDS {
        0 => {
            for (_, body) in sqs_bodies(event) {
                if let Ok(Work::Uploads(uploads)) = work_in(&body) {
                    // Upload ids are what `incoming/{id}` keys are made of.
                    for upload in uploads {
                        assert_eq!(upload.as_str().len(), 32, "{upload}");
                    }
                }
            }
        }
        1 => {
            for (_, body) in sqs_bodies(event) {
                if let Ok(request) = serde_json::from_str::<CrawlRequest>(&body) {
                    for raw in &request.urls {
                        let _ = NormalizedUrl::parse(raw, &NormalizationRules::default());
                        let _ = redacted(raw);
                    }
                }
            }
        }
        2 => {
            for (_, body) in sqs_bodies(event) {
                if let Ok(task) = serde_json::from_str::<FetchTask>(&body) {
                    let _ = url::Url::parse(&task.url);
                }
            }
        }
        3 => {
            if let Ok(event) = serde_json::from_slice::<serde_json::Value>(event) {
                let _ = removed_images(&event);
            }
        }
        4 | 7 => {
            let _ = serde_json::from_slice::<serde_json::Value>(event);
        }
        8 => {
            for (_, body) in sqs_bodies(event) {
                let _ = serde_json::from_str::<WebhookMessage>(&body);
            }
        }
        6 => {
            if let Ok(value) = serde_json::from_slice::<serde_json::Value>(event)
                && let Ok(Event::Tasks(batch)) = Event::of(value)
            {
                for item in sqs_items(batch, &QueueSenders::default()) {
                    let _ = ImageId::parse(item.body.trim());
                }
            }
        }
        _ => {
            let Ok(text) = std::str::from_utf8(event) else {
                return;
            };
            IN_LAMBDA_HTTP.set(true);
            let request = std::panic::catch_unwind(|| lambda_http::request::from_str(text));
            IN_LAMBDA_HTTP.set(false);
            if let Ok(Ok(request)) = request
                && let Ok(claims) = gateway::claims(request.extensions())
            {
                let _ = Caller::from_claims(&claims);
            }
        }
    }
});

/// The messages of an SQS batch event, as the handlers take them: each id and body.
fn sqs_bodies(event: &[u8]) -> Vec<(String, String)> {
    serde_json::from_slice::<SqsEvent>(event)
        .map(|event| sqs_items(event, &QueueSenders::default()))
        .unwrap_or_default()
        .into_iter()
        .map(|item| (item.id, item.body))
        .collect()
}

/// lambda_http panics while it builds the request's URI from an event whose host (the Host
/// header, else the domain name), `x-forwarded-proto`, path or query does not make a valid URI:
/// an `expect` and an `unwrap` in its `request.rs` (a long-standing upstream issue; reproducers
/// `tests/fixtures/fuzz/events-lambda-http-*.json`). The API function survives them:
/// lambda_runtime catches a handler's panic and fails the invocation (API Gateway answers 500).
/// Those panics are let through here, so that fuzzing goes on past them; libfuzzer-sys's hook
/// (abort) still takes every other one.
fn tolerate_lambda_http_panics() {
    let abort = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let known = IN_LAMBDA_HTTP.get()
            && info.location().is_some_and(|at| {
                at.file().contains("lambda_http") && at.file().ends_with("request.rs")
            });
        if !known {
            abort(info);
        }
    }));
}
