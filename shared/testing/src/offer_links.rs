//! The `OfferLinks` contract (with the `ImageIndex` it links records of).

use super::{
    BASE, CLAIM_TTL, LinkPorts, ORPHAN_TTL, mins, must_get, random_image_id, random_offer,
    ready_image, sample_ready,
};
use imgest_core::domain::{Generation, ImageId, OfferKey, Tenant, Timestamp};
use imgest_core::ports::{Claim, ImageIndex, KeyedLink, LinkError, OfferLinks};

contract_suite!($ offer_links_contract_tests, offer_links, LinkPorts;
    set_photos_keeps_the_order_and_replaces_the_list,
    unknown_images_are_refused_and_nothing_changes,
    link_counts_follow_every_offer,
    linked_images_never_expire,
    an_expired_image_is_linkable_once_revived,
    a_keyed_change_run_again_links_each_image_once,
    a_keyed_change_uses_the_link_its_photo_was_created_with,
    delete_offer_is_idempotent,
    one_offer_id_in_two_namespaces_is_two_offers,
    a_link_count_is_corrected_only_while_unchanged,
    scan_photo_lists_sees_every_offer_once_in_order,
    an_images_clients_are_those_whose_offers_link_it,
);

async fn set(offers: &dyn OfferLinks, offer: &OfferKey, ids: &[&ImageId], now: Timestamp) {
    let ids: Vec<ImageId> = ids.iter().map(|id| (*id).clone()).collect();
    offers
        .set_photos(offer, &ids, now, ORPHAN_TTL)
        .await
        .unwrap();
}

async fn photos(offers: &dyn OfferLinks, offer: &OfferKey) -> Option<Vec<ImageId>> {
    offers.photos(offer).await.unwrap()
}

/// (link_count, expires_at, last_update) of a stored record.
async fn links(images: &dyn ImageIndex, id: &ImageId) -> (u32, Option<Timestamp>, Timestamp) {
    let r = must_get(images, id).await;
    (r.link_count, r.expires_at, r.last_update)
}

fn owned(ids: &[&ImageId]) -> Vec<ImageId> {
    ids.iter().map(|id| (*id).clone()).collect()
}

pub async fn set_photos_keeps_the_order_and_replaces_the_list(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let t0 = BASE;
    let a = ready_image(images, t0).await.id;
    let b = ready_image(images, t0).await.id;
    let c = ready_image(images, t0).await.id;
    let d = ready_image(images, t0).await.id;
    let offer = random_offer();
    assert_eq!(photos(offers, &offer).await, None);

    let t1 = t0.plus(mins(1));
    set(offers, &offer, &[&a, &b, &c], t1).await;
    assert_eq!(photos(offers, &offer).await, Some(owned(&[&a, &b, &c])));
    for id in [&a, &b, &c] {
        assert_eq!(links(images, id).await, (1, None, t1), "newly linked {id}");
    }

    // Reordering changes no counts.
    let t2 = t1.plus(mins(1));
    set(offers, &offer, &[&c, &a, &b], t2).await;
    assert_eq!(photos(offers, &offer).await, Some(owned(&[&c, &a, &b])));
    for id in [&a, &b, &c] {
        assert_eq!(links(images, id).await.0, 1);
    }

    // Replacing links the new ones and orphans the dropped ones.
    let t3 = t2.plus(mins(1));
    set(offers, &offer, &[&b, &d], t3).await;
    assert_eq!(photos(offers, &offer).await, Some(owned(&[&b, &d])));
    for id in [&a, &c] {
        assert_eq!(
            links(images, id).await,
            (0, Some(t3.plus(ORPHAN_TTL)), t3),
            "dropped {id}"
        );
    }
    assert_eq!(links(images, &d).await, (1, None, t3));
    assert_eq!(links(images, &b).await.0, 1);

    // An empty list is a list: the offer exists with no photos.
    let t4 = t3.plus(mins(1));
    set(offers, &offer, &[], t4).await;
    assert_eq!(photos(offers, &offer).await, Some(Vec::new()));
    for id in [&b, &d] {
        assert_eq!(links(images, id).await, (0, Some(t4.plus(ORPHAN_TTL)), t4));
    }
}

