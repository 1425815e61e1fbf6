//! No message is believed for what it says of itself, on the emulator with real senders: each
//! test performs one attack a partner (or a function taken over) could try on a queue, and
//! shows it is refused with its reason or changes nothing. Who sent a message is SQS's
//! `SenderId` (two IAM users on the emulator, `infra/moto_server.py`), where a letter came from
//! is SQS's `DeadLetterQueueSourceArn`, and what a message refers to is checked against the
//! store.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName};
use bytes::Bytes;
use imgest_core::domain::{ClientId, ImageId, OfferId, OfferKey};
use imgest_core::ports::{DeadMessage, Reason, RedriveKinds};
use imgest_crawl::Processing;
use imgest_hosts::{Answer, PartnerHost};
use imgest_lambda as handlers;
use serde_json::{Value, json};

use crate::crawl_aws::{CrawlOnAws, drain, take, with_dead_letter_queue};
use crate::support::iam::{IamUser, iam_user};
use crate::support::{STACK_SENDER, sample};

fn string(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .unwrap()
}

/// `body` sent to `url` as `user`, with `attributes` (its own words about itself).
async fn send_as(user: &IamUser, url: &str, body: &str, attributes: &[(&str, &str)]) {
    let mut send = user.sqs.send_message().queue_url(url).message_body(body);
    for (name, value) in attributes {
        send = send.message_attributes(*name, string(value));
    }
    send.send().await.unwrap();
}

/// The dead letters of `queue`, as `imgest dlq list` shows them.
async fn dead_letters_of(app: &crate::support::TestApp, queue: &str) -> Vec<DeadMessage> {
    app.service
        .dead_letters(&[queue.to_owned()], 10)
        .await
        .unwrap()
        .remove(0)
        .1
}

fn only_forbidden() -> RedriveKinds {
    RedriveKinds::Only(vec![Reason::FORBIDDEN.to_owned()])
}

#[tokio::test]
async fn a_forged_sender_attribute_is_neither_kept_in_the_dead_letter_nor_believed_after_a_redrive()
{
    let Some(stack) = CrawlOnAws::start("forged sender").await else {
        return;
    };
    let CrawlOnAws { sqs, urls, app, .. } = &stack;
    let config = imgest_testing::aws::sdk_config("forged sender")
        .await
        .unwrap();
    let (acme_partner, beta_partner) = (
        iam_user(&config, "acme-partner").await,
        iam_user(&config, "beta-partner").await,
    );
    // The operator redrives with the tests' shared key: a listed redriver.
    let senders = format!("{}=acme;{}=beta", acme_partner.id, beta_partner.id);
    let crawler = app.crawler(
        Processing::Handoff,
        &[
            ("IMGEST_INTAKE_SENDERS", &senders),
            ("IMGEST_REDRIVERS", STACK_SENDER),
        ],
    );
    let intake = &urls["intake"];
    with_dead_letter_queue(sqs, intake, 5).await;

    // Beta's partner sends a crawl for acme, claiming acme's partner sent it first.
    let request =
        json!({"client_id": "acme", "offer_id": "o1", "urls": ["https://evil.example/x.jpg"]});
    send_as(
        &beta_partner,
        intake,
        &request.to_string(),
        &[("imgest.sender", &acme_partner.id)],
    )
    .await;
    let response = imgest_lambda_crawl::intake::handle(&crawler, take(sqs, intake, 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(drain(sqs, &urls["fetch-0"]).await.records.is_empty());

    // The letter names the sender the decision was about: beta's, not the one it claimed.
    let letters = dead_letters_of(app, "intake").await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].sender.as_deref(), Some(beta_partner.id.as_str()));
    assert_eq!(letters[0].reason.as_ref().unwrap().kind, Reason::FORBIDDEN);

    // The operator's routine redrive leaves it where it is.
    assert_eq!(app.service.redrive("intake", 10).await.unwrap(), 0);
    assert!(drain(sqs, intake).await.records.is_empty());
    // Asked for by name, it goes back as beta's, and is refused again, changing nothing.
    assert_eq!(
        app.service
            .redrive_kinds("intake", 10, &only_forbidden())
            .await
            .unwrap(),
        1
    );
    let again = take(sqs, intake, 1).await;
    let kept = &again.records[0].message_attributes;
    assert_eq!(
        kept["imgest.sender"].string_value.as_deref(),
        Some(beta_partner.id.as_str())
    );
    assert!(
        !kept.contains_key("imgest.kind"),
        "only the sender goes back: {kept:?}"
    );
    let response = imgest_lambda_crawl::intake::handle(&crawler, again).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(drain(sqs, &urls["fetch-0"]).await.records.is_empty());
    let acme = ClientId::parse("acme").unwrap();
    let offer = OfferKey::new(crawler.trusted_tenant(&acme), OfferId::parse("o1").unwrap());
    assert!(crawler.crawl_status(&offer).await.unwrap().is_none());
    assert_eq!(crawler.counts().crawls_forbidden, 2);
}

