//! A photo's perceptual signature, what near-duplicate detection compares: PDQ hashes (Meta's
//! 256-bit perceptual hash, computed by the pipeline) of the photo and of its mirror image, and
//! the same two of the photo with a flat border trimmed, when it has one (a padded copy's
//! trimmed hash is the original's hash), and the hash of its inner part (without the outer
//! tenth of each side: a copy with a shop's watermark or a caption near an edge keeps it). Two
//! photos are near-duplicates when some hash of one is within [`MATCH_DISTANCE`] bits of the
//! other's indexed hash, or their inner parts' hashes are; or, cropped, when enough of their
//! points agree (`super::points`).
//!
//! Also the index's keys: a hash cut into [`SLICES`] slices of 16 bits, each slice value a
//! bucket (multi-index hashing: two hashes within 31 bits differ by at most one bit on at least
//! one slice). The bits that flip between near-duplicates are mostly those whose coefficient
//! was nearest the median, so each hash keeps, per slice, its two weakest bits ([`WeakBits`]):
//! a lookup probes each slice's value with them flipped too.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::points::{POINT_BYTES, Point, STORED_POINTS};

/// The published matching threshold: hashes at most this many bits apart match.
pub const MATCH_DISTANCE: u32 = 31;
/// The published quality below which a hash is too flat to match on: such a hash is stored but
/// not indexed.
pub const MIN_QUALITY: u8 = 50;
/// The quality below which a photo is not looked up with either. Lower than [`MIN_QUALITY`]
/// because an edit flattens a copy: PDQ's quality is its luma's gradient sum, so a copy 10 %
/// darker and 10 % lower in contrast keeps 0.9 × 0.9 of its original's quality, and a photo
/// indexed at 50 is looked up with at 40. The match still needs the indexed side's quality.
pub const MIN_QUERY_QUALITY: u8 = 40;
/// Slices a hash is cut into for the index.
pub const SLICES: usize = 16;
/// Buckets a lookup reads per slice of a hash it probes with.
pub const PROBES_PER_SLICE: usize = 4;

/// 256 bits; as text, 64 hex digits in the reference's order (bit 255 first).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct PdqHash([u8; 32]);

impl PdqHash {
    /// Bit `k` (0 to 255: coefficient row `k / 16`, column `k % 16`).
    pub fn bit(&self, k: usize) -> bool {
        self.0
            .get(31 - k / 8)
            .is_some_and(|byte| byte >> (k % 8) & 1 == 1)
    }

    /// Sets bit `k` (ignored past 255).
    pub fn set(&mut self, k: usize) {
        if let Some(byte) = self.0.get_mut(31 - k / 8) {
            *byte |= 1 << (k % 8);
        }
    }

    /// The bits that differ.
    pub fn distance(&self, other: &PdqHash) -> u32 {
        self.0
            .iter()
            .zip(other.0.iter())
            .map(|(a, b)| (a ^ b).count_ones())
            .sum()
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(s: &str) -> Option<Self> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(s, &mut bytes).ok()?;
        Some(Self(bytes))
    }

    /// Where bit `k` (0 to 255) is: its slice, and its place in the slice's value.
    pub fn slice_bit(k: usize) -> (usize, u8) {
        let byte = 31 - (k % 256) / 8;
        let bit = (k % 8) as u8;
        (byte / 2, if byte.is_multiple_of(2) { 8 + bit } else { bit })
    }

    /// Slice `i` (0 to [`SLICES`] - 1) of the hash as written: hex digits `4i..4i + 4`.
    pub fn slice(&self, i: usize) -> u16 {
        match (self.0.get(2 * i), self.0.get(2 * i + 1)) {
            (Some(&hi), Some(&lo)) => u16::from_be_bytes([hi, lo]),
            _ => 0,
        }
    }
}

impl fmt::Debug for PdqHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PdqHash({})", self.to_hex())
    }
}

