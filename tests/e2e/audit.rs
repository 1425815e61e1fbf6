//! The audit: records checked against their files, link counts against the offers.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use imgest_core::domain::OfferKey;
use imgest_core::domain::{BlobKey, ImageId, ImageRecord};
use imgest_flows::audit::{AuditScope, Finding, FindingsOptions, SETTLE, SnapshotCount};

use crate::support::TestApp;

async fn record(app: &TestApp, id: &str) -> ImageRecord {
    let id = ImageId::parse(id).unwrap();
    app.service.ports().images.get(&id).await.unwrap().unwrap()
}

#[tokio::test]
async fn the_audit_mends_counts_and_files_it_can_and_reports_the_rest() {
    let app = TestApp::start().await;
    let ids: Vec<String> = {
        let mut ids = Vec::new();
        for i in 0..4 {
            ids.push(
                app.upload_ok(&imgest_hosts::hostile::jpeg(40 + i, 30, false, None))
                    .await,
            );
        }
        ids
    };
    assert_eq!(app.link("a", &[&ids[0], &ids[3]]).await.status, 200);
    let images = &app.service.ports().images;
    let now = app.service.ports().clock.now();
    let ttl = app.service.policy().orphan_ttl;
    // A count too high (what a keyed crawl link may leave), one too low (a bug), a variant
    // lost, an original lost.
    let high = record(&app, &ids[0]).await;
    assert!(images.correct_link_count(&high, 3, now, ttl).await.unwrap());
    let low = record(&app, &ids[3]).await;
    assert!(images.correct_link_count(&low, 0, now, ttl).await.unwrap());
    let damaged = record(&app, &ids[1]).await;
    let variant = BlobKey::variant(
        &damaged.id,
        &damaged.generation,
        &imgest_core::domain::VariantName::parse("medium").unwrap(),
        imgest_core::domain::OutputFormat::Jpeg,
    );
    let broken = record(&app, &ids[2]).await;
    let blobs = &app.service.ports().blobs;
    blobs
        .delete(&[
            variant.clone(),
            BlobKey::original(&broken.id, &broken.generation),
        ])
        .await
        .unwrap();

    // Counts changed a moment ago are reported, not corrected.
    let fresh = app.service.audit(true).await.unwrap();
    assert_eq!(
        (
            fresh.images_checked,
            fresh.images_missing_files,
            fresh.images_broken,
            fresh.images_repaired,
            fresh.link_counts_too_high,
            fresh.link_counts_too_low,
            fresh.link_counts_unsettled,
            fresh.link_counts_corrected,
        ),
        (4, 2, 1, 0, 1, 1, 2, 0),
        "{fresh:?}"
    );
    assert!(
        blobs.get(&variant).await.is_err(),
        "a dry run mends nothing"
    );

    app.advance_clock(SETTLE + Duration::from_secs(1));
    let report = app.service.audit(false).await.unwrap();
    assert_eq!(
        (
            report.images_repaired,
            report.images_broken,
            report.link_counts_corrected,
            report.links_to_missing_images
        ),
        (1, 1, 2, 0),
        "{report:?}"
    );
    assert_eq!(record(&app, &ids[0]).await.link_count, 1);
    assert_eq!(record(&app, &ids[3]).await.link_count, 1);
    // The damaged image was rebuilt from its original, under a new generation.
    let repaired = app.get(&format!("/v1/images/{}", ids[1])).await;
    for v in repaired.json["variants"].as_object().unwrap().values() {
        assert_eq!(app.get_bytes(v["url"].as_str().unwrap()).await.0, 200);
    }
    assert_ne!(record(&app, &ids[1]).await.generation, damaged.generation);

    // A second audit finds only what cannot be mended.
    // Watched (as `imgest audit` draws its progress): told as records are checked and offers
    // counted, and last with every record checked and every offer counted.
    let mut so_far = Vec::new();
    let again = app
        .service
        .audit_scope_watched(AuditScope::All, false, |r| so_far.push(*r))
        .await
        .unwrap();
    let last = so_far.last().unwrap();
    assert_eq!(
        (last.images_checked, last.offers_counted),
        (again.images_checked, again.offers_counted),
        "{so_far:?}"
    );
    assert!(
        so_far.is_sorted_by_key(|r| (r.images_checked, r.offers_counted)),
        "{so_far:?}"
    );
    assert_eq!(
        (
            again.images_missing_files,
            again.images_broken,
            again.link_counts_too_high + again.link_counts_too_low
        ),
        (1, 1, 0),
        "{again:?}"
    );
}

