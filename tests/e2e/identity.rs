//! Who may do what, over a real socket on a runner that checks tokens (`IMGEST_JWKS_FILE`):
//! every route against every kind of caller, bad tokens of every kind, two partners with the
//! same offer id, sellers' own uploads, the upload rate, and what is public.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;

use imgest_core::ports::ManualClock;
use imgest_http::auth::unix_now;
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_settings::Settings;
use serde_json::{Value, json};

use crate::support::identity::{AUDIENCE, ISSUER, Identity};
use crate::support::{Body, TestApp, base64, fixture};

/// The callers of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Anonymous,
    SellerA,
    SellerB,
    PartnerA,
    PartnerB,
    PartnerWithoutClient,
    /// An `imgest:offers` token whose only client is the identity provider's own `client_id`
    /// claim (what a Cognito access token carries for any app client): no partner.
    IdpClientOnly,
}

const EVERYONE: [Who; 7] = [
    Who::Anonymous,
    Who::SellerA,
    Who::SellerB,
    Who::PartnerA,
    Who::PartnerB,
    Who::PartnerWithoutClient,
    Who::IdpClientOnly,
];

fn token(id: &Identity, who: Who) -> Option<String> {
    match who {
        Who::Anonymous => None,
        Who::SellerA => Some(id.seller("seller-a")),
        Who::SellerB => Some(id.seller("seller-b")),
        Who::PartnerA => Some(id.partner("backend-a", "acme")),
        Who::PartnerB => Some(id.partner("backend-b", "globex")),
        Who::PartnerWithoutClient => Some(id.token("backend-x", "imgest:offers", None)),
        Who::IdpClientOnly => {
            let mut claims = id.claims(unix_now());
            claims["sub"] = json!("seller-app");
            claims["scope"] = json!("imgest:upload imgest:offers");
            claims["client_id"] = json!("acme");
            Some(id.signed(claims))
        }
    }
}

async fn start() -> (TestApp, Identity) {
    let id = Identity::new();
    let vars = id.vars();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    (TestApp::start_with(&vars).await, id)
}

/// What the route answers each caller (docs/api.md, who may do what): uploads and images for any
/// scoped caller; an upload only for its starter; offers and crawls for partners with a
/// client, each in its own namespace.
fn expected(route: &str, who: Who) -> u16 {
    use Who::*;
    if who == Anonymous {
        return 401;
    }
    let partner = matches!(who, PartnerA | PartnerB);
    match route {
        "POST /v1/images" | "POST /v1/images/known" => 200,
        "GET /v1/images/{id}" => 200,
        "POST /v1/uploads" => 201,
        "GET /v1/uploads/{a}" | "PUT /v1/uploads/{a}/body" => {
            if who == SellerA {
                200
            } else {
                404
            }
        }
        "PUT /v1/offers/o1/photos" | "GET /v1/offers/o1/photos" => {
            if partner {
                200
            } else {
                403
            }
        }
        "POST /v1/crawl as acme" => match who {
            PartnerA => 202,
            _ => 403,
        },
        "GET /v1/offers/o1/crawl" => match who {
            PartnerA => 200,
            PartnerB => 404,
            _ => 403,
        },
        // Each partner reads its own client's results; naming another's is refused.
        "GET /v1/crawls" => {
            if partner {
                200
            } else {
                403
            }
        }
        "GET /v1/crawls of acme" => match who {
            PartnerA => 200,
            _ => 403,
        },
        // Only the operator's scope lists every client's images (see below).
        "GET /v1/operator/images" => 403,
        // Only the operator registers, reads, rotates or removes a client's webhook endpoint
        // (its secrets among it): a partner, even the client's own, may not.
        "PUT /v1/operator/webhooks/acme"
        | "GET /v1/operator/webhooks/acme"
        | "POST /v1/operator/webhooks/acme/rotate"
        | "DELETE /v1/operator/webhooks/acme" => 403,
        "DELETE /v1/offers/o1" => {
            if partner {
                204
            } else {
                403
            }
        }
        other => panic!("no expectation for {other}"),
    }
}

