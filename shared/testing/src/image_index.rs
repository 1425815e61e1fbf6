//! The `ImageIndex` contract.

use std::sync::Arc;
use std::time::Duration;

use super::{
    BASE, CLAIM_TTL, ORPHAN_TTL, mins, must_get, random_image_id, ready_image, sample_ready, secs,
};
use imgest_core::domain::{
    ContentHash, Generation, ImageId, ImageRecord, ImageState, JobPart, PreviousFiles, Signature,
    ThumbHash, Timestamp, VariantSetVersion, refresh_granularity,
};
use imgest_core::ports::{Claim, ImageIndex, ReadyImage, StoreError};

contract_suite!($ image_index_contract_tests, image_index, Arc<dyn ImageIndex>;
    claim_new_then_in_progress_then_complete_then_existing,
    claim_revives_an_expired_ready_record,
    a_reupload_within_the_refresh_granularity_writes_nothing,
    an_expired_claim_is_taken_over_under_a_new_generation,
    a_claim_made_again_after_it_was_applied_is_the_callers,
    a_strong_hash_is_recorded_once_on_a_ready_record_of_its_generation,
    a_placeholder_is_recorded_once_on_a_ready_record_of_its_generation,
    a_signature_is_recorded_once_on_a_ready_record_of_its_generation,
    abandon_removes_only_the_holders_claim,
    complete_without_the_claim_is_a_conflict,
    get_many_keeps_the_order_of_ids_and_skips_missing,
    expired_lists_orphans_and_stale_claims_longest_expired_first,
    the_parts_of_gc_list_each_expired_record_once,
    delete_if_expired_deletes_only_what_is_still_expired,
    create_ready_writes_only_where_no_record_is,
    concurrent_claims_of_a_new_id_make_exactly_one_new,
    replace_files_moves_a_ready_record_and_keeps_the_old_files_listed,
    replace_files_refuses_a_stale_generation_a_claim_or_nothing,
    scan_sees_every_record_once_across_segments_and_pages,
);

async fn claim(images: &dyn ImageIndex, id: &ImageId, now: Timestamp) -> Claim {
    images
        .claim(id, &Generation::random(), now, CLAIM_TTL, ORPHAN_TTL)
        .await
        .unwrap()
}

async fn claim_new(images: &dyn ImageIndex, id: &ImageId, now: Timestamp) -> Generation {
    match claim(images, id, now).await {
        Claim::New { generation } => generation,
        other => panic!("expected a new claim of {id}, got {other:?}"),
    }
}

fn other_generation(g: &Generation) -> Generation {
    loop {
        let other = Generation::random();
        if &other != g {
            return other;
        }
    }
}

/// The ids of `records` that are among `mine`, in the order listed.
fn only<'a>(records: &'a [ImageRecord], mine: &[&ImageId]) -> Vec<&'a ImageId> {
    records
        .iter()
        .map(|r| &r.id)
        .filter(|id| mine.contains(id))
        .collect()
}