#[tokio::test]
async fn the_scheduled_audit_covers_every_record_once_a_cycle_a_segment_a_run() {
    let app = TestApp::start().await;
    let mut ids = Vec::new();
    for i in 0..8 {
        ids.push(
            app.upload_ok(&imgest_hosts::hostile::jpeg(40 + i, 30, false, None))
                .await,
        );
    }
    assert_eq!(app.link("a", &[&ids[0], &ids[5]]).await.status, 200);
    assert_eq!(app.link("b", &[&ids[5]]).await.status, 200);
    let images = &app.service.ports().images;
    let now = app.service.ports().clock.now();
    let ttl = app.service.policy().orphan_ttl;
    let high = record(&app, &ids[0]).await;
    assert!(images.correct_link_count(&high, 4, now, ttl).await.unwrap());
    let low = record(&app, &ids[5]).await;
    assert!(images.correct_link_count(&low, 1, now, ttl).await.unwrap());
    app.advance_clock(SETTLE + Duration::from_secs(1));

    let mut segments = Vec::new();
    let (mut checked, mut corrected, mut offers) = (0, 0, 0);
    for _ in 0..4 {
        let (segment, report) = app.service.audit_next_segment(4).await.unwrap();
        segments.push(segment);
        checked += report.images_checked;
        corrected += report.link_counts_corrected;
        offers += report.offers_counted;
        assert_eq!(report.links_to_missing_images, 0, "{report:?}");
    }
    assert_eq!(segments, [0, 1, 2, 3]);
    assert_eq!((checked, corrected), (8, 2));
    assert_eq!(offers, 8, "every run reads every offer");
    assert_eq!(record(&app, &ids[0]).await.link_count, 1);
    assert_eq!(record(&app, &ids[5]).await.link_count, 2);
    // The next run starts the next cycle.
    assert_eq!(app.service.audit_next_segment(4).await.unwrap().0, 0);
}

#[tokio::test]
async fn findings_of_a_snapshot_are_mended_only_where_the_record_is_the_one_it_held() {
    let app = TestApp::start().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            app.upload_ok(&imgest_hosts::hostile::jpeg(50 + i, 30, false, None))
                .await,
        );
    }
    assert_eq!(
        app.link("a", &[&ids[0], &ids[1], &ids[2]]).await.status,
        200
    );
    let images = &app.service.ports().images;
    let ttl = app.service.policy().orphan_ttl;
    // Counts too high, as a keyed crawl link may leave them; a variant of one lost.
    for id in &ids {
        let now = app.service.ports().clock.now();
        let r = record(&app, id).await;
        assert!(images.correct_link_count(&r, 2, now, ttl).await.unwrap());
    }
    let damaged = record(&app, &ids[2]).await;
    let variant = BlobKey::variant(
        &damaged.id,
        &damaged.generation,
        &imgest_core::domain::VariantName::parse("medium").unwrap(),
        imgest_core::domain::OutputFormat::Jpeg,
    );
    let blobs = &app.service.ports().blobs;
    blobs.delete(std::slice::from_ref(&variant)).await.unwrap();
    // The export: a snapshot taken once the counts settled.
    app.advance_clock(SETTLE + Duration::from_secs(1));
    let as_of = app.service.ports().clock.now();
    let snapshot: Vec<SnapshotCount> = {
        let mut held = Vec::new();
        for id in &ids {
            held.push(SnapshotCount {
                offers: 1,
                last_update: record(&app, id).await.last_update,
            });
        }
        held
    };
    // After the export, the second image is linked again (its record moves on).
    assert_eq!(app.link("b", &[&ids[1]]).await.status, 200);
    let findings: Vec<Finding> = ids
        .iter()
        .zip(&snapshot)
        .map(|(id, count)| Finding {
            id: ImageId::parse(id).unwrap(),
            count: Some(*count),
        })
        .collect();

    let dry = app
        .service
        .audit_findings(&findings, as_of, FindingsOptions::dry_run())
        .await
        .unwrap();
    assert_eq!(
        (
            dry.link_counts_too_high,
            dry.link_counts_unsettled,
            dry.link_counts_corrected
        ),
        (2, 1, 0),
        "{dry:?}"
    );
    assert!(
        blobs.get(&variant).await.is_err(),
        "a dry run mends nothing"
    );

    let report = app
        .service
        .audit_findings(&findings, as_of, FindingsOptions::apply())
        .await
        .unwrap();
    assert_eq!(
        (
            report.images_checked,
            report.images_repaired,
            report.link_counts_corrected,
            report.link_counts_unsettled
        ),
        (3, 1, 2, 1),
        "{report:?}"
    );
    assert_eq!(record(&app, &ids[0]).await.link_count, 1);
    assert_eq!(
        record(&app, &ids[1]).await.link_count,
        3,
        "changed since the snapshot: left alone"
    );
    let repaired = record(&app, &ids[2]).await;
    assert_eq!(repaired.link_count, 1);
    assert_ne!(
        repaired.generation, damaged.generation,
        "rebuilt from its original"
    );
    let files_only = Finding {
        id: repaired.id.clone(),
        count: None,
    };
    let again = app
        .service
        .audit_findings(&[files_only], as_of, FindingsOptions::dry_run())
        .await
        .unwrap();
    assert_eq!((again.images_checked, again.images_missing_files), (1, 0));

    // A snapshot taken while a count was still moving (linked a moment before it) corrects
    // nothing, however long after it is mended.
    assert_eq!(app.link("c", &[&ids[0]]).await.status, 200);
    let now = app.service.ports().clock.now();
    let r = record(&app, &ids[0]).await;
    assert!(images.correct_link_count(&r, 5, now, ttl).await.unwrap());
    let moving = Finding {
        id: r.id.clone(),
        count: Some(SnapshotCount {
            offers: 2,
            last_update: record(&app, &ids[0]).await.last_update,
        }),
    };
    app.advance_clock(SETTLE + Duration::from_secs(1));
    let early = app
        .service
        .audit_findings(&[moving], now, FindingsOptions::apply())
        .await
        .unwrap();
    assert_eq!(
        (early.link_counts_unsettled, early.link_counts_corrected),
        (1, 0)
    );
    assert_eq!(record(&app, &ids[0]).await.link_count, 5);
}