#[tokio::test]
async fn every_route_answers_each_caller_as_the_identity_model_says() {
    let (app, id) = start().await;
    let photo = fixture("photo.jpg");
    let seller_a = token(&id, Who::SellerA);
    let image = app
        .call(
            "POST",
            "/v1/images",
            seller_a.as_deref(),
            Body::Bytes(photo.clone(), "image/jpeg"),
        )
        .await;
    assert_eq!(image.status, 201, "{}", image.json);
    let image_id = image.json["image_id"].as_str().unwrap().to_owned();
    let sha256 = imgest_core::domain::ContentHash::of_bytes(&photo).to_hex();
    // Seller A's presigned upload, which only seller A may read or fill.
    let ticket = app
        .call(
            "POST",
            "/v1/uploads",
            seller_a.as_deref(),
            Body::Json(json!({"size": photo.len()})),
        )
        .await;
    let upload = ticket.json["upload_id"].as_str().unwrap().to_owned();
    // Both partners hold an offer o1.
    for who in [Who::PartnerA, Who::PartnerB] {
        let set = app
            .call(
                "PUT",
                "/v1/offers/o1/photos",
                token(&id, who).as_deref(),
                Body::Json(json!({"image_ids": [image_id]})),
            )
            .await;
        assert_eq!(set.status, 200, "{who:?}: {}", set.json);
    }

    let mut cells = 0;
    for who in EVERYONE {
        let t = token(&id, who);
        let t = t.as_deref();
        let checks: Vec<(&str, Value)> = vec![
            (
                "POST /v1/images",
                app.call(
                    "POST",
                    "/v1/images",
                    t,
                    Body::Bytes(photo.clone(), "image/jpeg"),
                )
                .await
                .pair(),
            ),
            (
                "POST /v1/images/known",
                app.call(
                    "POST",
                    "/v1/images/known",
                    t,
                    Body::Json(json!({"images": [{"image_id": image_id, "sha256": sha256}]})),
                )
                .await
                .pair(),
            ),
            (
                "GET /v1/images/{id}",
                app.call("GET", &format!("/v1/images/{image_id}"), t, Body::None)
                    .await
                    .pair(),
            ),
            (
                "POST /v1/uploads",
                app.call("POST", "/v1/uploads", t, Body::Json(json!({"size": 10})))
                    .await
                    .pair(),
            ),
            (
                "GET /v1/uploads/{a}",
                app.call("GET", &format!("/v1/uploads/{upload}"), t, Body::None)
                    .await
                    .pair(),
            ),
            (
                "PUT /v1/offers/o1/photos",
                app.call(
                    "PUT",
                    "/v1/offers/o1/photos",
                    t,
                    Body::Json(json!({"image_ids": [image_id]})),
                )
                .await
                .pair(),
            ),
            (
                "GET /v1/offers/o1/photos",
                app.call("GET", "/v1/offers/o1/photos", t, Body::None)
                    .await
                    .pair(),
            ),
            (
                "POST /v1/crawl as acme",
                app.call(
                    "POST",
                    "/v1/crawl",
                    t,
                    Body::Json(json!({"client_id": "acme", "offer_id": "o1", "urls": []})),
                )
                .await
                .pair(),
            ),
            (
                "GET /v1/offers/o1/crawl",
                app.call("GET", "/v1/offers/o1/crawl", t, Body::None)
                    .await
                    .pair(),
            ),
            (
                "GET /v1/crawls",
                app.call("GET", "/v1/crawls", t, Body::None).await.pair(),
            ),
            (
                "GET /v1/crawls of acme",
                app.call("GET", "/v1/crawls?client_id=acme", t, Body::None)
                    .await
                    .pair(),
            ),
            (
                "GET /v1/operator/images",
                app.call("GET", "/v1/operator/images", t, Body::None)
                    .await
                    .pair(),
            ),
            (
                "PUT /v1/operator/webhooks/acme",
                app.call(
                    "PUT",
                    "/v1/operator/webhooks/acme",
                    t,
                    Body::Json(json!({"url": "https://hooks.acme.example/imgest"})),
                )
                .await
                .pair(),
            ),
            (
                "GET /v1/operator/webhooks/acme",
                app.call("GET", "/v1/operator/webhooks/acme", t, Body::None)
                    .await
                    .pair(),
            ),
            (
                "POST /v1/operator/webhooks/acme/rotate",
                app.call(
                    "POST",
                    "/v1/operator/webhooks/acme/rotate",
                    t,
                    Body::Json(json!({})),
                )
                .await
                .pair(),
            ),
            (
                "DELETE /v1/operator/webhooks/acme",
                app.call("DELETE", "/v1/operator/webhooks/acme", t, Body::None)
                    .await
                    .pair(),
            ),
        ];
        for (route, got) in checks {
            let want = expected(route, who);
            assert_eq!(got[0], want, "{route} as {who:?}: {}", got[1]);
            let kind = match want {
                401 => Some("unauthenticated"),
                403 => Some("forbidden"),
                _ => None,
            };
            if let Some(kind) = kind {
                assert_eq!(got[1]["error"]["kind"], kind, "{route} as {who:?}");
            }
            cells += 1;
        }
    }
    // The body PUT last: seller A's uses the upload up.
    for who in EVERYONE.iter().rev() {
        let got = app
            .call(
                "PUT",
                &format!("/v1/uploads/{upload}/body"),
                token(&id, *who).as_deref(),
                Body::Bytes(photo.clone(), "application/octet-stream"),
            )
            .await;
        let want = expected("PUT /v1/uploads/{a}/body", *who);
        assert_eq!(got.status, want, "PUT body as {who:?}: {}", got.json);
        cells += 1;
    }
    // Deleting last: each partner deletes its own o1.
    for who in EVERYONE {
        let got = app
            .call(
                "DELETE",
                "/v1/offers/o1",
                token(&id, who).as_deref(),
                Body::None,
            )
            .await;
        assert_eq!(got.status, expected("DELETE /v1/offers/o1", who), "{who:?}");
        cells += 1;
    }
    assert_eq!(cells, 18 * EVERYONE.len());

    // The operator browses every client's images and keeps clients' webhook endpoints, and
    // may do nothing a seller or a partner does.
    let operator = id.token("ops", "imgest:operator", None);
    let browse = app
        .call("GET", "/v1/operator/images", Some(&operator), Body::None)
        .await;
    assert_eq!(browse.status, 200, "{}", browse.json);
    assert_eq!(browse.json["images"][0]["image_id"], image_id.as_str());
    let none = app
        .call(
            "GET",
            "/v1/operator/webhooks/acme",
            Some(&operator),
            Body::None,
        )
        .await;
    assert_eq!((none.status, none.kind()), (404, "webhook_not_found"));
    let upload = app
        .call(
            "POST",
            "/v1/images",
            Some(&operator),
            Body::Bytes(photo.clone(), "image/jpeg"),
        )
        .await;
    assert_eq!((upload.status, upload.kind()), (403, "forbidden"));
    let offer = app
        .call("GET", "/v1/offers/o1/photos", Some(&operator), Body::None)
        .await;
    assert_eq!(offer.status, 403, "{}", offer.json);
    // What stays open: the health check and the public files.
    assert_eq!(app.get("/healthz").await.status, 200);
    let variant = image.json["variants"]["large"]["url"].as_str().unwrap();
    assert_eq!(app.get_bytes(variant).await.0, 200);
}

