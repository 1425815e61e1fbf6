//! The `Records` contract.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{BASE, mins, secs, unique_name};
use imgest_core::domain::Timestamp;
use imgest_core::ports::{
    CountBucket, DocumentPage, Documents, MemberPage, StoreError, StoredDocument,
};

contract_suite!($ documents_contract_tests, documents, Arc<dyn Documents>;
    an_absent_record_reads_as_none,
    put_without_a_version_creates_the_document,
    put_with_the_current_version_replaces_and_moves_the_version_on,
    put_with_a_stale_version_conflicts_and_changes_nothing,
    put_without_a_version_over_a_record_conflicts,
    an_expired_record_is_absent_and_can_be_created_again,
    kinds_are_separate_namespaces,
    bodies_of_any_length_read_back_as_written,
    a_peek_reads_what_was_written_and_never_an_expired_document,
    concurrent_writers_of_one_version_have_exactly_one_winner,
    a_walk_returns_every_live_record_of_its_kind_once,
    a_walk_sees_a_record_changed_during_it_once,
    a_walk_refuses_a_cursor_it_did_not_give,
    members_are_listed_in_name_order_a_page_at_a_time_and_groups_are_apart,
    a_member_put_again_is_replaced_and_deleted_or_expired_ones_are_not_listed,
    members_stay_out_of_a_walk_of_their_kind,
    a_walk_of_members_may_start_after_any_name,
    member_bodies_of_any_length_read_back_as_written,
    counts_add_up_per_bucket_and_are_read_in_bucket_order,
    concurrent_adds_to_one_bucket_all_count,
    expired_buckets_and_bad_names_are_left_out_or_refused,
);

/// The kind the checks use (each check uses fresh keys).
const KIND: &str = "contract";
/// Records written by the checks expire this long after `BASE`, unless a check says otherwise.
const LIFETIME: std::time::Duration = mins(60);

async fn get(r: &dyn Documents, kind: &str, key: &str, now: Timestamp) -> Option<StoredDocument> {
    r.get_document(kind, key, now).await.unwrap()
}

async fn put(
    r: &dyn Documents,
    key: &str,
    body: &str,
    expected: Option<u64>,
    now: Timestamp,
) -> Result<u64, StoreError> {
    r.put_document(KIND, key, body, expected, BASE.plus(LIFETIME), now)
        .await
}

fn document(body: &str, version: u64) -> Option<StoredDocument> {
    Some(StoredDocument {
        body: body.to_owned(),
        version,
    })
}

/// Pages of a walk a check follows at most: far more than any check's documents need, even with
/// the pages a DynamoDB scan of a table shared with other checks fills with their items.
const MAX_PAGES: usize = 100_000;

/// One page of a walk of `kind`, checked against `limit`.
async fn page(
    r: &dyn Documents,
    kind: &str,
    cursor: Option<&str>,
    limit: usize,
    now: Timestamp,
) -> DocumentPage {
    let page = r.scan_documents(kind, cursor, limit, now).await.unwrap();
    assert!(
        page.documents.len() <= limit,
        "{} > {limit}",
        page.documents.len()
    );
    page
}

/// Every document a walk of `kind` at `now` returns, `limit` a page, in the order returned;
/// `between` runs after the first page.
async fn walk(
    r: &dyn Documents,
    kind: &str,
    limit: usize,
    now: Timestamp,
    between: impl AsyncFnOnce(),
) -> Vec<(String, StoredDocument)> {
    let first = page(r, kind, None, limit, now).await;
    between().await;
    let (mut seen, mut cursor) = (first.documents, first.next);
    for _ in 0..MAX_PAGES {
        let Some(at) = cursor else {
            return seen;
        };
        let next = page(r, kind, Some(&at), limit, now).await;
        seen.extend(next.documents);
        cursor = next.next;
    }
    panic!("the walk of {kind} did not end within {MAX_PAGES} pages");
}

/// The walk's documents by key, each key seen once.
fn by_key(seen: Vec<(String, StoredDocument)>) -> BTreeMap<String, StoredDocument> {
    let mut keys = BTreeMap::new();
    for (key, document) in seen {
        let again = keys.insert(key.clone(), document);
        assert!(again.is_none(), "{key:?} was returned twice");
    }
    keys
}

fn assert_conflict(r: Result<u64, StoreError>) {
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
}

pub async fn an_absent_record_reads_as_none(documents: Arc<dyn Documents>) {
    let r = documents.as_ref();
    assert_eq!(get(r, KIND, &unique_name("absent"), BASE).await, None);
}

