//! A photo's perceptual signature, what near-duplicate detection compares: PDQ hashes (Meta's
//! 256-bit perceptual hash, computed by the pipeline) of the photo and of its mirror image, and
//! the same two of the photo with a flat border trimmed, when it has one (a padded copy's
//! trimmed hash is the original's hash). Two photos are near-duplicates when some hash of one
//! is within [`MATCH_DISTANCE`] bits of the other's indexed hash.
//!
//! Also the index's keys: a hash cut into [`SLICES`] slices of 16 bits, each slice value a
//! bucket (multi-index hashing: two hashes within 31 bits agree exactly on at least one slice
//! in most cases and differ by at most one bit on at least one slice always).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The published matching threshold: hashes at most this many bits apart match.
pub const MATCH_DISTANCE: u32 = 31;
/// The published quality below which a hash is too flat to match on: such a hash is stored but
/// neither indexed nor looked up.
pub const MIN_QUALITY: u8 = 50;
/// Slices a hash is cut into for the index.
pub const SLICES: usize = 16;

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

/// A photo's hash and its mirror image's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashPair {
    pub hash: PdqHash,
    /// The hash of the photo mirrored left to right (from the same coefficients).
    pub mirror: PdqHash,
}

/// Which of a photo's hashes an entry of the index holds, or a match was found by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    /// The whole photo's.
    Whole,
    /// The photo's with its flat border trimmed.
    Trimmed,
}

impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Whole => "whole",
            Self::Trimmed => "trimmed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "whole" => Some(Self::Whole),
            "trimmed" => Some(Self::Trimmed),
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
}

/// Not a signature as [`Signature::to_text`] writes one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid perceptual signature: {0}")]
pub struct SignatureError(String);

/// The version tag of the text form: a later signature (another hash, other regions) gets its
/// own, and a record of this one is recomputed by the backfill.
const TEXT_VERSION: &str = "pdq1";

impl Signature {
    /// Whether its hashes are worth indexing and looking up.
    pub fn is_matchable(&self) -> bool {
        self.quality >= MIN_QUALITY
    }

    /// Each hash the index holds for the photo: the whole photo's and, with a border, the
    /// trimmed part's (the mirrors are looked up, not indexed).
    pub fn indexed(&self) -> impl Iterator<Item = (Signal, PdqHash)> + '_ {
        std::iter::once((Signal::Whole, self.whole.hash))
            .chain(self.trimmed.map(|t| (Signal::Trimmed, t.hash)))
    }

    /// Each hash a lookup probes with: the indexed ones and their mirrors.
    pub fn probes(&self) -> impl Iterator<Item = (Signal, PdqHash)> + '_ {
        let pair = |signal: Signal, p: HashPair| [(signal, p.hash), (signal, p.mirror)];
        pair(Signal::Whole, self.whole).into_iter().chain(
            self.trimmed
                .into_iter()
                .flat_map(move |t| pair(Signal::Trimmed, t)),
        )
    }

    /// `pdq1:{quality}:{hash}:{mirror}[:{trimmed}:{trimmed mirror}]`, hashes in hex.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{TEXT_VERSION}:{}:{}:{}",
            self.quality,
            self.whole.hash.to_hex(),
            self.whole.mirror.to_hex()
        );
        if let Some(t) = &self.trimmed {
            s.push(':');
            s.push_str(&t.hash.to_hex());
            s.push(':');
            s.push_str(&t.mirror.to_hex());
        }
        s
    }

    pub fn parse(s: &str) -> Result<Self, SignatureError> {
        let bad = || SignatureError(s.chars().take(40).collect());
        let parts: Vec<&str> = s.split(':').collect();
        let hash = |i: usize| {
            parts
                .get(i)
                .and_then(|h| PdqHash::from_hex(h))
                .ok_or_else(bad)
        };
        if parts.first() != Some(&TEXT_VERSION) || !matches!(parts.len(), 4 | 6) {
            return Err(bad());
        }
        let quality: u8 = parts
            .get(1)
            .and_then(|q| q.parse().ok())
            .filter(|q| *q <= 100)
            .ok_or_else(bad)?;
        let whole = HashPair {
            hash: hash(2)?,
            mirror: hash(3)?,
        };
        let trimmed = if parts.len() == 6 {
            Some(HashPair {
                hash: hash(4)?,
                mirror: hash(5)?,
            })
        } else {
            None
        };
        Ok(Self {
            quality,
            whole,
            trimmed,
        })
    }
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

/// The version byte of the compact form.
const BYTES_VERSION: u8 = 1;