trait Pair {
    fn pair(self) -> Value;
}

impl Pair for crate::support::Reply {
    /// `[status, body]`, for the matrix's messages.
    fn pair(self) -> Value {
        json!([self.status, self.json])
    }
}

#[tokio::test]
async fn bad_tokens_of_every_kind_are_unauthenticated_on_every_route() {
    let (app, id) = start().await;
    let now = unix_now();
    let claims = id.claims(now);
    let with = |change: &dyn Fn(&mut Value)| {
        let mut c = claims.clone();
        change(&mut c);
        id.signed(c)
    };
    let other_key = Identity::new();
    let b64 = |s: &str| base64(s.as_bytes(), true);
    let unsigned = format!(
        "{}.{}.",
        b64(r#"{"alg":"none","typ":"JWT"}"#),
        b64(&claims.to_string())
    );
    // An HMAC "signed" with the public key, the classic algorithm confusion.
    let public_key = id.issuer.jwks().to_string();
    let header = b64(r#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = b64(&claims.to_string());
    let hs256 = format!(
        "{header}.{payload}.{}",
        hmac_sha256_b64(
            public_key.as_bytes(),
            format!("{header}.{payload}").as_bytes()
        )
    );
    let bad: Vec<(&str, String)> = vec![
        ("garbage", "not-a-jwt".to_owned()),
        ("expired", with(&|c| c["exp"] = json!(now - 3600))),
        ("not valid yet", with(&|c| c["nbf"] = json!(now + 3600))),
        (
            "other issuer",
            with(&|c| c["iss"] = json!("https://evil.example/")),
        ),
        (
            "other audience",
            with(&|c| c["aud"] = json!("someone-else")),
        ),
        (
            "no sub",
            with(&|c| {
                c.as_object_mut().unwrap().remove("sub");
            }),
        ),
        (
            "no exp",
            with(&|c| {
                c.as_object_mut().unwrap().remove("exp");
            }),
        ),
        ("another key", other_key.signed(claims.clone())),
        ("a changed payload", {
            let good = id.signed(claims.clone());
            let parts: Vec<&str> = good.split('.').collect();
            let mut changed = claims.clone();
            changed["scope"] = json!("imgest:upload imgest:offers");
            format!("{}.{}.{}", parts[0], b64(&changed.to_string()), parts[2])
        }),
        ("alg none", unsigned),
        ("HS256 with the public key", hs256),
    ];
    assert_eq!(ISSUER, claims["iss"]);
    assert_eq!(AUDIENCE, claims["aud"]);
    let routes = [
        ("POST", "/v1/images"),
        ("POST", "/v1/images/known"),
        ("GET", "/v1/images/0123456789abcdef0123456789abcdef"),
        ("POST", "/v1/uploads"),
        ("GET", "/v1/uploads/0123456789abcdef0123456789abcdef"),
        ("PUT", "/v1/uploads/0123456789abcdef0123456789abcdef/body"),
        ("PUT", "/v1/offers/o1/photos"),
        ("GET", "/v1/offers/o1/photos"),
        ("DELETE", "/v1/offers/o1"),
        ("POST", "/v1/crawl"),
        ("GET", "/v1/offers/o1/crawl"),
    ];
    // Every refusal answers the same body, whatever check failed (the log says which).
    let mut bodies = std::collections::BTreeSet::new();
    for (name, token) in bad
        .iter()
        .map(|(n, t)| (*n, Some(t.as_str())))
        .chain([("none", None)])
    {
        for (method, path) in routes {
            let response = app.call_raw(method, path, token, Body::None).await;
            assert_eq!(response.status(), 401, "{name}: {method} {path}");
            assert!(
                response.headers()["www-authenticate"]
                    .to_str()
                    .unwrap()
                    .starts_with("Bearer"),
                "{name}"
            );
            bodies.insert(response.bytes().await.unwrap());
        }
    }
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let body: Value = serde_json::from_slice(bodies.first().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"error": {"kind": "unauthenticated", "message": imgest_http::UNAUTHENTICATED}})
    );
    // A good token counts only in the Authorization header, never in the query string.
    let good = id.seller("s1");
    let query = app
        .call(
            "GET",
            &format!("/v1/images/0123456789abcdef0123456789abcdef?access_token={good}"),
            None,
            Body::None,
        )
        .await;
    assert_eq!((query.status, query.kind()), (401, "unauthenticated"));
    let not_bearer = app
        .client
        .get(app.url("/v1/images/0123456789abcdef0123456789abcdef"))
        .header("authorization", format!("Basic {good}"))
        .send()
        .await
        .unwrap();
    assert_eq!(not_bearer.status(), 401);
    // The same good token in the header works.
    let ok = app
        .call(
            "GET",
            "/v1/images/0123456789abcdef0123456789abcdef",
            Some(&good),
            Body::None,
        )
        .await;
    assert_eq!(ok.status, 404, "{}", ok.json);
}