/// A finding of `id` as the snapshot held it: listed by `offers`, its record as it is now.
async fn finding(app: &TestApp, id: &str, offers: u32) -> Finding {
    Finding {
        id: ImageId::parse(id).unwrap(),
        count: Some(SnapshotCount {
            offers,
            last_update: record(app, id).await.last_update,
        }),
    }
}

async fn counts(app: &TestApp, ids: &[String]) -> Vec<u32> {
    let mut out = Vec::new();
    for id in ids {
        out.push(record(app, id).await.link_count);
    }
    out
}

/// A wrong or tampered findings file (`image_id,0,<last_update>` for live photos) lowers no
/// count the live offers do not confirm, acts only when told to, and a run that would lower
/// more counts than it may changes nothing.
async fn findings_the_offers_contradict_change_nothing_on(app: &TestApp) {
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            app.upload_ok(&imgest_hosts::hostile::jpeg(60 + i, 30, false, None))
                .await,
        );
    }
    let (a, b) = (&ids[0], &ids[1]);
    assert_eq!(
        app.link("x", &[a, b, &ids[2], &ids[3], &ids[4]])
            .await
            .status,
        200
    );
    assert_eq!(app.link("y", &[b]).await.status, 200);
    // Three counts one too high, as a keyed crawl link may leave them.
    let images = &app.service.ports().images;
    let ttl = app.service.policy().orphan_ttl;
    for id in &ids[2..] {
        let now = app.service.ports().clock.now();
        let r = record(app, id).await;
        assert!(images.correct_link_count(&r, 2, now, ttl).await.unwrap());
    }
    app.advance_clock(SETTLE + Duration::from_secs(1));
    let as_of = app.service.ports().clock.now();
    let before = counts(app, &ids).await;
    assert_eq!(before, [1, 2, 2, 2, 2]);
    let tampered = vec![
        finding(app, a, 0).await,
        finding(app, b, 0).await,
        finding(app, b, 1).await,
    ];
    let genuine = vec![
        finding(app, &ids[2], 1).await,
        finding(app, &ids[3], 1).await,
        finding(app, &ids[4], 1).await,
    ];
    let all: Vec<Finding> = tampered.iter().chain(&genuine).cloned().collect();

    // A dry run unless told otherwise: it reports and writes nothing.
    let dry = app
        .service
        .audit_findings(&all, as_of, FindingsOptions::dry_run())
        .await
        .unwrap();
    assert_eq!(
        (
            dry.link_counts_disputed,
            dry.link_counts_too_high,
            dry.link_counts_corrected
        ),
        (3, 3, 0),
        "{dry:?}"
    );
    assert_eq!(counts(app, &ids).await, before);

    // Three lowerings confirmed, but one more than this run may make: nothing changes.
    let capped = FindingsOptions {
        apply: true,
        max_lowered: 2,
    };
    let refused = app
        .service
        .audit_findings(&all, as_of, capped)
        .await
        .unwrap();
    assert_eq!(
        (refused.link_counts_over_cap, refused.link_counts_corrected),
        (3, 0),
        "{refused:?}"
    );
    assert_eq!(counts(app, &ids).await, before);

    // Applied: only what the live offers confirm.
    let applied = app
        .service
        .audit_findings(&all, as_of, FindingsOptions::apply())
        .await
        .unwrap();
    assert_eq!(
        (
            applied.link_counts_disputed,
            applied.link_counts_corrected,
            applied.link_counts_over_cap
        ),
        (3, 3, 0),
        "{applied:?}"
    );
    assert_eq!(counts(app, &ids).await, [1, 2, 1, 1, 1]);
    // The tampered lines alone, applied: the photos offers show keep their counts and never
    // expire.
    let again = app
        .service
        .audit_findings(&tampered, as_of, FindingsOptions::apply())
        .await
        .unwrap();
    assert_eq!(again.link_counts_corrected, 0, "{again:?}");
    for id in [a, b] {
        assert_eq!(record(app, id).await.expires_at, None, "{id}");
    }
}

