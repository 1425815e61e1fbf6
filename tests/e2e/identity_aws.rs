//! The identity model on the API function: the router as the function serves it
//! (`Edge::Lambda`, API Gateway's claims) on the AWS adapters (the emulator), fed API Gateway
//! HTTP API events built from `events/api-get-image.json`, with the claims of each caller in
//! the request context as the JWT authorizer passes them. (Tokens that are not valid never
//! reach the function: API Gateway refuses them; a request without claims is refused here.)

#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::{TestApp, base64, fixture};

/// One request of the matrix: caller, method, path, body (bytes and content type), status.
type Cell<'a> = (&'a str, &'a str, &'a str, Option<(&'a [u8], &'a str)>, u16);

/// What the JWT authorizer puts in the request context for a caller (`None`: no authorizer
/// passed it).
fn claims(who: &str) -> Option<Value> {
    let base = |sub: &str, scope: &str| {
        json!({"iss": "https://id.marketplace.example/", "aud": "imgest", "sub": sub,
               "scope": scope, "iat": "1710252300", "exp": "1710253200"})
    };
    Some(match who {
        "anonymous" => return None,
        "seller-a" => base("seller-a", "imgest:upload"),
        "seller-b" => base("seller-b", "imgest:upload"),
        "partner-a" => {
            let mut c = base("backend-a", "imgest:offers");
            c["imgest_client_id"] = json!("acme");
            c
        }
        "partner-b" => {
            let mut c = base("backend-b", "imgest:offers");
            c["imgest_client_id"] = json!("globex");
            c
        }
        "partner-without-client" => base("backend-x", "imgest:offers"),
        // A Cognito access token: the app client's own client_id, no imgest_client_id.
        "idp-client-only" => {
            let mut c = base("seller-app", "imgest:upload imgest:offers");
            c["client_id"] = json!("acme");
            c
        }
        // API Gateway passes a token without aud whose client_id is the audience; the
        // function does not.
        "no-aud" => {
            let mut c = base("backend-a", "imgest:offers");
            c.as_object_mut().unwrap().remove("aud");
            c["client_id"] = json!("imgest");
            c["imgest_client_id"] = json!("acme");
            c
        }
        "other-aud" => {
            let mut c = base("backend-a", "imgest:offers");
            c["aud"] = json!("imgest-staging");
            c["imgest_client_id"] = json!("acme");
            c
        }
        other => panic!("no caller {other}"),
    })
}

/// An API Gateway (payload 2.0) event of `method path` with `body`, as `who`.
fn event(who: &str, method: &str, path: &str, body: Option<(&[u8], &str)>) -> lambda_http::Request {
    lambda_http::request::from_str(&api_event(who, method, path, body).to_string()).unwrap()
}

/// The JSON of an API Gateway (payload 2.0) event of `method path` with `body`, as `who` (a
/// caller of [`claims`]).
pub(crate) fn api_event(who: &str, method: &str, path: &str, body: Option<(&[u8], &str)>) -> Value {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/api-get-image.json");
    let mut e: Value = serde_json::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
    let route = format!("{method} {path}");
    e["routeKey"] = json!(route);
    e["rawPath"] = json!(path);
    e["requestContext"]["routeKey"] = json!(route);
    e["requestContext"]["http"]["method"] = json!(method);
    e["requestContext"]["http"]["path"] = json!(path);
    e.as_object_mut().unwrap().remove("pathParameters");
    match claims(who) {
        Some(c) => {
            let scope = c["scope"].clone();
            e["requestContext"]["authorizer"] = json!({"jwt": {"claims": c, "scopes": [scope]}});
        }
        None => {
            e["requestContext"]
                .as_object_mut()
                .unwrap()
                .remove("authorizer");
        }
    }
    if let Some((bytes, content_type)) = body {
        e["headers"]["content-type"] = json!(content_type);
        e["body"] = json!(base64(bytes, false));
        e["isBase64Encoded"] = json!(true);
    }
    e
}

