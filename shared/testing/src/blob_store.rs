//! The `BlobStore` contract.

use std::sync::Arc;

use bytes::Bytes;

use super::{random_image_id, unique_name};
use imgest_core::domain::{BlobKey, Generation, OutputFormat, VariantName};
use imgest_core::ports::{BlobMeta, BlobStore, StoreError};

contract_suite!($ blob_store_contract_tests, blob_store, Arc<dyn BlobStore>;
    put_then_get_returns_the_same_bytes,
    put_overwrites_the_whole_object,
    get_of_a_missing_key_is_not_found,
    delete_removes_objects_and_ignores_missing_keys,
    list_returns_keys_in_byte_order_with_sizes,
    list_paginates_with_the_cursor,
    list_keeps_within_the_prefix,
    list_walks_one_image_shard,
    concurrent_puts_of_one_key_leave_one_whole_object,
    an_original_is_written_once,
    erase_removes_all_under_the_prefix_but_what_it_keeps,
);

/// A key under a check's own top-level prefix.
fn key(scope: &str, rest: &str) -> BlobKey {
    BlobKey::parse(&format!("{scope}/{rest}")).unwrap()
}

fn random_bytes(n: usize) -> Bytes {
    std::iter::repeat_with(|| fastrand::u8(..))
        .take(n)
        .collect()
}

fn is_not_found<T: std::fmt::Debug>(r: &Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::NotFound(_)))
}

/// Every key under `prefix`, page by page (`limit` per page), checking page sizes.
async fn list_all(store: &dyn BlobStore, prefix: &str, limit: usize) -> Vec<BlobMeta> {
    let mut all = Vec::new();
    let mut after: Option<BlobKey> = None;
    for _ in 0..1000 {
        let page = store.list(prefix, after.as_ref(), limit).await.unwrap();
        assert!(
            page.blobs.len() <= limit,
            "a page holds at most `limit` blobs"
        );
        all.extend(page.blobs);
        match page.next {
            Some(next) => after = Some(next),
            None => return all,
        }
    }
    panic!("listing {prefix:?} did not end");
}

fn names(blobs: &[BlobMeta]) -> Vec<&str> {
    blobs.iter().map(|b| b.key.as_str()).collect()
}

pub async fn put_then_get_returns_the_same_bytes(store: Arc<dyn BlobStore>) {
    let scope = unique_name("put");
    let k = key(&scope, "ab/photo/large.jpg");
    let body = random_bytes(300_000);
    store.put(&k, body.clone(), "image/jpeg").await.unwrap();
    assert_eq!(store.get(&k).await.unwrap(), body);

    let empty = key(&scope, "empty");
    store
        .put(&empty, Bytes::new(), "application/octet-stream")
        .await
        .unwrap();
    assert_eq!(store.get(&empty).await.unwrap(), Bytes::new());
}

pub async fn put_overwrites_the_whole_object(store: Arc<dyn BlobStore>) {
    let scope = unique_name("overwrite");
    let k = key(&scope, "x/original");
    store
        .put(&k, random_bytes(50_000), "image/png")
        .await
        .unwrap();
    let shorter = random_bytes(1_000);
    store.put(&k, shorter.clone(), "image/png").await.unwrap();
    assert_eq!(store.get(&k).await.unwrap(), shorter);
    let listed = list_all(store.as_ref(), &format!("{scope}/"), 10).await;
    assert_eq!(names(&listed), [k.as_str()]);
    assert_eq!(listed[0].size, 1_000);
}

pub async fn get_of_a_missing_key_is_not_found(store: Arc<dyn BlobStore>) {
    let scope = unique_name("missing");
    assert!(is_not_found(&store.get(&key(&scope, "nothing/here")).await));
    let k = key(&scope, "a/b");
    store
        .put(&k, Bytes::from_static(b"b"), "text/plain")
        .await
        .unwrap();
    // A key's "directory" is not an object.
    assert!(is_not_found(&store.get(&key(&scope, "a")).await));
    store.delete(std::slice::from_ref(&k)).await.unwrap();
    assert!(is_not_found(&store.get(&k).await));
}

pub async fn delete_removes_objects_and_ignores_missing_keys(store: Arc<dyn BlobStore>) {
    let scope = unique_name("delete");
    let a = key(&scope, "s/1/a.jpg");
    let b = key(&scope, "s/2/b.jpg");
    let sibling = key(&scope, "s/1/sibling.jpg");
    for k in [&a, &b, &sibling] {
        store
            .put(k, Bytes::from_static(b"data"), "image/jpeg")
            .await
            .unwrap();
    }
    let missing = key(&scope, "never/written");
    store
        .delete(&[a.clone(), missing.clone(), b.clone()])
        .await
        .unwrap();
    assert!(is_not_found(&store.get(&a).await));
    assert!(is_not_found(&store.get(&b).await));
    assert_eq!(store.get(&sibling).await.unwrap(), &b"data"[..]);
    // Deleting again, nothing or only missing keys is fine.
    store.delete(&[a, b, missing]).await.unwrap();
    store.delete(&[]).await.unwrap();
    let listed = list_all(store.as_ref(), &format!("{scope}/"), 10).await;
    assert_eq!(names(&listed), [sibling.as_str()]);
    store.delete(std::slice::from_ref(&sibling)).await.unwrap();
    assert!(
        list_all(store.as_ref(), &format!("{scope}/"), 10)
            .await
            .is_empty()
    );
    // The emptied place can be written again.
    store
        .put(&sibling, Bytes::from_static(b"again"), "image/jpeg")
        .await
        .unwrap();
    assert_eq!(store.get(&sibling).await.unwrap(), &b"again"[..]);
}