#[tokio::test]
async fn two_partners_both_hold_o1_and_neither_reads_changes_deletes_or_crawls_the_others() {
    let (app, id) = start().await;
    let (a, b) = (
        id.partner("backend-a", "acme"),
        id.partner("backend-b", "globex"),
    );
    let upload = |token: &str, name: &str, content_type: &'static str| {
        let (app, token, bytes) = (&app, token.to_owned(), fixture(name));
        async move {
            let reply = app
                .call(
                    "POST",
                    "/v1/images",
                    Some(&token),
                    Body::Bytes(bytes, content_type),
                )
                .await;
            reply.json["image_id"].as_str().unwrap().to_owned()
        }
    };
    let first = upload(&a, "photo.jpg", "image/jpeg").await;
    let second = upload(&b, "small.png", "image/png").await;
    let set = |token: &str, ids: Vec<&str>| {
        let token = token.to_owned();
        let ids: Vec<String> = ids.into_iter().map(str::to_owned).collect();
        let app = &app;
        async move {
            app.call(
                "PUT",
                "/v1/offers/o1/photos",
                Some(&token),
                Body::Json(json!({ "image_ids": ids })),
            )
            .await
        }
    };
    assert_eq!(set(&a, vec![&first]).await.status, 200);
    // B reads its own o1 (none yet), not A's.
    let read = app
        .call("GET", "/v1/offers/o1/photos", Some(&b), Body::None)
        .await;
    assert_eq!((read.status, read.kind()), (404, "offer_not_found"));
    // B's o1 is its own; A's is unchanged.
    assert_eq!(set(&b, vec![&second, &first]).await.status, 200);
    let mine = app
        .call("GET", "/v1/offers/o1/photos", Some(&a), Body::None)
        .await;
    assert_eq!(mine.photo_ids(), std::slice::from_ref(&first));
    assert_eq!(mine.json["offer_id"], "o1");
    let theirs = app
        .call("GET", "/v1/offers/o1/photos", Some(&b), Body::None)
        .await;
    assert_eq!(theirs.photo_ids(), [second.clone(), first.clone()]);
    // B deletes its o1: A's stays.
    assert_eq!(
        app.call("DELETE", "/v1/offers/o1", Some(&b), Body::None)
            .await
            .status,
        204
    );
    let mine = app
        .call("GET", "/v1/offers/o1/photos", Some(&a), Body::None)
        .await;
    assert_eq!(mine.photo_ids(), std::slice::from_ref(&first));
    // B cannot crawl for A, whatever the body says, nor read A's crawl.
    let crawl = app
        .call(
            "POST",
            "/v1/crawl",
            Some(&b),
            Body::Json(json!({"client_id": "acme", "offer_id": "o1", "urls": []})),
        )
        .await;
    assert_eq!((crawl.status, crawl.kind()), (403, "forbidden"));
    let crawl = app
        .call(
            "POST",
            "/v1/crawl",
            Some(&a),
            Body::Json(json!({"client_id": "acme", "offer_id": "o1", "urls": []})),
        )
        .await;
    assert_eq!(crawl.status, 202, "{}", crawl.json);
    let status = app
        .call("GET", "/v1/offers/o1/crawl", Some(&b), Body::None)
        .await;
    assert_eq!((status.status, status.kind()), (404, "crawl_not_found"));
    let status = app
        .call("GET", "/v1/offers/o1/crawl", Some(&a), Body::None)
        .await;
    assert_eq!(status.json["client_id"], "acme");
    // An empty crawl replaced A's photos with none: A's o1 is empty, not B's.
    let mine = app
        .call("GET", "/v1/offers/o1/photos", Some(&a), Body::None)
        .await;
    assert!(mine.photo_ids().is_empty(), "{}", mine.json);
}

