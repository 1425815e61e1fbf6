//! The `Records` contract.

use std::sync::Arc;

use super::{BASE, mins, secs, unique_name};
use crate::domain::Timestamp;
use crate::ports::{Records, StoreError, StoredRecord};

contract_suite!($ records_contract_tests, records, Arc<dyn Records>;
    an_absent_record_reads_as_none,
    put_without_a_version_creates_the_record,
    put_with_the_current_version_replaces_and_moves_the_version_on,
    put_with_a_stale_version_conflicts_and_changes_nothing,
    put_without_a_version_over_a_record_conflicts,
    an_expired_record_is_absent_and_can_be_created_again,
    kinds_are_separate_namespaces,
    bodies_of_any_length_read_back_as_written,
    a_peek_reads_what_was_written_and_never_an_expired_record,
    concurrent_writers_of_one_version_have_exactly_one_winner,
);

/// The kind the checks use (each check uses fresh keys).
const KIND: &str = "contract";
/// Records written by the checks expire this long after `BASE`, unless a check says otherwise.
const LIFETIME: std::time::Duration = mins(60);

async fn get(r: &dyn Records, kind: &str, key: &str, now: Timestamp) -> Option<StoredRecord> {
    r.get_record(kind, key, now).await.unwrap()
}

async fn put(
    r: &dyn Records,
    key: &str,
    body: &str,
    expected: Option<u64>,
    now: Timestamp,
) -> Result<u64, StoreError> {
    r.put_record(KIND, key, body, expected, BASE.plus(LIFETIME), now)
        .await
}

fn record(body: &str, version: u64) -> Option<StoredRecord> {
    Some(StoredRecord {
        body: body.to_owned(),
        version,
    })
}

fn assert_conflict(r: Result<u64, StoreError>) {
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
}

pub async fn an_absent_record_reads_as_none(records: Arc<dyn Records>) {
    let r = records.as_ref();
    assert_eq!(get(r, KIND, &unique_name("absent"), BASE).await, None);
}

