//! The rows of near-duplicate detection (`Similar`, `IMGEST_SIMILAR`; nothing when `off`): the
//! index's writes (each new photo's hashes and points filed, each collected one's removed), a
//! report's lookups (and the lookup points it keeps for the crawl's settle), the busiest
//! bucket's and point key's partitions, the index's storage, and what they add to the table
//! and the bill. The figures of the index are measured by `bench/similar.sh` on 10,057 photos
//! (docs/benchmarks.md#near-duplicates).

use super::model::{Report, fmt};
use super::scenario::{Scenario, Similar};

/// Share of photos with a flat border, whose trimmed part is filed too (measured by
/// `bench/similar.sh`: 2,558 of 10,057 photos, 20.1 entries an image).
const TRIMMED_SHARE: f64 = 0.254;
/// Share of the filed images under the busiest bucket (measured: 27 of 10,057, 30 in an earlier
/// run; on uniform hashes it would be 1 in 65,536: PDQ's slices are not uniform).
const BUSIEST_BUCKET_SHARE: f64 = 0.003;
/// Buckets a lookup reads (measured median; at most 256).
const LOOKUP_BUCKETS: f64 = 128.0;
/// An entry on DynamoDB, bytes: keys, the hash in hex (the whole photo's entries its inner
/// part's too: 64 more in 1 of 1 + [`TRIMMED_SHARE`] entries), its expiry (the 100 bytes of
/// overhead a stored item is billed are in [`ENTRY_STORED_BYTES`]).
const ENTRY_BYTES: f64 = 155.0 + 64.0 / (1.0 + TRIMMED_SHARE);
const ENTRY_STORED_BYTES: f64 = ENTRY_BYTES + 100.0;
/// Buckets: 16 slices of 16 bits.
const BUCKETS: f64 = 16.0 * 65_536.0;
/// Points filed an image (measured; at most 16).
const POINTS_PER_IMAGE: f64 = 14.9;
/// Point keys a lookup reads (measured: a median of 306 keys in all, less the hashes' 128; at
/// most 224: two per point at 7 scales).
const LOOKUP_POINT_KEYS: f64 = 178.0;
/// Share of the filed images under the busiest point key (measured: 134 of 10,057; plain edges
/// and corners are not filed, or it was 7 %; at most `MAX_BUCKET_ENTRIES` of it are read).
const BUSIEST_KEY_SHARE: f64 = 0.0133;
/// A point's entry on DynamoDB, bytes: keys (`p` and 6 hex digits; `{id}.p{n}`), the point in
/// hex (22), its expiry; and with the 100 bytes a stored item is billed.
const POINT_ENTRY_BYTES: f64 = 117.0;
const POINT_ENTRY_STORED_BYTES: f64 = POINT_ENTRY_BYTES + 100.0;
/// Point keys: 24 bits.
const POINT_KEYS: f64 = 16_777_216.0;
/// Write units of the lookup points a photo stored in report mode keeps for a day (7 scales of
/// up to 16 points, base64: about 1.8 KB with its keys), and read units of the settle's read.
const KEPT_POINTS_WCU: f64 = 2.0;
const KEPT_POINTS_RCU: f64 = 1.0;

/// What the index adds to the table and the bill.
#[derive(Debug, Default)]
pub(super) struct IndexLoad {
    pub wcu: f64,
    pub rcu: f64,
}