#[tokio::test]
async fn a_seller_past_its_upload_rate_gets_429_with_retry_after_and_others_do_not() {
    let id = Identity::new();
    let mut vars = id.vars();
    vars.push(("IMGEST_UPLOAD_RPM", "2".to_owned()));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let app = TestApp::start_with(&vars).await;
    let (one, two) = (id.seller("s1"), id.seller("s2"));
    let photo = fixture("photo.jpg");
    for _ in 0..2 {
        let r = app
            .call(
                "POST",
                "/v1/images",
                Some(&one),
                Body::Bytes(photo.clone(), "image/jpeg"),
            )
            .await;
        assert!(r.status == 200 || r.status == 201, "{}", r.json);
    }
    let third = app
        .call_raw(
            "POST",
            "/v1/uploads",
            Some(&one),
            Body::Json(json!({"size": 10})),
        )
        .await;
    assert_eq!(third.status(), 429);
    let wait: u64 = third.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let other = app
        .call(
            "POST",
            "/v1/images",
            Some(&two),
            Body::Bytes(photo, "image/jpeg"),
        )
        .await;
    assert_eq!(other.status, 200, "another seller has a budget of its own");
}

#[tokio::test]
async fn only_variants_are_served_and_originals_and_incoming_bodies_never() {
    let (app, id) = start().await;
    let seller = id.seller("s1");
    let uploaded = app
        .call(
            "POST",
            "/v1/images",
            Some(&seller),
            Body::Bytes(fixture("photo.jpg"), "image/jpeg"),
        )
        .await;
    let image_id = uploaded.json["image_id"].as_str().unwrap();
    let files = app.files_of(image_id).await;
    let original = files.iter().find(|f| f.ends_with("/original")).unwrap();
    assert!(original.starts_with("originals/"), "{original}");
    for variant in files.iter().filter(|f| f.ends_with(".jpg")) {
        assert!(variant.starts_with("public/"), "{variant}");
        let (status, _) = app.get_bytes(&app.url(&format!("/files/{variant}"))).await;
        assert_eq!(status, 200, "{variant}");
    }
    let (status, _) = app.get_bytes(&app.url(&format!("/files/{original}"))).await;
    assert_eq!(status, 404, "an original is never served");
    // Bodies waiting for processing are not served either.
    for waiting in [
        "incoming/0123456789abcdef0123456789abcdef",
        "fetched/0123456789abcdef0123456789abcdef",
    ] {
        let key = imgest_core::domain::BlobKey::parse(waiting).unwrap();
        app.service
            .ports()
            .blobs
            .put(
                &key,
                bytes::Bytes::from_static(b"x"),
                "application/octet-stream",
            )
            .await
            .unwrap();
        let (status, _) = app.get_bytes(&app.url(&format!("/files/{waiting}"))).await;
        assert_eq!(status, 404, "{waiting}");
    }
}

