//! The operator's browse of the stored images (`GET /v1/operator/images`, the page's "Images"
//! view): every live image or only the orphans, page by page, and hostile queries refused, on
//! the embedded backend and on the AWS adapters (the runner serves the same router on both).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use serde_json::Value;

use crate::support::{TestApp, fixture};

/// Every image of the browse, page by page with `limit`, by id; and how many pages it took.
async fn browse_all(
    app: &TestApp,
    orphans: bool,
    limit: usize,
) -> (BTreeMap<String, Value>, usize) {
    let mut images = BTreeMap::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut path = format!("/v1/operator/images?orphans={orphans}&limit={limit}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let r = app.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.json);
        pages += 1;
        let page = r.json["images"].as_array().unwrap();
        assert!(page.len() <= limit, "{}", r.json);
        for image in page {
            let id = image["image_id"].as_str().unwrap().to_owned();
            assert!(
                images.insert(id, image.clone()).is_none(),
                "seen twice: {image}"
            );
        }
        match r.json["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (images, pages),
        }
    }
}

const VARS: &[(&str, &str)] = &[("IMGEST_ORPHAN_TTL", "1h")];

#[tokio::test]
async fn the_operator_pages_through_every_image_and_finds_the_orphans() {
    pages_and_orphans(&TestApp::start_with(VARS).await).await;
}

#[tokio::test]
async fn the_operator_pages_through_every_image_and_finds_the_orphans_on_aws() {
    let Some(app) = TestApp::start_aws("browse on aws", VARS).await else {
        return;
    };
    pages_and_orphans(&app).await;
}

#[tokio::test]
async fn hostile_browse_queries_are_refused() {
    hostile_queries(&TestApp::start().await, false).await;
}

#[tokio::test]
async fn hostile_browse_queries_are_refused_on_aws() {
    let Some(app) = TestApp::start_aws("hostile browse on aws", &[]).await else {
        return;
    };
    hostile_queries(&app, true).await;
}

async fn pages_and_orphans(app: &TestApp) {
    let linked_a = app.upload_ok(&fixture("photo.jpg")).await;
    let linked_b = app.upload_ok(&fixture("photo.webp")).await;
    let orphan = app.upload_ok(&fixture("small.png")).await;
    let r = app.link("o1", &[&linked_a, &linked_b]).await;
    assert_eq!(r.status, 200, "{}", r.json);

    // Pages of two: DynamoDB's pages may hold fewer (it filters after reading), never more.
    let (all, pages) = browse_all(app, false, 2).await;
    assert!(pages >= 2, "three images in pages of two");
    let mut ids: Vec<&str> = vec![&linked_a, &linked_b, &orphan];
    ids.sort_unstable();
    assert_eq!(all.keys().map(String::as_str).collect::<Vec<_>>(), ids);
    for id in [&linked_a, &linked_b] {
        assert_eq!(all[id]["offers"], 1, "{}", all[id]);
        assert!(all[id].get("expires_at").is_none(), "{}", all[id]);
    }
    let seen = &all[&orphan];
    assert_eq!(seen["offers"], 0, "{seen}");
    assert!(seen["variants"]["thumb"]["url"].is_string(), "{seen}");
    assert!(seen["created_at"].is_string() && seen["last_update"].is_string());
    let expires = seen["expires_at"].as_str().unwrap();
    assert!(expires > seen["last_update"].as_str().unwrap(), "{seen}");

    let (orphans, _) = browse_all(app, true, 50).await;
    assert_eq!(orphans.keys().collect::<Vec<_>>(), vec![&orphan]);

    // Once collected, an orphan is no longer listed.
    app.advance_clock(std::time::Duration::from_secs(2 * 3600));
    assert_eq!(app.gc().await.images_deleted, 1);
    let (after, _) = browse_all(app, false, 50).await;
    assert_eq!(after.len(), 2);
    assert!(!after.contains_key(&orphan));
    let (none, _) = browse_all(app, true, 50).await;
    assert!(none.is_empty());
}

async fn hostile_queries(app: &TestApp, aws: bool) {
    let long_cursor = format!("/v1/operator/images?cursor={}", "a".repeat(600));
    for path in [
        "/v1/operator/images?limit=0",
        "/v1/operator/images?limit=201",
        "/v1/operator/images?limit=-1",
        "/v1/operator/images?limit=99999999999999999999999",
        "/v1/operator/images?orphans=maybe",
        "/v1/operator/images?offset=3",
        long_cursor.as_str(),
        // Not a cursor this API gives out (URL-safe base64 of the store's position).
        "/v1/operator/images?cursor=%FF%FE",
        "/v1/operator/images?cursor=a",
        "/v1/operator/images?cursor=_w",
    ] {
        let r = app.get(path).await;
        assert_eq!(
            (r.status, r.kind()),
            (400, "invalid_query"),
            "{path}: {}",
            r.json
        );
    }
    // Well-formed but forged ("zzzz"): the embedded index takes any text as a position (the
    // images after it: none), DynamoDB's positions do not parse.
    let r = app.get("/v1/operator/images?cursor=enp6eg").await;
    if aws {
        assert_eq!((r.status, r.kind()), (400, "invalid_query"), "{}", r.json);
    } else {
        assert_eq!(r.status, 200, "{}", r.json);
        assert_eq!(r.json["images"], serde_json::json!([]));
    }
}
