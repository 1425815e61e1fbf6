//! The port contract suites against `DynamoStore` on a DynamoDB API (moto's server locally,
//! started by `infra/test.sh`). Without `AWS_ENDPOINT_URL` every test here returns early
//! (unless AWS tests are required: then `testing::aws::sdk_config` fails them).
//!
//! Each test gets a client and a fresh table of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use imgest_aws::DynamoStore;
use imgest_aws::dynamodb::create_table;
use imgest_core::domain::{
    Generation, ImageId, ImageRecord, JobPart, OfferKey, SourceFormat, Tenant, Timestamp, UploadId,
};
use imgest_core::ports::{
    Checkpoints, Claim, Documents, ImageIndex, KeyedLink, OfferLinks, RateLimiter, ReadyImage,
    StoreError, UploadRecord, UploadRecords, UploadState,
};
use imgest_testing as testing;
use imgest_testing::{BASE, Fixture, LinkPorts, UploadPorts};

const TTL: Duration = Duration::from_secs(3600);

/// A store on a fresh table, or `None` when no emulator is configured.
async fn store_and_client(test: &str) -> Option<(Arc<DynamoStore>, Client, String)> {
    let config = testing::aws::sdk_config(test).await?;
    let client = Client::new(&config);
    let table = testing::aws::unique_name("imgest");
    create_table(&client, &table).await.unwrap();
    let store = Arc::new(DynamoStore::new(client.clone(), table.clone()));
    Some((store, client, table))
}

async fn store(test: &str) -> Option<Arc<DynamoStore>> {
    store_and_client(test).await.map(|(store, _, _)| store)
}

/// The contract's factories: each test gets a fresh table of its own.
async fn dynamodb_images(test: &str) -> Option<Fixture<Arc<dyn ImageIndex>>> {
    Some(Fixture::new(store(test).await?))
}

async fn dynamodb_links(test: &str) -> Option<Fixture<LinkPorts>> {
    Some(Fixture::new(LinkPorts::of(store(test).await?)))
}

/// A store (and its client and table) whose images turn hot at `links` links (see
/// `DynamoStore::with_hot_links`).
async fn hot_store(test: &str, links: u32) -> Option<(Arc<DynamoStore>, Client, String)> {
    let (store, client, table) = store_and_client(test).await?;
    let store = Arc::into_inner(store)?.with_hot_links(links);
    Some((Arc::new(store), client, table))
}

/// The link contract again over images that turn hot at two links (their changes on shards
/// from the second link on).
async fn dynamodb_hot_links(test: &str) -> Option<Fixture<LinkPorts>> {
    let (store, _, _) = hot_store(test, 2).await?;
    Some(Fixture::new(LinkPorts::of(store)))
}

async fn dynamodb_documents(test: &str) -> Option<Fixture<Arc<dyn Documents>>> {
    Some(Fixture::new(store(test).await?))
}

async fn dynamodb_rate_limits(test: &str) -> Option<Fixture<Arc<dyn RateLimiter>>> {
    Some(Fixture::new(store(test).await?))
}

async fn dynamodb_uploads(test: &str) -> Option<Fixture<UploadPorts>> {
    Some(Fixture::new(UploadPorts::of(store(test).await?)))
}

imgest_testing::image_index_contract_tests!(image_index, super::dynamodb_images);
imgest_testing::offer_links_contract_tests!(offer_links, super::dynamodb_links);
imgest_testing::offer_links_contract_tests!(offer_links_hot, super::dynamodb_hot_links);
imgest_testing::documents_contract_tests!(documents, super::dynamodb_documents);
imgest_testing::rate_limiter_contract_tests!(rate_limiter, super::dynamodb_rate_limits);
imgest_testing::uploads_contract_tests!(uploads, super::dynamodb_uploads);

/// Every suite `DynamoStore` has an adapter for, in a row on one shared table, twice (checks
/// must not trip over each other's data).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_suite_on_one_shared_table() {
    let Some(store) = store("every_suite_on_one_shared_table").await else {
        return;
    };
    for _ in 0..2 {
        testing::image_index::contract(store.clone()).await;
        testing::offer_links::contract(LinkPorts::of(store.clone())).await;
        testing::documents::contract(store.clone()).await;
        testing::rate_limiter::contract(store.clone()).await;
        testing::uploads::contract(UploadPorts::of(store.clone())).await;
    }
}

fn ready() -> ReadyImage {
    ReadyImage {
        format: SourceFormat::Png,
        width: 10,
        height: 20,
        original_bytes: 30,
        variants: Vec::new(),
        variant_set: imgest_core::domain::VariantSetVersion::of(&[b"none"]),
        sha256: None,
        original_metadata: None,
        thumbhash: None,
        signature: None,
    }
}

async fn ready_image(store: &DynamoStore, now: Timestamp) -> ImageRecord {
    let id = testing::random_image_id();
    let Claim::New { generation } = store
        .claim(&id, &Generation::random(), now, TTL, TTL)
        .await
        .unwrap()
    else {
        panic!("a fresh id is new");
    };
    store
        .complete(&id, &generation, ready(), now, TTL)
        .await
        .unwrap()
}

/// `count` ready images, made a few at a time.
async fn ready_images(store: &DynamoStore, now: Timestamp, count: usize) -> Vec<ImageId> {
    use futures_util::StreamExt;
    futures_util::stream::iter(0..count)
        .map(|_| async move { ready_image(store, now).await.id })
        .buffered(8)
        .collect()
        .await
}