pub async fn claim_new_then_in_progress_then_complete_then_existing(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let id = random_image_id();
    let t0 = BASE;
    let generation = claim_new(images, &id, t0).await;

    let claimed = must_get(images, &id).await;
    assert_eq!(claimed.generation, generation);
    assert_eq!(
        claimed.state,
        ImageState::Processing {
            claim_expires_at: t0.plus(CLAIM_TTL)
        }
    );
    assert_eq!((claimed.created_at, claimed.last_update), (t0, t0));
    assert_eq!((claimed.link_count, claimed.expires_at), (0, None));
    assert!(!claimed.is_live(t0));

    assert_eq!(
        claim(images, &id, t0.plus(secs(1))).await,
        Claim::InProgress {
            claim_expires_at: t0.plus(CLAIM_TTL)
        }
    );

    let t1 = t0.plus(secs(5));
    let ready = sample_ready();
    let record = images
        .complete(&id, &generation, ready.clone(), t1, ORPHAN_TTL)
        .await
        .unwrap();
    assert_eq!(record.id, id);
    assert_eq!(record.generation, generation);
    assert_eq!(
        record.state,
        ImageState::Ready {
            format: ready.format,
            width: ready.width,
            height: ready.height,
            original_bytes: ready.original_bytes,
            variants: ready.variants,
            variant_set: Some(ready.variant_set),
            sha256: ready.sha256,
            original_metadata: ready.original_metadata,
            thumbhash: ready.thumbhash,
            signature: ready.signature.map(Box::new),
        }
    );
    assert_eq!((record.created_at, record.last_update), (t0, t1));
    assert_eq!(
        (record.link_count, record.expires_at),
        (0, Some(t1.plus(ORPHAN_TTL)))
    );
    assert!(record.is_live(t1));
    assert_eq!(must_get(images, &id).await, record);

    // A re-upload of the same bytes finds it and refreshes it.
    let t2 = t1.plus(mins(10));
    let Claim::Existing(existing) = claim(images, &id, t2).await else {
        panic!("a ready record must be claimed as existing");
    };
    assert_eq!(existing.generation, generation);
    assert_eq!(existing.last_update, t2);
    assert_eq!(existing.expires_at, Some(t2.plus(ORPHAN_TTL)));
    assert_eq!(existing.created_at, t0);
    assert_eq!(must_get(images, &id).await, existing);
}

pub async fn claim_revives_an_expired_ready_record(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let record = ready_image(images, BASE).await;
    let late = BASE.plus(ORPHAN_TTL).plus(mins(30));
    assert!(record.is_expired(late));
    let Claim::Existing(revived) = claim(images, &record.id, late).await else {
        panic!("an expired but present ready record must be revived");
    };
    assert_eq!(revived.generation, record.generation);
    assert_eq!(revived.expires_at, Some(late.plus(ORPHAN_TTL)));
    assert!(revived.is_live(late));
    assert_eq!(must_get(images, &record.id).await, revived);
}

pub async fn a_reupload_within_the_refresh_granularity_writes_nothing(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let granularity = refresh_granularity(ORPHAN_TTL);
    let record = ready_image(images, BASE).await;

    // Just inside the granularity: the record as it is, written by nobody.
    let soon = BASE.plus(granularity).minus(Duration::from_millis(1));
    let Claim::Existing(seen) = claim(images, &record.id, soon).await else {
        panic!("a ready record must be claimed as existing");
    };
    assert_eq!(seen, record);
    assert_eq!(must_get(images, &record.id).await, record);

    // At the granularity: refreshed.
    let later = BASE.plus(granularity);
    let Claim::Existing(refreshed) = claim(images, &record.id, later).await else {
        panic!("a ready record must be claimed as existing");
    };
    assert_eq!(
        (refreshed.last_update, refreshed.expires_at),
        (later, Some(later.plus(ORPHAN_TTL)))
    );
    assert_eq!(must_get(images, &record.id).await, refreshed);
}

pub async fn an_expired_claim_is_taken_over_under_a_new_generation(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let id = random_image_id();
    let crashed = claim_new(images, &id, BASE).await;

    // Expired exactly at claim_expires_at.
    let t1 = BASE.plus(CLAIM_TTL);
    let taker = claim_new(images, &id, t1).await;
    assert_ne!(taker, crashed);
    let record = must_get(images, &id).await;
    assert_eq!(record.generation, taker);
    assert_eq!(
        record.state,
        ImageState::Processing {
            claim_expires_at: t1.plus(CLAIM_TTL)
        }
    );
    assert_eq!(
        claim(images, &id, t1.plus(secs(1))).await,
        Claim::InProgress {
            claim_expires_at: t1.plus(CLAIM_TTL)
        }
    );

    // The crashed holder wakes up: its completion is refused and its abandon is a no-op.
    let late = t1.plus(secs(2));
    let refused = images
        .complete(&id, &crashed, sample_ready(), late, ORPHAN_TTL)
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    images.abandon(&id, &crashed).await.unwrap();
    assert_eq!(must_get(images, &id).await.generation, taker);

    let done = images
        .complete(&id, &taker, sample_ready(), late, ORPHAN_TTL)
        .await
        .unwrap();
    assert!(done.is_live(late));
    let refused = images
        .complete(&id, &crashed, sample_ready(), late, ORPHAN_TTL)
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    assert_eq!(must_get(images, &id).await, done);
}

