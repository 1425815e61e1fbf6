//! The intake queue's callers, as the route matrix of `identity.rs` is the API's: every kind of
//! sender against two clients, each cell a crawl request with the `SenderId` (and the
//! `imgest.sender` a redrive carries) SQS would deliver. A request is taken in only when its
//! sender may act for its client; every other ends in the dead letters as `forbidden`, with no
//! crawl recorded. (The same decision on real SQS senders: `intake_senders_aws.rs`.)

#![allow(clippy::unwrap_used)]

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use imgest_core::domain::{ClientId, OfferId, OfferKey};
use imgest_core::ports::Reason;
use imgest_crawl::Processing;
use imgest_lambda_crawl as handlers;
use serde_json::json;

use crate::support::TestApp;

const SENDERS: &str = "AIDAPARTNERA=acme;AIDAPARTNERB=beta;AROACRAWLER=*";
const REDRIVERS: &str = "AROAOPERATOR";

/// A sender: its `SenderId`, the original sender it carries, and whom it acts as.
struct Sender {
    name: &'static str,
    sender_id: Option<&'static str>,
    carries: Option<&'static str>,
    /// The clients it may send for.
    may: &'static [&'static str],
}

const MATRIX: [Sender; 9] = [
    Sender {
        name: "partner-a",
        sender_id: Some("AIDAPARTNERA"),
        carries: None,
        may: &["acme"],
    },
    Sender {
        name: "partner-b",
        sender_id: Some("AIDAPARTNERB"),
        carries: None,
        may: &["beta"],
    },
    Sender {
        name: "crawler",
        sender_id: Some("AROACRAWLER:i-0abc"),
        carries: None,
        may: &["acme", "beta"],
    },
    Sender {
        name: "stranger",
        sender_id: Some("AIDASTRANGER"),
        carries: None,
        may: &[],
    },
    Sender {
        name: "nobody",
        sender_id: None,
        carries: None,
        may: &[],
    },
    Sender {
        name: "stranger-claiming-a",
        sender_id: Some("AIDASTRANGER"),
        carries: Some("AIDAPARTNERA"),
        may: &[],
    },
    Sender {
        name: "redrive-of-a",
        sender_id: Some("AROAOPERATOR:ops"),
        carries: Some("AIDAPARTNERA"),
        may: &["acme"],
    },
    Sender {
        name: "redrive-of-stranger",
        sender_id: Some("AROAOPERATOR:ops"),
        carries: Some("AIDASTRANGER"),
        may: &[],
    },
    Sender {
        name: "operator",
        sender_id: Some("AROAOPERATOR:ops"),
        carries: None,
        may: &[],
    },
];

fn message(sender: &Sender, client: &str) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(format!("{}-{client}", sender.name));
    let request =
        json!({"client_id": client, "offer_id": format!("{}-{client}", sender.name), "urls": []});
    m.body = Some(request.to_string());
    m.attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    if let Some(id) = sender.sender_id {
        m.attributes.insert("SenderId".into(), id.into());
    }
    if let Some(original) = sender.carries {
        let mut attribute = SqsMessageAttribute::default();
        attribute.data_type = Some("String".into());
        attribute.string_value = Some(original.into());
        m.message_attributes
            .insert("imgest.sender".into(), attribute);
    }
    m
}

#[tokio::test]
async fn every_sender_crawls_only_for_the_clients_it_may_act_for() {
    let app = TestApp::start().await;
    let crawler = app.crawler(
        Processing::Inline,
        &[
            ("IMGEST_INTAKE_SENDERS", SENDERS),
            ("IMGEST_INTAKE_REDRIVERS", REDRIVERS),
        ],
    );
    let mut event = SqsEvent::default();
    for sender in &MATRIX {
        for client in ["acme", "beta"] {
            event.records.push(message(sender, client));
        }
    }
    let response = handlers::intake::handle(&crawler, event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let letters = app
        .service
        .dead_letters(&["intake".to_owned()], 100)
        .await
        .unwrap()
        .remove(0)
        .1;
    let mut cells = 0;
    for sender in &MATRIX {
        for client in ["acme", "beta"] {
            let offer_id = format!("{}-{client}", sender.name);
            let client_id = ClientId::parse(client).unwrap();
            let offer = OfferKey::new(
                crawler.trusted_tenant(&client_id),
                OfferId::parse(&offer_id).unwrap(),
            );
            let crawled = crawler.crawl_status(&offer).await.unwrap().is_some();
            let refused = letters.iter().find(|l| l.body.contains(&offer_id));
            let allowed = sender.may.contains(&client);
            assert_eq!(crawled, allowed, "{offer_id}: crawled");
            assert_eq!(refused.is_some(), !allowed, "{offer_id}: dead-lettered");
            if let Some(letter) = refused {
                let reason = letter.reason.as_ref().unwrap();
                assert_eq!(reason.kind, Reason::FORBIDDEN, "{offer_id}");
                assert!(reason.message.contains(client), "{reason:?}");
            }
            cells += 1;
        }
    }
    assert_eq!(cells, 18);
    let forbidden = MATRIX.iter().map(|s| 2 - s.may.len()).sum::<usize>();
    assert_eq!(letters.len(), forbidden);
    assert_eq!(crawler.counts().crawls_forbidden, forbidden as u64);
}

#[tokio::test]
async fn with_no_sender_listed_no_queued_crawl_is_taken() {
    let app = TestApp::start().await;
    let crawler = app.crawler(Processing::Inline, &[("IMGEST_INTAKE_SENDERS", "")]);
    let mut event = SqsEvent::default();
    event.records.push(message(&MATRIX[2], "acme"));
    let response = handlers::intake::handle(&crawler, event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(crawler.counts().crawls_forbidden, 1);
    assert_eq!(crawler.counts().offers_received, 0);
}