/// What near-duplicate detection does (`IMGEST_SIMILAR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SimilarMode {
    /// Signatures are made and stored (a record carries one either way), nothing is indexed:
    /// no write beyond the record's.
    #[default]
    Off,
    /// New photos are indexed; lookups on demand (`GET /v1/images/{id}/similar`).
    Index,
    /// Indexed, and every new photo is looked up as it is stored: the upload answer and the
    /// crawl result name its near-duplicates under other clients' offers.
    Report,
}

impl SimilarMode {
    pub fn indexes(self) -> bool {
        !matches!(self, Self::Off)
    }

    pub fn reports(self) -> bool {
        matches!(self, Self::Report)
    }
}

impl std::str::FromStr for SimilarMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            "index" => Ok(Self::Index),
            "report" => Ok(Self::Report),
            other => Err(format!("{other:?} is not off, index or report")),
        }
    }
}

/// Per slice of a hash, its two weakest bits (those whose coefficients were nearest the
/// median): the low nibble the weakest's place in the slice's value, the high the next's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WeakBits(pub [u8; SLICES]);

impl WeakBits {
    /// The two places (0 to 15) in slice `i`.
    pub fn of_slice(&self, i: usize) -> (u8, u8) {
        let b = self.0.get(i).copied().unwrap_or(0);
        (b & 0x0f, b >> 4)
    }
}

/// A photo's hash and its mirror image's, each with its weak bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashPair {
    pub hash: PdqHash,
    /// The hash of the photo mirrored left to right (its pixels mirrored and hashed again: PDQ's
    /// blur is not symmetric, so sign changes of the coefficients are a few bits off).
    pub mirror: PdqHash,
    pub hash_weak: WeakBits,
    pub mirror_weak: WeakBits,
}

/// Which of a photo's hashes an entry of the index holds, or a match was found by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    /// The whole photo's.
    Whole,
    /// The photo's inner parts' (without the outer tenth of each side): what a watermark or a
    /// caption near an edge leaves alone.
    Inner,
    /// The photo's with its flat border trimmed.
    Trimmed,
    /// Neither photo's hashes: their points (one is a crop of the other).
    Cropped,
}

impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Whole => "whole",
            Self::Inner => "inner",
            Self::Trimmed => "trimmed",
            Self::Cropped => "cropped",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "whole" => Some(Self::Whole),
            "inner" => Some(Self::Inner),
            "trimmed" => Some(Self::Trimmed),
            "cropped" => Some(Self::Cropped),
            _ => None,
        }
    }
}

/// A photo's perceptual signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// PDQ's quality of the whole photo, 0 to 100 (the trimmed part's is at least as high:
    /// only a part with detail is trimmed to).
    pub quality: u8,
    pub whole: HashPair,
    /// The photo with a flat border (padding, a frame) trimmed: `None` when it has none.
    pub trimmed: Option<HashPair>,
    /// The hash of the photo's inner part: [`INNER_BAND`] of each side left out (the whole
    /// photo's for one too small to lose it). Not indexed on its own: it rides with the whole
    /// photo's entries, and decides for an entry a lookup reads. `None` in a signature made
    /// before it was (the backfill signs such a record again).
    pub inner: Option<PdqHash>,
    /// The photo's strongest corners ([`STORED_POINTS`] at most), what finds a crop of it.
    /// `None` in a signature made before points were (the backfill signs such a record again);
    /// empty for a photo without corners.
    pub points: Option<Vec<Point>>,
}

/// The share of each side the inner hash leaves out: a watermark, a shop's name or a caption
/// sits within it (typically a twentieth of the photo high, a fortieth from its edge).
pub const INNER_BAND: f32 = 0.1;

/// Not a signature as [`Signature::to_text`] writes one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid perceptual signature: {0}")]
pub struct SignatureError(String);

/// The version tag of the text form: a later signature (another hash, other regions) gets its
/// own, and a record of this one is recomputed by the backfill.
const TEXT_VERSION: &str = "pdq1";
/// What the text form of the points starts with (no other part of it holds a `p`).
const POINTS_TEXT_TAG: &str = ":p";