pub async fn unknown_images_are_refused_and_nothing_changes(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let expired = ready_image(images, BASE).await.id; // expires BASE+60m
    let now = BASE.plus(mins(120));
    let a = ready_image(images, BASE.plus(mins(90))).await.id;
    let b = ready_image(images, BASE.plus(mins(90))).await.id;
    let processing = random_image_id();
    assert!(matches!(
        images
            .claim(
                &processing,
                &Generation::random(),
                now,
                CLAIM_TTL,
                ORPHAN_TTL
            )
            .await
            .unwrap(),
        Claim::New { .. }
    ));
    let never = random_image_id();

    let offer = random_offer();
    set(offers, &offer, &[&a, &b], now).await;
    let before = (links(images, &a).await, links(images, &b).await);

    let later = now.plus(mins(1));
    for bad in [&never, &processing, &expired] {
        let r = offers
            .set_photos(&offer, &owned(&[&b, bad, &a]), later, ORPHAN_TTL)
            .await;
        assert!(
            matches!(&r, Err(LinkError::UnknownImage(id)) if id == bad),
            "linking {bad}: {r:?}"
        );
        assert_eq!(photos(offers, &offer).await, Some(owned(&[&a, &b])));
        assert_eq!((links(images, &a).await, links(images, &b).await), before);
    }
    // The first unknown id is the one reported; dropping linked ones is undone too.
    let r = offers
        .set_photos(&offer, &owned(&[&processing, &never]), later, ORPHAN_TTL)
        .await;
    assert!(
        matches!(&r, Err(LinkError::UnknownImage(id)) if *id == processing),
        "{r:?}"
    );
    assert_eq!(photos(offers, &offer).await, Some(owned(&[&a, &b])));
    assert_eq!((links(images, &a).await, links(images, &b).await), before);

    // A new offer refused is not created.
    let other = random_offer();
    let r = offers
        .set_photos(&other, &owned(&[&a, &never]), later, ORPHAN_TTL)
        .await;
    assert!(
        matches!(&r, Err(LinkError::UnknownImage(id)) if *id == never),
        "{r:?}"
    );
    assert_eq!(photos(offers, &other).await, None);
    assert_eq!(links(images, &a).await, before.0);
    // The refused records are untouched too.
    assert!(must_get(images, &expired).await.is_expired(later));
    assert!(!must_get(images, &processing).await.is_ready());
    assert_eq!(images.get(&never).await.unwrap(), None);
}

pub async fn link_counts_follow_every_offer(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let x = ready_image(images, BASE).await.id;
    let (o1, o2) = (random_offer(), random_offer());
    let t1 = BASE.plus(mins(1));
    set(offers, &o1, &[&x], t1).await;
    set(offers, &o2, &[&x], t1).await;
    assert_eq!(links(images, &x).await, (2, None, t1));

    let t2 = t1.plus(mins(1));
    assert!(offers.delete_offer(&o1, t2, ORPHAN_TTL).await.unwrap());
    assert_eq!(photos(offers, &o1).await, None);
    assert_eq!(
        links(images, &x).await,
        (1, None, t2),
        "still linked by the other offer"
    );

    // A re-upload of a linked image refreshes it without giving it an expiry.
    let t3 = t2.plus(mins(1));
    let Claim::Existing(record) = images
        .claim(&x, &Generation::random(), t3, CLAIM_TTL, ORPHAN_TTL)
        .await
        .unwrap()
    else {
        panic!("a ready record must be claimed as existing");
    };
    assert_eq!(
        (record.link_count, record.expires_at, record.last_update),
        (1, None, t3)
    );
    assert_eq!(links(images, &x).await, (1, None, t3));

    let t4 = t3.plus(mins(1));
    assert!(offers.delete_offer(&o2, t4, ORPHAN_TTL).await.unwrap());
    assert_eq!(links(images, &x).await, (0, Some(t4.plus(ORPHAN_TTL)), t4));
    assert!(must_get(images, &x).await.is_expired(t4.plus(ORPHAN_TTL)));
}