pub async fn put_without_a_version_creates_the_document(documents: Arc<dyn Documents>) {
    let (r, key) = (documents.as_ref(), unique_name("create"));
    let v = put(r, &key, r#"{"n":1}"#, None, BASE).await.unwrap();
    assert_eq!(get(r, KIND, &key, BASE).await, document(r#"{"n":1}"#, v));
    // Read back just before it expires, too.
    let last = BASE.plus(LIFETIME).minus(secs(1));
    assert_eq!(get(r, KIND, &key, last).await, document(r#"{"n":1}"#, v));
}

/// A peek may lag the last writes on a live service (not on SQLite or the emulator, whose
/// reads are all consistent), but it reads the same document the same way, expiry included.
pub async fn a_peek_reads_what_was_written_and_never_an_expired_document(
    documents: Arc<dyn Documents>,
) {
    let (r, key) = (documents.as_ref(), unique_name("peek"));
    assert_eq!(r.peek_document(KIND, &key, BASE).await.unwrap(), None);
    let long = "x".repeat(2000);
    let v = put(r, &key, &long, None, BASE).await.unwrap();
    assert_eq!(
        r.peek_document(KIND, &key, BASE).await.unwrap(),
        document(&long, v)
    );
    let expired = BASE.plus(LIFETIME);
    assert_eq!(r.peek_document(KIND, &key, expired).await.unwrap(), None);
}

pub async fn put_with_the_current_version_replaces_and_moves_the_version_on(
    documents: Arc<dyn Documents>,
) {
    let (r, key) = (documents.as_ref(), unique_name("replace"));
    let v1 = put(r, &key, "one", None, BASE).await.unwrap();
    let v2 = put(r, &key, "two", Some(v1), BASE).await.unwrap();
    assert!(v2 > v1, "{v2} > {v1}");
    assert_eq!(get(r, KIND, &key, BASE).await, document("two", v2));
    let later = BASE.plus(secs(5));
    let v3 = put(r, &key, "three", Some(v2), later).await.unwrap();
    assert!(v3 > v2, "{v3} > {v2}");
    assert_eq!(get(r, KIND, &key, later).await, document("three", v3));
}

/// Adapters may store long bodies differently (compressed); what is read is what was written,
/// across changes between short and long.
pub async fn bodies_of_any_length_read_back_as_written(documents: Arc<dyn Documents>) {
    let (r, key) = (documents.as_ref(), unique_name("lengths"));
    let long: String = (0..400)
        .map(|i| format!("{{\"url\":\"https://photos.example/{i}/é.jpg\"}}"))
        .collect();
    let v1 = put(r, &key, "short", None, BASE).await.unwrap();
    let v2 = put(r, &key, &long, Some(v1), BASE).await.unwrap();
    assert_eq!(get(r, KIND, &key, BASE).await, document(&long, v2));
    let v3 = put(r, &key, "short again", Some(v2), BASE).await.unwrap();
    assert_eq!(get(r, KIND, &key, BASE).await, document("short again", v3));
}

pub async fn put_with_a_stale_version_conflicts_and_changes_nothing(documents: Arc<dyn Documents>) {
    let (r, key) = (documents.as_ref(), unique_name("stale"));
    let v1 = put(r, &key, "one", None, BASE).await.unwrap();
    let v2 = put(r, &key, "two", Some(v1), BASE).await.unwrap();
    assert_conflict(put(r, &key, "stale", Some(v1), BASE).await);
    assert_conflict(put(r, &key, "made up", Some(v2 + 1000), BASE).await);
    assert_eq!(get(r, KIND, &key, BASE).await, document("two", v2));
    // A version of a document that was never written is stale too.
    assert_conflict(put(r, &unique_name("never"), "x", Some(v1), BASE).await);
}

pub async fn put_without_a_version_over_a_record_conflicts(documents: Arc<dyn Documents>) {
    let (r, key) = (documents.as_ref(), unique_name("exists"));
    let v = put(r, &key, "first", None, BASE).await.unwrap();
    assert_conflict(put(r, &key, "second", None, BASE.plus(secs(1))).await);
    assert_eq!(
        get(r, KIND, &key, BASE.plus(secs(1))).await,
        document("first", v)
    );
}

pub async fn an_expired_record_is_absent_and_can_be_created_again(documents: Arc<dyn Documents>) {
    let (r, key) = (documents.as_ref(), unique_name("expiry"));
    let expires_at = BASE.plus(secs(10));
    let v1 = r
        .put_document(KIND, &key, "old", None, expires_at, BASE)
        .await
        .unwrap();
    let before = expires_at.minus(std::time::Duration::from_millis(1));
    assert_eq!(get(r, KIND, &key, before).await, document("old", v1));
    // Expired at `expires_at` itself.
    assert_eq!(get(r, KIND, &key, expires_at).await, None);
    let after = BASE.plus(secs(20));
    assert_eq!(get(r, KIND, &key, after).await, None);
    // Its version no longer counts: a writer that read it before it expired conflicts.
    assert_conflict(
        r.put_document(KIND, &key, "late", Some(v1), after.plus(LIFETIME), after)
            .await,
    );
    let v2 = r
        .put_document(KIND, &key, "new", None, after.plus(LIFETIME), after)
        .await
        .unwrap();
    assert!(v2 > v1, "a recreated document's version {v2} follows {v1}");
    assert_eq!(get(r, KIND, &key, after).await, document("new", v2));
    assert_conflict(
        r.put_document(KIND, &key, "again", None, after.plus(LIFETIME), after)
            .await,
    );
}

pub async fn kinds_are_separate_namespaces(documents: Arc<dyn Documents>) {
    let (r, key) = (documents.as_ref(), unique_name("kinds"));
    let (one, two) = (unique_name("kind-a"), unique_name("kind-b"));
    let expires = BASE.plus(LIFETIME);
    let v1 = r
        .put_document(&one, &key, "in one", None, expires, BASE)
        .await
        .unwrap();
    assert_eq!(get(r, &two, &key, BASE).await, None);
    let v2 = r
        .put_document(&two, &key, "in two", None, expires, BASE)
        .await
        .unwrap();
    assert_eq!(get(r, &one, &key, BASE).await, document("in one", v1));
    assert_eq!(get(r, &two, &key, BASE).await, document("in two", v2));
    // Writing one kind's document leaves the other's alone.
    let v3 = r
        .put_document(&two, &key, "two again", Some(v2), expires, BASE)
        .await
        .unwrap();
    assert_eq!(get(r, &one, &key, BASE).await, document("in one", v1));
    assert_eq!(get(r, &two, &key, BASE).await, document("two again", v3));
}

pub async fn concurrent_writers_of_one_version_have_exactly_one_winner(
    documents: Arc<dyn Documents>,
) {
    const WRITERS: usize = 12;
    let key = unique_name("race");
    let v1 = put(documents.as_ref(), &key, "start", None, BASE)
        .await
        .unwrap();
    let writes = (0..WRITERS).map(|i| {
        let (documents, key) = (documents.clone(), key.clone());
        async move {
            put(
                documents.as_ref(),
                &key,
                &format!("writer {i}"),
                Some(v1),
                BASE,
            )
            .await
        }
    });
    let results = futures_util::future::join_all(writes).await;
    let winners: Vec<(usize, u64)> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r {
            Ok(v) => Some((i, *v)),
            Err(StoreError::Conflict(_)) => None,
            Err(e) => panic!("writer {i}: {e}"),
        })
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let (i, v) = winners[0];
    assert_eq!(
        get(documents.as_ref(), KIND, &key, BASE).await,
        document(&format!("writer {i}"), v)
    );

    // Racing creators of a new document: one wins too.
    let key = unique_name("race-new");
    let creates = (0..WRITERS).map(|i| {
        let (documents, key) = (documents.clone(), key.clone());
        async move {
            put(
                documents.as_ref(),
                &key,
                &format!("creator {i}"),
                None,
                BASE,
            )
            .await
        }
    });
    let results = futures_util::future::join_all(creates).await;
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Ok(_) | Err(StoreError::Conflict(_)))),
        "{results:?}"
    );
}

pub async fn a_walk_returns_every_live_record_of_its_kind_once(documents: Arc<dyn Documents>) {
    let r = documents.as_ref();
    let (kind, other) = (unique_name("walked"), unique_name("not-walked"));
    let now = BASE.plus(mins(1));
    let write = async |kind: &str, key: &str, body: &str, expected: Option<u64>, expires_at| {
        r.put_document(kind, key, body, expected, expires_at, BASE)
            .await
            .unwrap()
    };
    let long: String = (0..100)
        .map(|i| format!("{{\"url\":\"https://photos.example/{i}.jpg\"}}"))
        .collect();
    let lives = BASE.plus(LIFETIME);
    let mut expected = BTreeMap::new();
    for i in 0..7 {
        // Keys that sort apart from the order they are written in, one long body (stored
        // deflated where an adapter does), and one document written twice.
        let key = format!("{}-{i}", 7 - i);
        let body = if i == 3 {
            long.clone()
        } else {
            format!("{{\"n\":{i}}}")
        };
        let mut v = write(&kind, &key, &body, None, lives).await;
        let mut body = body;
        if i == 5 {
            v = write(&kind, &key, "second", Some(v), lives).await;
            body = "second".to_owned();
        }
        expected.insert(key, StoredDocument { body, version: v });
    }
    // Expired by `now`, or exactly at it; and documents of another kind under the same keys.
    for (key, expires_at) in [("expired-a", BASE.plus(secs(10))), ("expired-b", now)] {
        write(&kind, key, "old", None, expires_at).await;
    }
    for key in expected.keys() {
        write(&other, key, "other kind", None, lives).await;
    }

    for limit in [1, 2, 3, 1000] {
        let seen = by_key(walk(r, &kind, limit, now, async || {}).await);
        assert_eq!(seen, expected, "limit {limit}");
    }
    // Once they have expired, none.
    assert!(walk(r, &kind, 3, lives, async || {}).await.is_empty());
    // A kind with no documents: an empty walk.
    let none = unique_name("empty");
    assert!(walk(r, &none, 3, now, async || {}).await.is_empty());
}

pub async fn a_walk_sees_a_record_changed_during_it_once(documents: Arc<dyn Documents>) {
    let r = documents.as_ref();
    let kind = unique_name("changing");
    let write = async |key: &str, body: &str, expected: Option<u64>| {
        r.put_document(&kind, key, body, expected, BASE.plus(LIFETIME), BASE)
            .await
            .unwrap()
    };
    let mut versions = BTreeMap::new();
    for i in 0..6 {
        let key = format!("k{i}");
        versions.insert(key.clone(), write(&key, "before", None).await);
    }
    let seen = by_key(
        walk(r, &kind, 2, BASE, async || {
            // Every document is replaced after the first page, and one is added.
            for (key, v) in &versions {
                write(key, "after", Some(*v)).await;
            }
            write("added", "new", None).await;
        })
        .await,
    );
    for key in versions.keys() {
        let document = seen
            .get(key)
            .unwrap_or_else(|| panic!("{key} was not seen"));
        assert!(
            document.body == "before" || document.body == "after",
            "{key}: {document:?}"
        );
    }
    // The added document may or may not be seen; nothing else is.
    assert!(
        seen.keys()
            .all(|k| versions.contains_key(k) || k == "added"),
        "{seen:?}"
    );
}

pub async fn a_walk_refuses_a_cursor_it_did_not_give(documents: Arc<dyn Documents>) {
    let r = documents.as_ref();
    let kind = unique_name("cursor");
    for cursor in ["not a cursor", "", "[1,2,3]"] {
        let walked = r.scan_documents(&kind, Some(cursor), 10, BASE).await;
        assert!(
            matches!(walked, Err(ref e) if !e.is_retryable()),
            "{cursor:?}: {walked:?}"
        );
    }
}

/// Every member of `group` at `now`, `limit` a page, each page checked against `limit`.
async fn members(
    r: &dyn Documents,
    group: &str,
    limit: usize,
    now: Timestamp,
) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page: MemberPage = r
            .list_members(KIND, group, cursor.as_deref(), limit, now)
            .await
            .unwrap();
        assert!(
            page.members.len() <= limit,
            "{} > {limit}",
            page.members.len()
        );
        seen.extend(page.members);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return seen,
        }
    }
    panic!("the members of {group} did not end within {MAX_PAGES} pages");
}