/// A claim applied whose answer was lost is made again by the SDK's retry: the same proposed
/// generation finds its own claim and answers `New` again, while anyone else waits for it.
pub async fn a_claim_made_again_after_it_was_applied_is_the_callers(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let id = random_image_id();
    let proposed = Generation::random();
    let ours = Claim::New {
        generation: proposed.clone(),
    };
    let first = images
        .claim(&id, &proposed, BASE, CLAIM_TTL, ORPHAN_TTL)
        .await
        .unwrap();
    assert_eq!(first, ours);
    let again = images
        .claim(&id, &proposed, BASE.plus(secs(1)), CLAIM_TTL, ORPHAN_TTL)
        .await
        .unwrap();
    assert_eq!(again, ours);
    assert_eq!(
        claim(images, &id, BASE.plus(secs(1))).await,
        Claim::InProgress {
            claim_expires_at: BASE.plus(CLAIM_TTL)
        }
    );
    // A take-over under a proposed generation is recognised the same way.
    let late = BASE.plus(CLAIM_TTL);
    let taker = Generation::random();
    for _ in 0..2 {
        assert_eq!(
            images
                .claim(&id, &taker, late, CLAIM_TTL, ORPHAN_TTL)
                .await
                .unwrap(),
            Claim::New {
                generation: taker.clone()
            }
        );
    }
    assert_eq!(must_get(images, &id).await.generation, taker);
}

/// A record written before strong hashes gets one, once, for its own generation; a record
/// written with one keeps it through a re-pointing that brings none (a retired variant).
pub async fn a_strong_hash_is_recorded_once_on_a_ready_record_of_its_generation(
    images: Arc<dyn ImageIndex>,
) {
    let images = images.as_ref();
    let id = random_image_id();
    let Claim::New { generation } = claim(images, &id, BASE).await else {
        panic!("a fresh id is new");
    };
    let hash = ContentHash::of_bytes(b"the original");
    // A claim has no hash to record.
    assert!(
        !images
            .set_strong_hash(&id, &generation, &hash)
            .await
            .unwrap()
    );
    let legacy = ReadyImage {
        sha256: None,
        ..sample_ready()
    };
    let record = images
        .complete(&id, &generation, legacy.clone(), BASE, ORPHAN_TTL)
        .await
        .unwrap();
    assert_eq!(record.sha256(), None);
    assert!(
        !images
            .set_strong_hash(&id, &Generation::random(), &hash)
            .await
            .unwrap(),
        "another generation"
    );
    assert!(
        images
            .set_strong_hash(&id, &generation, &hash)
            .await
            .unwrap()
    );
    let other = ContentHash::of_bytes(b"another original");
    assert!(
        !images
            .set_strong_hash(&id, &generation, &other)
            .await
            .unwrap(),
        "recorded once"
    );
    let record = must_get(images, &id).await;
    assert_eq!(record.sha256(), Some(&hash));
    // Re-pointed in place with nothing to say about the hash: it stays.
    let kept = images
        .replace_files(&id, &generation, &generation, legacy, BASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.sha256(), Some(&hash));
    // Missing records and unknown ids change nothing.
    assert!(
        !images
            .set_strong_hash(&random_image_id(), &generation, &hash)
            .await
            .unwrap()
    );
}