pub async fn put_without_a_version_creates_the_record(records: Arc<dyn Records>) {
    let (r, key) = (records.as_ref(), unique_name("create"));
    let v = put(r, &key, r#"{"n":1}"#, None, BASE).await.unwrap();
    assert_eq!(get(r, KIND, &key, BASE).await, record(r#"{"n":1}"#, v));
    // Read back just before it expires, too.
    let last = BASE.plus(LIFETIME).minus(secs(1));
    assert_eq!(get(r, KIND, &key, last).await, record(r#"{"n":1}"#, v));
}

/// A peek may lag the last writes on a live service (not on SQLite or the emulator, whose
/// reads are all consistent), but it reads the same record the same way, expiry included.
pub async fn a_peek_reads_what_was_written_and_never_an_expired_record(records: Arc<dyn Records>) {
    let (r, key) = (records.as_ref(), unique_name("peek"));
    assert_eq!(r.peek_record(KIND, &key, BASE).await.unwrap(), None);
    let long = "x".repeat(2000);
    let v = put(r, &key, &long, None, BASE).await.unwrap();
    assert_eq!(
        r.peek_record(KIND, &key, BASE).await.unwrap(),
        record(&long, v)
    );
    let expired = BASE.plus(LIFETIME);
    assert_eq!(r.peek_record(KIND, &key, expired).await.unwrap(), None);
}

pub async fn put_with_the_current_version_replaces_and_moves_the_version_on(
    records: Arc<dyn Records>,
) {
    let (r, key) = (records.as_ref(), unique_name("replace"));
    let v1 = put(r, &key, "one", None, BASE).await.unwrap();
    let v2 = put(r, &key, "two", Some(v1), BASE).await.unwrap();
    assert!(v2 > v1, "{v2} > {v1}");
    assert_eq!(get(r, KIND, &key, BASE).await, record("two", v2));
    let later = BASE.plus(secs(5));
    let v3 = put(r, &key, "three", Some(v2), later).await.unwrap();
    assert!(v3 > v2, "{v3} > {v2}");
    assert_eq!(get(r, KIND, &key, later).await, record("three", v3));
}

/// Adapters may store long bodies differently (compressed); what is read is what was written,
/// across changes between short and long.
pub async fn bodies_of_any_length_read_back_as_written(records: Arc<dyn Records>) {
    let (r, key) = (records.as_ref(), unique_name("lengths"));
    let long: String = (0..400)
        .map(|i| format!("{{\"url\":\"https://photos.example/{i}/é.jpg\"}}"))
        .collect();
    let v1 = put(r, &key, "short", None, BASE).await.unwrap();
    let v2 = put(r, &key, &long, Some(v1), BASE).await.unwrap();
    assert_eq!(get(r, KIND, &key, BASE).await, record(&long, v2));
    let v3 = put(r, &key, "short again", Some(v2), BASE).await.unwrap();
    assert_eq!(get(r, KIND, &key, BASE).await, record("short again", v3));
}

pub async fn put_with_a_stale_version_conflicts_and_changes_nothing(records: Arc<dyn Records>) {
    let (r, key) = (records.as_ref(), unique_name("stale"));
    let v1 = put(r, &key, "one", None, BASE).await.unwrap();
    let v2 = put(r, &key, "two", Some(v1), BASE).await.unwrap();
    assert_conflict(put(r, &key, "stale", Some(v1), BASE).await);
    assert_conflict(put(r, &key, "made up", Some(v2 + 1000), BASE).await);
    assert_eq!(get(r, KIND, &key, BASE).await, record("two", v2));
    // A version of a record that was never written is stale too.
    assert_conflict(put(r, &unique_name("never"), "x", Some(v1), BASE).await);
}

pub async fn put_without_a_version_over_a_record_conflicts(records: Arc<dyn Records>) {
    let (r, key) = (records.as_ref(), unique_name("exists"));
    let v = put(r, &key, "first", None, BASE).await.unwrap();
    assert_conflict(put(r, &key, "second", None, BASE.plus(secs(1))).await);
    assert_eq!(
        get(r, KIND, &key, BASE.plus(secs(1))).await,
        record("first", v)
    );
}

pub async fn an_expired_record_is_absent_and_can_be_created_again(records: Arc<dyn Records>) {
    let (r, key) = (records.as_ref(), unique_name("expiry"));
    let expires_at = BASE.plus(secs(10));
    let v1 = r
        .put_record(KIND, &key, "old", None, expires_at, BASE)
        .await
        .unwrap();
    let before = expires_at.minus(std::time::Duration::from_millis(1));
    assert_eq!(get(r, KIND, &key, before).await, record("old", v1));
    // Expired at `expires_at` itself.
    assert_eq!(get(r, KIND, &key, expires_at).await, None);
    let after = BASE.plus(secs(20));
    assert_eq!(get(r, KIND, &key, after).await, None);
    // Its version no longer counts: a writer that read it before it expired conflicts.
    assert_conflict(
        r.put_record(KIND, &key, "late", Some(v1), after.plus(LIFETIME), after)
            .await,
    );
    let v2 = r
        .put_record(KIND, &key, "new", None, after.plus(LIFETIME), after)
        .await
        .unwrap();
    assert!(v2 > v1, "a recreated record's version {v2} follows {v1}");
    assert_eq!(get(r, KIND, &key, after).await, record("new", v2));
    assert_conflict(
        r.put_record(KIND, &key, "again", None, after.plus(LIFETIME), after)
            .await,
    );
}

pub async fn kinds_are_separate_namespaces(records: Arc<dyn Records>) {
    let (r, key) = (records.as_ref(), unique_name("kinds"));
    let (one, two) = (unique_name("kind-a"), unique_name("kind-b"));
    let expires = BASE.plus(LIFETIME);
    let v1 = r
        .put_record(&one, &key, "in one", None, expires, BASE)
        .await
        .unwrap();
    assert_eq!(get(r, &two, &key, BASE).await, None);
    let v2 = r
        .put_record(&two, &key, "in two", None, expires, BASE)
        .await
        .unwrap();
    assert_eq!(get(r, &one, &key, BASE).await, record("in one", v1));
    assert_eq!(get(r, &two, &key, BASE).await, record("in two", v2));
    // Writing one kind's record leaves the other's alone.
    let v3 = r
        .put_record(&two, &key, "two again", Some(v2), expires, BASE)
        .await
        .unwrap();
    assert_eq!(get(r, &one, &key, BASE).await, record("in one", v1));
    assert_eq!(get(r, &two, &key, BASE).await, record("two again", v3));
}

pub async fn concurrent_writers_of_one_version_have_exactly_one_winner(records: Arc<dyn Records>) {
    const WRITERS: usize = 12;
    let key = unique_name("race");
    let v1 = put(records.as_ref(), &key, "start", None, BASE)
        .await
        .unwrap();
    let writes = (0..WRITERS).map(|i| {
        let (records, key) = (records.clone(), key.clone());
        async move {
            put(
                records.as_ref(),
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
        get(records.as_ref(), KIND, &key, BASE).await,
        record(&format!("writer {i}"), v)
    );

    // Racing creators of a new record: one wins too.
    let key = unique_name("race-new");
    let creates = (0..WRITERS).map(|i| {
        let (records, key) = (records.clone(), key.clone());
        async move { put(records.as_ref(), &key, &format!("creator {i}"), None, BASE).await }
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