async fn put_member(
    r: &dyn Documents,
    group: &str,
    member: &str,
    body: &str,
    expires_at: Timestamp,
) {
    r.put_member(KIND, group, member, body, expires_at, BASE)
        .await
        .unwrap();
}

pub async fn members_are_listed_in_name_order_a_page_at_a_time_and_groups_are_apart(
    documents: Arc<dyn Documents>,
) {
    let r = documents.as_ref();
    let (group, other) = (unique_name("group"), unique_name("group"));
    let names: Vec<String> = (0..7)
        .rev()
        .map(|i| format!("{i:02}/acme/offer {i}"))
        .collect();
    for name in &names {
        put_member(
            r,
            &group,
            name,
            &format!("{{\"n\":\"{name}\"}}"),
            BASE.plus(LIFETIME),
        )
        .await;
    }
    put_member(r, &other, "00/acme/offer 0", "{}", BASE.plus(LIFETIME)).await;
    let mut sorted = names.clone();
    sorted.sort();
    for limit in [1, 3, 7, 100] {
        let seen = members(r, &group, limit, BASE).await;
        let seen_names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(seen_names, sorted, "{limit} a page");
        for (name, body) in &seen {
            assert_eq!(body, &format!("{{\"n\":\"{name}\"}}"));
        }
    }
    assert_eq!(members(r, &other, 10, BASE).await.len(), 1);
    assert!(members(r, &unique_name("group"), 10, BASE).await.is_empty());
    // A cursor of another group's walk is refused, not followed.
    let page = r.list_members(KIND, &group, None, 1, BASE).await.unwrap();
    let cursor = page.next.expect("a next page");
    let refused = r.list_members(KIND, &other, Some(&cursor), 1, BASE).await;
    assert!(
        matches!(refused, Err(StoreError::BadCursor(_))),
        "{refused:?}"
    );
}

