//! Near-duplicates: the same photo re-encoded, resized, watermarked, mirrored or padded, found
//! across offers by its perceptual signature (`imgest_core::domain::Signature`).
//!
//! The index is multi-index hashing over the record groups of the documents port: each indexed
//! hash is filed under its [`SLICES`] buckets (slice number and 16-bit value; group
//! `similar/{bucket}`), the member named by the image (`{id}`, or `{id}.t` for the trimmed
//! part's hash) and holding the hash itself (the whole photo's entries its inner part's hash
//! too), so a lookup's distance check needs no second read. A lookup reads, for each hash it
//! probes with (the photo's, its mirror's, and the trimmed part's two when it has a border),
//! the buckets [`Bucket::probes`] names (each slice's value, and with its two weak bits
//! flipped): a bounded number of key reads whatever the index holds ([`lookup_reads`]).
//! Buckets spread over 16 x 65,536 keys. An entry read whose hashes are all too far is still a
//! match when the inner parts' hashes are near (a copy with a watermark or a caption near an
//! edge: its whole hash moved, but seldom in every slice).
//!
//! A crop moves every hash, so the index also files each photo's points (`imgest_core::domain::
//! Point`: its strongest corners, each with a 64-bit descriptor of the patch around it) under
//! their keys (group `similar/p{key}`, member `{id}.p{n}`, holding the point). A lookup finds
//! its own points at several scales ([`QueryPoints`]: from the photo's stored variant, or from
//! what was kept of them when it was stored in report mode), reads each one's key and the key
//! with its weakest bit flipped, and an image whose points agree with enough of them on one
//! offset ([`agreeing`]) is a crop of the photo, or the photo a crop of it.
//!
//! What a caller sees is scoped ([`Scope`]): a client the images its offers link, a seller
//! the photos it uploaded (within their window), the operator everything. Matches are then
//! checked against the records: an image collected since it was filed is dropped, and its
//! entries with it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt, stream};

use super::{FlowError, Service};
use imgest_core::domain::{
    Bucket, ClientId, ImageId, ImageRecord, ImageState, MATCH_DISTANCE, MIN_AGREEING, Owner,
    PROBES_PER_SLICE, PdqHash, Point, QueryPoints, SLICES, Signal, Signature, SimilarMode,
    agreeing, key_text,
};
use imgest_core::imaging::{Imaging, Processed};
use imgest_core::ports::{Ports, StoreError};

/// The record kind of the index's groups.
pub const INDEX_KIND: &str = "similar";
/// Entries live as long as their image; they are deleted with it, not expired (a century).
const ENTRY_LIFE: Duration = Duration::from_secs(100 * 365 * 86_400);
/// Buckets read (or entries written) at once.
const CONCURRENCY: usize = 16;
/// The most entries read from one bucket: a bucket of a flat, common pattern could grow past
/// what a lookup should read; the rest of it is left unread (and counted).
pub const MAX_BUCKET_ENTRIES: usize = 2_000;
/// A page of a bucket.
const PAGE: usize = 500;
/// The most near-duplicates a lookup answers, nearest first.
pub const MAX_MATCHES: usize = 50;
/// How long a photo stored in report mode keeps its lookup's points (group `q{id}`), for the
/// crawl's settle to look it up with (the function that settles a crawl decodes nothing): a
/// day, well past the hours a crawl takes.
const QUERY_POINTS_LIFE: Duration = Duration::from_secs(86_400);
/// The member of a photo's kept lookup points.
const QUERY_POINTS_MEMBER: &str = "points";

/// Whose images a lookup may answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every stored image (the operator, open mode).
    All,
    /// The images `client`'s offers link and those `owner` uploaded.
    Caller {
        client: Option<ClientId>,
        owner: Option<Owner>,
    },
}