/// The index's rows at `new_photos` new photos and `orphans` collected ones a second.
pub(super) fn rows(r: &mut Report, s: &Scenario, new_photos: f64, orphans: f64) -> IndexLoad {
    let mode = s.deployment.similar;
    if mode == Similar::Off {
        return IndexLoad::default();
    }
    let lim = &s.limits;
    let hot = lim.partition_fraction * lim.partition_wcu;
    let hash_entries = 16.0 * (1.0 + TRIMMED_SHARE);
    let entries = hash_entries + POINTS_PER_IMAGE;
    let kept = if mode == Similar::Report {
        new_photos * KEPT_POINTS_WCU
    } else {
        0.0
    };
    let wcu = (new_photos + orphans) * entries + kept;
    r.row(
        "dynamodb",
        "near-duplicate index: write units/s",
        wcu,
        "WCU/s",
        None,
        format!(
            "(new photos {} + collected {}) /s × {} entries [16 × (1 + trimmed share {}) hashes' + {} points], 1 unit each, + new photos × {} units of kept lookup points in report mode; in the table's row",
            fmt(new_photos),
            fmt(orphans),
            fmt(entries),
            fmt(TRIMMED_SHARE),
            fmt(POINTS_PER_IMAGE),
            fmt(KEPT_POINTS_WCU)
        ),
    );
    r.row(
        "dynamodb",
        "near-duplicate index: the busiest point key's write units/s",
        (new_photos + orphans) * BUSIEST_KEY_SHARE,
        "WCU/s",
        Some(hot),
        format!(
            "(new photos {} + collected {}) /s × its share {} of the images (measured)",
            fmt(new_photos),
            fmt(orphans),
            fmt(BUSIEST_KEY_SHARE)
        ),
    );
    r.row(
        "dynamodb",
        "near-duplicate index: the busiest bucket's write units/s",
        (new_photos + orphans) * BUSIEST_BUCKET_SHARE,
        "WCU/s",
        Some(hot),
        format!(
            "(new photos {} + collected {}) /s × its share {} of the images (measured)",
            fmt(new_photos),
            fmt(orphans),
            fmt(BUSIEST_BUCKET_SHARE)
        ),
    );
    let mut rcu = 0.0;
    if mode == Similar::Report {
        // A bucket is read consistently: 1 unit per 4 KB of its entries, at least 1; a lookup
        // reads at most MAX_BUCKET_ENTRIES of one.
        let cap = imgest_flows::similar::MAX_BUCKET_ENTRIES as f64;
        let per_bucket = |filed: f64| (filed.min(cap) * ENTRY_BYTES / 4096.0).max(1.0);
        let average = s.load.stored_images * hash_entries / BUCKETS;
        let per_key = |filed: f64| (filed.min(cap) * POINT_ENTRY_BYTES / 4096.0).max(1.0);
        let average_key = s.load.stored_images * POINTS_PER_IMAGE / POINT_KEYS;
        rcu = new_photos
            * (LOOKUP_BUCKETS * per_bucket(average)
                + LOOKUP_POINT_KEYS * per_key(average_key)
                + KEPT_POINTS_RCU);
        r.row(
            "dynamodb",
            "near-duplicate lookups: read units/s",
            rcu,
            "RCU/s",
            None,
            format!(
                "new photos {}/s × ({} buckets × {} units [{} entries a bucket: stored {} × {} ÷ {} buckets, at most {}] + {} point keys × {} units [{} entries a key] + {} unit of kept points); in the table's row",
                fmt(new_photos),
                fmt(LOOKUP_BUCKETS),
                fmt(per_bucket(average)),
                fmt(average),
                fmt(s.load.stored_images),
                fmt(hash_entries),
                fmt(BUCKETS),
                fmt(cap),
                fmt(LOOKUP_POINT_KEYS),
                fmt(per_key(average_key)),
                fmt(average_key),
                fmt(KEPT_POINTS_RCU)
            ),
        );
        let busiest_key = s.load.stored_images * BUSIEST_KEY_SHARE;
        let key_read_share = (LOOKUP_POINT_KEYS * BUSIEST_KEY_SHARE / POINTS_PER_IMAGE).min(1.0);
        r.row(
            "dynamodb",
            "near-duplicate lookups: the busiest point key's read units/s",
            new_photos * key_read_share * per_key(busiest_key),
            "RCU/s",
            Some(lim.partition_fraction * lim.partition_rcu),
            format!(
                "new photos {}/s × the share of lookups reading it {} [{} keys × its share of points {} ÷ {}, at most 1] × {} units [{} entries, at most {}]",
                fmt(new_photos),
                fmt(key_read_share),
                fmt(LOOKUP_POINT_KEYS),
                fmt(BUSIEST_KEY_SHARE),
                fmt(POINTS_PER_IMAGE),
                fmt(per_key(busiest_key)),
                fmt(busiest_key),
                fmt(cap)
            ),
        );
        let busiest = s.load.stored_images * BUSIEST_BUCKET_SHARE;
        r.row(
            "dynamodb",
            "near-duplicate lookups: the busiest bucket's read units/s",
            new_photos * 4.0 * BUSIEST_BUCKET_SHARE * per_bucket(busiest),
            "RCU/s",
            Some(lim.partition_fraction * lim.partition_rcu),
            format!(
                "new photos {}/s × 4 hashes probed × its share {} × {} units [{} entries, at most {}]",
                fmt(new_photos),
                fmt(BUSIEST_BUCKET_SHARE),
                fmt(per_bucket(busiest)),
                fmt(busiest),
                fmt(cap)
            ),
        );
    }
    IndexLoad { wcu, rcu }
}

/// The index's storage, dollars an hour (a month's price ÷ 730).
pub(super) fn storage_dollars_per_h(s: &Scenario) -> (f64, String) {
    if s.deployment.similar == Similar::Off {
        return (0.0, String::new());
    }
    let entries = 16.0 * (1.0 + TRIMMED_SHARE);
    let bytes = entries * ENTRY_STORED_BYTES + POINTS_PER_IMAGE * POINT_ENTRY_STORED_BYTES;
    let gb = s.load.stored_images * bytes / 1e9;
    (
        gb * s.prices.dynamodb_gb_month / 730.0,
        format!(
            "stored {} × ({} hash entries × {} B + {} points × {} B) ÷ 1 GB × ${}/GB-month ÷ 730 h",
            fmt(s.load.stored_images),
            fmt(entries),
            fmt(ENTRY_STORED_BYTES),
            fmt(POINTS_PER_IMAGE),
            fmt(POINT_ENTRY_STORED_BYTES),
            fmt(s.prices.dynamodb_gb_month)
        ),
    )
}