/// A record written before placeholders gets one, once, for its own generation; a record
/// written with one keeps it through a re-pointing that brings none.
pub async fn a_placeholder_is_recorded_once_on_a_ready_record_of_its_generation(
    images: Arc<dyn ImageIndex>,
) {
    let images = images.as_ref();
    let id = random_image_id();
    let Claim::New { generation } = claim(images, &id, BASE).await else {
        panic!("a fresh id is new");
    };
    let hash = ThumbHash::from_bytes(vec![0x21; 23]).unwrap();
    // A claim has no placeholder to record.
    assert!(!images.set_thumbhash(&id, &generation, &hash).await.unwrap());
    let legacy = ReadyImage {
        thumbhash: None,
        signature: None,
        ..sample_ready()
    };
    let record = images
        .complete(&id, &generation, legacy.clone(), BASE, ORPHAN_TTL)
        .await
        .unwrap();
    assert_eq!(record.thumbhash(), None);
    assert!(
        !images
            .set_thumbhash(&id, &Generation::random(), &hash)
            .await
            .unwrap(),
        "another generation"
    );
    assert!(images.set_thumbhash(&id, &generation, &hash).await.unwrap());
    let other = ThumbHash::from_bytes(vec![0x42; 24]).unwrap();
    assert!(
        !images
            .set_thumbhash(&id, &generation, &other)
            .await
            .unwrap(),
        "recorded once"
    );
    assert_eq!(must_get(images, &id).await.thumbhash(), Some(&hash));
    // Re-pointed in place with nothing to say about the placeholder: it stays.
    let kept = images
        .replace_files(&id, &generation, &generation, legacy, BASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.thumbhash(), Some(&hash));
    // Missing records change nothing.
    assert!(
        !images
            .set_thumbhash(&random_image_id(), &generation, &hash)
            .await
            .unwrap()
    );
}

/// A record written before signatures gets one, once, for its own generation; one written
/// with one keeps it through a re-pointing that brings none, and reads it back whole; one
/// written before inner hashes were gets one with, once.
pub async fn a_signature_is_recorded_once_on_a_ready_record_of_its_generation(
    images: Arc<dyn ImageIndex>,
) {
    let images = images.as_ref();
    let id = random_image_id();
    let Claim::New { generation } = claim(images, &id, BASE).await else {
        panic!("a fresh id is new");
    };
    let signature = sample_ready().signature.unwrap();
    let other = Signature {
        trimmed: None,
        ..signature.clone()
    };
    assert!(
        !images
            .set_signature(&id, &generation, &signature)
            .await
            .unwrap()
    );
    let legacy = ReadyImage {
        signature: None,
        ..sample_ready()
    };
    let record = images
        .complete(&id, &generation, legacy.clone(), BASE, ORPHAN_TTL)
        .await
        .unwrap();
    assert_eq!(record.signature(), None);
    assert!(
        !images
            .set_signature(&id, &Generation::random(), &signature)
            .await
            .unwrap(),
        "another generation"
    );
    assert!(
        images
            .set_signature(&id, &generation, &signature)
            .await
            .unwrap()
    );
    assert!(
        !images
            .set_signature(&id, &generation, &other)
            .await
            .unwrap(),
        "recorded once"
    );
    assert_eq!(must_get(images, &id).await.signature(), Some(&signature));
    let kept = images
        .replace_files(&id, &generation, &generation, legacy, BASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.signature(), Some(&signature));
    assert!(
        !images
            .set_signature(&random_image_id(), &generation, &signature)
            .await
            .unwrap()
    );

    // A signature made before points (or inner hashes) were is replaced by one with, once.
    for older in [
        Signature {
            points: None,
            ..signature.clone()
        },
        Signature {
            inner: None,
            points: None,
            ..signature.clone()
        },
    ] {
        let id = random_image_id();
        let generation = claim_new(images, &id, BASE).await;
        let ready = ReadyImage {
            signature: Some(older.clone()),
            ..sample_ready()
        };
        images
            .complete(&id, &generation, ready, BASE, ORPHAN_TTL)
            .await
            .unwrap();
        assert_eq!(must_get(images, &id).await.signature(), Some(&older));
        assert!(
            !images
                .set_signature(
                    &id,
                    &generation,
                    &Signature {
                        trimmed: None,
                        ..older.clone()
                    }
                )
                .await
                .unwrap(),
            "an older signature is not replaced by another older one"
        );
        assert!(
            images
                .set_signature(&id, &generation, &signature)
                .await
                .unwrap()
        );
        assert_eq!(must_get(images, &id).await.signature(), Some(&signature));
        for later in [older, other.clone()] {
            assert!(
                !images
                    .set_signature(&id, &generation, &later)
                    .await
                    .unwrap(),
                "{later:?}"
            );
        }
        assert_eq!(must_get(images, &id).await.signature(), Some(&signature));
    }
}