pub async fn linked_images_never_expire(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let record = ready_image(images, BASE).await; // would expire BASE+60m
    let (x, g) = (&record.id, &record.generation);
    let offer = random_offer();
    set(offers, &offer, &[x], BASE.plus(mins(10))).await;

    let much_later = BASE.plus(mins(600));
    assert!(must_get(images, x).await.is_live(much_later));
    assert!(!images.delete_if_expired(x, g, much_later).await.unwrap());
    let expired = images.expired(much_later, 1000).await.unwrap();
    assert!(expired.iter().all(|r| &r.id != x));

    // Unlinked, it expires an orphan TTL later and can then be collected.
    set(offers, &offer, &[], much_later).await;
    assert!(!images.delete_if_expired(x, g, much_later).await.unwrap());
    let gone_at = much_later.plus(ORPHAN_TTL);
    assert!(images.delete_if_expired(x, g, gone_at).await.unwrap());
    let r = offers
        .set_photos(&offer, std::slice::from_ref(x), gone_at, ORPHAN_TTL)
        .await;
    assert!(
        matches!(&r, Err(LinkError::UnknownImage(id)) if id == x),
        "{r:?}"
    );
    assert_eq!(photos(offers, &offer).await, Some(Vec::new()));
}

pub async fn an_expired_image_is_linkable_once_revived(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let x = ready_image(images, BASE).await.id;
    let late = BASE.plus(mins(120));
    let offer = random_offer();
    let r = offers
        .set_photos(&offer, std::slice::from_ref(&x), late, ORPHAN_TTL)
        .await;
    assert!(
        matches!(&r, Err(LinkError::UnknownImage(id)) if *id == x),
        "{r:?}"
    );
    assert!(matches!(
        images
            .claim(&x, &Generation::random(), late, CLAIM_TTL, ORPHAN_TTL)
            .await
            .unwrap(),
        Claim::Existing(_)
    ));
    set(offers, &offer, &[&x], late).await;
    assert_eq!(links(images, &x).await, (1, None, late));
}

/// A crawled photo's record may be created with its crawl's link counted (a store that links
/// keyed changes with plain writes saves the crawl's write of it): whatever the store does,
/// the crawl's change counts that link once, other offers' links count beside it, and once
/// every offer dropped it a late run of the crawl links it again (never a count too low).
pub async fn a_keyed_change_uses_the_link_its_photo_was_created_with(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let t0 = BASE;
    let (offer, other, third) = (random_offer(), random_offer(), random_offer());
    let id = random_image_id();
    let first = KeyedLink {
        offer: offer.clone(),
        key: "crawl-1".into(),
    };
    let created = images
        .create_ready(
            &id,
            &Generation::random(),
            sample_ready(),
            t0,
            ORPHAN_TTL,
            Some(&first),
        )
        .await
        .unwrap()
        .expect("no record: created");
    assert_eq!(created, must_get(images, &id).await);
    assert!(created.is_ready() && created.is_live(t0));

    // Another offer links it first, by a plain change and by another crawl.
    let t1 = t0.plus(mins(1));
    set(offers, &other, &[&id], t1).await;
    offers
        .set_photos_keyed(&third, &owned(&[&id]), "crawl-9", t1, ORPHAN_TTL)
        .await
        .unwrap();
    // The crawl's change, run twice.
    for _ in 0..2 {
        offers
            .set_photos_keyed(&offer, &owned(&[&id]), "crawl-1", t1, ORPHAN_TTL)
            .await
            .unwrap();
    }
    assert_eq!(photos(offers, &offer).await, Some(owned(&[&id])));
    let r = must_get(images, &id).await;
    assert_eq!((r.link_count, r.expires_at), (3, None));
    let marks = images.keyed_links(&id).await.unwrap();
    assert!(
        marks.iter().all(|m| [&offer, &third].contains(&m)),
        "{marks:?}"
    );

    // The crawls' offers drop it, another still links it: their marks are gone with their
    // links, and a late run of the crawl's change links it again.
    let t2 = t1.plus(mins(1));
    for o in [&third, &offer] {
        set(offers, o, &[], t2).await;
    }
    assert_eq!(links(images, &id).await.0, 1);
    assert_eq!(
        images.keyed_links(&id).await.unwrap(),
        Vec::<OfferKey>::new()
    );
    let t3 = t2.plus(mins(1));
    offers
        .set_photos_keyed(&offer, &owned(&[&id]), "crawl-1", t3, ORPHAN_TTL)
        .await
        .unwrap();
    assert_eq!(links(images, &id).await.0, 2, "never a count too low");
    for o in [&other, &offer] {
        set(offers, o, &[], t3).await;
    }
    assert_eq!(links(images, &id).await, (0, Some(t3.plus(ORPHAN_TTL)), t3));

    // A photo whose crawl was replaced before it settled: the next crawl's link is counted
    // (the first one's may be too: one too many, never too few).
    let replaced = random_image_id();
    images
        .create_ready(
            &replaced,
            &Generation::random(),
            sample_ready(),
            t3,
            ORPHAN_TTL,
            Some(&first),
        )
        .await
        .unwrap()
        .expect("created");
    let next = random_offer();
    offers
        .set_photos_keyed(&next, &owned(&[&replaced]), "crawl-2", t3, ORPHAN_TTL)
        .await
        .unwrap();
    let r = must_get(images, &replaced).await;
    assert!((1..=2).contains(&r.link_count), "{} links", r.link_count);
    assert_eq!(r.expires_at, None);
}