impl Signature {
    /// Whether its hashes are worth indexing.
    pub fn is_matchable(&self) -> bool {
        self.quality >= MIN_QUALITY
    }

    /// Whether it has every hash this build makes: one made before inner hashes or points were
    /// is made again by the backfill, and replaced where it is stored.
    pub fn is_complete(&self) -> bool {
        self.inner.is_some() && self.points.is_some()
    }

    /// Its points (none in a signature made before points were).
    pub fn points(&self) -> &[Point] {
        self.points.as_deref().unwrap_or_default()
    }

    /// Whether it is worth looking up with: its hashes may find an indexed one (a copy flatter
    /// than what it copies, [`MIN_QUERY_QUALITY`]).
    pub fn is_searchable(&self) -> bool {
        self.quality >= MIN_QUERY_QUALITY
    }

    /// Each hash the index holds for the photo: the whole photo's and, with a border, the
    /// trimmed part's (the mirrors are looked up, not indexed).
    pub fn indexed(&self) -> impl Iterator<Item = (Signal, PdqHash)> + '_ {
        std::iter::once((Signal::Whole, self.whole.hash))
            .chain(self.trimmed.map(|t| (Signal::Trimmed, t.hash)))
    }

    /// Each hash a lookup probes with, with its weak bits: the indexed ones and their mirrors.
    pub fn probes(&self) -> impl Iterator<Item = (Signal, PdqHash, WeakBits)> + '_ {
        let pair = |signal: Signal, p: HashPair| {
            [
                (signal, p.hash, p.hash_weak),
                (signal, p.mirror, p.mirror_weak),
            ]
        };
        pair(Signal::Whole, self.whole).into_iter().chain(
            self.trimmed
                .into_iter()
                .flat_map(move |t| pair(Signal::Trimmed, t)),
        )
    }

    /// `pdq1:{quality}:{pair}[:{trimmed pair}]`, a pair being `{hash}:{mirror}:{weak}:{mirror
    /// weak}` in hex.
    pub fn to_text(&self) -> String {
        let mut s = format!("{TEXT_VERSION}:{}", self.quality);
        for p in std::iter::once(&self.whole).chain(self.trimmed.as_ref()) {
            for part in [
                p.hash.to_hex(),
                p.mirror.to_hex(),
                hex::encode(p.hash_weak.0),
                hex::encode(p.mirror_weak.0),
            ] {
                s.push(':');
                s.push_str(&part);
            }
        }
        if let Some(inner) = self.inner {
            s.push_str(INNER_TEXT_TAG);
            s.push_str(&inner.to_hex());
        }
        // Points only with an inner hash (the compact form's rule: a signature has both or
        // was made before one of them).
        if let (Some(_), Some(points)) = (self.inner, &self.points) {
            s.push_str(POINTS_TEXT_TAG);
            for p in points {
                s.push_str(&hex::encode(p.to_bytes()));
            }
        }
        s
    }

    pub fn parse(s: &str) -> Result<Self, SignatureError> {
        let bad = || SignatureError(s.chars().take(40).collect());
        let mut parts: Vec<&str> = s.split(':').collect();
        // The points, last and tagged `p` (absent from a signature made before them).
        let points = match parts.last().and_then(|p| p.strip_prefix('p')) {
            Some(hex) => {
                let bytes = hex::decode(hex).map_err(|_| bad())?;
                let points = points_of(&bytes).ok_or_else(bad)?;
                parts.pop();
                Some(points)
            }
            None => None,
        };
        // The inner part's hash, last and tagged `i` (absent from a signature made before it).
        let inner = match parts.last().and_then(|p| p.strip_prefix('i')) {
            Some(hex) => {
                let inner = PdqHash::from_hex(hex).ok_or_else(bad)?;
                parts.pop();
                Some(inner)
            }
            None => None,
        };
        if parts.first() != Some(&TEXT_VERSION)
            || !matches!(parts.len(), 6 | 10)
            || (points.is_some() && inner.is_none())
        {
            return Err(bad());
        }
        let quality: u8 = parts
            .get(1)
            .and_then(|q| q.parse().ok())
            .filter(|q| *q <= 100)
            .ok_or_else(bad)?;
        let hash = |i: usize| {
            parts
                .get(i)
                .and_then(|h| PdqHash::from_hex(h))
                .ok_or_else(bad)
        };
        let weak = |i: usize| {
            let mut out = [0u8; SLICES];
            parts
                .get(i)
                .and_then(|h| hex::decode_to_slice(h, &mut out).ok())
                .map(|()| WeakBits(out))
                .ok_or_else(bad)
        };
        let pair = |i: usize| -> Result<HashPair, SignatureError> {
            Ok(HashPair {
                hash: hash(i)?,
                mirror: hash(i + 1)?,
                hash_weak: weak(i + 2)?,
                mirror_weak: weak(i + 3)?,
            })
        };
        let trimmed = if parts.len() == 10 {
            Some(pair(6)?)
        } else {
            None
        };
        Ok(Self {
            quality,
            whole: pair(2)?,
            trimmed,
            inner,
            points,
        })
    }
}

