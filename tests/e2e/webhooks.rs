//! Signed webhooks: a client's results POSTed to the endpoint its operator registered, checked
//! by a receiver on 127.0.0.1 that verifies every delivery with the Standard Webhooks project's
//! own library (not imgest's signer). Answers of 500, 503 and a timeout are retried with the
//! same `webhook-id` until a 2xx; a 410 disables the endpoint and dead-letters the delivery (a
//! redrive after registering again delivers it); during a rotation's overlap both secrets
//! verify, after it only the new one; an endpoint on a private address is refused. On the
//! embedded backend (the runner's webhook workers) and on the emulator (the webhooks
//! function's handler over SQS and DynamoDB).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use imgest_crawl::Processing;
use imgest_crawl::webhooks::WEBHOOK_QUEUE;
use serde_json::{Value, json};

use crate::support::identity::Identity;
use crate::support::webhooks::{Receiver, Reply};
use crate::support::{Body, TestApp};

/// An app whose webhooks may reach the receiver on 127.0.0.1, with a one-second timeout, and
/// the identity that signs its tokens.
async fn app() -> (TestApp, Identity) {
    let id = Identity::new();
    let mut vars = id.vars();
    vars.extend([
        ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true".to_owned()),
        ("IMGEST_FETCH_PORTS", "any".to_owned()),
        ("IMGEST_WEBHOOK_TIMEOUT", "1s".to_owned()),
    ]);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    (TestApp::start_with(&vars).await, id)
}