pub async fn list_returns_keys_in_byte_order_with_sizes(store: Arc<dyn BlobStore>) {
    let scope = unique_name("order");
    // Byte order: '-' < '.' < '/' < '0' < 'A' < '_' < 'a', across directory levels.
    let rests = ["a0", "_z", "a/b", "a-c", "A", "a.x", "a/b0", "ab/00/x", "0"];
    for (i, rest) in rests.iter().enumerate() {
        store
            .put(
                &key(&scope, rest),
                random_bytes(i * 10),
                "application/octet-stream",
            )
            .await
            .unwrap();
    }
    let listed = list_all(store.as_ref(), &format!("{scope}/"), 100).await;
    let mut expected: Vec<String> = rests.iter().map(|r| format!("{scope}/{r}")).collect();
    expected.sort();
    assert_eq!(names(&listed), expected);
    for meta in &listed {
        let rest = &meta.key.as_str()[scope.len() + 1..];
        let i = rests.iter().position(|r| *r == rest).unwrap();
        assert_eq!(meta.size, (i * 10) as u64, "size of {rest}");
        // The store's own clock, not the checks': only sanity-checked (after 2020).
        assert!(meta.last_modified.as_millis() > 1_577_836_800_000);
    }
}

pub async fn list_paginates_with_the_cursor(store: Arc<dyn BlobStore>) {
    let scope = unique_name("pages");
    let mut expected = Vec::new();
    for dir in ["d1", "d2", "d3"] {
        for file in ["f1", "f2", "f3"] {
            let k = key(&scope, &format!("{dir}/{file}"));
            store
                .put(&k, Bytes::from_static(b"."), "text/plain")
                .await
                .unwrap();
            expected.push(k.as_str().to_owned());
        }
    }
    let prefix = format!("{scope}/");
    for limit in [1, 2, 3, 4, 9, 10] {
        let listed = list_all(store.as_ref(), &prefix, limit).await;
        assert_eq!(names(&listed), expected, "pages of {limit}");
    }
    // The first page of a listing that has more gives a cursor.
    let page = store.list(&prefix, None, 4).await.unwrap();
    assert_eq!(names(&page.blobs), expected[..4]);
    assert_eq!(
        page.next.as_ref().map(BlobKey::as_str),
        Some(expected[3].as_str())
    );
    // A cursor need not be an existing key.
    let between = key(&scope, "d2/f1x");
    let page = store.list(&prefix, Some(&between), 2).await.unwrap();
    assert_eq!(names(&page.blobs), expected[4..6]);
    let page = store
        .list(&prefix, Some(&key(&scope, "d3/f3")), 5)
        .await
        .unwrap();
    assert!(page.blobs.is_empty());
    assert_eq!(page.next, None);
}