pub async fn a_member_put_again_is_replaced_and_deleted_or_expired_ones_are_not_listed(
    documents: Arc<dyn Documents>,
) {
    let r = documents.as_ref();
    let group = unique_name("group");
    put_member(r, &group, "a", "1", BASE.plus(LIFETIME)).await;
    put_member(r, &group, "a", "2", BASE.plus(LIFETIME)).await;
    put_member(r, &group, "b", "1", BASE.plus(LIFETIME)).await;
    put_member(r, &group, "c", "1", BASE.plus(secs(10))).await;
    put_member(r, &group, "d", "1", BASE.plus(LIFETIME)).await;
    let all = members(r, &group, 10, BASE).await;
    assert_eq!(
        all,
        [("a", "2"), ("b", "1"), ("c", "1"), ("d", "1")].map(|(n, b)| (n.to_owned(), b.to_owned()))
    );
    r.delete_members(KIND, &group, &["b".to_owned(), "never".to_owned()])
        .await
        .unwrap();
    r.delete_members(KIND, &group, &[]).await.unwrap();
    let later = members(r, &group, 10, BASE.plus(secs(10))).await;
    assert_eq!(
        later,
        [("a", "2"), ("d", "1")].map(|(n, b)| (n.to_owned(), b.to_owned()))
    );
    // More than one request's worth of deletions (DynamoDB takes 25 a request).
    let many: Vec<String> = (0..60).map(|i| format!("m{i:03}")).collect();
    for name in &many {
        put_member(r, &group, name, "x", BASE.plus(LIFETIME)).await;
    }
    r.delete_members(KIND, &group, &many).await.unwrap();
    assert_eq!(members(r, &group, 100, BASE.plus(secs(10))).await.len(), 2);
}

