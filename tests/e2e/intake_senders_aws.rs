//! Who may send crawls through the intake queue, on the emulator with real senders: two IAM
//! users send to the intake queue, SQS names each as the `SenderId`, and the intake function
//! takes a request only from a sender `IMGEST_INTAKE_SENDERS` lets act for its client. The
//! others end in the dead-letter queue as `forbidden`, having changed nothing; a redrive keeps
//! the original sender, which only a listed redriver may vouch for.
//!
//! Needs `infra/moto_server.py`'s SenderId patch (moto alone gives every message one id).

#![allow(clippy::unwrap_used)]

use imgest_core::domain::{ClientId, OfferId, OfferKey};
use imgest_core::ports::{Reason, RedriveKinds};
use imgest_crawl::Processing;
use imgest_lambda_crawl as handlers;
use serde_json::{Value, json};

use crate::crawl_aws::{CrawlOnAws, drain, take as all, with_dead_letter_queue};
use crate::support::iam::{IamUser, iam_user};

/// moto's `SenderId` for requests signed with a key no IAM identity owns (the tests' shared
/// `test` key: what the operator's redrive sends as here).
const SHARED_KEY_SENDER: &str = crate::support::STACK_SENDER;

async fn send(user: &IamUser, url: &str, request: &Value) {
    user.sqs
        .send_message()
        .queue_url(url)
        .message_body(request.to_string())
        .send()
        .await
        .unwrap();
}

fn request(client: &str, offer: &str, url: &str) -> Value {
    json!({"client_id": client, "offer_id": offer, "urls": [url]})
}

#[tokio::test]
async fn a_crawl_from_a_sender_not_allowed_for_its_client_ends_forbidden_and_changes_nothing() {
    let Some(stack) = CrawlOnAws::start("intake senders").await else {
        return;
    };
    let CrawlOnAws { sqs, urls, app, .. } = &stack;
    let config = imgest_testing::aws::sdk_config("intake senders")
        .await
        .unwrap();
    let (a, b) = (
        iam_user(&config, "partner-a").await,
        iam_user(&config, "partner-b").await,
    );
    assert_ne!(a.id, b.id);
    let senders = format!("{}=acme;{}=beta", a.id, b.id);
    let crawler = app.crawler(Processing::Handoff, &[("IMGEST_INTAKE_SENDERS", &senders)]);
    let intake = &urls["intake"];
    with_dead_letter_queue(sqs, intake, 5).await;

    // A sends acme's offer; B sends its own client's, and the same acme offer with its URL.
    send(
        &a,
        intake,
        &request("acme", "o1", "https://img.acme.example/a.jpg"),
    )
    .await;
    send(
        &b,
        intake,
        &request("beta", "o2", "https://img.beta.example/b.jpg"),
    )
    .await;
    send(
        &b,
        intake,
        &request("acme", "o1", "https://evil.example/x.jpg"),
    )
    .await;
    let event = all(sqs, intake, 3).await;
    let ids: Vec<String> = event
        .records
        .iter()
        .map(|m| m.attributes["SenderId"].clone())
        .collect();
    assert!(ids.contains(&a.id) && ids.contains(&b.id), "{ids:?}");
    let response = handlers::intake::handle(&crawler, event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    // A's and B's own crawls were taken in: one download each; B's acme one was not.
    let tasks = all(sqs, &urls["fetch-0"], 2).await;
    let fetched: Vec<String> = tasks
        .records
        .iter()
        .map(|m| {
            let task: Value = serde_json::from_str(m.body.as_deref().unwrap()).unwrap();
            task["url"].as_str().unwrap().to_owned()
        })
        .collect();
    assert!(
        !fetched.iter().any(|u| u.contains("evil.example")),
        "{fetched:?}"
    );
    let acme = ClientId::parse("acme").unwrap();
    let offer = OfferKey::new(crawler.trusted_tenant(&acme), OfferId::parse("o1").unwrap());
    let status = crawler.crawl_status(&offer).await.unwrap().unwrap();
    assert_eq!(status.photos.len(), 1);
    assert_eq!(status.photos[0].url, "https://img.acme.example/a.jpg");

    // B's acme request waits in the dead-letter queue as `forbidden`, naming its sender.
    let letters = app
        .service
        .dead_letters(&["intake".to_owned()], 10)
        .await
        .unwrap();
    let letters = &letters[0].1;
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert!(letter.body.contains("evil.example"), "{}", letter.body);
    let reason = letter.reason.clone().unwrap();
    assert_eq!(reason.kind, Reason::FORBIDDEN);
    assert!(
        reason.message.contains(&b.id) && reason.message.contains("acme"),
        "{reason:?}"
    );
    assert_eq!(letter.sender.as_deref(), Some(b.id.as_str()));
    assert_eq!(crawler.counts().crawls_forbidden, 1);
    assert_eq!(app.service.counts().messages_dead_lettered, 1);

    // A routine redrive leaves a forbidden letter. Asked for by its kind, the operator (a
    // listed redriver) sends it again, vouching for B as its original sender: B still may not
    // act for acme, so it is refused again, and the letter still names B.
    assert_eq!(app.service.redrive("intake", 10).await.unwrap(), 0);
    let forbidden = RedriveKinds::Only(vec![Reason::FORBIDDEN.to_owned()]);
    let crawler = app.crawler(
        Processing::Handoff,
        &[
            ("IMGEST_INTAKE_SENDERS", &senders),
            ("IMGEST_REDRIVERS", SHARED_KEY_SENDER),
        ],
    );
    assert_eq!(
        app.service
            .redrive_kinds("intake", 10, &forbidden)
            .await
            .unwrap(),
        1
    );
    let again = all(sqs, intake, 1).await;
    assert_eq!(again.records[0].attributes["SenderId"], SHARED_KEY_SENDER);
    let kept = &again.records[0].message_attributes;
    assert_eq!(
        kept["imgest.sender"].string_value.as_deref(),
        Some(b.id.as_str())
    );
    let response = handlers::intake::handle(&crawler, again).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(drain(sqs, &urls["fetch-0"]).await.records.is_empty());
    let letters = app
        .service
        .dead_letters(&["intake".to_owned()], 10)
        .await
        .unwrap();
    assert_eq!(letters[0].1.len(), 1);
    assert_eq!(letters[0].1[0].sender.as_deref(), Some(b.id.as_str()));

    // Once B may act for acme, the redrive is taken in as B's.
    let allowed = format!("{}=acme;{}=beta,acme", a.id, b.id);
    let crawler = app.crawler(
        Processing::Handoff,
        &[
            ("IMGEST_INTAKE_SENDERS", &allowed),
            ("IMGEST_REDRIVERS", SHARED_KEY_SENDER),
        ],
    );
    assert_eq!(
        app.service
            .redrive_kinds("intake", 10, &forbidden)
            .await
            .unwrap(),
        1
    );
    let response = handlers::intake::handle(&crawler, all(sqs, intake, 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let task = all(sqs, &urls["fetch-0"], 1).await;
    assert!(
        task.records[0]
            .body
            .as_deref()
            .unwrap()
            .contains("evil.example")
    );
    assert_eq!(crawler.counts().crawls_forbidden, 0);
}
