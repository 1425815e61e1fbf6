//! Linking photos to offers: set, reorder, delete, and the errors that change nothing.

#![allow(clippy::unwrap_used)]

use crate::support::{TestApp, fixture};

async fn three_images(app: &TestApp) -> Vec<String> {
    let mut ids = Vec::new();
    for name in ["photo.jpg", "small.png", "animated.gif"] {
        ids.push(app.upload_ok(&fixture(name)).await);
    }
    ids
}

#[tokio::test]
async fn an_offer_keeps_its_photos_in_the_order_given_and_can_be_reordered() {
    let app = TestApp::start().await;
    let ids = three_images(&app).await;
    let (a, b, c) = (ids[0].as_str(), ids[1].as_str(), ids[2].as_str());

    let set = app.link("cars:1", &[a, b, c]).await;
    assert_eq!(set.status, 200, "{}", set.json);
    assert_eq!(set.json["offer_id"], "cars:1");
    assert_eq!(set.photo_ids(), [a, b, c]);
    assert!(
        set.json["photos"][0]["variants"]["thumb"]["url"]
            .as_str()
            .unwrap()
            .ends_with("thumb.jpg")
    );

    let reordered = app.link("cars:1", &[c, a]).await;
    assert_eq!(reordered.photo_ids(), [c, a]);
    assert_eq!(app.photos("cars:1").await.photo_ids(), [c, a]);

    assert_eq!(app.get(&format!("/v1/images/{a}")).await.json["offers"], 1);
    assert_eq!(app.get(&format!("/v1/images/{b}")).await.json["offers"], 0);
}

#[tokio::test]
async fn an_unknown_image_changes_nothing() {
    let app = TestApp::start().await;
    let ids = three_images(&app).await;
    app.link("o1", &[&ids[0], &ids[1]]).await;

    let unknown = "0cc175b9c0f1b6a831c399e269772661";
    let r = app.link("o1", &[&ids[2], unknown]).await;
    assert_eq!((r.status, r.kind()), (422, "unknown_image"));
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains(unknown)
    );
    assert_eq!(
        app.photos("o1").await.photo_ids(),
        [ids[0].clone(), ids[1].clone()]
    );
    assert_eq!(
        app.get(&format!("/v1/images/{}", ids[2])).await.json["offers"],
        0
    );
}

#[tokio::test]
async fn too_many_or_repeated_or_malformed_photos_are_refused() {
    let app = TestApp::start_with(&[("IMGEST_MAX_PHOTOS_PER_OFFER", "2")]).await;
    let ids = three_images(&app).await;
    let r = app.link("o", &[&ids[0], &ids[1], &ids[2]]).await;
    assert_eq!((r.status, r.kind()), (422, "too_many_photos"));
    let r = app.link("o", &[&ids[0], &ids[0]]).await;
    assert_eq!((r.status, r.kind()), (422, "duplicate_image"));
    let r = app.link("o", &["xyz"]).await;
    assert_eq!((r.status, r.kind()), (400, "invalid_image_id"));
    let r = app.link("bad offer!", &[&ids[0]]).await;
    assert_eq!((r.status, r.kind()), (400, "invalid_offer_id"));
    let r = app
        .client
        .put(app.url("/v1/offers/o/photos"))
        .header("content-type", "application/json")
        .body("{\"images\": 1}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(app.photos("o").await.status, 404, "nothing was set");
}

#[tokio::test]
async fn deleting_an_offer_is_idempotent_and_touches_no_file() {
    let app = TestApp::start().await;
    let ids = three_images(&app).await;
    app.link("a", &[&ids[0], &ids[1]]).await;
    app.link("b", &[&ids[1]]).await;
    let files_before = app.files().await;

    assert_eq!(app.delete("/v1/offers/a").await.status, 204);
    assert_eq!(app.delete("/v1/offers/a").await.status, 204);
    assert_eq!(app.delete("/v1/offers/never-existed").await.status, 204);
    let gone = app.photos("a").await;
    assert_eq!((gone.status, gone.kind()), (404, "offer_not_found"));
    assert_eq!(app.files().await, files_before);
    assert_eq!(app.photos("b").await.photo_ids(), [ids[1].clone()]);
    assert_eq!(
        app.get(&format!("/v1/images/{}", ids[1])).await.json["offers"],
        1
    );
    assert_eq!(
        app.get(&format!("/v1/images/{}", ids[0])).await.json["offers"],
        0
    );
}