/// Points in their compact form, one after another; `None` for a length that is not a whole
/// number of them, or more than [`STORED_POINTS`].
fn points_of(bytes: &[u8]) -> Option<Vec<Point>> {
    if !bytes.len().is_multiple_of(POINT_BYTES) || bytes.len() / POINT_BYTES > STORED_POINTS {
        return None;
    }
    bytes
        .chunks_exact(POINT_BYTES)
        .map(Point::from_bytes)
        .collect()
}

impl Serialize for Signature {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_text())
    }
}

impl<'de> Deserialize<'de> for Signature {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The version byte of the compact form made before points were.
const BYTES_VERSION: u8 = 1;
/// The version byte of the compact form with points: version 1's with an inner hash, then the
/// points' count and the points.
const BYTES_VERSION_POINTS: u8 = 2;
/// A pair in the compact form: two hashes and their weak bits.
const PAIR_BYTES: usize = 64 + 2 * SLICES;
/// The compact form's lengths, without and with a trimmed part; an inner hash adds its 32
/// bytes at the end.
const PAIR_LEN_2: usize = 2 + PAIR_BYTES;
const PAIR_LEN_4: usize = 2 + 2 * PAIR_BYTES;
const INNER_BYTES: usize = 32;
/// The compact form's lengths of a signature made before points were, with an inner hash and
/// without (the ones a complete signature replaces: a signature with points is never one of
/// these lengths, `POINTS_BASE_LEN` + 11 n).
pub const BYTES_WITHOUT_POINTS: [usize; 4] = [
    PAIR_LEN_2,
    PAIR_LEN_4,
    PAIR_LEN_2 + INNER_BYTES,
    PAIR_LEN_4 + INNER_BYTES,
];
/// What the text form of an inner hash starts with (no other part of it holds an `i`).
const INNER_TEXT_TAG: &str = ":i";

impl Signature {
    /// The compact form (131 bytes, 227 with a trimmed part, and 11 a point: 307 with 16
    /// points; made before points were, 1 fewer and 32 fewer again without an inner hash):
    /// what an item of the table holds, where every byte counts towards an image write's units.
    pub fn to_bytes(&self) -> Vec<u8> {
        let version = match (&self.points, self.inner) {
            (Some(_), Some(_)) => BYTES_VERSION_POINTS,
            _ => BYTES_VERSION,
        };
        let mut bytes = vec![version, self.quality];
        for pair in std::iter::once(&self.whole).chain(self.trimmed.as_ref()) {
            bytes.extend_from_slice(&pair.hash.0);
            bytes.extend_from_slice(&pair.mirror.0);
            bytes.extend_from_slice(&pair.hash_weak.0);
            bytes.extend_from_slice(&pair.mirror_weak.0);
        }
        if let Some(inner) = self.inner {
            bytes.extend_from_slice(&inner.0);
            if let Some(points) = &self.points {
                bytes.push(points.len() as u8);
                for p in points {
                    bytes.extend_from_slice(&p.to_bytes());
                }
            }
        }
        bytes
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SignatureError> {
        let bad = || SignatureError(format!("{} bytes", bytes.len()));
        let take = |start: usize, len: usize| bytes.get(start..start + len).ok_or_else(bad);
        let pair = |start: usize| -> Result<HashPair, SignatureError> {
            let mut parts = [[0u8; 32]; 2];
            let mut weak = [[0u8; SLICES]; 2];
            for (i, part) in parts.iter_mut().enumerate() {
                part.copy_from_slice(take(start + 32 * i, 32)?);
            }
            for (i, w) in weak.iter_mut().enumerate() {
                w.copy_from_slice(take(start + 64 + SLICES * i, SLICES)?);
            }
            Ok(HashPair {
                hash: PdqHash(parts[0]),
                mirror: PdqHash(parts[1]),
                hash_weak: WeakBits(weak[0]),
                mirror_weak: WeakBits(weak[1]),
            })
        };
        let (Some(&version), Some(&quality)) = (bytes.first(), bytes.get(1)) else {
            return Err(bad());
        };
        if version == BYTES_VERSION_POINTS {
            // Pairs, the inner hash, the count, the points.
            let count_at = [PAIR_LEN_2, PAIR_LEN_4]
                .into_iter()
                .map(|len| len + INNER_BYTES)
                .find(|&at| {
                    bytes
                        .get(at)
                        .is_some_and(|&n| bytes.len() == at + 1 + usize::from(n) * POINT_BYTES)
                })
                .ok_or_else(bad)?;
            let mut v1 = bytes.get(..count_at).ok_or_else(bad)?.to_vec();
            v1[0] = BYTES_VERSION;
            let points = points_of(bytes.get(count_at + 1..).ok_or_else(bad)?).ok_or_else(bad)?;
            let signature = Self::from_bytes(&v1)?;
            return Ok(Self {
                points: Some(points),
                ..signature
            });
        }
        if version != BYTES_VERSION {
            return Err(bad());
        }
        let (pairs_len, inner) = match bytes.len() {
            n @ (PAIR_LEN_2 | PAIR_LEN_4) => (n, None),
            n if matches!(n.checked_sub(INNER_BYTES), Some(PAIR_LEN_2 | PAIR_LEN_4)) => {
                let mut inner = [0u8; 32];
                inner.copy_from_slice(take(n - INNER_BYTES, INNER_BYTES)?);
                (n - INNER_BYTES, Some(PdqHash(inner)))
            }
            _ => return Err(bad()),
        };
        if quality > 100 {
            return Err(bad());
        }
        let trimmed = if pairs_len == PAIR_LEN_4 {
            Some(pair(2 + PAIR_BYTES)?)
        } else {
            None
        };
        Ok(Self {
            quality,
            whole: pair(2)?,
            trimmed,
            inner,
            points: None,
        })
    }
}

/// An index bucket: slice `slice` of a hash holding `value`; as text (a storage key), the
/// slice's hex digit and the value's four (`a1f0c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bucket {
    pub slice: u8,
    pub value: u16,
}

impl Bucket {
    /// The buckets `hash` is filed under, one per slice.
    pub fn of(hash: &PdqHash) -> impl Iterator<Item = Bucket> + '_ {
        (0..SLICES).map(|i| Bucket {
            slice: i as u8,
            value: hash.slice(i),
        })
    }