/// A walk may start after a name that is not a member (the results' feed starts every shard of
/// a day at one place in their merged order).
pub async fn a_walk_of_members_may_start_after_any_name(documents: Arc<dyn Documents>) {
    let r = documents.as_ref();
    let group = unique_name("group");
    for name in ["b", "d", "f"] {
        put_member(r, &group, name, "{}", BASE.plus(LIFETIME)).await;
    }
    for (after, want) in [
        ("a", &["b", "d", "f"][..]),
        ("c", &["d", "f"][..]),
        ("d", &["f"][..]),
        ("g", &[][..]),
    ] {
        let mut seen = Vec::new();
        let mut cursor = Some(imgest_core::ports::walk_cursor(&group, after));
        for _ in 0..MAX_PAGES {
            let page = r
                .list_members(KIND, &group, cursor.as_deref(), 1, BASE)
                .await
                .unwrap();
            seen.extend(page.members.into_iter().map(|(name, _)| name));
            cursor = page.next;
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(seen, want, "after {after:?}");
    }
}

/// Members' bodies as long as a results' feed entry (the DynamoDB adapter deflates long ones).
pub async fn member_bodies_of_any_length_read_back_as_written(documents: Arc<dyn Documents>) {
    let r = documents.as_ref();
    let group = unique_name("group");
    let long: String = (0..40)
        .map(|i| format!("{{\"url\":\"https://img.example/offer/{i}.jpg\",\"status\":\"ok\"}},"))
        .collect();
    let bodies = ["{}".to_owned(), "x".repeat(512), "y".repeat(513), long];
    for (i, body) in bodies.iter().enumerate() {
        put_member(r, &group, &format!("{i}"), body, BASE.plus(LIFETIME)).await;
    }
    let seen: Vec<String> = members(r, &group, 10, BASE)
        .await
        .into_iter()
        .map(|(_, body)| body)
        .collect();
    assert_eq!(seen, bodies);
}

pub async fn members_stay_out_of_a_walk_of_their_kind(documents: Arc<dyn Documents>) {
    let r = documents.as_ref();
    let kind = unique_name("kind").replace('-', "_");
    r.put_member(&kind, "g", "m", "{}", BASE.plus(LIFETIME), BASE)
        .await
        .unwrap();
    r.put_document(&kind, "g", "{}", None, BASE.plus(LIFETIME), BASE)
        .await
        .unwrap();
    let seen = by_key(walk(r, &kind, 10, BASE, async || {}).await);
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["g"]);
    assert_eq!(members(r, "g", 10, BASE).await, []);
}