pub async fn abandon_removes_only_the_holders_claim(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let id = random_image_id();
    let generation = claim_new(images, &id, BASE).await;
    images
        .abandon(&id, &other_generation(&generation))
        .await
        .unwrap();
    assert_eq!(must_get(images, &id).await.generation, generation);
    images.abandon(&id, &generation).await.unwrap();
    assert_eq!(images.get(&id).await.unwrap(), None);
    // Nothing left to abandon; the bytes can be claimed afresh.
    images.abandon(&id, &generation).await.unwrap();
    claim_new(images, &id, BASE.plus(secs(1))).await;

    // A completed record is not a claim: abandon leaves it alone.
    let record = ready_image(images, BASE).await;
    images
        .abandon(&record.id, &record.generation)
        .await
        .unwrap();
    assert_eq!(must_get(images, &record.id).await, record);
}

pub async fn complete_without_the_claim_is_a_conflict(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let unknown = random_image_id();
    let r = images
        .complete(
            &unknown,
            &Generation::random(),
            sample_ready(),
            BASE,
            ORPHAN_TTL,
        )
        .await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    assert_eq!(images.get(&unknown).await.unwrap(), None);

    let id = random_image_id();
    let generation = claim_new(images, &id, BASE).await;
    let before = must_get(images, &id).await;
    let r = images
        .complete(
            &id,
            &other_generation(&generation),
            sample_ready(),
            BASE,
            ORPHAN_TTL,
        )
        .await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    assert_eq!(must_get(images, &id).await, before);
}

pub async fn get_many_keeps_the_order_of_ids_and_skips_missing(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let a = ready_image(images, BASE).await.id;
    let b = ready_image(images, BASE).await.id;
    let c = ready_image(images, BASE).await.id;
    let p = random_image_id();
    claim_new(images, &p, BASE).await;
    let (m1, m2) = (random_image_id(), random_image_id());

    let got = images
        .get_many(&[c.clone(), m1, a.clone(), p.clone(), b.clone(), m2])
        .await
        .unwrap();
    let ids: Vec<&ImageId> = got.iter().map(|r| &r.id).collect();
    assert_eq!(ids, [&c, &a, &p, &b]);
    assert!(
        got[2].state != got[0].state,
        "records come back whatever their state"
    );
    assert!(images.get_many(&[]).await.unwrap().is_empty());

    // Long lists (past any batch size) keep the order too.
    let mut long: Vec<ImageId> = std::iter::repeat_with(random_image_id).take(260).collect();
    long.insert(250, a.clone());
    long.insert(120, b.clone());
    long.insert(3, c.clone());
    let got = images.get_many(&long).await.unwrap();
    let ids: Vec<&ImageId> = got.iter().map(|r| &r.id).collect();
    assert_eq!(ids, [&c, &b, &a]);
}

pub async fn expired_lists_orphans_and_stale_claims_longest_expired_first(
    images: Arc<dyn ImageIndex>,
) {
    let images = images.as_ref();
    // An epoch of its own, before every other check's, so other records rarely compete.
    let b = Timestamp::from_millis(1_000_000_000_000 + i64::from(fastrand::u32(..1_000_000)));
    let orphan_a = ready_image(images, b).await; // expires b+60m
    let stale_c = random_image_id();
    claim_new(images, &stale_c, b.plus(mins(20))).await; // expires b+30m
    let orphan_d = ready_image(images, b.plus(mins(30))).await; // expires b+90m
    let stale_e = random_image_id();
    claim_new(images, &stale_e, b.plus(mins(79))).await; // expires b+89m
    let mine = [&orphan_a.id, &stale_c, &orphan_d.id, &stale_e];

    let listed = images.expired(b.plus(mins(85)), 1000).await.unwrap();
    assert_eq!(only(&listed, &mine), [&stale_c, &orphan_a.id]);
    assert!(listed.iter().all(|r| r.is_expired(b.plus(mins(85)))));
    assert_eq!(images.expired(b.plus(mins(85)), 1).await.unwrap().len(), 1);

    let listed = images.expired(b.plus(mins(95)), 1000).await.unwrap();
    assert_eq!(
        only(&listed, &mine),
        [&stale_c, &orphan_a.id, &stale_e, &orphan_d.id]
    );
    assert!(only(&images.expired(b, 1000).await.unwrap(), &mine).is_empty());

    // A refreshed orphan leaves the list.
    claim(images, &orphan_a.id, b.plus(mins(95))).await;
    let listed = images.expired(b.plus(mins(95)), 1000).await.unwrap();
    assert_eq!(only(&listed, &mine), [&stale_c, &stale_e, &orphan_d.id]);
}