#[tokio::test]
async fn findings_the_offers_contradict_change_nothing() {
    findings_the_offers_contradict_change_nothing_on(&TestApp::start().await).await;
}

#[tokio::test]
async fn findings_the_offers_contradict_change_nothing_on_aws() {
    let Some(app) = TestApp::start_aws("audit findings on aws", &[]).await else {
        return;
    };
    findings_the_offers_contradict_change_nothing_on(&app).await;
}

/// The race a keyed link leaves open: a crawl linked a photo and died before its offer's
/// write (its count is one too high, marked as that crawl's), the offers are counted, then the
/// crawl's redelivery lists the photo using that link, without touching the record. The count
/// is then right, and the audit must not lower it.
#[tokio::test]
async fn a_count_whose_keyed_link_its_offer_now_lists_is_never_lowered() {
    let test = "audit keyed link on aws";
    let Some(config) = imgest_testing::aws::sdk_config(test).await else {
        return;
    };
    let app = TestApp::start_aws(test, &[]).await.unwrap();
    let (_, table) = app.aws.clone().unwrap();
    let photo = app
        .upload_ok(&imgest_hosts::hostile::jpeg(70, 30, false, None))
        .await;
    assert_eq!(app.link("listed", &[&photo]).await.status, 200);
    let crawled = OfferKey::shared(imgest_core::domain::OfferId::parse("crawled").unwrap());
    // What the crawl's first run wrote before it died: the photo linked and marked.
    aws_sdk_dynamodb::Client::new(&config)
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(format!("image#{photo}")))
        .key("sk", AttributeValue::S("image".into()))
        .update_expression("SET link_count = link_count + :one, linked_by = :mark")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .expression_attribute_values(":mark", AttributeValue::S(format!("{crawled}#crawl-7")))
        .send()
        .await
        .unwrap();
    app.advance_clock(SETTLE + Duration::from_secs(1));
    let as_of = app.service.ports().clock.now();
    let findings = vec![finding(&app, &photo, 1).await];
    let plan = app.service.plan_findings(&findings, as_of).await.unwrap();
    assert_eq!(plan.lowerings(), 1, "{:?}", plan.report());

    // The crawl's redelivery uses the marked link: the offer lists the photo, its record
    // is as the plan read it.
    let seen = record(&app, &photo).await;
    let now = app.service.ports().clock.now();
    let ttl = app.service.policy().orphan_ttl;
    let id = ImageId::parse(&photo).unwrap();
    app.service
        .ports()
        .offers
        .set_photos_keyed(&crawled, std::slice::from_ref(&id), "crawl-7", now, ttl)
        .await
        .unwrap();
    assert_eq!(record(&app, &photo).await, seen);

    let report = app
        .service
        .apply_findings(plan, FindingsOptions::DEFAULT_MAX_LOWERED)
        .await
        .unwrap();
    assert_eq!(
        (report.link_counts_corrected, report.link_counts_disputed),
        (0, 1),
        "{report:?}"
    );
    assert_eq!(
        record(&app, &photo).await.link_count,
        2,
        "two offers list it"
    );
}