pub async fn delete_offer_is_idempotent(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let unknown = random_offer();
    assert!(
        !offers
            .delete_offer(&unknown, BASE, ORPHAN_TTL)
            .await
            .unwrap()
    );

    let a = ready_image(images, BASE).await.id;
    let offer = random_offer();
    set(offers, &offer, &[&a], BASE).await;
    let t1 = BASE.plus(mins(1));
    assert!(offers.delete_offer(&offer, t1, ORPHAN_TTL).await.unwrap());
    let t2 = t1.plus(mins(1));
    assert!(!offers.delete_offer(&offer, t2, ORPHAN_TTL).await.unwrap());
    // The second delete did not unlink anything again.
    assert_eq!(links(images, &a).await, (0, Some(t1.plus(ORPHAN_TTL)), t1));
    assert_eq!(photos(offers, &offer).await, None);

    // An offer with no photos exists and is deleted like any other.
    let empty = random_offer();
    set(offers, &empty, &[], BASE).await;
    assert!(offers.delete_offer(&empty, t1, ORPHAN_TTL).await.unwrap());
    assert!(!offers.delete_offer(&empty, t1, ORPHAN_TTL).await.unwrap());
}

pub async fn a_keyed_change_run_again_links_each_image_once(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let t0 = BASE;
    let a = ready_image(images, t0).await.id;
    let b = ready_image(images, t0).await.id;
    let c = ready_image(images, t0).await.id;
    let (offer, other) = (random_offer(), random_offer());
    let keyed = |offer: OfferKey, ids: Vec<ImageId>, now: Timestamp| async move {
        offers
            .set_photos_keyed(&offer, &ids, "crawl-1", now, ORPHAN_TTL)
            .await
            .unwrap();
    };
    let t1 = t0.plus(mins(1));
    keyed(offer.clone(), owned(&[&a, &b]), t1).await;
    keyed(offer.clone(), owned(&[&a, &b]), t1).await;
    assert_eq!(photos(offers, &offer).await, Some(owned(&[&a, &b])));
    for id in [&a, &b] {
        assert_eq!(links(images, id).await, (1, None, t1), "{id}, run twice");
        // A store that marks a keyed change's links names its offer, and no other.
        let marks = images.keyed_links(id).await.unwrap();
        assert!(marks.iter().all(|m| m == &offer), "{id}: {marks:?}");
    }

    // Another offer's change under the same key is another change.
    keyed(other.clone(), owned(&[&b, &c]), t1).await;
    assert_eq!(links(images, &b).await.0, 2);
    assert_eq!(links(images, &c).await.0, 1);

    // The key names the change, not the images: dropped since, and linked again by a later
    // run of it, an image is counted again.
    let t2 = t1.plus(mins(1));
    set(offers, &offer, &[&b], t2).await;
    assert_eq!(links(images, &a).await, (0, Some(t2.plus(ORPHAN_TTL)), t2));
    assert_eq!(
        images.keyed_links(&a).await.unwrap(),
        Vec::<OfferKey>::new(),
        "an unlink removes the mark"
    );
    let t3 = t2.plus(mins(1));
    keyed(offer.clone(), owned(&[&a, &b]), t3).await;
    assert_eq!(photos(offers, &offer).await, Some(owned(&[&a, &b])));
    assert_eq!(links(images, &a).await, (1, None, t3));
    assert_eq!(links(images, &b).await.0, 2);

    // Unknown images are refused as by `set_photos`, and nothing changes.
    let never = random_image_id();
    let r = offers
        .set_photos_keyed(&offer, &owned(&[&c, &never]), "crawl-2", t3, ORPHAN_TTL)
        .await;
    assert!(
        matches!(&r, Err(LinkError::UnknownImage(id)) if id == &never),
        "{r:?}"
    );
    assert_eq!(photos(offers, &offer).await, Some(owned(&[&a, &b])));
    assert_eq!(links(images, &c).await.0, 1);
}