#[tokio::test]
async fn a_rotated_jwks_file_is_read_again_without_a_restart() {
    let (app, id) = start().await;
    let old = id.seller("s1");
    let path = "/v1/images/0123456789abcdef0123456789abcdef";
    assert_eq!(
        app.call("GET", path, Some(&old), Body::None).await.status,
        404
    );
    let rotated = Identity::new();
    rotated
        .issuer
        .write_jwks(std::path::Path::new(&id.jwks_file()))
        .unwrap();
    let new = rotated.seller("s1");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let status = app.call("GET", path, Some(&new), Body::None).await.status;
        if status == 404 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new key was never loaded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        app.call("GET", path, Some(&old), Body::None).await.status,
        401,
        "the old key is gone"
    );
}

/// HMAC-SHA256 of `message` under `key`, base64url.
fn hmac_sha256_b64(key: &[u8], message: &[u8]) -> String {
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, key);
    base64(aws_lc_rs::hmac::sign(&key, message).as_ref(), true)
}

#[tokio::test]
async fn an_open_runner_answers_only_to_its_own_name_and_to_no_other_sites_changes() {
    use imgest_http::routes::{Op, Verb};
    let app = TestApp::start().await;
    let port = app.base.rsplit(':').next().unwrap().to_owned();
    let send = |method: &str, path: &str, headers: Vec<(&'static str, String)>| {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = app.client.request(method, app.url(path));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.body(fixture("photo.jpg")).send()
    };
    // Another name for this address (DNS rebinding): every route answers 421, nothing else.
    for op in Op::ALL {
        let route = op.route();
        let path = route
            .path
            .replace("{*key}", "public/x")
            .replace(['{', '}'], "");
        let method = match route.method {
            Verb::Get => "GET",
            Verb::Put => "PUT",
            Verb::Post => "POST",
            Verb::Delete => "DELETE",
        };
        let response = send(
            method,
            &path,
            vec![("host", format!("evil.example:{port}"))],
        )
        .await
        .unwrap();
        assert_eq!(response.status(), 421, "{method} {path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["kind"], "misdirected_request");
    }
    // Its own names.
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let response = send("GET", "/healthz", vec![("host", host.clone())])
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{host}");
    }
    // A page of another site may not change anything: a cross-site upload is refused, and
    // nothing is stored.
    for headers in [
        vec![("origin", "http://evil.example".to_owned())],
        vec![("sec-fetch-site", "cross-site".to_owned())],
        vec![("sec-fetch-site", "same-site".to_owned())],
    ] {
        let response = send("POST", "/v1/images", headers.clone()).await.unwrap();
        assert_eq!(response.status(), 403, "{headers:?}");
    }
    assert!(app.files().await.is_empty(), "nothing stored");
    // Its own page may.
    let own = send(
        "POST",
        "/v1/images",
        vec![
            ("origin", app.base.clone()),
            ("sec-fetch-site", "same-origin".to_owned()),
        ],
    )
    .await
    .unwrap();
    assert_eq!(own.status(), 201);
}