/// One near-duplicate of a photo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearDuplicate {
    pub image_id: ImageId,
    /// Bits apart, 0 to [`MATCH_DISTANCE`]: the hashes' (of 256), or for a crop the agreeing
    /// points' descriptors' mean (of 64, at most 6).
    pub distance: u32,
    /// Which hashes matched: `Trimmed` when either side's was its trimmed part's, `Inner` when
    /// only the inner parts' were near, `Cropped` when none was and their points agree.
    pub signal: Signal,
    /// Whether it matched as a mirror image.
    pub mirrored: bool,
}

/// What a lookup found, and what it read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Similar {
    /// Nearest first, at most [`MAX_MATCHES`].
    pub matches: Vec<NearDuplicate>,
    /// Where each match's entries were read (bucket, member): what is removed of an image
    /// found collected.
    pub(crate) entries: HashMap<ImageId, Vec<(String, String)>>,
    /// Whether the photo has a signature worth looking up (`false`: made before signatures
    /// were and not yet backfilled, or too flat to match on).
    pub searched: bool,
    pub buckets_read: usize,
    pub entries_read: usize,
}

/// The most key reads of one lookup of `signature`: [`SLICES`] × [`PROBES_PER_SLICE`] per hash
/// probed, 2 hashes or 4 (a photo with a border): 128 or 256; and two per point at each of its
/// scales ([`QueryPoints::MAX_KEYS`], 224): at most 480, whatever the index holds.
pub fn lookup_reads(signature: &Signature) -> usize {
    signature.probes().count() * SLICES * PROBES_PER_SLICE + QueryPoints::MAX_KEYS
}

fn member_name(id: &ImageId, signal: Signal) -> String {
    match signal {
        // The inner part's hash rides with the whole photo's entries.
        Signal::Whole | Signal::Inner => id.as_str().to_owned(),
        Signal::Trimmed => format!("{id}.t"),
        Signal::Cropped => format!("{id}.p"),
    }
}

/// A point's entry: the member (`{id}.p{n}`, n its rank) and the body (the point's compact
/// form, in hex).
fn point_entry(id: &ImageId, n: usize, point: &Point) -> (String, String) {
    (format!("{id}.p{n:x}"), hex::encode(point.to_bytes()))
}

fn parse_point_entry(name: &str, body: &str) -> Option<(ImageId, Point)> {
    let (id, n) = name.split_once(".p")?;
    u8::from_str_radix(n, 16).ok()?;
    let point = Point::from_bytes(&hex::decode(body).ok()?)?;
    Some((ImageId::parse(id).ok()?, point))
}

/// An entry's body: its hash in hex, then, for the whole photo's, its inner part's.
fn entry_body(hash: &PdqHash, inner: Option<&PdqHash>) -> String {
    let mut body = hash.to_hex();
    if let Some(inner) = inner {
        body.push_str(&inner.to_hex());
    }
    body
}

/// An entry's hash and inner part's hash (`None` in an entry filed before inner hashes were).
fn parse_body(body: &str) -> Option<(PdqHash, Option<PdqHash>)> {
    match (body.get(..64), body.get(64..)) {
        (Some(hash), Some("")) => Some((PdqHash::from_hex(hash)?, None)),
        (Some(hash), Some(inner)) => {
            Some((PdqHash::from_hex(hash)?, Some(PdqHash::from_hex(inner)?)))
        }
        _ => None,
    }
}

fn parse_member(name: &str) -> Option<(ImageId, Signal)> {
    let (id, signal) = match name.strip_suffix(".t") {
        Some(id) => (id, Signal::Trimmed),
        None => (name, Signal::Whole),
    };
    Some((ImageId::parse(id).ok()?, signal))
}

/// `id`'s entries of the index: (group, member, body) for each slice of each indexed hash, and
/// for each point; none for a photo too flat to match on.
fn entries(id: &ImageId, signature: &Signature) -> Vec<(String, String, String)> {
    if !signature.is_matchable() {
        return Vec::new();
    }
    let hashes = signature.indexed().flat_map(|(signal, hash)| {
        let inner = signature.inner.as_ref().filter(|_| signal == Signal::Whole);
        let (name, body) = (member_name(id, signal), entry_body(&hash, inner));
        Bucket::of(&hash)
            .map(move |b| (b.to_text(), name.clone(), body.clone()))
            .collect::<Vec<_>>()
    });
    let points = signature.points().iter().enumerate().map(|(n, p)| {
        let (name, body) = point_entry(id, n, p);
        (key_text(p.key()), name, body)
    });
    hashes.chain(points).collect()
}