pub async fn one_offer_id_in_two_namespaces_is_two_offers(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let a = ready_image(images, BASE).await.id;
    let b = ready_image(images, BASE).await.id;
    let mine = random_offer();
    let theirs = OfferKey::new(Tenant::Client(super::random_client()), mine.id().clone());
    let shared = OfferKey::shared(mine.id().clone());
    let t1 = BASE.plus(mins(1));
    set(offers, &mine, &[&a], t1).await;
    assert_eq!(
        photos(offers, &theirs).await,
        None,
        "another client's offer is not there"
    );
    assert_eq!(photos(offers, &shared).await, None);
    set(offers, &theirs, &[&a, &b], t1).await;
    set(offers, &shared, &[&b], t1).await;
    assert_eq!(photos(offers, &mine).await, Some(owned(&[&a])));
    assert_eq!(photos(offers, &theirs).await, Some(owned(&[&a, &b])));
    assert_eq!(photos(offers, &shared).await, Some(owned(&[&b])));
    assert_eq!(links(images, &a).await.0, 2);
    assert_eq!(links(images, &b).await.0, 2);

    let t2 = t1.plus(mins(1));
    assert!(offers.delete_offer(&theirs, t2, ORPHAN_TTL).await.unwrap());
    assert_eq!(photos(offers, &mine).await, Some(owned(&[&a])), "untouched");
    assert_eq!(
        photos(offers, &shared).await,
        Some(owned(&[&b])),
        "untouched"
    );
    assert_eq!(links(images, &a).await.0, 1);
    assert_eq!(links(images, &b).await.0, 1);
}

/// Who may see an image among near-duplicates: every client whose offer links it (by a plain
/// or a keyed change), never a client that did not, never open mode's shared offers.
pub async fn an_images_clients_are_those_whose_offers_link_it(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let a = ready_image(images, BASE).await.id;
    let b = ready_image(images, BASE).await.id;
    let (acme, globex, initech) = (
        super::random_client(),
        super::random_client(),
        super::random_client(),
    );
    let of = |client: &imgest_core::domain::ClientId| {
        OfferKey::new(Tenant::Client(client.clone()), random_offer().id().clone())
    };
    let t1 = BASE.plus(mins(1));
    assert_eq!(offers.linking_clients(&a).await.unwrap(), vec![]);
    set(offers, &of(&acme), &[&a], t1).await;
    set(offers, &of(&acme), &[&a, &b], t1).await;
    offers
        .set_photos_keyed(&of(&globex), &owned(&[&a]), "crawl-1", t1, ORPHAN_TTL)
        .await
        .unwrap();
    set(
        offers,
        &OfferKey::shared(random_offer().id().clone()),
        &[&b],
        t1,
    )
    .await;
    let mut clients = offers.linking_clients(&a).await.unwrap();
    clients.sort_by(|x, y| x.as_str().cmp(y.as_str()));
    let mut want = vec![acme.clone(), globex.clone()];
    want.sort_by(|x, y| x.as_str().cmp(y.as_str()));
    assert_eq!(clients, want);
    assert!(!clients.contains(&initech));
    assert_eq!(offers.linking_clients(&b).await.unwrap(), vec![acme]);
    assert_eq!(
        offers
            .linking_clients(&super::random_image_id())
            .await
            .unwrap(),
        vec![],
        "an image never stored"
    );
}