pub async fn the_parts_of_gc_list_each_expired_record_once(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let b = Timestamp::from_millis(2_000_000_000_000 + i64::from(fastrand::u32(..1_000_000)));
    // Orphans and stale claims under every first digit (ids are random: 40 leave a digit
    // out about once in 24 runs, which only makes that digit's check empty).
    let mut mine = Vec::new();
    for i in 0..40 {
        if i % 2 == 0 {
            mine.push(ready_image(images, b).await.id);
        } else {
            let id = random_image_id();
            claim_new(images, &id, b).await;
            mine.push(id);
        }
    }
    let mine: Vec<&ImageId> = mine.iter().collect();
    let now = b.plus(mins(120));
    let whole = images.expired(now, 10_000).await.unwrap();
    assert_eq!(only(&whole, &mine).len(), mine.len());

    for of in [2, 5, 16] {
        let mut seen: Vec<ImageId> = Vec::new();
        for index in 0..of {
            let part = JobPart::new(index, of).unwrap();
            let listed = images.expired_in(part, now, 10_000).await.unwrap();
            assert!(
                listed
                    .iter()
                    .all(|r| part.holds(&r.id) && r.is_expired(now)),
                "{part} lists only its own expired records"
            );
            let ids: Vec<&ImageId> = mine.iter().copied().filter(|id| part.holds(id)).collect();
            let got = only(&listed, &mine);
            assert_eq!(got.len(), ids.len(), "{part}: every record of its own");
            seen.extend(got.into_iter().cloned());
        }
        seen.sort();
        let mut all: Vec<ImageId> = mine.iter().copied().cloned().collect();
        all.sort();
        assert_eq!(seen, all, "{of} parts list every record once");
    }
}

pub async fn delete_if_expired_deletes_only_what_is_still_expired(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let b = BASE;
    let r = ready_image(images, b).await; // expires b+60m
    let (id, g) = (&r.id, &r.generation);
    assert!(
        !images
            .delete_if_expired(id, g, b.plus(mins(30)))
            .await
            .unwrap(),
        "not expired yet"
    );
    assert!(
        !images
            .delete_if_expired(id, &other_generation(g), b.plus(mins(120)))
            .await
            .unwrap(),
        "another generation"
    );
    // Re-uploaded after it expired but before GC got to it: refreshed, so kept.
    claim(images, id, b.plus(mins(90))).await; // now expires b+150m
    assert!(
        !images
            .delete_if_expired(id, g, b.plus(mins(120)))
            .await
            .unwrap(),
        "refreshed"
    );
    assert!(images.get(id).await.unwrap().is_some());
    assert!(
        images
            .delete_if_expired(id, g, b.plus(mins(150)))
            .await
            .unwrap()
    );
    assert_eq!(images.get(id).await.unwrap(), None);
    assert!(
        !images
            .delete_if_expired(id, g, b.plus(mins(150)))
            .await
            .unwrap(),
        "already gone"
    );

    let p = random_image_id();
    let gp = claim_new(images, &p, b).await; // claim expires b+10m
    assert!(
        !images
            .delete_if_expired(&p, &gp, b.plus(mins(5)))
            .await
            .unwrap()
    );
    assert!(
        !images
            .delete_if_expired(&p, &other_generation(&gp), b.plus(CLAIM_TTL))
            .await
            .unwrap()
    );
    assert!(
        images
            .delete_if_expired(&p, &gp, b.plus(CLAIM_TTL))
            .await
            .unwrap()
    );
    assert_eq!(images.get(&p).await.unwrap(), None);

    let missing = random_image_id();
    assert!(
        !images
            .delete_if_expired(&missing, &Generation::random(), b)
            .await
            .unwrap()
    );
}