/// An open runner (no `IMGEST_JWKS_FILE`) on 127.0.0.1 with `vars` set, or why it did not
/// start; its data directory lives as long as the runner.
async fn open_runner(
    vars: &[(&str, &str)],
) -> Result<(LocalRunner, tempfile::TempDir), imgest_local::app::AppError> {
    imgest_download::install_default_provider();
    let dir = tempfile::tempdir().unwrap();
    let mut map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    map.insert("IMGEST_DATA_DIR".into(), dir.path().display().to_string());
    let settings = Settings::from_map(&map).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let options = RunnerOptions {
        clock: Arc::new(ManualClock::starting_now()),
        gc_every: None,
        backfill: false,
        erasures: true,
    };
    let runner = LocalRunner::start(&settings, Some(listener), options).await?;
    Ok((runner, dir))
}

#[tokio::test]
async fn an_open_runner_behind_a_public_url_starts_only_when_told_to() {
    let public = "https://photos.example.com";
    let upload_through_the_proxy = |runner: &LocalRunner| {
        reqwest::Client::new()
            .post(format!("http://{}/v1/images", runner.addr().unwrap()))
            .header("host", "photos.example.com")
            .body(fixture("photo.jpg"))
            .send()
    };
    // Nobody checks callers and the Host guard would accept the public name: a proxy serving
    // it would open the API to whoever reaches the proxy. Refused at start, with the reason.
    for vars in [
        vec![("IMGEST_PUBLIC_URL", public)],
        vec![("IMGEST_PUBLIC_URL", public), ("IMGEST_AUTH", "off")],
    ] {
        match open_runner(&vars).await {
            Err(refused) => {
                let reason = refused.to_string();
                assert!(
                    reason.contains("IMGEST_PUBLIC_URL")
                        && reason.contains("IMGEST_ALLOW_OPEN_PUBLIC_URL"),
                    "{reason}"
                );
            }
            Ok((runner, _dir)) => {
                let through = upload_through_the_proxy(&runner).await.unwrap();
                panic!(
                    "started open with {vars:?}: an upload through the proxy answered {}",
                    through.status()
                );
            }
        }
    }
    // A public URL on this machine changes nothing.
    let (runner, _dir) = open_runner(&[("IMGEST_PUBLIC_URL", "http://localhost:9")])
        .await
        .unwrap();
    assert_eq!(
        upload_through_the_proxy(&runner).await.unwrap().status(),
        421
    );
    // Told explicitly, it runs open there.
    let (runner, _dir) = open_runner(&[
        ("IMGEST_PUBLIC_URL", public),
        ("IMGEST_ALLOW_OPEN_PUBLIC_URL", "true"),
    ])
    .await
    .unwrap();
    assert_eq!(
        upload_through_the_proxy(&runner).await.unwrap().status(),
        201
    );
}