/// Files `id`'s hashes in the index (nothing for a flat photo). Idempotent.
pub async fn index(ports: &Ports, id: &ImageId, signature: &Signature) -> Result<(), StoreError> {
    let now = ports.clock.now();
    let expires = now.plus(ENTRY_LIFE);
    stream::iter(entries(id, signature))
        .map(|(group, name, body)| async move {
            ports
                .documents
                .put_member(INDEX_KIND, &group, &name, &body, expires, now)
                .await
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Removes `id`'s entries (its record is gone); nothing for a flat photo, which has none.
pub async fn forget(ports: &Ports, id: &ImageId, signature: &Signature) -> Result<(), StoreError> {
    stream::iter(entries(id, signature))
        .map(|(group, name, _)| async move {
            ports
                .documents
                .delete_members(INDEX_KIND, &group, &[name])
                .await
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The indexed images within [`MATCH_DISTANCE`] of any of `signature`'s probes, and those whose
/// points agree with `points` (a crop), but `exclude`, nearest first (each image once, by its
/// nearest hash; crops after the hashes' matches), unchecked against records or scope.
pub async fn candidates(
    ports: &Ports,
    signature: &Signature,
    points: Option<&QueryPoints>,
    exclude: Option<&ImageId>,
) -> Result<Similar, StoreError> {
    let mut out = Similar {
        searched: signature.is_searchable(),
        ..Similar::default()
    };
    if !out.searched {
        return Ok(out);
    }
    let mut buckets: BTreeSet<Bucket> = BTreeSet::new();
    // Each probe: the hash, which signal it is, and whether it is a mirror's.
    let mut probes: Vec<(PdqHash, Signal, bool)> = Vec::new();
    for (i, (signal, hash, weak)) in signature.probes().enumerate() {
        buckets.extend(Bucket::probes(&hash, &weak));
        probes.push((hash, signal, i % 2 == 1));
    }
    let keys = points.map(QueryPoints::keys).unwrap_or_default();
    out.buckets_read = buckets.len() + keys.len();
    let now = ports.clock.now();
    let groups = buckets
        .into_iter()
        .map(Bucket::to_text)
        .chain(keys.into_iter().map(key_text));
    let read: Vec<(String, Vec<(String, String)>)> = stream::iter(groups)
        .map(|group| async move {
            let entries = read_group(ports, &group, now).await?;
            Ok::<_, StoreError>((group, entries))
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    // The points read, by image (with where each was read).
    let mut stored_points: HashMap<ImageId, Vec<(Point, String, String)>> = HashMap::new();
    let mut best: HashMap<ImageId, NearDuplicate> = HashMap::new();
    let read = read
        .iter()
        .flat_map(|(group, entries)| entries.iter().map(move |e| (group, e)));
    for (group, (name, body)) in read {
        out.entries_read += 1;
        if let Some((image_id, point)) = parse_point_entry(name, body) {
            if Some(&image_id) != exclude {
                stored_points.entry(image_id).or_default().push((
                    point,
                    group.clone(),
                    name.clone(),
                ));
            }
            continue;
        }
        let (Some((image_id, indexed)), Some((hash, inner))) =
            (parse_member(name), parse_body(body))
        else {
            continue;
        };
        if Some(&image_id) == exclude {
            continue;
        }
        let mut near = false;
        for (probe, signal, mirrored) in &probes {
            let distance = probe.distance(&hash);
            if distance > MATCH_DISTANCE {
                continue;
            }
            let found = NearDuplicate {
                image_id: image_id.clone(),
                distance,
                signal: (*signal).max(indexed),
                mirrored: *mirrored,
            };
            let better = best.get(&image_id).is_none_or(|b| {
                (distance, found.signal, found.mirrored) < (b.distance, b.signal, b.mirrored)
            });
            if better {
                best.insert(image_id.clone(), found);
            }
            near = true;
        }
        // None of the hashes near: the inner parts' may be (an edge's watermark or caption).
        if !near
            && let Some(distance) = inner
                .zip(signature.inner)
                .map(|(a, b)| a.distance(&b))
                .filter(|d| *d <= MATCH_DISTANCE)
            && best.get(&image_id).is_none_or(|b| distance < b.distance)
        {
            best.insert(
                image_id.clone(),
                NearDuplicate {
                    image_id: image_id.clone(),
                    distance,
                    signal: Signal::Inner,
                    mirrored: false,
                },
            );
            near = true;
        }
        if near {
            out.entries
                .entry(image_id)
                .or_default()
                .push((group.clone(), name.clone()));
        }
    }
    // Crops: images no hash found whose points agree with the lookup's.
    if let Some(query) = points {
        for (image_id, read) in stored_points {
            if best.contains_key(&image_id) || read.len() < MIN_AGREEING {
                continue;
            }
            // Each point is filed under one key, and each key is read once: no point twice.
            let points: Vec<Point> = read.iter().map(|(p, _, _)| *p).collect();
            let agreement = agreeing(query, &points);
            if agreement.points >= MIN_AGREEING {
                out.entries
                    .entry(image_id.clone())
                    .or_default()
                    .extend(read.into_iter().map(|(_, group, name)| (group, name)));
                best.insert(
                    image_id.clone(),
                    NearDuplicate {
                        image_id,
                        distance: agreement.distance,
                        signal: Signal::Cropped,
                        mirrored: false,
                    },
                );
            }
        }
    }
    let mut matches: Vec<NearDuplicate> = best.into_values().collect();
    let order = |m: &NearDuplicate| (m.signal == Signal::Cropped, m.distance, m.image_id.clone());
    matches.sort_by_key(order);
    out.matches = matches;
    Ok(out)
}

/// A bucket's (or a point key's) entries (name, body), at most [`MAX_BUCKET_ENTRIES`].
async fn read_group(
    ports: &Ports,
    group: &str,
    now: imgest_core::domain::Timestamp,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut entries = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = ports
            .documents
            .list_members(INDEX_KIND, group, cursor.as_deref(), PAGE, now)
            .await?;
        entries.extend(page.members);
        match page.next {
            Some(next) if entries.len() < MAX_BUCKET_ENTRIES => cursor = Some(next),
            _ => break,
        }
    }
    entries.truncate(MAX_BUCKET_ENTRIES);
    Ok(entries)
}

/// Files a photo just stored in the index when `mode` says to; a failure is logged (the photo
/// is stored; `imgest backfill start` files it again). In report mode it also keeps the
/// photo's lookup points, found in `source` (its signature's variant file, still in memory),
/// for a day: the crawl's settle looks it up with them, and decodes nothing.
pub(crate) async fn index_stored(
    ports: &Ports,
    imaging: &Arc<dyn Imaging>,
    mode: SimilarMode,
    record: &ImageRecord,
    source: Option<Vec<u8>>,
) {
    let (true, Some(signature)) = (mode.indexes(), record.signature()) else {
        return;
    };
    if let Err(e) = index(ports, &record.id, signature).await {
        tracing::error!(image_id = %record.id, error = %e,
            "could not file a photo in the near-duplicate index; a backfill files it");
    }
    let Some(file) = source.filter(|_| mode.reports() && signature.is_searchable()) else {
        return;
    };
    let pipeline = Arc::clone(imaging);
    let points = match tokio::task::spawn_blocking(move || pipeline.query_points(&file)).await {
        Ok(Some(points)) => points,
        Ok(None) | Err(_) => return,
    };
    let now = ports.clock.now();
    if let Err(e) = ports
        .documents
        .put_member(
            INDEX_KIND,
            &query_points_group(&record.id),
            QUERY_POINTS_MEMBER,
            &points.to_text(),
            now.plus(QUERY_POINTS_LIFE),
            now,
        )
        .await
    {
        tracing::warn!(image_id = %record.id, error = %e,
            "could not keep a photo's lookup points; its report looks for no crop");
    }
}

/// The group of a photo's kept lookup points.
fn query_points_group(id: &ImageId) -> String {
    format!("q{id}")
}

/// Which of `processed`'s variants the signature is made of, its file: what
/// [`index_stored`] finds the lookup's points in (`None` unless `mode` reports).
pub(crate) fn signature_file(
    imaging: &dyn Imaging,
    mode: SimilarMode,
    processed: &Processed,
) -> Option<Vec<u8>> {
    if !mode.reports() {
        return None;
    }
    let mut sizes = processed.variants.iter().map(|v| (v.width, v.height));
    let i = imaging.signature_source(&mut sizes, (processed.width, processed.height))?;
    processed.variants.get(i).map(|v| v.bytes.clone())
}

impl Service {
    /// The near-duplicates of stored image `id` that `scope` may see, nearest first.
    pub async fn similar(&self, id: &ImageId, scope: &Scope) -> Result<Similar, FlowError> {
        let record = self.image(id).await?;
        let Some(signature) = record.signature() else {
            return Ok(Similar::default());
        };
        let points = self.lookup_points(&record).await?;
        self.similar_to(signature, points.as_ref(), Some(id), scope)
            .await
    }

    /// A stored photo's lookup points: those kept when it was stored in report mode, else
    /// found in its signature's variant file (a read and a decode); `None` when neither can
    /// be had (a function without the pipeline, a photo too flat to look up, a file gone):
    /// the lookup then finds no crop.
    pub async fn lookup_points(
        &self,
        record: &ImageRecord,
    ) -> Result<Option<QueryPoints>, FlowError> {
        if !record.signature().is_some_and(Signature::is_searchable) {
            return Ok(None);
        }
        let now = self.ports.clock.now();
        let kept = self
            .ports
            .documents
            .list_members(INDEX_KIND, &query_points_group(&record.id), None, 1, now)
            .await?;
        if let Some(points) = kept
            .members
            .first()
            .and_then(|(_, body)| QueryPoints::parse(body))
        {
            return Ok(Some(points));
        }
        let (
            Ok(imaging),
            ImageState::Ready {
                width,
                height,
                variants,
                ..
            },
        ) = (self.imaging(), &record.state)
        else {
            return Ok(None);
        };
        let mut sizes = variants.iter().map(|v| (v.width, v.height));
        let Some(variant) = imaging
            .signature_source(&mut sizes, (*width, *height))
            .and_then(|i| variants.get(i))
        else {
            return Ok(None);
        };
        let Some(file) = self.variant_file(record, variant).await? else {
            return Ok(None);
        };
        let pipeline = Arc::clone(imaging);
        tokio::task::spawn_blocking(move || pipeline.query_points(&file))
            .await
            .map_err(|e| FlowError::Internal(format!("finding a photo's points: {e}")))
    }

    /// The near-duplicates of `signature` (and, for crops, of `points`) that `scope` may see,
    /// but `exclude`.
    pub async fn similar_to(
        &self,
        signature: &Signature,
        points: Option<&QueryPoints>,
        exclude: Option<&ImageId>,
        scope: &Scope,
    ) -> Result<Similar, FlowError> {
        let mut found = candidates(&self.ports, signature, points, exclude).await?;
        // The nearest few hundred are checked: a scope that sees few of many is rare, and the
        // checks cost a read or two each.
        found.matches.truncate(MAX_MATCHES * 4);
        let ids: Vec<ImageId> = found.matches.iter().map(|m| m.image_id.clone()).collect();
        let now = self.ports.clock.now();
        let live: BTreeSet<ImageId> = self
            .ports
            .images
            .get_many(&ids)
            .await?
            .into_iter()
            .filter(|r| r.is_live(now))
            .map(|r| r.id)
            .collect();
        let mut kept = Vec::new();
        let mut dead = Vec::new();
        for m in std::mem::take(&mut found.matches) {
            if kept.len() == MAX_MATCHES {
                break;
            }
            if !live.contains(&m.image_id) {
                dead.push(m.image_id);
                continue;
            }
            if self.may_see(&m.image_id, scope).await? {
                kept.push(m);
            }
        }
        found.matches = kept;
        self.drop_entries(&found, &dead).await;
        Ok(found)
    }

    /// Removes the entries read of images no longer stored (collected while indexing was off,
    /// or GC could not remove them): lookups clean up what they trip over.
    async fn drop_entries(&self, found: &Similar, dead: &[ImageId]) {
        for id in dead {
            for (group, name) in found.entries.get(id).into_iter().flatten() {
                if let Err(e) = self
                    .ports
                    .documents
                    .delete_members(INDEX_KIND, group, std::slice::from_ref(name))
                    .await
                {
                    tracing::warn!(image_id = %id, error = %e,
                        "could not remove a collected image's near-duplicate entry");
                }
            }
        }
    }

    /// Whether new photos are looked up as they are stored (`IMGEST_SIMILAR=report`).
    pub fn reports_similar(&self) -> bool {
        self.policy.similar.reports()
    }

    /// The near-duplicates of a photo just stored that other clients' offers link (report
    /// mode): ids and distances for moderation, whatever the caller may otherwise see.
    pub async fn report_similar(
        &self,
        record: &ImageRecord,
        client: Option<&ClientId>,
    ) -> Result<Vec<NearDuplicate>, FlowError> {
        let Some(signature) = record.signature().filter(|_| self.policy.similar.reports()) else {
            return Ok(Vec::new());
        };
        let points = self.lookup_points(record).await?;
        let found = self
            .similar_to(signature, points.as_ref(), Some(&record.id), &Scope::All)
            .await?;
        let mut out = Vec::new();
        for m in found.matches {
            let clients = self.ports.offers.linking_clients(&m.image_id).await?;
            if clients.iter().any(|c| Some(c) != client) {
                out.push(m);
            }
        }
        Ok(out)
    }

    async fn may_see(&self, id: &ImageId, scope: &Scope) -> Result<bool, FlowError> {
        let Scope::Caller { client, owner } = scope else {
            return Ok(true);
        };
        if let Some(client) = client
            && self
                .ports
                .offers
                .linking_clients(id)
                .await?
                .contains(client)
        {
            return Ok(true);
        }
        if let Some(owner) = owner {
            return Ok(self
                .uploaders(id)
                .await?
                .iter()
                .any(|o| o == owner.as_str()));
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_carry_the_signal_and_read_back() {
        let id = ImageId::of_bytes(b"photo");
        for signal in [Signal::Whole, Signal::Trimmed] {
            assert_eq!(
                parse_member(&member_name(&id, signal)),
                Some((id.clone(), signal))
            );
        }
        assert_eq!(parse_member("not an id"), None);
        assert_eq!(parse_member(&format!("{id}.x")), None);
        // A point's entry is not a hash's, and reads back as the point.
        let point = Point::at(0x0123_4567_89ab_cdef, 40.5, 7.25).unwrap();
        let (name, body) = point_entry(&id, 11, &point);
        assert_eq!(parse_member(&name), None);
        assert_eq!(parse_point_entry(&name, &body), Some((id.clone(), point)));
        assert_eq!(parse_point_entry(&format!("{id}.t"), &body), None);
    }

    #[test]
    fn an_entry_body_holds_the_hash_and_the_inner_parts_and_reads_back() {
        let hash = PdqHash::from_hex(&"1f".repeat(32)).unwrap();
        let inner = PdqHash::from_hex(&"e0".repeat(32)).unwrap();
        assert_eq!(parse_body(&entry_body(&hash, None)), Some((hash, None)));
        assert_eq!(
            parse_body(&entry_body(&hash, Some(&inner))),
            Some((hash, Some(inner)))
        );
        let body = entry_body(&hash, Some(&inner));
        for bad in [
            "",
            &body[..63],
            &body[..100],
            &format!("{body}0"),
            &body.replace('1', "x"),
        ] {
            assert_eq!(parse_body(bad), None, "{bad:?}");
        }
    }
}