pub async fn concurrent_claims_of_a_new_id_make_exactly_one_new(images: Arc<dyn ImageIndex>) {
    const CLAIMANTS: usize = 16;
    let id = random_image_id();
    let claims = |now: Timestamp| {
        let tasks: Vec<_> = (0..CLAIMANTS)
            .map(|_| {
                let (images, id) = (images.clone(), id.clone());
                tokio::spawn(async move {
                    images
                        .claim(&id, &Generation::random(), now, CLAIM_TTL, ORPHAN_TTL)
                        .await
                        .unwrap()
                })
            })
            .collect();
        async move {
            let mut out = Vec::new();
            for task in tasks {
                out.push(task.await.unwrap());
            }
            out
        }
    };
    let outcomes = claims(BASE).await;
    let winners: Vec<&Generation> = outcomes
        .iter()
        .filter_map(|c| match c {
            Claim::New { generation } => Some(generation),
            _ => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let expected_wait = Claim::InProgress {
        claim_expires_at: BASE.plus(CLAIM_TTL),
    };
    assert_eq!(
        outcomes.iter().filter(|c| **c == expected_wait).count(),
        CLAIMANTS - 1
    );
    let generation = winners[0].clone();
    images
        .complete(
            &id,
            &generation,
            sample_ready(),
            BASE.plus(secs(1)),
            ORPHAN_TTL,
        )
        .await
        .unwrap();

    // Once ready, every concurrent claimant finds it (past the refresh granularity, so the
    // record is written again).
    let later = BASE.plus(secs(1)).plus(refresh_granularity(ORPHAN_TTL));
    for outcome in claims(later).await {
        let Claim::Existing(record) = outcome else {
            panic!("expected an existing record, got {outcome:?}");
        };
        assert_eq!(record.generation, generation);
    }
    let record = must_get(images.as_ref(), &id).await;
    assert_eq!(record.last_update, later);
}

pub async fn create_ready_writes_only_where_no_record_is(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let now = BASE;
    let id = random_image_id();
    let generation = Generation::random();
    let created = images
        .create_ready(&id, &generation, sample_ready(), now, ORPHAN_TTL, None)
        .await
        .unwrap()
        .expect("no record: created");
    assert_eq!(created, must_get(images, &id).await);
    assert_eq!(created.generation, generation);
    assert!(created.is_ready() && created.is_live(now));
    assert_eq!(
        (created.link_count, created.expires_at, created.created_at),
        (0, Some(now.plus(ORPHAN_TTL)), now)
    );
    // An upload of the same bytes finds it, as it would a completed claim.
    assert!(matches!(
        images.claim(&id, &Generation::random(), now, CLAIM_TTL, ORPHAN_TTL).await.unwrap(),
        Claim::Existing(r) if r.generation == generation
    ));

    // A record of any state stays as it is.
    let later = now.plus(mins(1));
    let again = images
        .create_ready(
            &id,
            &Generation::random(),
            sample_ready(),
            later,
            ORPHAN_TTL,
            None,
        )
        .await
        .unwrap();
    assert_eq!(again, None);
    assert_eq!(must_get(images, &id).await.generation, generation);
    let claimed = random_image_id();
    let claim_generation = claim_new(images, &claimed, now).await;
    let over_claim = images
        .create_ready(
            &claimed,
            &Generation::random(),
            sample_ready(),
            later,
            ORPHAN_TTL,
            None,
        )
        .await
        .unwrap();
    assert_eq!(over_claim, None);
    assert_eq!(
        must_get(images, &claimed).await.generation,
        claim_generation
    );
    assert!(!must_get(images, &claimed).await.is_ready());
}

/// What re-processing under another variant set gives: one variant more.
fn reprocessed() -> ReadyImage {
    let mut ready = sample_ready();
    let mut extra = ready.variants[0].clone();
    extra.name = imgest_core::domain::VariantName::parse("huge").unwrap();
    ready.variants.push(extra);
    ready.variant_set = VariantSetVersion::of(&[b"another set"]);
    ready
}

pub async fn replace_files_moves_a_ready_record_and_keeps_the_old_files_listed(
    images: Arc<dyn ImageIndex>,
) {
    let images = images.as_ref();
    let before = ready_image(images, BASE).await;
    let new = other_generation(&before.generation);
    let keep = BASE.plus(mins(30));
    let after = images
        .replace_files(&before.id, &before.generation, &new, reprocessed(), keep)
        .await
        .unwrap()
        .expect("a ready record of the expected generation is replaced");
    assert_eq!(after.generation, new);
    assert_eq!(after.variant_set(), Some(&reprocessed().variant_set));
    let ImageState::Ready { variants, .. } = &after.state else {
        panic!("still ready");
    };
    assert_eq!(variants.len(), 3);
    assert_eq!(
        after.previous,
        Some(PreviousFiles {
            generation: before.generation.clone(),
            kept_until: keep,
        })
    );
    // Links, expiry and use are the record's own, not the files'.
    assert_eq!(
        (
            after.link_count,
            after.expires_at,
            after.last_update,
            after.created_at
        ),
        (
            before.link_count,
            before.expires_at,
            before.last_update,
            before.created_at
        )
    );
    assert_eq!(must_get(images, &before.id).await, after);

    // Retiring a variant keeps the generation, and the previous files stay listed.
    let mut fewer = reprocessed();
    fewer.variants.truncate(1);
    let retired = images
        .replace_files(&before.id, &new, &new, fewer, BASE.plus(mins(99)))
        .await
        .unwrap()
        .expect("the same generation is replaced in place");
    assert_eq!(retired.generation, new);
    assert_eq!(retired.previous, after.previous);
    let ImageState::Ready { variants, .. } = &retired.state else {
        panic!("still ready");
    };
    assert_eq!(variants.len(), 1);
}

pub async fn replace_files_refuses_a_stale_generation_a_claim_or_nothing(
    images: Arc<dyn ImageIndex>,
) {
    let images = images.as_ref();
    let record = ready_image(images, BASE).await;
    let stale = other_generation(&record.generation);
    let new = Generation::random();
    assert_eq!(
        images
            .replace_files(&record.id, &stale, &new, reprocessed(), BASE)
            .await
            .unwrap(),
        None
    );
    assert_eq!(must_get(images, &record.id).await, record);

    let claimed = random_image_id();
    let generation = claim_new(images, &claimed, BASE).await;
    assert_eq!(
        images
            .replace_files(&claimed, &generation, &new, reprocessed(), BASE)
            .await
            .unwrap(),
        None
    );
    assert!(!must_get(images, &claimed).await.is_ready());

    let missing = random_image_id();
    assert_eq!(
        images
            .replace_files(&missing, &generation, &new, reprocessed(), BASE)
            .await
            .unwrap(),
        None
    );
    assert_eq!(images.get(&missing).await.unwrap(), None);
}

pub async fn scan_sees_every_record_once_across_segments_and_pages(images: Arc<dyn ImageIndex>) {
    let images = images.as_ref();
    let mut mine = Vec::new();
    for _ in 0..6 {
        mine.push(ready_image(images, BASE).await.id);
    }
    let claimed = random_image_id();
    claim_new(images, &claimed, BASE).await;
    mine.push(claimed);

    let segments = 3;
    let mut seen: Vec<ImageId> = Vec::new();
    for segment in 0..segments {
        let mut cursor: Option<String> = None;
        loop {
            let page = images
                .scan(segment, segments, cursor.as_deref(), 2)
                .await
                .unwrap();
            seen.extend(page.records.into_iter().map(|r| r.id));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    for id in &mine {
        assert_eq!(
            seen.iter().filter(|s| *s == id).count(),
            1,
            "{id} is seen once across the segments"
        );
    }
}