fn bucket(bucket: i64, counts: &[(&str, u64)]) -> CountBucket {
    CountBucket {
        bucket,
        counts: counts.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect(),
    }
}

pub async fn counts_add_up_per_bucket_and_are_read_in_bucket_order(documents: Arc<dyn Documents>) {
    let (r, key) = (documents.as_ref(), unique_name("series"));
    let live = BASE.plus(LIFETIME);
    let add = async |b: i64, counts: &[(&str, u64)]| {
        r.add_counts(KIND, &key, b, counts, live, BASE)
            .await
            .unwrap();
    };
    add(12, &[("answered", 2)]).await;
    add(9, &[("answered", 1), ("failed", 4)]).await;
    add(12, &[("answered", 3), ("failed", 1)]).await;
    add(100, &[("answered", 1)]).await;
    assert_eq!(
        r.read_counts(KIND, &key, 0, 99, BASE).await.unwrap(),
        [
            bucket(9, &[("answered", 1), ("failed", 4)]),
            bucket(12, &[("answered", 5), ("failed", 1)]),
        ]
    );
    assert_eq!(
        r.read_counts(KIND, &key, 12, 100, BASE).await.unwrap(),
        [
            bucket(12, &[("answered", 5), ("failed", 1)]),
            bucket(100, &[("answered", 1)]),
        ]
    );
    assert!(
        r.read_counts(KIND, &key, 13, 99, BASE)
            .await
            .unwrap()
            .is_empty()
    );
    // Series are apart by kind and key.
    assert!(
        r.read_counts(KIND, &unique_name("series"), 0, 200, BASE)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        r.read_counts("other", &key, 0, 200, BASE)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn concurrent_adds_to_one_bucket_all_count(documents: Arc<dyn Documents>) {
    let key = unique_name("series");
    let adds = (0..32).map(|i| {
        let (documents, key) = (Arc::clone(&documents), key.clone());
        async move {
            documents
                .add_counts(
                    KIND,
                    &key,
                    5,
                    &[("answered", 1), ("failed", i % 2)],
                    BASE.plus(LIFETIME),
                    BASE,
                )
                .await
                .unwrap();
        }
    });
    futures_util::future::join_all(adds).await;
    assert_eq!(
        documents.read_counts(KIND, &key, 5, 5, BASE).await.unwrap(),
        [bucket(5, &[("answered", 32), ("failed", 16)])]
    );
}

pub async fn expired_buckets_and_bad_names_are_left_out_or_refused(documents: Arc<dyn Documents>) {
    let (r, key) = (documents.as_ref(), unique_name("series"));
    r.add_counts(KIND, &key, 1, &[("answered", 1)], BASE.plus(secs(10)), BASE)
        .await
        .unwrap();
    r.add_counts(KIND, &key, 2, &[("answered", 1)], BASE.plus(LIFETIME), BASE)
        .await
        .unwrap();
    let later = BASE.plus(secs(10));
    assert_eq!(
        r.read_counts(KIND, &key, 0, 10, later).await.unwrap(),
        [bucket(2, &[("answered", 1)])]
    );
    for bad in ["", "Answered", "a-b", "a b", &"x".repeat(33)] {
        let refused = r
            .add_counts(KIND, &key, 3, &[(bad, 1)], BASE.plus(LIFETIME), BASE)
            .await;
        assert!(refused.is_err(), "{bad:?}");
    }
    assert!(
        r.add_counts(
            KIND,
            &key,
            -1,
            &[("answered", 1)],
            BASE.plus(LIFETIME),
            BASE
        )
        .await
        .is_err()
    );
}