/// Registers `url` for `client` through the operator's route: the secret that signs now.
async fn register(app: &TestApp, id: &Identity, client: &str, url: &str) -> String {
    let operator = id.token("ops", "imgest:operator", None);
    let reply = app
        .call(
            "PUT",
            &format!("/v1/operator/webhooks/{client}"),
            Some(&operator),
            Body::Json(json!({ "url": url })),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.json);
    reply.json["secrets"][0]["secret"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A crawl of `offer` for `client` with no URL, settled at once: its result's crawl id.
async fn crawl(app: &TestApp, id: &Identity, client: &str, offer: &str) -> String {
    let token = id.partner(&format!("{client}-backend"), client);
    let body = json!({"client_id": client, "offer_id": offer, "urls": []});
    let accepted = app
        .call("POST", "/v1/crawl", Some(&token), Body::Json(body))
        .await;
    assert_eq!(accepted.status, 202, "{}", accepted.json);
    let crawl = app
        .call(
            "GET",
            &format!("/v1/offers/{offer}/crawl"),
            Some(&token),
            Body::None,
        )
        .await;
    assert_eq!(crawl.json["state"], "done", "{}", crawl.json);
    crawl.json["crawl_id"].as_str().unwrap().to_owned()
}

/// The embedded webhook queue's tasks (ready, delayed, in flight) and dead letters.
async fn queue_state(app: &TestApp) -> (u64, u64) {
    let overview = app.service.queue_overview(10).await.unwrap();
    let row = overview
        .queues
        .iter()
        .find(|q| q.queue == WEBHOOK_QUEUE)
        .unwrap();
    (row.ready + row.delayed + row.in_flight, row.dead)
}

/// Waits until the webhook queue holds a delivery due later and none in flight: a failed
/// attempt's retry.
async fn until_retry_queued(app: &TestApp) {
    let started = Instant::now();
    loop {
        let overview = app.service.queue_overview(0).await.unwrap();
        let row = overview
            .queues
            .iter()
            .find(|q| q.queue == WEBHOOK_QUEUE)
            .unwrap();
        if row.delayed == 1 && row.in_flight == 0 {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{row:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The kinds of the webhook queue's dead letters, the newest first.
async fn dead_letter_kinds(app: &TestApp) -> Vec<String> {
    let letters = app
        .service
        .dead_letters(&[WEBHOOK_QUEUE.to_owned()], 10)
        .await
        .unwrap();
    letters
        .into_iter()
        .flat_map(|(_, letters)| letters)
        .map(|l| l.reason.map(|r| r.kind).unwrap_or_default())
        .collect()
}

/// Whether the operator sees `client`'s endpoint disabled.
async fn shown_disabled(app: &TestApp, id: &Identity, client: &str) -> bool {
    let operator = id.token("ops", "imgest:operator", None);
    let shown = app
        .call(
            "GET",
            &format!("/v1/operator/webhooks/{client}"),
            Some(&operator),
            Body::None,
        )
        .await;
    assert_eq!(shown.status, 200, "{}", shown.json);
    shown.json["disabled"]["reason"].is_string()
}

#[tokio::test]
async fn a_result_is_retried_after_500s_and_a_timeout_with_the_same_id_until_a_2xx() {
    let (app, id) = app().await;
    let receiver = Receiver::start(&[Reply::Status(500), Reply::Hang, Reply::Status(503)]).await;
    let secret = register(&app, &id, "acme", &receiver.url()).await;
    let crawl_id = crawl(&app, &id, "acme", "car-1").await;
    for attempt in 1..=3 {
        receiver.until_got(attempt).await;
        // Once the failed attempt queued its retry, a minute on: the retry and the endpoint's
        // cooling are due.
        until_retry_queued(&app).await;
        app.advance_clock(Duration::from_secs(60));
    }
    receiver.until_got(4).await;
    let got = receiver.received();
    assert_eq!(got.len(), 4);
    for delivery in &got {
        assert_eq!(delivery.id(), crawl_id);
        assert!(delivery.verifies_with(&secret), "{:?}", delivery.headers);
        let body = delivery.json();
        assert_eq!(body["type"], "crawl.settled");
        assert_eq!(body["data"]["offer_id"], "car-1");
        assert_eq!(body["data"]["crawl_id"], crawl_id.as_str());
        assert_eq!(body["data"]["client_id"], "acme");
    }
    // Delivered: nothing left queued, nothing given up on.
    let started = Instant::now();
    while queue_state(&app).await != (0, 0) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            queue_state(&app).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The offer re-sent unchanged: its result again (the same crawl id) on the topic and in the
    // feed, no second delivery of a webhook-id the endpoint has.
    assert_eq!(crawl(&app, &id, "acme", "car-1").await, crawl_id);
    assert_eq!(queue_state(&app).await, (0, 0));
    // Another client's results are not this endpoint's.
    crawl(&app, &id, "beta", "bike-1").await;
    assert_eq!(queue_state(&app).await, (0, 0));
    assert_eq!(receiver.received().len(), 4);
}

#[tokio::test]
async fn a_410_disables_the_endpoint_and_a_redrive_after_registering_again_delivers() {
    let (app, id) = app().await;
    let receiver = Receiver::start(&[Reply::Status(410)]).await;
    let secret = register(&app, &id, "acme", &receiver.url()).await;
    let crawl_id = crawl(&app, &id, "acme", "car-1").await;
    receiver.until_got(1).await;
    let started = Instant::now();
    while queue_state(&app).await != (0, 1) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            queue_state(&app).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(dead_letter_kinds(&app).await, ["endpoint_gone"]);
    assert!(shown_disabled(&app, &id, "acme").await);
    // Disabled: the next result is not queued at all.
    crawl(&app, &id, "acme", "car-2").await;
    assert_eq!(queue_state(&app).await, (0, 1));
    assert_eq!(receiver.received().len(), 1);

    // Registered again (the same secret kept), then redriven: delivered with its own id.
    assert_eq!(register(&app, &id, "acme", &receiver.url()).await, secret);
    let moved = app
        .service
        .redrive_kinds(
            WEBHOOK_QUEUE,
            10,
            &imgest_core::ports::RedriveKinds::Routine,
        )
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let got = receiver.until_got(2).await;
    assert_eq!(got[1].id(), crawl_id);
    assert!(got[1].verifies_with(&secret));
}

#[tokio::test]
async fn during_a_rotation_both_secrets_verify_and_after_it_only_the_new_one() {
    let (app, id) = app().await;
    let receiver = Receiver::start(&[]).await;
    let old = register(&app, &id, "acme", &receiver.url()).await;
    let operator = id.token("ops", "imgest:operator", None);
    let rotated = app
        .call(
            "POST",
            "/v1/operator/webhooks/acme/rotate",
            Some(&operator),
            Body::Json(json!({"overlap": "2m"})),
        )
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.json);
    let secrets = rotated.json["secrets"].as_array().unwrap();
    assert_eq!(secrets.len(), 2, "{}", rotated.json);
    let new = secrets[0]["secret"].as_str().unwrap().to_owned();
    assert_eq!(secrets[1]["secret"], old.as_str());
    assert_ne!(new, old);

    crawl(&app, &id, "acme", "car-1").await;
    let during = receiver.until_got(1).await.remove(0);
    assert!(during.verifies_with(&old) && during.verifies_with(&new));

    // Past the overlap (within the receiver's five-minute timestamp tolerance).
    app.advance_clock(Duration::from_secs(180));
    crawl(&app, &id, "acme", "car-2").await;
    let after = receiver.until_got(2).await.remove(1);
    assert!(after.verifies_with(&new));
    assert!(!after.verifies_with(&old));
}

#[tokio::test]
async fn endpoints_on_private_addresses_plain_http_or_with_credentials_are_refused() {
    // Private networks are not allowed here (the default).
    let id = Identity::new();
    let vars = id.vars();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let app = TestApp::start_with(&vars).await;
    let operator = id.token("ops", "imgest:operator", None);
    for (url, kind) in [
        // A name that resolves to loopback, and address literals.
        ("https://localhost/hooks", "forbidden_endpoint"),
        ("https://127.0.0.1/hooks", "forbidden_endpoint"),
        ("https://[::1]/hooks", "forbidden_endpoint"),
        ("https://169.254.169.254/latest", "forbidden_endpoint"),
        ("https://10.0.0.7/hooks", "forbidden_endpoint"),
        ("http://hooks.example.com/hooks", "invalid_endpoint"),
        (
            "https://user:pw@hooks.example.com/hooks",
            "invalid_endpoint",
        ),
        ("https://hooks.example.com:22/hooks", "forbidden_endpoint"),
        ("not a url", "invalid_endpoint"),
    ] {
        let reply = app
            .call(
                "PUT",
                "/v1/operator/webhooks/acme",
                Some(&operator),
                Body::Json(json!({ "url": url })),
            )
            .await;
        assert_eq!(
            (reply.status, reply.kind()),
            (422, kind),
            "{url}: {}",
            reply.json
        );
    }
    // Bounded: a URL over 2,048 bytes is refused, and a body over 4 KiB is not read.
    let long = format!("https://hooks.example.com/{}", "a".repeat(2100));
    let too_long = app
        .call(
            "PUT",
            "/v1/operator/webhooks/acme",
            Some(&operator),
            Body::Json(json!({ "url": long })),
        )
        .await;
    assert_eq!(
        (too_long.status, too_long.kind()),
        (422, "invalid_endpoint")
    );
    let huge = format!("https://hooks.example.com/{}", "a".repeat(5000));
    let too_big = app
        .call(
            "PUT",
            "/v1/operator/webhooks/acme",
            Some(&operator),
            Body::Json(json!({ "url": huge })),
        )
        .await;
    // (As every JSON route's body limit answers: 400, the limit named.)
    assert_eq!(
        (too_big.status, too_big.kind()),
        (400, "invalid_body"),
        "{}",
        too_big.json
    );
    assert!(
        too_big.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("length limit")
    );
    // A partner may not register one.
    let partner = id.partner("acme-backend", "acme");
    let reply = app
        .call(
            "PUT",
            "/v1/operator/webhooks/acme",
            Some(&partner),
            Body::Json(json!({"url": "https://hooks.example.com/hooks"})),
        )
        .await;
    assert_eq!(reply.status, 403, "{}", reply.json);
    let none = app
        .call(
            "GET",
            "/v1/operator/webhooks/acme",
            Some(&operator),
            Body::None,
        )
        .await;
    assert_eq!((none.status, none.kind()), (404, "webhook_not_found"));
}

/// An app on the emulator whose results go to a queue and whose webhook deliveries go to
/// another (`webhooks`, with a dead-letter queue), with a one-second webhook timeout, for a
/// test that hands the deliveries to the webhooks function's handler.
struct OnAws {
    app: TestApp,
    id: Identity,
    sqs: aws_sdk_sqs::Client,
    webhooks: String,
}

impl OnAws {
    async fn start(test: &str) -> Option<Self> {
        let config = imgest_testing::aws::sdk_config(test).await?;
        let sqs = aws_sdk_sqs::Client::new(&config);
        let (results, _) = imgest_testing::aws::queue(&sqs, "webhooks-results").await;
        let (webhooks, _) = imgest_testing::aws::queue(&sqs, "webhooks").await;
        imgest_testing::aws::with_dead_letter_queue(&sqs, &webhooks, 5).await;
        let id = Identity::new();
        let mut vars = id.vars();
        vars.extend([
            (
                "IMGEST_QUEUES",
                format!("results={results},webhooks={webhooks}"),
            ),
            ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true".to_owned()),
            ("IMGEST_FETCH_PORTS", "any".to_owned()),
            ("IMGEST_WEBHOOK_TIMEOUT", "1s".to_owned()),
        ]);
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let app = TestApp::start_aws(test, &vars).await?;
        Some(Self {
            app,
            id,
            sqs,
            webhooks,
        })
    }
}

/// The webhooks function's handler over SQS and DynamoDB: the result queued by the crawl is
/// delivered, a 500 retried through the queue with the same id, then delivered; the sample
/// event's shape is what the queue carries.
#[tokio::test]
async fn the_webhooks_function_retries_through_its_queue_and_delivers_on_dynamodb() {
    let Some(OnAws {
        app,
        id,
        sqs,
        webhooks,
    }) = OnAws::start("webhooks").await
    else {
        return;
    };
    let receiver = Receiver::start(&[Reply::Status(500)]).await;
    let secret = register(&app, &id, "acme", &receiver.url()).await;
    let crawl_id = crawl(&app, &id, "acme", "car-1").await;

    let crawler = app.crawler(Processing::Handoff, &[("IMGEST_WEBHOOK_TIMEOUT", "1s")]);
    let first = crate::crawl_aws::take(&sqs, &webhooks, 1).await;
    let message: Value = serde_json::from_str(first.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(message["webhook"]["crawl_id"], crawl_id.as_str());
    assert_eq!(message["webhook"]["client_id"], "acme");
    let response = imgest_lambda_crawl::webhooks::handle(&crawler, first).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(receiver.received().len(), 1);

    // The retry waits in the queue (a few seconds); the endpoint's cooling is over by then.
    app.advance_clock(Duration::from_secs(60));
    let retry = crate::crawl_aws::take(&sqs, &webhooks, 1).await;
    let response = imgest_lambda_crawl::webhooks::handle(&crawler, retry).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let got = receiver.received();
    assert_eq!(got.len(), 2);
    assert!(
        got.iter()
            .all(|d| d.id() == crawl_id && d.verifies_with(&secret))
    );
    assert!(
        crate::crawl_aws::drain(&sqs, &webhooks)
            .await
            .records
            .is_empty()
    );

    // The sample event, its ids replaced by this result's, is delivered as the queue's own.
    let filed_ms = message["webhook"]["filed_ms"].to_string();
    let sample = crate::aws::event(
        "sqs-webhooks.json",
        &[
            ("9f2c4e1a0b7d3c58", &crawl_id),
            ("1710252340118", &filed_ms),
        ],
    );
    let event = serde_json::from_str(&sample).unwrap();
    let response = imgest_lambda_crawl::webhooks::handle(&crawler, event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(receiver.received().len(), 3);
}

/// On the emulator, through the webhooks function's handler: during a rotation's overlap both
/// secrets verify; a 410 disables the endpoint (in DynamoDB) and dead-letters the delivery with
/// its reason (in the queue's dead-letter queue), and nothing more reaches it.
#[tokio::test]
async fn on_dynamodb_a_rotation_signs_with_both_secrets_and_a_410_disables_the_endpoint() {
    let Some(OnAws {
        app,
        id,
        sqs,
        webhooks,
    }) = OnAws::start("webhooks rotation and 410").await
    else {
        return;
    };
    let receiver = Receiver::start(&[Reply::Status(204), Reply::Status(410)]).await;
    let old = register(&app, &id, "acme", &receiver.url()).await;
    let operator = id.token("ops", "imgest:operator", None);
    let rotated = app
        .call(
            "POST",
            "/v1/operator/webhooks/acme/rotate",
            Some(&operator),
            Body::Json(json!({"overlap": "2m"})),
        )
        .await;
    let new = rotated.json["secrets"][0]["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let crawler = app.crawler(Processing::Handoff, &[]);

    crawl(&app, &id, "acme", "car-1").await;
    let first = crate::crawl_aws::take(&sqs, &webhooks, 1).await;
    let response = imgest_lambda_crawl::webhooks::handle(&crawler, first).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let during = receiver.until_got(1).await.remove(0);
    assert!(during.verifies_with(&old) && during.verifies_with(&new));

    crawl(&app, &id, "acme", "car-2").await;
    let second = crate::crawl_aws::take(&sqs, &webhooks, 1).await;
    let response = imgest_lambda_crawl::webhooks::handle(&crawler, second).await;
    // Given up on, not retried: in the dead letters with its reason.
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(receiver.received().len(), 2);
    assert_eq!(dead_letter_kinds(&app).await, ["endpoint_gone"]);
    assert!(shown_disabled(&app, &id, "acme").await);

    // The API's process may still hold the endpoint as it read it (for up to 5 s) and queue a
    // delivery: the function, which disabled it, gives that up without an attempt.
    crawl(&app, &id, "acme", "car-3").await;
    let third = crate::crawl_aws::drain(&sqs, &webhooks).await;
    if !third.records.is_empty() {
        let response = imgest_lambda_crawl::webhooks::handle(&crawler, third).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        assert!(
            dead_letter_kinds(&app)
                .await
                .contains(&"endpoint_disabled".to_owned())
        );
    }
    assert_eq!(receiver.received().len(), 2);
}

/// The webhooks function believes nothing a message says of itself: a message from outside the
/// stack (the sample event with a stranger's `SenderId`) is dead-lettered as `forbidden`
/// without a read; one from the stack that names another client's result under this client is
/// found in no feed of this client's and given up on, never posted anywhere.
#[tokio::test]
async fn the_webhooks_function_takes_neither_a_strangers_message_nor_another_clients_result() {
    let Some(OnAws {
        app,
        id,
        sqs,
        webhooks,
    }) = OnAws::start("webhooks forged messages").await
    else {
        return;
    };
    let acme = Receiver::start(&[]).await;
    let beta = Receiver::start(&[]).await;
    register(&app, &id, "acme", &acme.url()).await;
    register(&app, &id, "beta", &beta.url()).await;
    let crawler = app.crawler(Processing::Handoff, &[]);
    let acme_crawl = crawl(&app, &id, "acme", "car-1").await;
    let acme_message = crate::crawl_aws::take(&sqs, &webhooks, 1).await;
    let acme_body: Value =
        serde_json::from_str(acme_message.records[0].body.as_deref().unwrap()).unwrap();
    crawl(&app, &id, "beta", "bike-1").await;
    let beta_message = crate::crawl_aws::take(&sqs, &webhooks, 1).await;
    let beta_body: Value =
        serde_json::from_str(beta_message.records[0].body.as_deref().unwrap()).unwrap();

    // acme's own delivery, sent by a stranger.
    let filed_ms = acme_body["webhook"]["filed_ms"].to_string();
    let stranger = crate::aws::event(
        "sqs-webhooks.json",
        &[
            ("9f2c4e1a0b7d3c58", &acme_crawl),
            ("1710252340118", &filed_ms),
            (crate::support::SAMPLE_EVENT_SENDER, "AIDASTRANGERSENDER"),
        ],
    );
    let response =
        imgest_lambda_crawl::webhooks::handle(&crawler, serde_json::from_str(&stranger).unwrap())
            .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(dead_letter_kinds(&app).await, ["forbidden"]);

    // beta's result named under acme, sent from the stack (the sample event's sender is one
    // of its roles).
    let forged = crate::aws::event(
        "sqs-webhooks.json",
        &[
            (
                "9f2c4e1a0b7d3c58",
                beta_body["webhook"]["crawl_id"].as_str().unwrap(),
            ),
            (
                "1710252340118",
                &beta_body["webhook"]["filed_ms"].to_string(),
            ),
        ],
    );
    let response =
        imgest_lambda_crawl::webhooks::handle(&crawler, serde_json::from_str(&forged).unwrap())
            .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(
        dead_letter_kinds(&app)
            .await
            .contains(&"result_expired".to_owned())
    );
    assert!(acme.received().is_empty() && beta.received().is_empty());

    // The real messages are delivered, each to its own client's endpoint.
    for message in [acme_message, beta_message] {
        let response = imgest_lambda_crawl::webhooks::handle(&crawler, message).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    assert_eq!(acme.received().len(), 1);
    assert_eq!(beta.received().len(), 1);
    assert_eq!(acme.received()[0].json()["data"]["client_id"], "acme");
    assert_eq!(beta.received()[0].json()["data"]["client_id"], "beta");
}
