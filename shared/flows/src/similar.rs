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
//! What a caller sees is scoped ([`Scope`]): a client the images its offers link, a seller
//! the photos it uploaded (within their window), the operator everything. Matches are then
//! checked against the records: an image collected since it was filed is dropped, and its
//! entries with it.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt, stream};

use super::{FlowError, Service};
use imgest_core::domain::{
    Bucket, ClientId, ImageId, ImageRecord, MATCH_DISTANCE, Owner, PROBES_PER_SLICE, PdqHash,
    SLICES, Signal, Signature, SimilarMode,
};
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
    /// Bits apart, 0 to [`MATCH_DISTANCE`].
    pub distance: u32,
    /// Which hashes matched: `Trimmed` when either side's was its trimmed part's, `Inner` when
    /// only the inner parts' were near.
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
/// probed, 2 hashes or 4 (a photo with a border): 128 or 256, whatever the index holds.
pub fn lookup_reads(signature: &Signature) -> usize {
    signature.probes().count() * SLICES * PROBES_PER_SLICE
}

fn member_name(id: &ImageId, signal: Signal) -> String {
    match signal {
        // The inner part's hash rides with the whole photo's entries.
        Signal::Whole | Signal::Inner => id.as_str().to_owned(),
        Signal::Trimmed => format!("{id}.t"),
    }
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

/// `id`'s entries of the index: (bucket, member, body) for each slice of each indexed hash;
/// none for a photo too flat to match on.
fn entries(id: &ImageId, signature: &Signature) -> Vec<(String, String, String)> {
    if !signature.is_matchable() {
        return Vec::new();
    }
    signature
        .indexed()
        .flat_map(|(signal, hash)| {
            let inner = signature.inner.as_ref().filter(|_| signal == Signal::Whole);
            let (name, body) = (member_name(id, signal), entry_body(&hash, inner));
            Bucket::of(&hash)
                .map(move |b| (b.to_text(), name.clone(), body.clone()))
                .collect::<Vec<_>>()
        })
        .collect()
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

/// The indexed images within [`MATCH_DISTANCE`] of any of `signature`'s probes, but `exclude`,
/// nearest first (each image once, by its nearest hash), unchecked against records or scope.
pub async fn candidates(
    ports: &Ports,
    signature: &Signature,
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
    out.buckets_read = buckets.len();
    let now = ports.clock.now();
    let read: Vec<(String, Vec<(String, String)>)> = stream::iter(buckets)
        .map(|bucket| async move {
            let entries = read_bucket(ports, bucket, now).await?;
            Ok::<_, StoreError>((bucket.to_text(), entries))
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    let mut best: HashMap<ImageId, NearDuplicate> = HashMap::new();
    let read = read
        .iter()
        .flat_map(|(group, entries)| entries.iter().map(move |e| (group, e)));
    for (group, (name, body)) in read {
        out.entries_read += 1;
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
    let mut matches: Vec<NearDuplicate> = best.into_values().collect();
    matches.sort_by(|a, b| (a.distance, &a.image_id).cmp(&(b.distance, &b.image_id)));
    out.matches = matches;
    Ok(out)
}

/// A bucket's entries (name, body), at most [`MAX_BUCKET_ENTRIES`].
async fn read_bucket(
    ports: &Ports,
    bucket: Bucket,
    now: imgest_core::domain::Timestamp,
) -> Result<Vec<(String, String)>, StoreError> {
    let group = bucket.to_text();
    let mut entries = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = ports
            .documents
            .list_members(INDEX_KIND, &group, cursor.as_deref(), PAGE, now)
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
/// is stored; `imgest backfill start` files it again).
pub(crate) async fn index_stored(ports: &Ports, mode: SimilarMode, record: &ImageRecord) {
    let (true, Some(signature)) = (mode.indexes(), record.signature()) else {
        return;
    };
    if let Err(e) = index(ports, &record.id, signature).await {
        tracing::error!(image_id = %record.id, error = %e,
            "could not file a photo in the near-duplicate index; a backfill files it");
    }
}

impl Service {
    /// The near-duplicates of stored image `id` that `scope` may see, nearest first.
    pub async fn similar(&self, id: &ImageId, scope: &Scope) -> Result<Similar, FlowError> {
        let record = self.image(id).await?;
        let Some(signature) = record.signature() else {
            return Ok(Similar::default());
        };
        self.similar_to(signature, Some(id), scope).await
    }

    /// The near-duplicates of `signature` that `scope` may see, but `exclude`.
    pub async fn similar_to(
        &self,
        signature: &Signature,
        exclude: Option<&ImageId>,
        scope: &Scope,
    ) -> Result<Similar, FlowError> {
        let mut found = candidates(&self.ports, signature, exclude).await?;
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
        let found = self
            .similar_to(signature, Some(&record.id), &Scope::All)
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