    /// The buckets a lookup of `hash` reads: in each slice its value, and the values with its
    /// weak bits flipped, one, the other and both ([`PROBES_PER_SLICE`] × [`SLICES`]). A hash
    /// `d` bits away is found unless every slice holds a differing bit that is not among its
    /// weak ones.
    pub fn probes(hash: &PdqHash, weak: &WeakBits) -> Vec<Bucket> {
        let mut out = Vec::with_capacity(SLICES * PROBES_PER_SLICE);
        for b in Self::of(hash) {
            let (first, second) = weak.of_slice(usize::from(b.slice));
            let (first, second) = (1u16 << first, 1u16 << second);
            for flip in [0, first, second, first | second] {
                let bucket = Bucket {
                    slice: b.slice,
                    value: b.value ^ flip,
                };
                if !out.contains(&bucket) {
                    out.push(bucket);
                }
            }
        }
        out
    }

    pub fn to_text(self) -> String {
        format!("{:x}{:04x}", self.slice, self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(seed: u8) -> PdqHash {
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i as u8)
                .wrapping_mul(37)
                .wrapping_add(seed)
                .rotate_left(u32::from(seed % 7));
        }
        PdqHash(bytes)
    }

    fn pair(seed: u8) -> HashPair {
        HashPair {
            hash: hash(seed),
            mirror: hash(seed + 1),
            hash_weak: WeakBits([seed; SLICES]),
            mirror_weak: WeakBits([0x21; SLICES]),
        }
    }

