//! Results reach only their client, on the emulator: the results go to a topic (as the template
//! deploys it) with the client as each message's `client_id` attribute, and each client's
//! queue is subscribed with a filter on it (as `docs/deployment.md` says to subscribe one). The
//! matrix: three clients (one's name a prefix of another's), two crawls each, and the crawl
//! repeated: each queue holds exactly its own client's results, with their crawl ids and
//! settled times, and a repeated crawl's result again under the same crawl id.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use imgest_core::domain::{ClientId, OfferId};
use imgest_crawl::Processing;
use imgest_crawl::messages::{CrawlRequest, CrawlState};
use serde_json::Value;

use crate::support::TestApp;

const CLIENTS: [&str; 3] = ["acme", "beta", "acme-2"];

/// A queue subscribed to `topic` for `client`'s results; its URL.
async fn subscribe(
    sqs: &aws_sdk_sqs::Client,
    sns: &aws_sdk_sns::Client,
    topic: &str,
    client: &str,
) -> String {
    let (url, arn) = imgest_testing::aws::queue(sqs, &format!("results-{client}")).await;
    let filter = serde_json::json!({ "client_id": [client] }).to_string();
    sns.subscribe()
        .topic_arn(topic)
        .protocol("sqs")
        .endpoint(arn)
        .attributes("RawMessageDelivery", "true")
        .attributes("FilterPolicyScope", "MessageAttributes")
        .attributes("FilterPolicy", filter)
        .send()
        .await
        .unwrap();
    url
}

/// Every result on `url` until `want` arrived (or a deadline), then whatever else is there.
async fn results(sqs: &aws_sdk_sqs::Client, url: &str, want: usize) -> Vec<Value> {
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let wait = if got.len() >= want { 1 } else { 5 };
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(wait)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        let messages = out.messages.unwrap_or_default();
        let empty = messages.is_empty();
        for m in messages {
            let result: Value = serde_json::from_str(m.body().unwrap()).unwrap();
            let attribute = &m.message_attributes().unwrap()["client_id"];
            assert_eq!(
                attribute.string_value(),
                result["client_id"].as_str(),
                "the attribute is the result's client"
            );
            got.push(result);
        }
        if (got.len() >= want && empty) || std::time::Instant::now() >= deadline {
            return got;
        }
    }
}

#[tokio::test]
async fn each_clients_subscription_gets_its_own_results_and_no_other() {
    const NAME: &str = "results topic";
    let Some(config) = imgest_testing::aws::sdk_config(NAME).await else {
        return;
    };
    let (sqs, sns) = (
        aws_sdk_sqs::Client::new(&config),
        aws_sdk_sns::Client::new(&config),
    );
    let topic = sns
        .create_topic()
        .name(imgest_testing::aws::unique_name("imgest-results"))
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    let mut queues = BTreeMap::new();
    for client in CLIENTS {
        queues.insert(client, subscribe(&sqs, &sns, &topic, client).await);
    }
    let app = TestApp::start_aws(NAME, &[("IMGEST_QUEUES", &format!("results={topic}"))])
        .await
        .unwrap();
    let crawler = app.crawler(Processing::Handoff, &[]);
    // Two crawls per client (no URL: each settles at intake and sends its result), and the
    // first one again (an unchanged offer: its result again).
    for client in CLIENTS {
        for offer in ["first", "second", "first"] {
            let request = CrawlRequest {
                client_id: ClientId::parse(client).unwrap(),
                offer_id: OfferId::parse(&format!("{client}-{offer}")).unwrap(),
                urls: Vec::new(),
            };
            assert_eq!(
                crawler.intake_trusted(request).await.unwrap(),
                CrawlState::Done
            );
        }
    }
    for (client, url) in &queues {
        let got = results(&sqs, url, 3).await;
        assert_eq!(got.len(), 3, "{client}: {got:?}");
        let mut crawls = BTreeMap::new();
        for result in &got {
            assert_eq!(result["client_id"], *client, "{client} got {result}");
            assert_eq!(result["state"], "done");
            let settled = result["settled_at"].as_str().unwrap();
            assert!(humantime::parse_rfc3339(settled).is_ok(), "{settled}");
            let crawl_id = result["crawl_id"].as_str().unwrap().to_owned();
            crawls
                .entry(result["offer_id"].as_str().unwrap().to_owned())
                .or_insert_with(BTreeSet::new)
                .insert(crawl_id);
        }
        // The repeated crawl is the same result (one crawl id); the other offer's is another.
        assert_eq!(crawls.len(), 2, "{client}: {crawls:?}");
        assert!(
            crawls.values().all(|ids| ids.len() == 1),
            "{client}: {crawls:?}"
        );
    }
}