#[tokio::test]
async fn the_api_function_answers_each_caller_as_the_identity_model_says() {
    let test = "identity on the api function";
    // A crawl's result goes to the results queue: it must exist.
    let Some(config) = imgest_testing::aws::sdk_config(test).await else {
        return;
    };
    let sqs = aws_sdk_sqs::Client::new(&config);
    let results = sqs
        .create_queue()
        .queue_name(imgest_testing::aws::unique_name("imgest-results"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let queues = format!("results={results}");
    let Some(app) = TestApp::start_aws(test, &[("IMGEST_QUEUES", &queues)]).await else {
        return;
    };
    let router = app.api_function();
    let send = |who: &str, method: &str, path: &str, body: Option<(&[u8], &str)>| {
        let request = event(who, method, path, body);
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await.unwrap();
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            (status, json)
        }
    };
    let photo = fixture("photo.jpg");
    let (status, image) = send(
        "seller-a",
        "POST",
        "/v1/images",
        Some((&photo, "image/jpeg")),
    )
    .await;
    assert_eq!(status, 201, "{image}");
    let image_id = image["image_id"].as_str().unwrap().to_owned();
    let (_, ticket) = send(
        "seller-a",
        "POST",
        "/v1/uploads",
        Some((br#"{"size": 10}"#, "application/json")),
    )
    .await;
    let upload = ticket["upload_id"].as_str().unwrap().to_owned();
    let photos = format!(r#"{{"image_ids": ["{image_id}"]}}"#);
    let sha256 = imgest_core::domain::ContentHash::of_bytes(&photo);
    let precheck = format!(r#"{{"images": [{{"image_id": "{image_id}", "sha256": "{sha256}"}}]}}"#);
    for who in ["partner-a", "partner-b"] {
        let (status, body) = send(
            who,
            "PUT",
            "/v1/offers/o1/photos",
            Some((photos.as_bytes(), "application/json")),
        )
        .await;
        assert_eq!(status, 200, "{who}: {body}");
    }
    let crawl = br#"{"client_id": "acme", "offer_id": "o1", "urls": []}"#;
    let image_path = format!("/v1/images/{image_id}");
    let upload_path = format!("/v1/uploads/{upload}");
    // (caller, method, path, body, expected status)
    let cells: Vec<Cell<'_>> = vec![
        ("anonymous", "GET", &image_path, None, 401),
        (
            "anonymous",
            "POST",
            "/v1/uploads",
            Some((br#"{"size": 10}"#, "application/json")),
            401,
        ),
        ("anonymous", "GET", "/v1/offers/o1/photos", None, 401),
        ("seller-b", "GET", &image_path, None, 200),
        (
            "seller-b",
            "POST",
            "/v1/images",
            Some((&photo, "image/jpeg")),
            200,
        ),
        ("seller-a", "GET", &upload_path, None, 200),
        ("seller-b", "GET", &upload_path, None, 404),
        ("partner-a", "GET", &upload_path, None, 404),
        ("seller-a", "GET", "/v1/offers/o1/photos", None, 403),
        (
            "seller-a",
            "PUT",
            "/v1/offers/o1/photos",
            Some((photos.as_bytes(), "application/json")),
            403,
        ),
        (
            "seller-a",
            "POST",
            "/v1/crawl",
            Some((crawl, "application/json")),
            403,
        ),
        (
            "partner-without-client",
            "GET",
            "/v1/offers/o1/photos",
            None,
            403,
        ),
        (
            "partner-without-client",
            "POST",
            "/v1/crawl",
            Some((crawl, "application/json")),
            403,
        ),
        ("partner-without-client", "GET", &image_path, None, 200),
        ("partner-a", "GET", "/v1/offers/o1/photos", None, 200),
        ("partner-b", "GET", "/v1/offers/o1/photos", None, 200),
        (
            "partner-b",
            "POST",
            "/v1/crawl",
            Some((crawl, "application/json")),
            403,
        ),
        (
            "partner-a",
            "POST",
            "/v1/crawl",
            Some((crawl, "application/json")),
            202,
        ),
        ("partner-a", "GET", "/v1/offers/o1/crawl", None, 200),
        ("partner-b", "GET", "/v1/offers/o1/crawl", None, 404),
        ("partner-a", "GET", "/v1/crawls", None, 200),
        ("seller-a", "GET", "/v1/crawls", None, 403),
        ("idp-client-only", "GET", "/v1/crawls", None, 403),
        ("partner-b", "DELETE", "/v1/offers/o1", None, 204),
        ("seller-b", "DELETE", "/v1/offers/o1", None, 403),
        ("idp-client-only", "GET", "/v1/offers/o1/photos", None, 403),
        (
            "idp-client-only",
            "POST",
            "/v1/crawl",
            Some((crawl, "application/json")),
            403,
        ),
        ("idp-client-only", "GET", &image_path, None, 200),
        ("no-aud", "GET", "/v1/offers/o1/photos", None, 401),
        ("no-aud", "GET", &image_path, None, 401),
        ("other-aud", "GET", &image_path, None, 401),
        (
            "seller-a",
            "POST",
            "/v1/images/known",
            Some((precheck.as_bytes(), "application/json")),
            200,
        ),
    ];
    for (who, method, path, body, want) in cells {
        let (status, json) = send(who, method, path, body).await;
        assert_eq!(status, want, "{method} {path} as {who}: {json}");
    }
    // B deleted its own o1; A's is untouched (and empty after A's empty crawl).
    let (status, a) = send("partner-a", "GET", "/v1/offers/o1/photos", None).await;
    assert_eq!((status, a["offer_id"].as_str()), (200, Some("o1")), "{a}");
    let (status, _) = send("partner-b", "GET", "/v1/offers/o1/photos", None).await;
    assert_eq!(status, 404);
}