    fn good_bytes() -> Vec<u8> {
        Signature {
            quality: 87,
            whole: pair(1),
            trimmed: None,
            inner: None,
            points: None,
        }
        .to_bytes()
    }

    #[test]
    fn a_signature_reads_back_as_written_and_refuses_anything_else() {
        let points = |n: u64| -> Vec<Point> {
            (0..n)
                .filter_map(|i| Point::at(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i as f32, 3.5))
                .collect()
        };
        for trimmed in [None, Some(pair(3))] {
            // Made before inner hashes were, before points were, and after (no corners, one,
            // as many as a signature keeps).
            for (inner, points) in [
                (None, None),
                (Some(hash(5)), None),
                (Some(hash(5)), Some(points(0))),
                (Some(hash(5)), Some(points(1))),
                (Some(hash(5)), Some(points(STORED_POINTS as u64))),
            ] {
                let s = Signature {
                    quality: 87,
                    whole: pair(1),
                    trimmed,
                    inner,
                    points,
                };
                assert_eq!(Signature::parse(&s.to_text()), Ok(s.clone()));
                let bytes = s.to_bytes();
                assert_eq!(Signature::from_bytes(&bytes), Ok(s.clone()));
                assert!(bytes.len() <= 227 + STORED_POINTS * POINT_BYTES);
                assert_eq!(
                    BYTES_WITHOUT_POINTS.contains(&bytes.len()),
                    s.points.is_none(),
                    "{} bytes",
                    bytes.len()
                );
            }
        }
        // Too many points, a point cut short, points without an inner hash.
        let full = Signature {
            quality: 87,
            whole: pair(1),
            trimmed: None,
            inner: Some(hash(5)),
            points: Some(points(STORED_POINTS as u64)),
        };
        let text = full.to_text();
        for bad in [
            format!("{text}{}", "00".repeat(POINT_BYTES)),
            text[..text.len() - 2].to_owned(),
            text.replace(&format!(":i{}", hash(5).to_hex()), ""),
        ] {
            assert!(Signature::parse(&bad).is_err(), "{bad:?}");
        }
        let bytes = full.to_bytes();
        for bad in [
            [bytes.clone(), vec![0; POINT_BYTES]].concat(),
            bytes[..bytes.len() - 1].to_vec(),
        ] {
            assert!(Signature::from_bytes(&bad).is_err(), "{} bytes", bad.len());
        }
        let good = Signature {
            quality: 87,
            whole: pair(1),
            trimmed: None,
            inner: None,
            points: None,
        }
        .to_text();
        for bad in [
            format!("{good}:i{}", "0".repeat(63)),
            format!("{good}:i{}:i{}", hash(3).to_hex(), hash(3).to_hex()),
            format!("pdq1:87:i{}", hash(3).to_hex()),
            String::new(),
            good.replace("pdq1", "pdq2"),
            good.replace(":87:", ":101:"),
            good.replace(":87:", ":-1:"),
            format!("{good}:{}", hash(3).to_hex()),
            good[..good.len() - 1].to_owned(),
            format!("{good}:zz:zz:zz:zz"),
        ] {
            assert!(Signature::parse(&bad).is_err(), "{bad:?}");
        }
        let mut bytes = good_bytes();
        bytes[0] = 2;
        for bad in [
            vec![],
            vec![1],
            vec![0; 98],
            good_bytes()[..97].to_vec(),
            [good_bytes(), vec![0; 31]].concat(),
            [good_bytes(), vec![0; 33]].concat(),
            bytes,
        ] {
            assert!(Signature::from_bytes(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_bits_place_is_the_slice_that_holds_it() {
        let mut seen = std::collections::HashSet::new();
        for k in 0..256 {
            let mut h = PdqHash::default();
            h.set(k);
            let (slice, bit) = PdqHash::slice_bit(k);
            assert_eq!(h.slice(slice), 1 << bit, "bit {k}");
            assert!(seen.insert((slice, bit)));
        }
    }

    #[test]
    fn probes_flip_each_slices_weak_bits_and_find_what_differs_only_there() {
        let h = PdqHash::from_hex(&format!("1234{}", "0".repeat(60))).unwrap();
        let buckets: Vec<Bucket> = Bucket::of(&h).collect();
        assert_eq!(buckets.len(), SLICES);
        assert_eq!(buckets[0].to_text(), "01234");
        assert_eq!(buckets[15].to_text(), "f0000");
        // Weak bits 3 and 9 in every slice.
        let weak = WeakBits([0x93; SLICES]);
        let probes = Bucket::probes(&h, &weak);
        assert_eq!(probes.len(), SLICES * PROBES_PER_SLICE);
        // A hash 31 bits away: in slice 5 its two weak bits, in slice 0 one other bit, in every
        // other slice two other bits.
        let mut far31 = h;
        for slice in 0..SLICES {
            let places: &[u8] = match slice {
                5 => &[3, 9],
                0 => &[15],
                _ => &[0, 15],
            };
            for &place in places {
                let byte = 2 * slice + usize::from(place < 8);
                far31.0[byte] ^= 1 << (place % 8);
            }
        }
        assert_eq!(h.distance(&far31), 31);
        let far_buckets: Vec<Bucket> = Bucket::of(&far31).collect();
        assert!(far_buckets.iter().any(|b| probes.contains(b)));
        assert!(!far_buckets.iter().any(|b| buckets.contains(b)));
        // The same distance with the weak bits left alone is missed.
        let unlucky = WeakBits([0x21; SLICES]);
        let missed = Bucket::probes(&h, &unlucky);
        assert!(!far_buckets.iter().any(|b| missed.contains(b)));
    }

    #[test]
    fn a_flat_photo_is_neither_indexed_nor_searched_a_flatter_copy_is_searched_and_probes_cover_mirrors_and_trimmed()
     {
        let mut s = Signature {
            quality: MIN_QUERY_QUALITY - 1,
            whole: pair(1),
            trimmed: None,
            inner: Some(hash(5)),
            points: None,
        };
        assert!(!s.is_matchable());
        assert!(!s.is_searchable());
        // A copy a little flatter than what it copies is looked up with, not indexed.
        s.quality = MIN_QUERY_QUALITY;
        assert!(s.is_searchable());
        assert!(!s.is_matchable());
        s.quality = MIN_QUALITY;
        assert!(s.is_matchable());
        assert!(s.is_searchable());
        assert_eq!(s.indexed().count(), 1);
        assert_eq!(s.probes().count(), 2);
        s.trimmed = Some(pair(3));
        assert_eq!(
            s.indexed().map(|(signal, _)| signal).collect::<Vec<_>>(),
            [Signal::Whole, Signal::Trimmed]
        );
        assert_eq!(s.probes().count(), 4);
    }
}