/// Receives a message of `url` without deleting it (a function that stopped on it), making it
/// visible again at once: after the queue's receive limit SQS moves it to the dead letters.
async fn receive_and_stop(sqs: &aws_sdk_sqs::Client, url: &str) -> usize {
    let received = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .visibility_timeout(0)
        .wait_time_seconds(0)
        .send()
        .await
        .unwrap();
    received.messages.unwrap_or_default().len()
}

#[tokio::test]
async fn a_letter_sqs_moved_is_known_by_sqs_record_and_its_own_attributes_are_not_believed() {
    let Some(stack) = CrawlOnAws::start("moved letters").await else {
        return;
    };
    let CrawlOnAws { sqs, urls, app, .. } = &stack;
    let config = imgest_testing::aws::sdk_config("moved letters")
        .await
        .unwrap();
    let partner = iam_user(&config, "partner").await;
    // As the template has them: the crawl's queues share one dead-letter queue.
    let dead = crate::crawl_aws::with_shared_dead_letter_queue(
        sqs,
        &[&urls["intake"], &urls["fetch-0"]],
        2,
    )
    .await;

    // A partner's message dressed as a fetch queue's letter, and a function that stops on it
    // until SQS moves it.
    let body = json!({"url_hash": "0cc175b9c0f1b6a831c399e269772661", "url": "https://evil.example/x.jpg",
        "client_id": "acme", "tier": 0, "attempt": 0});
    send_as(
        &partner,
        &urls["intake"],
        &body.to_string(),
        &[
            ("imgest.queue", "fetch-0"),
            ("imgest.kind", "storage_unavailable"),
            ("imgest.sender", STACK_SENDER),
        ],
    )
    .await;
    for _ in 0..2 {
        assert_eq!(receive_and_stop(sqs, &urls["intake"]).await, 1);
    }
    assert_eq!(receive_and_stop(sqs, &urls["intake"]).await, 0, "moved");
    let moved = sqs
        .receive_message()
        .queue_url(&dead)
        .message_system_attribute_names(MessageSystemAttributeName::DeadLetterQueueSourceArn)
        .visibility_timeout(0)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(moved.len(), 1);
    assert!(
        moved[0].attributes.as_ref().is_some_and(|a| a
            .get(&MessageSystemAttributeName::DeadLetterQueueSourceArn)
            .is_some_and(|arn| arn.ends_with(urls["intake"].rsplit('/').next().unwrap()))),
        "the emulator records where SQS moved it from: {moved:?}"
    );

    // It is the intake queue's, as SQS says, whatever it says; it died without a reason.
    assert!(dead_letters_of(app, "fetch-0").await.is_empty());
    let letters = dead_letters_of(app, "intake").await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].reason, None);
    assert_eq!(letters[0].sender.as_deref(), Some(partner.id.as_str()));
    let died = RedriveKinds::Only(vec![Reason::DIED.to_owned()]);
    assert_eq!(
        app.service
            .redrive_kinds("fetch-0", 10, &died)
            .await
            .unwrap(),
        0
    );
    assert!(drain(sqs, &urls["fetch-0"]).await.records.is_empty());

    // Redriven onto its own queue it carries its true sender and none of its words.
    assert_eq!(
        app.service
            .redrive_kinds("intake", 10, &died)
            .await
            .unwrap(),
        1
    );
    let back = take(sqs, &urls["intake"], 1).await;
    let kept: HashMap<&str, Option<&str>> = back.records[0]
        .message_attributes
        .iter()
        .map(|(k, v)| (k.as_str(), v.string_value.as_deref()))
        .collect();
    assert_eq!(
        kept,
        HashMap::from([("imgest.sender", Some(partner.id.as_str()))])
    );
}