impl Signature {
    /// The compact form, in base64 (88 characters, 176 with a trimmed part): what an item of
    /// the table holds, where every byte counts towards an image write's units.
    pub fn to_base64(&self) -> String {
        use base64::Engine as _;
        let mut bytes = vec![BYTES_VERSION, self.quality];
        for pair in std::iter::once(&self.whole).chain(self.trimmed.as_ref()) {
            bytes.extend_from_slice(&pair.hash.0);
            bytes.extend_from_slice(&pair.mirror.0);
        }
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    pub fn parse_base64(text: &str) -> Result<Self, SignatureError> {
        use base64::Engine as _;
        let bad = || SignatureError(text.chars().take(40).collect());
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| bad())?;
        let hash = |i: usize| -> Result<PdqHash, SignatureError> {
            let start = 2 + 32 * i;
            let slice = bytes.get(start..start + 32).ok_or_else(bad)?;
            let mut out = [0u8; 32];
            out.copy_from_slice(slice);
            Ok(PdqHash(out))
        };
        let (Some(&BYTES_VERSION), Some(&quality)) = (bytes.first(), bytes.get(1)) else {
            return Err(bad());
        };
        if quality > 100 || !matches!(bytes.len(), 66 | 130) {
            return Err(bad());
        }
        let trimmed = if bytes.len() == 130 {
            Some(HashPair {
                hash: hash(2)?,
                mirror: hash(3)?,
            })
        } else {
            None
        };
        Ok(Self {
            quality,
            whole: HashPair {
                hash: hash(0)?,
                mirror: hash(1)?,
            },
            trimmed,
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

    /// The buckets a lookup of `hash` reads: its own and, with `radius` 1, every value one bit
    /// away in each slice ([`SLICES`] × 17 then: every hash within 31 bits shares a bucket
    /// with it). Radius 0 reads [`SLICES`], and finds a hash `d` bits away unless each slice
    /// holds one of the `d` differing bits (for `d` = 31 spread at random, about 1 in 9).
    pub fn probes(hash: &PdqHash, radius: u8) -> Vec<Bucket> {
        let mut out = Vec::with_capacity(SLICES * if radius > 0 { 17 } else { 1 });
        for b in Self::of(hash) {
            out.push(b);
            if radius > 0 {
                out.extend((0..16).map(|bit| Bucket {
                    slice: b.slice,
                    value: b.value ^ (1 << bit),
                }));
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

    #[test]
    fn a_signature_reads_back_as_written_and_refuses_anything_else() {
        let whole = HashPair {
            hash: hash(1),
            mirror: hash(2),
        };
        for trimmed in [
            None,
            Some(HashPair {
                hash: hash(3),
                mirror: hash(4),
            }),
        ] {
            let s = Signature {
                quality: 87,
                whole,
                trimmed,
            };
            assert_eq!(Signature::parse(&s.to_text()), Ok(s.clone()));
            assert_eq!(Signature::parse_base64(&s.to_base64()), Ok(s.clone()));
            assert!(s.to_base64().len() <= 176);
        }
        for bad in ["", "AQ==", "not base64", &"A".repeat(88)] {
            assert!(Signature::parse_base64(bad).is_err(), "{bad:?}");
        }
        let good = Signature {
            quality: 87,
            whole,
            trimmed: None,
        }
        .to_text();
        for bad in [
            String::new(),
            good.replace("pdq1", "pdq2"),
            good.replace(":87:", ":101:"),
            good.replace(":87:", ":-1:"),
            format!("{good}:{}", hash(3).to_hex()),
            good[..good.len() - 1].to_owned(),
            format!("{good}:zz:zz"),
        ] {
            assert!(Signature::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn buckets_cut_the_hash_as_written_and_probes_reach_one_bit_away() {
        let h = PdqHash::from_hex(&format!("1234{}", "0".repeat(60))).unwrap();
        let buckets: Vec<Bucket> = Bucket::of(&h).collect();
        assert_eq!(buckets.len(), SLICES);
        assert_eq!(buckets[0].to_text(), "01234");
        assert_eq!(buckets[15].to_text(), "f0000");
        assert_eq!(Bucket::probes(&h, 0), buckets);
        let wide = Bucket::probes(&h, 1);
        assert_eq!(wide.len(), SLICES * 17);
        // A hash 31 bits away (two in each slice but one, one there) shares a radius-1 bucket.
        let mut far = h;
        let mut flipped = 0;
        for slice in 0..SLICES {
            for bit in 0..if slice == 5 { 1 } else { 2 } {
                let k = 255 - (slice * 16 + bit * 5);
                far.0[31 - k / 8] ^= 1 << (k % 8);
                flipped += 1;
            }
        }
        assert_eq!(h.distance(&far), flipped);
        assert_eq!(flipped, 31);
        let far_buckets: Vec<Bucket> = Bucket::of(&far).collect();
        assert!(far_buckets.iter().any(|b| wide.contains(b)));
        assert!(!far_buckets.iter().any(|b| buckets.contains(b)));
    }

    #[test]
    fn a_flat_photo_is_not_matchable_and_probes_cover_mirrors_and_trimmed() {
        let pair = HashPair {
            hash: hash(1),
            mirror: hash(2),
        };
        let mut s = Signature {
            quality: MIN_QUALITY - 1,
            whole: pair,
            trimmed: None,
        };
        assert!(!s.is_matchable());
        s.quality = MIN_QUALITY;
        assert!(s.is_matchable());
        assert_eq!(s.indexed().count(), 1);
        assert_eq!(s.probes().count(), 2);
        s.trimmed = Some(pair);
        assert_eq!(
            s.indexed().map(|(signal, _)| signal).collect::<Vec<_>>(),
            [Signal::Whole, Signal::Trimmed]
        );
        assert_eq!(s.probes().count(), 4);
    }
}
