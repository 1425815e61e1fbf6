//! The results' change feed (`GET /v1/crawls`): two clients' results filed interleaved, each
//! client reads only its own, in the order they were filed, across pages; a cursor taken before
//! results were old enough to be listed skips none of them; the runner restarted, each goes on
//! from its cursor; bad cursors and limits are refused, and a cursor older than the feed keeps
//! is told so. On the embedded backend and on the emulator (the feed's items on DynamoDB).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use imgest_crawl::feed::{LAG, RETENTION};
use serde_json::{Value, json};

use crate::support::identity::Identity;
use crate::support::{Body, TestApp};

const CLIENTS: [&str; 2] = ["acme", "beta"];

/// `client`'s feed from `after`, `limit` a page, to its end: the offers in order, and the
/// cursor to go on from.
async fn read_all(
    app: &TestApp,
    token: &str,
    after: Option<&str>,
    limit: usize,
) -> (Vec<String>, String) {
    let mut offers = Vec::new();
    let mut after = after.map(str::to_owned);
    for _ in 0..100 {
        let mut path = format!("/v1/crawls?limit={limit}");
        if let Some(cursor) = &after {
            path.push_str(&format!("&after={cursor}"));
        }
        let page = app.call("GET", &path, Some(token), Body::None).await;
        assert_eq!(page.status, 200, "{}", page.json);
        let results = page.json["results"].as_array().unwrap();
        assert!(results.len() <= limit, "{}", page.json);
        for result in results {
            assert_eq!(result["state"], "done");
            assert!(result["crawl_id"].is_string() && result["settled_at"].is_string());
            offers.push(result["offer_id"].as_str().unwrap().to_owned());
        }
        after = Some(page.json["next"].as_str().unwrap().to_owned());
        if page.json["more"] == Value::Bool(false) {
            return (offers, after.unwrap());
        }
    }
    panic!("the feed did not end within 100 pages");
}

/// A crawl of `offer` for `client` with no URL: it settles at once and its result is sent (and
/// filed), a few milliseconds after the previous one.
async fn crawl(app: &TestApp, token: &str, client: &str, offer: &str) {
    let body = json!({"client_id": client, "offer_id": offer, "urls": []});
    let accepted = app
        .call("POST", "/v1/crawl", Some(token), Body::Json(body))
        .await;
    assert_eq!(
        (accepted.status, &accepted.json["state"]),
        (202, &json!("done")),
        "{}",
        accepted.json
    );
    app.advance_clock(Duration::from_millis(7));
}

async fn each_client_pulls_its_own_results_in_order_across_pages_and_a_restart(
    app: TestApp,
    id: &Identity,
) {
    let tokens: Vec<String> = CLIENTS
        .iter()
        .map(|c| id.partner(&format!("{c}-backend"), c))
        .collect();
    for i in 0..5 {
        for (client, token) in CLIENTS.iter().zip(&tokens) {
            crawl(&app, token, client, &format!("{client}-{i}")).await;
        }
    }
    let own = |client: &str, range: std::ops::Range<usize>| -> Vec<String> {
        range.map(|i| format!("{client}-{i}")).collect()
    };
    // Too fresh to list: nothing yet, and the cursor given then skips none of them later.
    let (none, early) = read_all(&app, &tokens[0], None, 2).await;
    assert!(none.is_empty(), "{none:?}");
    app.advance_clock(LAG);
    let mut cursors = Vec::new();
    for ((client, token), limit) in CLIENTS.iter().zip(&tokens).zip([2, 3]) {
        let (offers, next) = read_all(&app, token, None, limit).await;
        assert_eq!(offers, own(client, 0..5), "{client}, {limit} a page");
        cursors.push(next);
    }
    let (from_early, _) = read_all(&app, &tokens[0], Some(&early), 1).await;
    assert_eq!(from_early, own("acme", 0..5));
    // Read to the end, a cursor has nothing more until more is filed.
    let (nothing, _) = read_all(&app, &tokens[1], Some(&cursors[1]), 10).await;
    assert!(nothing.is_empty(), "{nothing:?}");

    // One more result for acme, then a restart: each goes on from its cursor.
    crawl(&app, &tokens[0], "acme", "acme-5").await;
    let app = app.restart().await;
    app.advance_clock(LAG);
    let (acme, _) = read_all(&app, &tokens[0], Some(&cursors[0]), 10).await;
    assert_eq!(acme, own("acme", 5..6));
    let (beta, _) = read_all(&app, &tokens[1], Some(&cursors[1]), 10).await;
    assert!(beta.is_empty(), "{beta:?}");

    // Refusals: a cursor this API did not give, limits out of range.
    for path in [
        "/v1/crawls?after=bm90LWEtY3Vyc29y",
        "/v1/crawls?limit=0",
        "/v1/crawls?limit=501",
        "/v1/crawls?cursor=x",
    ] {
        let refused = app.call("GET", path, Some(&tokens[0]), Body::None).await;
        assert_eq!(
            (refused.status, refused.kind()),
            (400, "invalid_query"),
            "{path}: {}",
            refused.json
        );
    }
    // A cursor older than the feed keeps: the partner is told it may have missed results.
    app.advance_clock(RETENTION);
    let path = format!("/v1/crawls?after={}", cursors[0]);
    let expired = app.call("GET", &path, Some(&tokens[0]), Body::None).await;
    assert_eq!(
        (expired.status, expired.kind()),
        (410, "cursor_expired"),
        "{}",
        expired.json
    );
}

#[tokio::test]
async fn each_client_pulls_its_own_results_in_order_on_the_embedded_backend() {
    let id = Identity::new();
    let vars = id.vars();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let app = TestApp::start_with(&vars).await;
    each_client_pulls_its_own_results_in_order_across_pages_and_a_restart(app, &id).await;
}

#[tokio::test]
async fn each_client_pulls_its_own_results_in_order_on_dynamodb() {
    const NAME: &str = "the results' feed";
    let Some(config) = imgest_testing::aws::sdk_config(NAME).await else {
        return;
    };
    // The results are sent (to a queue) as well as filed.
    let sqs = aws_sdk_sqs::Client::new(&config);
    let (results, _) = imgest_testing::aws::queue(&sqs, "feed-results").await;
    let id = Identity::new();
    let mut vars = id.vars();
    vars.push(("IMGEST_QUEUES", format!("results={results}")));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let app = TestApp::start_aws(NAME, &vars).await.unwrap();
    each_client_pulls_its_own_results_in_order_across_pages_and_a_restart(app, &id).await;
}