/// The raw image item.
async fn raw_image(
    client: &Client,
    table: &str,
    id: &ImageId,
) -> std::collections::HashMap<String, AttributeValue> {
    raw_item(client, table, &format!("image#{id}"), "image").await
}

fn number(item: &std::collections::HashMap<String, AttributeValue>, attr: &str) -> Option<i64> {
    item.get(attr)
        .map(|v| v.as_n().expect("a number").parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_and_gc_attributes_are_set_only_while_an_image_may_expire() {
    let Some((store, client, table)) =
        store_and_client("ttl_and_gc_attributes_are_set_only_while_an_image_may_expire").await
    else {
        return;
    };
    // A claim: deleted by TTL a day after the claim expires, listed for GC at its expiry.
    let id = testing::random_image_id();
    let now = Timestamp::from_millis(1_700_000_000_500);
    let Claim::New { generation } = store
        .claim(&id, &Generation::random(), now, TTL, TTL)
        .await
        .unwrap()
    else {
        panic!("new");
    };
    let item = raw_image(&client, &table, &id).await;
    let claim_expiry = now.plus(TTL).as_millis();
    assert_eq!(number(&item, "claim_expires_at"), Some(claim_expiry));
    assert_eq!(number(&item, "gc_at"), Some(claim_expiry));
    assert_eq!(
        number(&item, "ttl"),
        Some((claim_expiry + 999) / 1000 + 86_400)
    );
    // The id's first hex digit and the quarter of its second.
    let quarter = id.as_str()[1..2]
        .parse::<char>()
        .unwrap()
        .to_digit(16)
        .unwrap()
        / 4;
    let bucket = format!("gc#{}{quarter}", &id.as_str()[..1]);
    assert_eq!(item.get("gc_bucket").unwrap().as_s().unwrap(), &bucket);
    assert_eq!(item.get("state").unwrap().as_s().unwrap(), "processing");

    // Completed: an orphan, expiring (TTL in whole seconds, rounded up) and a GC candidate.
    // Its index entry stays the claim's (moving it would be two index writes): early, never
    // late.
    let done = now.plus(Duration::from_secs(5));
    let record = store
        .complete(&id, &generation, ready(), done, TTL)
        .await
        .unwrap();
    let expires = record.expires_at.unwrap().as_millis();
    let item = raw_image(&client, &table, &id).await;
    assert_eq!(number(&item, "expires_at"), Some(expires));
    assert_eq!(number(&item, "ttl"), Some(expires / 1000 + 1));
    assert_eq!(number(&item, "gc_at"), Some(claim_expiry));
    assert!(claim_expiry < expires);
    assert_eq!(item.get("gc_bucket").unwrap().as_s().unwrap(), &bucket);
    assert!(!item.contains_key("claim_expires_at"));
    assert_eq!(item.get("variants").unwrap().as_s().unwrap(), "[]");

    // Linked: no expiry, no TTL (the TTL deleter must never remove it), not in the GC index.
    let offer = testing::random_offer();
    store
        .set_photos(&offer, std::slice::from_ref(&id), now, TTL)
        .await
        .unwrap();
    let item = raw_image(&client, &table, &id).await;
    for attr in ["expires_at", "ttl", "gc_bucket", "gc_at"] {
        assert!(!item.contains_key(attr), "a linked image has no {attr}");
    }
    assert_eq!(number(&item, "link_count"), Some(1));
    // A re-upload of a linked image keeps it that way.
    store
        .claim(&id, &Generation::random(), now, TTL, TTL)
        .await
        .unwrap();
    assert!(!raw_image(&client, &table, &id).await.contains_key("ttl"));

    // Unlinked again: back to an orphan.
    let later = now.plus(Duration::from_secs(60));
    assert!(store.delete_offer(&offer, later, TTL).await.unwrap());
    let item = raw_image(&client, &table, &id).await;
    let expires = later.plus(TTL).as_millis();
    assert_eq!(number(&item, "ttl"), Some((expires + 999) / 1000));
    assert_eq!(number(&item, "gc_at"), Some(expires));

    // The offer item keeps its ordered list and a version.
    let a = ready_image(&store, now).await.id;
    store
        .set_photos(&offer, &[a.clone(), id.clone()], later, TTL)
        .await
        .unwrap();
    let item = client
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(format!("offer#{offer}")))
        .key("sk", AttributeValue::S("offer".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    let photos: Vec<&str> = item["photos"]
        .as_l()
        .unwrap()
        .iter()
        .map(|v| v.as_s().unwrap().as_str())
        .collect();
    assert_eq!(photos, [a.as_str(), id.as_str()]);
    assert_eq!(number(&item, "version"), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_indexed_no_later_than_the_orphan_it_may_become_and_gc_walks_past_early_entries()
{
    let Some((store, client, table)) = store_and_client(
        "a_claim_is_indexed_no_later_than_the_orphan_it_may_become_and_gc_walks_past_early_entries",
    )
    .await
    else {
        return;
    };
    let minute = Duration::from_secs(60);
    // A claim TTL longer than the orphan TTL: the entry takes the orphan's.
    let id = testing::random_image_id();
    store
        .claim(&id, &Generation::random(), BASE, TTL, minute)
        .await
        .unwrap();
    let item = raw_image(&client, &table, &id).await;
    assert_eq!(number(&item, "gc_at"), Some(BASE.plus(minute).as_millis()));

    // Three fresh orphans whose entries (their claims', at +1 min) are early against their
    // expiry (+60 min), and one stale claim whose entry comes after theirs.
    let mut fresh = Vec::new();
    for _ in 0..3 {
        let id = testing::random_image_id();
        let Claim::New { generation } = store
            .claim(&id, &Generation::random(), BASE, minute, TTL)
            .await
            .unwrap()
        else {
            panic!("new");
        };
        store
            .complete(&id, &generation, ready(), BASE, TTL)
            .await
            .unwrap();
        fresh.push(id);
    }
    let stale = testing::random_image_id();
    let later = BASE.plus(Duration::from_secs(120));
    store
        .claim(&stale, &Generation::random(), later, minute, TTL)
        .await
        .unwrap();

    let now = BASE.plus(Duration::from_secs(600));
    let listed = store.expired(now, 1).await.unwrap();
    let ids: Vec<&ImageId> = listed.iter().map(|r| &r.id).collect();
    assert_eq!(
        ids,
        [&stale],
        "the walk skips entries that are not expired yet"
    );
    let listed = store.expired(now, 100).await.unwrap();
    assert!(listed.iter().all(|r| !fresh.contains(&r.id)));
    let all = store.expired(BASE.plus(TTL), 100).await.unwrap();
    assert_eq!(all.len(), 5, "{all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_lists_entries_of_the_bucket_layout_before_and_of_the_present_one() {
    let Some((store, client, table)) =
        store_and_client("gc_lists_entries_of_the_bucket_layout_before_and_of_the_present_one")
            .await
    else {
        return;
    };
    let minute = Duration::from_secs(60);
    let (old, new) = (testing::random_image_id(), testing::random_image_id());
    for id in [&old, &new] {
        store
            .claim(id, &Generation::random(), BASE, minute, TTL)
            .await
            .unwrap();
    }
    // An entry as the layout before wrote it (the first digit alone) is still found, by the
    // whole run and by its part.
    let legacy = format!("gc#{}", &old.as_str()[..1]);
    client
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(format!("image#{old}")))
        .key("sk", AttributeValue::S("image".into()))
        .update_expression("SET gc_bucket = :b")
        .expression_attribute_values(":b", AttributeValue::S(legacy))
        .send()
        .await
        .unwrap();
    let now = BASE.plus(Duration::from_secs(600));
    let listed = store.expired(now, 100).await.unwrap();
    for id in [&old, &new] {
        assert!(
            listed.iter().any(|r| &r.id == id),
            "{id} listed: {listed:?}"
        );
    }
    let digit = old.as_str()[..1]
        .parse::<char>()
        .unwrap()
        .to_digit(16)
        .unwrap();
    let part = JobPart::new(u64::from(digit % 4), 4).unwrap();
    let listed = store.expired_in(part, now, 100).await.unwrap();
    assert!(listed.iter().any(|r| r.id == old), "{part} lists {old}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_record_expires_by_ttl_alone_until_an_offer_drops_it() {
    let Some((store, client, table)) =
        store_and_client("a_created_record_expires_by_ttl_alone_until_an_offer_drops_it").await
    else {
        return;
    };
    let id = testing::random_image_id();
    let now = Timestamp::from_millis(1_700_000_000_500);
    let generation = imgest_core::domain::Generation::random();
    store
        .create_ready(&id, &generation, ready(), now, TTL, None)
        .await
        .unwrap()
        .expect("created");
    // Not in the GC index (the offer's link would delete the entry again): the TTL collects
    // it if no offer ever links it.
    let item = raw_image(&client, &table, &id).await;
    let expires = now.plus(TTL).as_millis();
    assert_eq!(number(&item, "ttl"), Some((expires + 999) / 1000));
    for attr in ["gc_bucket", "gc_at"] {
        assert!(!item.contains_key(attr), "a created record has no {attr}");
    }
    assert!(
        store
            .expired(now.plus(TTL), 1000)
            .await
            .unwrap()
            .iter()
            .all(|r| r.id != id)
    );

    // Linked, then dropped by its offer: an orphan in the GC index like any other.
    let offer = testing::random_offer();
    store
        .set_photos(&offer, std::slice::from_ref(&id), now, TTL)
        .await
        .unwrap();
    let later = now.plus(Duration::from_secs(60));
    store.delete_offer(&offer, later, TTL).await.unwrap();
    let item = raw_image(&client, &table, &id).await;
    assert!(item.contains_key("gc_at"));
    let listed = store.expired(later.plus(TTL), 1000).await.unwrap();
    assert!(listed.iter().any(|r| r.id == id));
}

/// A crawled photo created with its crawl's link: one write, counted and marked, no expiry;
/// the crawl's change writes its offer alone and leaves the image item as it is. Its crawl
/// replaced before it settled, the link is one too many, and both changes' offers are named
/// for the audit until a correction removes the mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_created_with_its_crawls_link_is_not_written_again_when_the_crawl_links_it() {
    let Some((store, client, table)) = store_and_client(
        "a_photo_created_with_its_crawls_link_is_not_written_again_when_the_crawl_links_it",
    )
    .await
    else {
        return;
    };
    let now = BASE;
    let client_id = imgest_core::domain::ClientId::parse("acme").unwrap();
    let offer = OfferKey::new(
        Tenant::Client(client_id),
        imgest_core::domain::OfferId::parse("offer-1").unwrap(),
    );
    let first = KeyedLink {
        offer: offer.clone(),
        key: "crawl-1".into(),
    };
    let id = testing::random_image_id();
    let created = store
        .create_ready(&id, &Generation::random(), ready(), now, TTL, Some(&first))
        .await
        .unwrap()
        .expect("created");
    assert_eq!((created.link_count, created.expires_at), (1, None));
    let item = raw_image(&client, &table, &id).await;
    for attr in ["ttl", "expires_at", "gc_bucket", "gc_at", "linked_by"] {
        assert!(!item.contains_key(attr), "a linked record has no {attr}");
    }
    assert_eq!(
        item.get("first_link").and_then(|v| v.as_s().ok()),
        Some(&format!("{offer}#crawl-1"))
    );
    assert_eq!(
        item.get("clients").and_then(|v| v.as_ss().ok()),
        Some(&vec!["acme".to_owned()])
    );

    let later = now.plus(Duration::from_secs(60));
    store
        .set_photos_keyed(&offer, std::slice::from_ref(&id), "crawl-1", later, TTL)
        .await
        .unwrap();
    assert_eq!(
        raw_image(&client, &table, &id).await,
        item,
        "not written again"
    );
    assert_eq!(store.get(&id).await.unwrap().unwrap().link_count, 1);

    // Replaced before it settled: the next crawl links it, and the count is one too high.
    let replaced = testing::random_image_id();
    store
        .create_ready(
            &replaced,
            &Generation::random(),
            ready(),
            now,
            TTL,
            Some(&first),
        )
        .await
        .unwrap()
        .expect("created");
    store
        .set_photos_keyed(
            &offer,
            &[id.clone(), replaced.clone()],
            "crawl-2",
            later,
            TTL,
        )
        .await
        .unwrap();
    let seen = store.get(&replaced).await.unwrap().unwrap();
    assert_eq!(seen.link_count, 2);
    assert_eq!(
        store.keyed_links(&replaced).await.unwrap(),
        vec![offer.clone()]
    );
    // The audit's correction removes both marks.
    assert!(
        store
            .correct_link_count(&seen, 1, later, TTL)
            .await
            .unwrap()
    );
    let item = raw_image(&client, &table, &replaced).await;
    assert!(!item.contains_key("first_link") && !item.contains_key("linked_by"));
    assert_eq!(
        store.keyed_links(&replaced).await.unwrap(),
        Vec::<OfferKey>::new()
    );
}

/// A keyed change cut short after linking its images and before writing the offer: its next
/// run finds the marks, counts those links as its own and writes the offer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_change_cut_short_after_its_links_counts_them_once_when_run_again() {
    let Some((store, client, table)) = store_and_client(
        "a_keyed_change_cut_short_after_its_links_counts_them_once_when_run_again",
    )
    .await
    else {
        return;
    };
    let now = BASE;
    let a = ready_image(&store, now).await.id;
    let b = ready_image(&store, now).await.id;
    let offer = testing::random_offer();
    // What the first run wrote before it stopped: `a` linked and marked.
    client
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(format!("image#{a}")))
        .key("sk", AttributeValue::S("image".into()))
        .update_expression(
            "SET link_count = link_count + :one, linked_by = :mark \
             REMOVE expires_at, #ttl, gc_bucket, gc_at",
        )
        .expression_attribute_names("#ttl", "ttl")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .expression_attribute_values(":mark", AttributeValue::S(format!("{offer}#crawl-1")))
        .send()
        .await
        .unwrap();

    let ids = [a.clone(), b.clone()];
    store
        .set_photos_keyed(&offer, &ids, "crawl-1", now, TTL)
        .await
        .unwrap();
    assert_eq!(store.photos(&offer).await.unwrap().unwrap(), ids);
    for r in store.get_many(&ids).await.unwrap() {
        assert_eq!((r.link_count, r.expires_at), (1, None), "{}", r.id);
    }

    // Any other change of a count removes the mark: a later run of the same change, after the
    // offer dropped `a`, links it again.
    let later = now.plus(Duration::from_secs(60));
    store
        .set_photos(&offer, std::slice::from_ref(&b), later, TTL)
        .await
        .unwrap();
    assert!(
        !raw_image(&client, &table, &a)
            .await
            .contains_key("linked_by")
    );
    store
        .set_photos_keyed(&offer, &ids, "crawl-1", later, TTL)
        .await
        .unwrap();
    assert_eq!(store.get(&a).await.unwrap().unwrap().link_count, 1);
}

/// SQS may deliver a crawl's finish twice at once: runs of one keyed change side by side count
/// each link once. With another offer linking the same images meanwhile, a count may end one
/// too high (that change removes the mark a second run would have used), never too low.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_one_keyed_change_side_by_side_count_each_link_once() {
    let Some(store) = store("runs_of_one_keyed_change_side_by_side_count_each_link_once").await
    else {
        return;
    };
    let now = BASE;
    for round in 0..3 {
        let ids = ready_images(&store, now, 4).await;
        let offer = testing::random_offer();
        let runs = (0..3).map(|_| store.set_photos_keyed(&offer, &ids, "crawl-1", now, TTL));
        for r in futures_util::future::join_all(runs).await {
            r.unwrap();
        }
        assert_eq!(store.photos(&offer).await.unwrap().unwrap(), ids);
        for r in store.get_many(&ids).await.unwrap() {
            assert_eq!(
                (r.link_count, r.expires_at),
                (1, None),
                "round {round}: {}",
                r.id
            );
        }
    }

    let ids = ready_images(&store, now, 4).await;
    let (offer, other) = (testing::random_offer(), testing::random_offer());
    let keyed = (0..3).map(|_| store.set_photos_keyed(&offer, &ids, "crawl-1", now, TTL));
    let plain = (0..2).map(|_| store.set_photos(&other, &ids, now, TTL));
    let (keyed, plain) = tokio::join!(
        futures_util::future::join_all(keyed),
        futures_util::future::join_all(plain)
    );
    for r in keyed.into_iter().chain(plain) {
        r.unwrap();
    }
    assert_eq!(store.photos(&offer).await.unwrap().unwrap(), ids);
    assert_eq!(store.photos(&other).await.unwrap().unwrap(), ids);
    for r in store.get_many(&ids).await.unwrap() {
        assert!(
            (2..=3).contains(&r.link_count),
            "{}: {} links",
            r.id,
            r.link_count
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_larger_than_one_transaction_keep_counts_right() {
    let Some(store) = store("changes_larger_than_one_transaction_keep_counts_right").await else {
        return;
    };
    let now = BASE;
    // Small numbers past the limit: moto copies the table for every item of a transaction.
    let first = ready_images(&store, now, 105).await;
    let offer = testing::random_offer();
    // 105 new links: 6 in a transaction of their own first, then the offer with 99.
    store.set_photos(&offer, &first, now, TTL).await.unwrap();
    assert_eq!(store.photos(&offer).await.unwrap().unwrap(), first);
    for r in store.get_many(&first).await.unwrap() {
        assert_eq!((r.link_count, r.expires_at), (1, None), "{}", r.id);
    }

    // Keep 5, drop 100, add 10: the offer with the 10 links and 89 unlinks, then 11 more.
    let mut second: Vec<ImageId> = first[100..].to_vec();
    second.extend(ready_images(&store, now, 10).await);
    let t1 = now.plus(Duration::from_secs(60));
    store.set_photos(&offer, &second, t1, TTL).await.unwrap();
    assert_eq!(store.photos(&offer).await.unwrap().unwrap(), second);
    for r in store.get_many(&first[..100]).await.unwrap() {
        assert_eq!(
            (r.link_count, r.expires_at, r.last_update),
            (0, Some(t1.plus(TTL)), t1),
            "dropped {}",
            r.id
        );
    }
    for r in store.get_many(&second).await.unwrap() {
        assert_eq!(
            (r.link_count, r.expires_at),
            (1, None),
            "kept or added {}",
            r.id
        );
    }

    // A big change refused for one unknown image changes nothing.
    let mut third = first.clone();
    third.push(testing::random_image_id());
    let r = store.set_photos(&offer, &third, t1, TTL).await;
    assert!(matches!(
        r,
        Err(imgest_core::ports::LinkError::UnknownImage(_))
    ));
    assert_eq!(store.photos(&offer).await.unwrap().unwrap(), second);
    for r in store.get_many(&first[..100]).await.unwrap() {
        assert_eq!(r.link_count, 0);
    }

    let t2 = t1.plus(Duration::from_secs(60));
    assert!(store.delete_offer(&offer, t2, TTL).await.unwrap());
    for r in store.get_many(&second).await.unwrap() {
        assert_eq!(
            (r.link_count, r.expires_at),
            (0, Some(t2.plus(TTL))),
            "{}",
            r.id
        );
    }
}

/// Racing writers. Needs a backend whose writes are atomic under concurrency: real DynamoDB,
/// or moto serving one request at a time. moto's threaded `moto_server` is not (a cancelled
/// transaction restores a snapshot of the whole table, and increments race), so this check
/// runs only when `IMGEST_TEST_DYNAMODB_CONCURRENCY=1`.
/// Whether the emulator applies concurrent writes atomically (moto's server does): the racing
/// tests are skipped elsewhere.
fn concurrency_tested(test: &str) -> bool {
    let on = std::env::var("IMGEST_TEST_DYNAMODB_CONCURRENCY").is_ok_and(|v| v == "1");
    if !on {
        eprintln!(
            "{test}: skipped, set IMGEST_TEST_DYNAMODB_CONCURRENCY=1 on a backend with atomic \
             concurrent writes"
        );
    }
    on
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_offer_changes_keep_link_counts_exact() {
    let test = "concurrent_offer_changes_keep_link_counts_exact";
    if !concurrency_tested(test) {
        return;
    }
    if let Some(store) = store(test).await {
        offer_changes_race(store).await;
    }
}

/// The same races over images that turn hot at their third link, while the writers cross it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_offer_changes_keep_a_hot_images_link_counts_exact() {
    let test = "concurrent_offer_changes_keep_a_hot_images_link_counts_exact";
    if !concurrency_tested(test) {
        return;
    }
    if let Some((store, _, _)) = hot_store(test, 3).await {
        offer_changes_race(store).await;
    }
}

/// Six offers link two images at once, race over one offer's list, then are all deleted at
/// once: every count follows the lists.
async fn offer_changes_race(store: Arc<DynamoStore>) {
    let now = BASE;
    let x = ready_image(&store, now).await.id;
    let y = ready_image(&store, now).await.id;
    let offers: Vec<_> = (0..6).map(|_| testing::random_offer()).collect();

    // Many offers linking the same images at once: every link counted.
    let tasks: Vec<_> = offers
        .iter()
        .map(|offer| {
            let (store, offer, ids) = (store.clone(), offer.clone(), vec![x.clone(), y.clone()]);
            tokio::spawn(async move { store.set_photos(&offer, &ids, now, TTL).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    for id in [&x, &y] {
        let r = store.get(id).await.unwrap().unwrap();
        assert_eq!((r.link_count, r.expires_at), (6, None));
    }

    // One offer rewritten by racing writers: whichever wins, counts match the final list.
    let contested = offers[0].clone();
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let store = store.clone();
            let offer = contested.clone();
            let ids = if i % 2 == 0 {
                vec![x.clone()]
            } else {
                vec![y.clone()]
            };
            tokio::spawn(async move { store.set_photos(&offer, &ids, now, TTL).await })
        })
        .collect();
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) | Err(imgest_core::ports::LinkError::Store(StoreError::Conflict(_))) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    let last = store.photos(&contested).await.unwrap().unwrap();
    assert_eq!(last.len(), 1);
    let count = |id: &ImageId| if last.contains(id) { 6 } else { 5 };
    for id in [&x, &y] {
        assert_eq!(store.get(id).await.unwrap().unwrap().link_count, count(id));
    }

    // All deleted at once: nothing links them any more.
    let later = now.plus(Duration::from_secs(60));
    let tasks: Vec<_> = offers
        .iter()
        .map(|offer| {
            let (store, offer) = (store.clone(), offer.clone());
            tokio::spawn(async move { store.delete_offer(&offer, later, TTL).await })
        })
        .collect();
    for task in tasks {
        assert!(task.await.unwrap().unwrap());
    }
    for id in [&x, &y] {
        let r = store.get(id).await.unwrap().unwrap();
        assert_eq!((r.link_count, r.expires_at), (0, Some(later.plus(TTL))));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_created_once_and_finished_idempotently() {
    let Some(store) = store("uploads_are_created_once_and_finished_idempotently").await else {
        return;
    };
    let record = UploadRecord {
        id: UploadId::random(),
        size: 1234,
        state: UploadState::Pending,
        created_at: BASE,
        expires_at: BASE.plus(TTL),
        owner: None,
    };
    assert_eq!(store.get_upload(&record.id).await.unwrap(), None);
    store.create_upload(&record).await.unwrap();
    assert_eq!(
        store.get_upload(&record.id).await.unwrap().as_ref(),
        Some(&record)
    );
    assert!(matches!(
        store.create_upload(&record).await,
        Err(StoreError::Conflict(_))
    ));

    let done = UploadState::Done {
        image_id: testing::random_image_id(),
        deduplicated: true,
    };
    store.finish_upload(&record.id, &done).await.unwrap();
    store.finish_upload(&record.id, &done).await.unwrap();
    let got = store.get_upload(&record.id).await.unwrap().unwrap();
    assert_eq!(got.state, done);
    assert_eq!(
        (got.size, got.created_at, got.expires_at),
        (1234, BASE, BASE.plus(TTL))
    );

    let failed = UploadState::Failed {
        kind: "unsupported_format".into(),
        request_id: "5f0c2a9e7b3d4a61".into(),
    };
    store.finish_upload(&record.id, &failed).await.unwrap();
    assert_eq!(
        store.get_upload(&record.id).await.unwrap().unwrap().state,
        failed
    );

    let missing = UploadId::random();
    assert!(matches!(
        store.finish_upload(&missing, &done).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.get_upload(&missing).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_are_saved_and_overwritten() {
    let Some(store) = store("checkpoints_are_saved_and_overwritten").await else {
        return;
    };
    let name = testing::unique_name("sweep");
    assert_eq!(store.load_checkpoint(&name).await.unwrap(), None);
    store.save_checkpoint(&name, "3f").await.unwrap();
    assert_eq!(
        store.load_checkpoint(&name).await.unwrap().as_deref(),
        Some("3f")
    );
    store.save_checkpoint(&name, "").await.unwrap();
    assert_eq!(
        store.load_checkpoint(&name).await.unwrap().as_deref(),
        Some("")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_is_a_backend_error_not_a_panic() {
    let Some(config) = testing::aws::sdk_config("a_missing_table_is_a_backend_error").await else {
        return;
    };
    let store = DynamoStore::new(Client::new(&config), testing::aws::unique_name("missing"));
    let r = store.get(&testing::random_image_id()).await;
    assert!(matches!(r, Err(StoreError::Backend { .. })), "{r:?}");
    let client = Client::new(&config);
    let table = testing::aws::unique_name("imgest");
    create_table(&client, &table).await.unwrap();
    assert!(matches!(
        create_table(&client, &table).await,
        Err(StoreError::Conflict(_))
    ));
}

/// The raw item at `pk` / `sk`. (Record and rate-limit keys start `rec#` and `ratelimit#`:
/// the ttl-cleanup function's stream filter and handler take only `image#` deletions.)
async fn raw_item(
    client: &Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> std::collections::HashMap<String, AttributeValue> {
    testing::aws::raw_item(client, table, pk, sk)
        .await
        .unwrap_or_else(|| panic!("item {pk} exists"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_and_rate_limit_items_expire_by_ttl_and_are_not_gc_candidates() {
    let Some((store, client, table)) =
        store_and_client("record_and_rate_limit_items_expire_by_ttl_and_are_not_gc_candidates")
            .await
    else {
        return;
    };
    // A record: deleted by TTL an hour after it expires (whole seconds, rounded up).
    let key = testing::unique_name("url");
    let expires_at = Timestamp::from_millis(1_700_000_060_500);
    let version = store
        .put_document("url", &key, "{}", None, expires_at, BASE)
        .await
        .unwrap();
    let item = raw_item(&client, &table, &format!("rec#url#{key}"), "rec").await;
    assert_eq!(
        number(&item, "version"),
        Some(i64::try_from(version).unwrap())
    );
    assert_eq!(number(&item, "expires_at"), Some(expires_at.as_millis()));
    assert_eq!(number(&item, "ttl"), Some(1_700_000_061 + 3600));
    for attr in ["gc_bucket", "gc_at"] {
        assert!(!item.contains_key(attr), "a record is never a GC candidate");
    }
    // A kind that could alias another kind's keys is refused.
    assert!(matches!(
        store
            .put_document("url#x", &key, "{}", None, expires_at, BASE)
            .await,
        Err(StoreError::Backend { .. })
    ));

    // A rate limit's bucket: deleted by TTL once it has left the window.
    let rate_client = testing::unique_name("client");
    let window = Duration::from_secs(60);
    store
        .acquire(&rate_client, 2, 10, window, BASE)
        .await
        .unwrap();
    // One-second buckets (a sixtieth of the window), zero-padded.
    let bucket = format!("b#{:013}#{:016}", 1000, BASE.as_millis() / 1000);
    let item = raw_item(
        &client,
        &table,
        &format!("ratelimit#{rate_client}"),
        &bucket,
    )
    .await;
    assert_eq!(number(&item, "g"), Some(2));
    let ttl = number(&item, "ttl").unwrap();
    assert!(
        ttl > BASE.plus(window).as_secs() && ttl <= BASE.plus(window * 2).as_secs(),
        "{ttl}"
    );
    assert!(!item.contains_key("gc_bucket"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_over_the_item_size_limit_is_item_too_large_and_never_retried() {
    let Some((store, _, _)) =
        store_and_client("a_write_over_the_item_size_limit_is_item_too_large").await
    else {
        return;
    };
    // Random letters and digits: deflated, still well over 400 KB.
    let body: String = std::iter::repeat_with(fastrand::alphanumeric)
        .take(700_000)
        .collect();
    let key = testing::unique_name("big");
    let r = store
        .put_document("url", &key, &body, None, BASE.plus(TTL), BASE)
        .await;
    match r {
        Err(e) => {
            assert_eq!(e.kind(), "item_too_large", "{e}");
            assert!(!e.is_retryable());
        }
        Ok(v) => panic!("a 700 KB record was written (version {v})"),
    }
}

/// A series is spread over shards: its adds land on several partitions, and a read sums them
/// with what the series' unsharded partition holds from before the shards.
#[tokio::test]
async fn a_counter_series_spreads_its_adds_over_shards_and_reads_its_unsharded_partition_too() {
    let Some((store, client, table)) = store_and_client(
        "a_counter_series_spreads_its_adds_over_shards_and_reads_its_unsharded_partition_too",
    )
    .await
    else {
        return;
    };
    let key = testing::aws::unique_name("cdn");
    let live = BASE.plus(Duration::from_secs(3600));
    // What an earlier release added, on the series' one partition.
    client
        .put_item()
        .table_name(&table)
        .item("pk", AttributeValue::S(format!("ctr#host#{key}")))
        .item("sk", AttributeValue::S(format!("b#{:019}", 5)))
        .item("c_answered", AttributeValue::N("2".into()))
        .item(
            "expires_at",
            AttributeValue::N(live.as_millis().to_string()),
        )
        .send()
        .await
        .unwrap();
    let adds = 2 * imgest_aws::dynamodb::COUNTER_SHARDS as u64;
    for _ in 0..adds {
        store
            .add_counts("host", &key, 5, &[("answered", 1)], live, BASE)
            .await
            .unwrap();
    }
    let read = store.read_counts("host", &key, 0, 10, BASE).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].bucket, 5);
    assert_eq!(read[0].counts["answered"], adds + 2);
    // The adds are on the shards' partitions, each of them.
    let partitions = client
        .scan()
        .table_name(&table)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default()
        .iter()
        .filter_map(|item| item.get("pk")?.as_s().ok().cloned())
        .filter(|pk| pk.starts_with(&format!("ctr#host#{key}#s")))
        .count();
    assert_eq!(partitions, imgest_aws::dynamodb::COUNTER_SHARDS as usize);
}

/// The delta items of hot image `id` (`linkdelta#{id}#{k}`), read consistently: their deltas.
async fn link_shards(client: &Client, table: &str, id: &ImageId) -> Vec<i64> {
    let mut deltas = Vec::new();
    for shard in 0..imgest_aws::dynamodb::LINK_SHARDS {
        let pk = format!("linkdelta#{id}#{shard}");
        if let Some(item) = testing::aws::raw_item(client, table, &pk, "linkdelta").await {
            deltas.push(number(&item, "delta").unwrap());
        }
    }
    deltas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_images_changes_go_to_its_shards_and_its_count_stays_exact() {
    let Some((store, client, table)) = hot_store(
        "a_hot_images_changes_go_to_its_shards_and_its_count_stays_exact",
        3,
    )
    .await
    else {
        return;
    };
    let now = BASE;
    let record = ready_image(&store, now).await;
    let x = record.id.clone();
    let dealer = testing::random_client();
    let offers: Vec<OfferKey> = (0..12)
        .map(|_| OfferKey::new(Tenant::Client(dealer.clone()), testing::random_offer_id()))
        .collect();
    // Three links on the item itself: then it is hot.
    for offer in &offers[..3] {
        store
            .set_photos(offer, std::slice::from_ref(&x), now, TTL)
            .await
            .unwrap();
    }
    assert!(!raw_image(&client, &table, &x).await.contains_key("hot"));

    // Nine more at once, some of them a crawl's keyed changes: each on a shard, in its
    // offer's transaction; the item is written once (turning hot), never by a link.
    let tasks: Vec<_> = offers[3..]
        .iter()
        .enumerate()
        .map(|(i, offer)| {
            let (store, offer, ids) = (store.clone(), offer.clone(), vec![x.clone()]);
            tokio::spawn(async move {
                if i % 3 == 0 {
                    store
                        .set_photos_keyed(&offer, &ids, "crawl-1", now, TTL)
                        .await
                } else {
                    store.set_photos(&offer, &ids, now, TTL).await
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let item = raw_image(&client, &table, &x).await;
    assert!(item.contains_key("hot"));
    assert_eq!(number(&item, "link_count"), Some(3));
    let deltas = link_shards(&client, &table, &x).await;
    assert_eq!(deltas.len(), imgest_aws::dynamodb::LINK_SHARDS as usize);
    assert_eq!(deltas.iter().sum::<i64>(), 9);
    let r = store.get(&x).await.unwrap().unwrap();
    assert_eq!((r.link_count, r.expires_at), (12, None));
    assert_eq!(
        store.get_many(std::slice::from_ref(&x)).await.unwrap()[0].link_count,
        12
    );

    // Another client's offer: the item is written (the client is added), the total exact.
    let other = testing::random_offer();
    store
        .set_photos(&other, std::slice::from_ref(&x), now, TTL)
        .await
        .unwrap();
    assert_eq!(
        number(&raw_image(&client, &table, &x).await, "link_count"),
        Some(4)
    );
    assert_eq!(store.get(&x).await.unwrap().unwrap().link_count, 13);
    assert_eq!(store.linking_clients(&x).await.unwrap().len(), 2);

    // Every offer leaves at once: the last unlink cools it into an orphan, shards gone, and
    // GC may collect it after the orphan window.
    let later = now.plus(Duration::from_secs(60));
    let tasks: Vec<_> = offers
        .iter()
        .chain([&other])
        .map(|offer| {
            let (store, offer) = (store.clone(), offer.clone());
            tokio::spawn(async move { store.delete_offer(&offer, later, TTL).await })
        })
        .collect();
    for task in tasks {
        assert!(task.await.unwrap().unwrap());
    }
    let r = store.get(&x).await.unwrap().unwrap();
    assert_eq!((r.link_count, r.expires_at), (0, Some(later.plus(TTL))));
    let item = raw_image(&client, &table, &x).await;
    assert!(!item.contains_key("hot"), "{item:?}");
    assert!(link_shards(&client, &table, &x).await.is_empty());
    assert!(
        !store
            .delete_if_expired(&x, &record.generation, later)
            .await
            .unwrap()
    );
    assert!(
        store
            .delete_if_expired(&x, &record.generation, later.plus(TTL))
            .await
            .unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_image_left_with_no_link_is_cooled_into_an_orphan_by_a_read() {
    let Some((store, client, table)) = hot_store(
        "a_hot_image_left_with_no_link_is_cooled_into_an_orphan_by_a_read",
        3,
    )
    .await
    else {
        return;
    };
    let now = BASE;
    let x = ready_image(&store, now).await.id;
    let offers: Vec<OfferKey> = (0..4).map(|_| testing::random_offer()).collect();
    for offer in &offers {
        store
            .set_photos(offer, std::slice::from_ref(&x), now, TTL)
            .await
            .unwrap();
    }
    assert!(raw_image(&client, &table, &x).await.contains_key("hot"));
    // A shard one link higher than its offers: the last unlink leaves one link, too many to
    // cool. Then that link goes too, as if the last unlink's fold had failed.
    let shard = |delta: i64| {
        client
            .update_item()
            .table_name(&table)
            .key("pk", AttributeValue::S(format!("linkdelta#{x}#0")))
            .key("sk", AttributeValue::S("linkdelta".into()))
            .update_expression("ADD delta :d")
            .expression_attribute_values(":d", AttributeValue::N(delta.to_string()))
            .send()
    };
    shard(1).await.unwrap();
    let later = now.plus(Duration::from_secs(60));
    for offer in &offers {
        assert!(store.delete_offer(offer, later, TTL).await.unwrap());
    }
    assert!(raw_image(&client, &table, &x).await.contains_key("hot"));
    shard(-1).await.unwrap();

    // A read finds no link left and cools it into the orphan the last unlink would have made.
    let r = store.get(&x).await.unwrap().unwrap();
    assert_eq!((r.link_count, r.expires_at), (0, Some(later.plus(TTL))));
    let item = raw_image(&client, &table, &x).await;
    assert!(!item.contains_key("hot") && !item.contains_key("hot_grace"));
    assert!(link_shards(&client, &table, &x).await.is_empty());
}