#[tokio::test]
async fn a_letter_too_large_for_a_message_keeps_its_body_in_storage_and_a_redrive_restores_it() {
    let Some(stack) = CrawlOnAws::start("large letters").await else {
        return;
    };
    let CrawlOnAws { sqs, urls, app, .. } = &stack;
    let config = imgest_testing::aws::sdk_config("large letters")
        .await
        .unwrap();
    let partner = iam_user(&config, "partner").await;
    let crawler = app.crawler(Processing::Handoff, &[]);
    with_dead_letter_queue(sqs, &urls["intake"], 5).await;

    // A body at SQS's limit from a sender no one listed: its letter, with the reason and the
    // sender beside it, would not fit in a message.
    let padding = "x".repeat(256 * 1024 - 200);
    let body =
        json!({"client_id": "acme", "offer_id": "big", "urls": [], "padding": padding}).to_string();
    assert!(body.len() <= 256 * 1024);
    send_as(&partner, &urls["intake"], &body, &[]).await;
    let response =
        imgest_lambda_crawl::intake::handle(&crawler, take(sqs, &urls["intake"], 1).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let letters = dead_letters_of(app, "intake").await;
    assert_eq!(letters.len(), 1);
    assert!(
        letters[0].body.contains("kept under dead-letters/intake/"),
        "{}",
        letters[0].body
    );
    assert_eq!(letters[0].reason.as_ref().unwrap().kind, Reason::FORBIDDEN);
    let kept: Vec<String> = app
        .files()
        .await
        .into_iter()
        .filter(|k| k.starts_with("dead-letters/"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");

    assert_eq!(
        app.service
            .redrive_kinds("intake", 10, &only_forbidden())
            .await
            .unwrap(),
        1
    );
    let back = take(sqs, &urls["intake"], 1).await;
    assert_eq!(back.records[0].body.as_deref(), Some(body.as_str()));
    assert!(
        !app.files()
            .await
            .iter()
            .any(|k| k.starts_with("dead-letters/")),
        "the kept body goes once redriven"
    );
}

#[tokio::test]
async fn the_internal_queues_take_only_the_stacks_messages() {
    let Some(stack) = CrawlOnAws::start("internal queues").await else {
        return;
    };
    let CrawlOnAws { sqs, urls, app, .. } = &stack;
    let config = imgest_testing::aws::sdk_config("internal queues")
        .await
        .unwrap();
    let partner = iam_user(&config, "partner").await;
    let crawler = app.crawler(Processing::Handoff, &[]);
    let task = json!({"url_hash": "0cc175b9c0f1b6a831c399e269772661", "url": "https://evil.example/x.jpg",
        "client_id": "acme", "tier": 0, "attempt": 0});
    let settle = json!({"settle": {"offer": "acme/o1", "crawl_id": "c1"}});
    let download =
        json!({"downloaded": {"url_hash": "0cc175b9c0f1b6a831c399e269772661", "attempts": 1}});
    let image = ImageId::of_bytes(b"x").to_string();
    for (queue, body) in [
        ("fetch-0", task.to_string()),
        ("settle", settle.to_string()),
        ("process", download.to_string()),
        ("backfill", image),
    ] {
        with_dead_letter_queue(sqs, &urls[queue], 5).await;
        // The partner's message, dressed as a function's, due later than it is.
        send_as(
            &partner,
            &urls[queue],
            &body,
            &[("imgest.sender", STACK_SENDER), ("imgest.due", "1")],
        )
        .await;
        let event = take(sqs, &urls[queue], 1).await;
        let response = match queue {
            "fetch-0" => imgest_lambda_crawl::fetch::handle(&crawler, event).await,
            "settle" => imgest_lambda_crawl::settle::handle(&crawler, event).await,
            "process" => imgest_lambda_crawl::process::handle(&crawler, event).await,
            _ => handlers::backfill::tasks(&app.service, &crawler.settings().senders, event).await,
        };
        assert!(
            response.batch_item_failures.is_empty(),
            "{queue}: {response:?}"
        );
        let letters = dead_letters_of(app, queue).await;
        assert_eq!(letters.len(), 1, "{queue}: {letters:?}");
        let reason = letters[0].reason.clone().unwrap();
        assert_eq!(reason.kind, Reason::FORBIDDEN, "{queue}: {reason:?}");
        assert!(reason.message.contains(&partner.id), "{queue}: {reason:?}");
    }
    // Nothing was read for them: no record, no download queued, no result.
    assert!(drain(sqs, &urls["fetch-0"]).await.records.is_empty());
    assert!(drain(sqs, &urls["results"]).await.records.is_empty());
}

/// A crawl of `urls` for acme's offer `offer`, taken in by the intake handler: the fetch
/// tasks it queued on the first tier.
async fn crawl(stack: &CrawlOnAws, offer: &str, urls: &[String]) -> SqsEvent {
    let request = json!({"client_id": "acme", "offer_id": offer, "urls": urls});
    let event = crate::crawl_aws::intake_event(&format!("intake-{offer}"), &request);
    let response = imgest_lambda_crawl::intake::handle(&stack.crawler, event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    take(&stack.sqs, &stack.urls["fetch-0"], urls.len()).await
}

#[tokio::test]
async fn a_fetch_task_is_believed_only_as_far_as_its_urls_record_bears_it_out() {
    let Some(stack) = CrawlOnAws::start("forged fetch tasks").await else {
        return;
    };
    let host = PartnerHost::start([
        (
            "/victim.jpg",
            Answer::photo(Bytes::from(sample("dune.jpg"))),
        ),
        (
            "/attacker.jpg",
            Answer::photo(Bytes::from(sample("storm.jpg"))),
        ),
    ])
    .await
    .unwrap();
    let crawler = &stack.crawler;
    with_dead_letter_queue(&stack.sqs, &stack.urls["fetch-0"], 5).await;
    let tasks = crawl(&stack, "victim", &[host.url("/victim.jpg")]).await;
    let task: Value = serde_json::from_str(tasks.records[0].body.as_deref().unwrap()).unwrap();
    assert!(
        task["lease"].as_str().is_some_and(|l| !l.is_empty()),
        "{task}"
    );

    let forged = |change: &dyn Fn(&mut Value)| {
        let mut event = tasks.clone();
        let mut body = task.clone();
        change(&mut body);
        event.records[0].body = Some(body.to_string());
        event.records[0].message_id = Some(format!("forged-{}", fastrand::u64(..)));
        event
    };
    // The attacker's photo under the victim URL's hash: refused, nothing downloaded.
    let attacker = host.url("/attacker.jpg");
    let other_url = forged(&|t| t["url"] = json!(attacker));
    let response = imgest_lambda_crawl::fetch::handle(crawler, other_url).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    // Another client's budget and hosts: refused.
    let other_client = forged(&|t| t["client_id"] = json!("beta"));
    imgest_lambda_crawl::fetch::handle(crawler, other_client).await;
    // A lease the store never gave: dropped.
    let other_lease = forged(&|t| t["lease"] = json!("0000000000000000"));
    imgest_lambda_crawl::fetch::handle(crawler, other_lease).await;
    assert_eq!(host.requests(), 0);
    assert_eq!(crawler.counts().tasks_not_leased, 1);
    let letters = dead_letters_of(&stack.app, "fetch-0").await;
    let mut reasons: Vec<String> = letters
        .iter()
        .map(|l| {
            let reason = l.reason.clone().unwrap();
            assert_eq!(reason.kind, Reason::FORBIDDEN);
            reason.message
        })
        .collect();
    reasons.sort();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].contains("does not hash to it"), "{reasons:?}");
    assert!(reasons[1].contains("names client beta"), "{reasons:?}");

    // The task as intake queued it settles the victim's URL with the victim's photo.
    let response = imgest_lambda_crawl::fetch::handle(crawler, tasks).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let processed = take(&stack.sqs, &stack.urls["process"], 1).await;
    let response = imgest_lambda_crawl::process::handle(crawler, processed).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let acme = ClientId::parse("acme").unwrap();
    let offer = OfferKey::new(
        crawler.trusted_tenant(&acme),
        OfferId::parse("victim").unwrap(),
    );
    let status = crawler.crawl_status(&offer).await.unwrap().unwrap();
    let victim = ImageId::of_bytes(&sample("dune.jpg")).to_string();
    assert_eq!(
        serde_json::to_value(&status.photos[0]).unwrap()["image_id"],
        victim.as_str()
    );
}

/// Rewrites the offer's crawl record as a function that may write crawl records could.
async fn rewrite_crawl(
    app: &crate::support::TestApp,
    offer: &OfferKey,
    change: impl Fn(&mut Value),
) {
    let documents = &app.service.ports().documents;
    let now = app.service.ports().clock.now();
    let key = offer.to_string();
    let stored = documents
        .get_document("crawl", &key, now)
        .await
        .unwrap()
        .unwrap();
    let mut body: Value = serde_json::from_str(&stored.body).unwrap();
    change(&mut body);
    documents
        .put_document(
            "crawl",
            &key,
            &body.to_string(),
            Some(stored.version),
            now.plus(std::time::Duration::from_secs(86_400)),
            now,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn the_intake_function_links_a_settled_crawl_only_as_far_as_its_seal_and_urls_bear_it_out() {
    let Some(stack) = CrawlOnAws::start("sealed crawls").await else {
        return;
    };
    let host = PartnerHost::start([
        ("/a.jpg", Answer::photo(Bytes::from(sample("dune.jpg")))),
        ("/b.jpg", Answer::photo(Bytes::from(sample("storm.jpg")))),
    ])
    .await
    .unwrap();
    let CrawlOnAws { sqs, urls, app, .. } = &stack;
    // As deployed: the fetch and process functions hand settled crawls to the intake
    // function, which checks them.
    let settling = app.crawler(Processing::Handoff, &[]).finishing_elsewhere();
    let intake = app
        .crawler(Processing::Handoff, &[])
        .verifying_settled_crawls();
    with_dead_letter_queue(sqs, &urls["settle"], 5).await;
    let acme = ClientId::parse("acme").unwrap();
    let (dune, storm) = (
        ImageId::of_bytes(&sample("dune.jpg")).to_string(),
        ImageId::of_bytes(&sample("storm.jpg")).to_string(),
    );

    // Two offers, each crawled to its settle message; then their crawl records are rewritten
    // as a decoder taken over could: one photo's image swapped, one offer's URLs changed.
    let mut settled = Vec::new();
    for (offer, path) in [("swapped", "/a.jpg"), ("relisted", "/b.jpg")] {
        let tasks = crawl(&stack, offer, &[host.url(path)]).await;
        let response = imgest_lambda_crawl::fetch::handle(&settling, tasks).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        let processed = take(sqs, &urls["process"], 1).await;
        let response = imgest_lambda_crawl::process::handle(&settling, processed).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        let key = OfferKey::new(intake.trusted_tenant(&acme), OfferId::parse(offer).unwrap());
        settled.push((offer, key));
    }
    rewrite_crawl(app, &settled[0].1, |c| {
        c["photos"][0]["image_id"] = json!(storm)
    })
    .await;
    let evil = host.url("/b.jpg").replace("/b.jpg", "/evil.jpg");
    rewrite_crawl(app, &settled[1].1, |c| c["photos"][0]["url"] = json!(evil)).await;

    let messages = take(sqs, &urls["settle"], 2).await;
    let response = imgest_lambda_crawl::settle::handle(&intake, messages).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    // The swapped photo is linked as its URL's record says; the relisted offer is refused.
    let photos = app.get("/v1/offers/swapped/photos").await;
    assert_eq!(
        photos.json["photos"][0]["image_id"],
        dune.as_str(),
        "{}",
        photos.json
    );
    assert_eq!(app.get("/v1/offers/relisted/photos").await.status, 404);
    let letters = dead_letters_of(app, "settle").await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    let reason = letters[0].reason.clone().unwrap();
    assert_eq!(reason.kind, Reason::FORBIDDEN);
    assert!(reason.message.contains("sealed"), "{reason:?}");
    assert_eq!(intake.counts().crawls_unverified, 2);
    let results = take(sqs, &urls["results"], 1).await;
    let result: Value = serde_json::from_str(results.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(result["offer_id"], "swapped");
    assert_eq!(result["photos"][0]["image_id"], dune.as_str());
}

#[tokio::test]
async fn stats_report_a_results_subscription_that_filters_on_no_single_client() {
    let Some(config) = imgest_testing::aws::sdk_config("results subscribers").await else {
        return;
    };
    let sns = aws_sdk_sns::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);
    let topic = sns
        .create_topic()
        .name(imgest_testing::aws::unique_name("results"))
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    let mut endpoints = Vec::new();
    for (name, filter) in [
        ("acme", Some(r#"{"client_id": ["acme"]}"#)),
        ("wide", None),
        ("two", Some(r#"{"client_id": ["acme", "beta"]}"#)),
    ] {
        let url = sqs
            .create_queue()
            .queue_name(imgest_testing::aws::unique_name(name))
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        let arn = format!(
            "arn:aws:sqs:us-east-1:123456789012:{}",
            url.rsplit('/').next().unwrap()
        );
        let mut subscribe = sns
            .subscribe()
            .topic_arn(&topic)
            .protocol("sqs")
            .endpoint(&arn);
        if let Some(filter) = filter {
            subscribe = subscribe.attributes("FilterPolicy", filter);
        }
        subscribe.send().await.unwrap();
        endpoints.push((name, arn));
    }
    let app = crate::support::TestApp::start_aws(
        "results subscribers",
        &[("IMGEST_QUEUES", &format!("results={topic}"))],
    )
    .await
    .unwrap();
    let stats = imgest_crawl::stats::stats(&app.service).await.unwrap();
    let by_endpoint: HashMap<&str, Option<&str>> = stats
        .results_subscribers
        .iter()
        .map(|s| (s.endpoint.as_str(), s.client.as_deref()))
        .collect();
    assert_eq!(by_endpoint.len(), 3, "{by_endpoint:?}");
    assert_eq!(by_endpoint[endpoints[0].1.as_str()], Some("acme"));
    assert_eq!(by_endpoint[endpoints[1].1.as_str()], None);
    assert_eq!(by_endpoint[endpoints[2].1.as_str()], None);
    assert_eq!(stats.unfiltered_subscribers, 2);
}

#[tokio::test]
async fn a_long_wait_due_out_of_bounds_is_given_up_on_alone_and_the_batchs_other_hops_go_on() {
    let Some(stack) = CrawlOnAws::start("out-of-bounds hops").await else {
        return;
    };
    let CrawlOnAws {
        sqs,
        urls,
        app,
        crawler,
        ..
    } = &stack;
    let queue = &urls["fetch-0"];
    with_dead_letter_queue(sqs, queue, 5).await;
    let now = app.service.ports().clock.now().as_millis();
    // Two of the stack's chained waits: one due in an hour, one (a bug's) in thirty days.
    for (body, due) in [
        ("in an hour", now + 3_600_000),
        ("in a month", now + 30 * 86_400_000),
    ] {
        sqs.send_message()
            .queue_url(queue)
            .message_body(body)
            .message_attributes("imgest.due", string(&due.to_string()))
            .send()
            .await
            .unwrap();
    }
    let response = imgest_lambda_crawl::fetch::handle(crawler, take(sqs, queue, 2).await).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let letters = dead_letters_of(app, "fetch-0").await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].body, "in a month");
    let reason = letters[0].reason.clone().unwrap();
    assert_eq!(reason.kind, Reason::UNUSABLE);
    assert!(reason.message.contains("longest wait"), "{reason:?}");
    // The other one waits for its next hop.
    let counts = app
        .service
        .ports()
        .messages
        .counts("fetch-0")
        .await
        .unwrap();
    assert_eq!(counts.delayed, 1, "{counts:?}");
}