pub async fn list_keeps_within_the_prefix(store: Arc<dyn BlobStore>) {
    let scope = unique_name("prefix");
    for rest in ["a", "ab-1", "ab/1", "ab/2/x", "abc/1", "b/ab/1"] {
        store
            .put(&key(&scope, rest), Bytes::from_static(b"."), "text/plain")
            .await
            .unwrap();
    }
    let list = |p: &str| {
        let store = store.clone();
        let prefix = format!("{scope}/{p}");
        let scope = scope.clone();
        async move {
            list_all(store.as_ref(), &prefix, 2)
                .await
                .iter()
                .map(|b| b.key.as_str()[scope.len() + 1..].to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list("ab/").await, ["ab/1", "ab/2/x"]);
    assert_eq!(list("ab").await, ["ab-1", "ab/1", "ab/2/x", "abc/1"]);
    assert_eq!(list("abc").await, ["abc/1"]);
    assert_eq!(list("ab/2/x").await, ["ab/2/x"]);
    assert_eq!(list("a").await, ["a", "ab-1", "ab/1", "ab/2/x", "abc/1"]);
    assert!(list("zz").await.is_empty());
    assert!(list("ab/3/").await.is_empty());
    // Another check's keys never show under this one's prefix, nor this one's under theirs.
    assert!(
        list_all(store.as_ref(), &format!("{scope}-other/"), 10)
            .await
            .is_empty()
    );
}

pub async fn list_walks_one_image_shard(store: Arc<dyn BlobStore>) {
    let scope = unique_name("shards");
    let large = VariantName::parse("large").unwrap();
    let mut by_shard: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for _ in 0..6 {
        let id = random_image_id();
        let generation = Generation::random();
        for k in [
            BlobKey::original(&id, &generation),
            BlobKey::variant(&id, &generation, &large, OutputFormat::Jpeg),
        ] {
            let k = key(&scope, k.as_str());
            store
                .put(&k, Bytes::from_static(b"img"), "image/jpeg")
                .await
                .unwrap();
            by_shard
                .entry(id.shard().to_owned())
                .or_default()
                .push(k.as_str().to_owned());
        }
    }
    for (shard, expected) in by_shard {
        // The sweep walks each area's shard: variants and originals.
        for area in imgest_core::domain::IMAGE_AREAS {
            let prefix = format!("{scope}/{area}{shard}/");
            let mut in_area: Vec<String> = expected
                .iter()
                .filter(|k| k.starts_with(&prefix))
                .cloned()
                .collect();
            in_area.sort();
            assert!(!in_area.is_empty(), "{prefix}");
            let listed = list_all(store.as_ref(), &prefix, 3).await;
            assert_eq!(names(&listed), in_area, "{prefix}");
        }
    }
}

pub async fn concurrent_puts_of_one_key_leave_one_whole_object(store: Arc<dyn BlobStore>) {
    const WRITERS: u8 = 8;
    const SIZE: usize = 256 * 1024;
    let scope = unique_name("race");
    let k = key(&scope, "ab/race/original");
    let whole = |body: &Bytes| body.len() == SIZE && body.iter().all(|b| *b == body[0]);
    let mut tasks = Vec::new();
    for i in 0..WRITERS {
        let (store, k) = (store.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            store
                .put(&k, Bytes::from(vec![i; SIZE]), "image/jpeg")
                .await
                .unwrap();
        }));
    }
    for _ in 0..4 {
        let (store, k) = (store.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                match store.get(&k).await {
                    Ok(body) => assert!(whole(&body), "a reader saw a partial object"),
                    Err(StoreError::NotFound(_)) => {}
                    Err(e) => panic!("get failed: {e}"),
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let body = store.get(&k).await.unwrap();
    assert!(whole(&body) && body[0] < WRITERS);
    let listed = list_all(store.as_ref(), &format!("{scope}/"), 10).await;
    assert_eq!(
        names(&listed),
        [k.as_str()],
        "no temporary object is listed"
    );
}

/// An original (the one copy of a photo) is never overwritten: a second write of its key
/// succeeds (a write retried after a lost answer) and the first body stays; any other key is
/// overwritten as usual.
pub async fn an_original_is_written_once(store: Arc<dyn BlobStore>) {
    let original = BlobKey::original(&random_image_id(), &Generation::random());
    assert!(original.is_write_once());
    let first = random_bytes(2048);
    store
        .put(&original, first.clone(), "image/jpeg")
        .await
        .unwrap();
    store
        .put(&original, first.clone(), "image/jpeg")
        .await
        .unwrap();
    store
        .put(&original, random_bytes(4096), "image/jpeg")
        .await
        .unwrap();
    assert_eq!(store.get(&original).await.unwrap(), first);
    store.delete(std::slice::from_ref(&original)).await.unwrap();
    let variant = key(&unique_name("once"), "public/ab/x/v.jpg");
    assert!(!variant.is_write_once());
}

pub async fn erase_removes_all_under_the_prefix_but_what_it_keeps(store: Arc<dyn BlobStore>) {
    let scope = unique_name("erase");
    let gone = key(&scope, "img/g1/large.jpg");
    let overwritten = key(&scope, "img/g1/original");
    let kept = key(&scope, "img/g2/original");
    let outside = key(&scope, "other/g1/original");
    for k in [&gone, &overwritten, &kept, &outside] {
        store
            .put(k, Bytes::from_static(b"data"), "image/jpeg")
            .await
            .unwrap();
    }
    // A second version of one key (a versioned store keeps the first).
    store
        .put(&overwritten, Bytes::from_static(b"again"), "image/jpeg")
        .await
        .unwrap();
    let keep_name = kept.clone();
    let erased = store
        .erase(&format!("{scope}/img/"), &move |b: &BlobMeta| {
            b.key == keep_name
        })
        .await
        .unwrap();
    assert_eq!(erased.objects, 2, "{erased:?}");
    for k in [&gone, &overwritten] {
        assert!(is_not_found(&store.get(k).await), "{k}");
    }
    assert_eq!(store.get(&kept).await.unwrap(), &b"data"[..]);
    assert_eq!(store.get(&outside).await.unwrap(), &b"data"[..]);
    // Again: nothing left to erase but what is kept.
    let again = store
        .erase(&format!("{scope}/img/"), &|_: &BlobMeta| false)
        .await
        .unwrap();
    assert_eq!(again.objects, 1);
    assert!(
        list_all(store.as_ref(), &format!("{scope}/img/"), 10)
            .await
            .is_empty()
    );
}