pub async fn a_link_count_is_corrected_only_while_unchanged(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let x = ready_image(images, BASE).await.id;
    let o = random_offer();
    let t1 = BASE.plus(mins(1));
    set(offers, &o, &[&x], t1).await;
    let seen = must_get(images, &x).await;

    // Too low (1 offer, count 1 → 3 by the correction itself), then back down to the truth.
    let t2 = t1.plus(mins(30));
    assert!(
        images
            .correct_link_count(&seen, 3, t2, ORPHAN_TTL)
            .await
            .unwrap()
    );
    assert_eq!(links(images, &x).await, (3, None, t1));
    // A correction made on a stale read is refused.
    assert!(
        !images
            .correct_link_count(&seen, 1, t2, ORPHAN_TTL)
            .await
            .unwrap()
    );
    let now_seen = must_get(images, &x).await;
    assert!(
        images
            .correct_link_count(&now_seen, 1, t2, ORPHAN_TTL)
            .await
            .unwrap()
    );
    assert_eq!(links(images, &x).await, (1, None, t1));

    // A link meanwhile moves `last_update`: the correction read before it is refused.
    let read = must_get(images, &x).await;
    let o2 = random_offer();
    set(offers, &o2, &[&x], t2).await;
    assert!(
        !images
            .correct_link_count(&read, 0, t2, ORPHAN_TTL)
            .await
            .unwrap()
    );
    assert_eq!(links(images, &x).await, (2, None, t2));

    // Lowered to 0, the image is an orphan that expires.
    let y = ready_image(images, BASE).await;
    let mut linked = y.clone();
    assert!(
        images
            .correct_link_count(&y, 1, t1, ORPHAN_TTL)
            .await
            .unwrap()
    );
    linked.link_count = 1;
    assert!(
        images
            .correct_link_count(&linked, 0, t2, ORPHAN_TTL)
            .await
            .unwrap()
    );
    assert_eq!(
        links(images, &y.id).await,
        (0, Some(t2.plus(ORPHAN_TTL)), BASE)
    );
}

pub async fn scan_photo_lists_sees_every_offer_once_in_order(ports: LinkPorts) {
    let (images, offers) = (ports.images.as_ref(), ports.offers.as_ref());
    let (a, b) = (
        ready_image(images, BASE).await.id,
        ready_image(images, BASE).await.id,
    );
    let mut mine = Vec::new();
    for list in [vec![&a, &b], vec![&b, &a], vec![&b], vec![]] {
        let offer = random_offer();
        set(offers, &offer, &list, BASE).await;
        mine.push(owned(&list));
    }
    let segments = 2;
    let mut lists = Vec::new();
    for segment in 0..segments {
        let mut cursor: Option<String> = None;
        loop {
            let page = offers
                .scan_photo_lists(segment, segments, cursor.as_deref(), 2)
                .await
                .unwrap();
            lists.extend(page.lists);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    // Other checks' offers share the store: look only at lists of these two images.
    let ours: Vec<&Vec<ImageId>> = lists
        .iter()
        .filter(|l| l.iter().any(|id| *id == a || *id == b))
        .collect();
    for list in mine.iter().filter(|l| !l.is_empty()) {
        assert_eq!(ours.iter().filter(|l| **l == list).count(), 1, "{list:?}");
    }
    assert_eq!(ours.len(), 3);
}
