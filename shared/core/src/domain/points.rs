//! A photo's points: what finds a cropped copy, which no hash of the whole picture does (a crop
//! of a few percent moves every PDQ bit that matters). A point is a corner of the photo's luma,
//! found at a fixed scale (the photo averaged down to [`POINT_SIDE`] pixels on its short side),
//! with a 64-bit descriptor of the patch around it (an 8x8 grid of cell means, each cell above
//! or below the patch's median). A crop keeps the points inside it at the same place relative to
//! each other, so two photos are one picture, cropped, when enough of their points have the
//! same descriptor and agree on one offset ([`agreeing`]).
//!
//! A crop is also a zoom: cut 20 % of each side and the part left fills the picture, 1.25
//! times larger. A stored photo keeps its points at one scale; a lookup finds its own at
//! several ([`QUERY_SCALES`]), so that one of them is within the few percent a descriptor
//! tolerates, whichever of the two photos is the crop.
//!
//! The index files each stored point under a key of [`KEY_BITS`] of its descriptor's bits; a
//! lookup reads, for each of its points, the key and the key with its weakest bit flipped.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

/// The short side, in pixels, of the picture points are found in (and their places measured).
pub const POINT_SIDE: f32 = 128.0;
/// The points a photo keeps (its strongest corners): a crop of a fifth of each side keeps
/// about two thirds of them.
pub const STORED_POINTS: usize = 16;
/// The points a lookup finds at each of its scales.
pub const QUERY_POINTS: usize = 16;
/// The scales a lookup finds its points at, relative to [`POINT_SIDE`]: below 1 for a copy
/// cropped from the stored photo (its part fills more of the picture), above 1 for a stored
/// crop of the photo looked up. Spaced 7 %: a descriptor tolerates about 3.5 %.
pub const QUERY_SCALES: [f32; 7] = [0.81, 0.87, 0.93, 1.0, 1.075, 1.15, 1.235];
/// Descriptors at most this many bits apart (of 64) are the same patch.
pub const POINT_DISTANCE: u32 = 6;
/// Points that must agree, on one offset, for two photos to be one picture (on the
/// benchmark's 2,000 unrelated photos, 3 agreeing points happen between unrelated photos about
/// once in 10,000 pairs; 4 never did, each point voting once).
pub const MIN_AGREEING: usize = 4;
/// Two matched points agree when their offsets (the stored point's place less the looked-up
/// one's) are within this many pixels.
pub const OFFSET_TOLERANCE: f32 = 2.0;
/// The agreeing points, in the photo looked up, must spread over at least this share of its
/// width or height: a logo or a shop's stamp at the same place in two different photos is a
/// cluster of points, not a picture.
pub const MIN_SPREAD: f32 = 0.25;
/// The descriptor bits (cell `row * 8 + column`) a point is filed under, in the key's order.
pub const KEY_BITS: [u8; 24] = [
    0, 1, 2, 4, 5, 7, 8, 9, 13, 16, 17, 18, 19, 21, 26, 30, 31, 34, 39, 41, 47, 52, 55, 58,
];
/// A place is kept in eighths of a pixel, in 12 bits.
const PLACE_UNITS: f32 = 8.0;
const MAX_PLACE: u16 = 0x0fff;

/// One point: its descriptor and its place (in eighths of a pixel of the [`POINT_SIDE`]
/// picture).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Point {
    pub descriptor: u64,
    pub x: u16,
    pub y: u16,
}

impl Point {
    /// A point at `(x, y)` pixels; `None` past what a place holds (4,096 eighths: a picture
    /// more than 4:1).
    pub fn at(descriptor: u64, x: f32, y: f32) -> Option<Self> {
        let place = |v: f32| {
            let v = (v * PLACE_UNITS).round();
            (v >= 0.0 && v <= f32::from(MAX_PLACE)).then_some(v as u16)
        };
        Some(Self {
            descriptor,
            x: place(x)?,
            y: place(y)?,
        })
    }

    pub fn x_px(&self) -> f32 {
        f32::from(self.x) / PLACE_UNITS
    }

    pub fn y_px(&self) -> f32 {
        f32::from(self.y) / PLACE_UNITS
    }

    /// The key it is filed under: [`KEY_BITS`] of its descriptor.
    pub fn key(&self) -> u32 {
        KEY_BITS.iter().enumerate().fold(0, |key, (i, &bit)| {
            key | (((self.descriptor >> bit) & 1) as u32) << i
        })
    }

    /// Descriptor bits apart.
    pub fn distance(&self, other: &Point) -> u32 {
        (self.descriptor ^ other.descriptor).count_ones()
    }

    /// The compact form: the descriptor (8 bytes, big-endian), then x and y in 12 bits each.
    pub fn to_bytes(self) -> [u8; POINT_BYTES] {
        let mut out = [0u8; POINT_BYTES];
        out[..8].copy_from_slice(&self.descriptor.to_be_bytes());
        let place = (u32::from(self.x) << 12) | u32::from(self.y);
        out[8..].copy_from_slice(&place.to_be_bytes()[1..]);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let descriptor = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
        let &[a, b, c] = bytes.get(8..POINT_BYTES)? else {
            return None;
        };
        let place = u32::from_be_bytes([0, a, b, c]);
        Some(Self {
            descriptor,
            x: (place >> 12) as u16,
            y: (place & 0x0fff) as u16,
        })
    }
}

/// A point's compact form, in bytes.
pub const POINT_BYTES: usize = 11;

/// A key and the index bucket's name for it (`p` and six hex digits).
pub fn key_text(key: u32) -> String {
    format!("p{key:06x}")
}

/// A lookup's points at one of [`QUERY_SCALES`]: each with the place in its key of its weakest
/// key bit (the cell nearest the patch's median), and the picture's size at that scale.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryLevel {
    pub width: f32,
    pub height: f32,
    pub points: Vec<(Point, u8)>,
}

/// A lookup's points, at every scale it looks at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryPoints(pub Vec<QueryLevel>);

impl QueryPoints {
    /// The keys a lookup reads: each point's, and with its weakest key bit flipped.
    pub fn keys(&self) -> BTreeSet<u32> {
        self.0
            .iter()
            .flat_map(|level| level.points.iter())
            .flat_map(|(p, weak)| {
                let key = p.key();
                [key, key ^ (1 << (u32::from(*weak) % KEY_BITS.len() as u32))]
            })
            .collect()
    }

    /// The most keys [`keys`](Self::keys) names: two per point at each scale.
    pub const MAX_KEYS: usize = 2 * QUERY_POINTS * QUERY_SCALES.len();
}

impl QueryPoints {
    /// The text form, base64 of each scale's picture size (two 16-bit numbers), its points'
    /// count and its points (each its compact form and its weak bit's place): about 1.8 KB
    /// for every point at every scale.
    pub fn to_text(&self) -> String {
        let mut bytes = Vec::new();
        for level in &self.0 {
            bytes.extend_from_slice(&(level.width as u16).to_be_bytes());
            bytes.extend_from_slice(&(level.height as u16).to_be_bytes());
            bytes.push(level.points.len().min(usize::from(u8::MAX)) as u8);
            for (p, weak) in level.points.iter().take(usize::from(u8::MAX)) {
                bytes.extend_from_slice(&p.to_bytes());
                bytes.push(*weak);
            }
        }
        BASE64.encode(bytes)
    }

    /// `None` for anything [`to_text`](Self::to_text) does not write, or more scales or points
    /// than a lookup finds.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = BASE64.decode(text).ok()?;
        let mut rest = bytes.as_slice();
        let mut levels = Vec::new();
        while !rest.is_empty() {
            let (&[w0, w1, h0, h1, n], tail) = rest.split_first_chunk::<5>()?;
            let (width, height) = (u16::from_be_bytes([w0, w1]), u16::from_be_bytes([h0, h1]));
            let n = usize::from(n);
            if width == 0 || height == 0 || n > QUERY_POINTS || levels.len() == QUERY_SCALES.len() {
                return None;
            }
            let (points, tail) = tail.split_at_checked(n * (POINT_BYTES + 1))?;
            let points = points
                .chunks_exact(POINT_BYTES + 1)
                .map(|c| {
                    let weak = *c.get(POINT_BYTES)?;
                    (usize::from(weak) < KEY_BITS.len()).then_some((Point::from_bytes(c)?, weak))
                })
                .collect::<Option<Vec<_>>>()?;
            levels.push(QueryLevel {
                width: f32::from(width),
                height: f32::from(height),
                points,
            });
            rest = tail;
        }
        Some(Self(levels))
    }
}

/// How two photos' points agree: the most agreeing points (`0`: fewer than
/// [`MIN_AGREEING`], or not spread), and their descriptors' mean bits apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Agreement {
    pub points: usize,
    pub distance: u32,
}

/// Whether `stored` (a photo's points, as its entries hold them) and `query` are one picture,
/// cropped: at one of the query's scales, at least [`MIN_AGREEING`] query points whose nearest
/// stored point (within [`POINT_DISTANCE`]) is a different one each, and whose offsets to it
/// agree within [`OFFSET_TOLERANCE`], spread over [`MIN_SPREAD`] of the query's picture. Each
/// query point votes once, for its nearest: a repeated pattern (a fence, tiles, a row of
/// windows) has points alike, and letting each vote for all of them made unrelated photos
/// agree (31 of 1.3 million pairs on the benchmark; none this way).
pub fn agreeing(query: &QueryPoints, stored: &[Point]) -> Agreement {
    let mut best = Agreement::default();
    if stored.len() < MIN_AGREEING {
        return best;
    }
    for level in &query.0 {
        // Per query point: (its nearest stored point, its place, the offset, bits apart).
        let votes: Vec<Vote> = level
            .points
            .iter()
            .filter_map(|(q, _)| {
                let (n, s) = stored
                    .iter()
                    .enumerate()
                    .min_by_key(|(n, s)| (q.distance(s), *n))?;
                let d = q.distance(s);
                let (qx, qy) = (q.x_px(), q.y_px());
                (d <= POINT_DISTANCE).then(|| Vote {
                    stored: n,
                    x: qx,
                    y: qy,
                    dx: s.x_px() - qx,
                    dy: s.y_px() - qy,
                    bits: d,
                })
            })
            .collect();
        if votes.len() < MIN_AGREEING {
            continue;
        }
        for v in &votes {
            let cluster: Vec<&Vote> = votes
                .iter()
                .filter(|w| {
                    (w.dx - v.dx).abs() <= OFFSET_TOLERANCE
                        && (w.dy - v.dy).abs() <= OFFSET_TOLERANCE
                })
                .collect();
            let distinct = cluster
                .iter()
                .map(|w| w.stored)
                .collect::<BTreeSet<usize>>()
                .len();
            if distinct < MIN_AGREEING.max(best.points + 1) {
                continue;
            }
            let extent = |pick: fn(&Vote) -> f32| {
                let (lo, hi) = cluster
                    .iter()
                    .map(|w| pick(w))
                    .fold((f32::MAX, f32::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
                hi - lo
            };
            let spread = extent(|w| w.x) >= MIN_SPREAD * level.width
                || extent(|w| w.y) >= MIN_SPREAD * level.height;
            if spread {
                let total: u32 = cluster.iter().map(|w| w.bits).sum();
                let n = cluster.len() as u32;
                best = Agreement {
                    points: distinct,
                    distance: (total + n / 2) / n,
                };
            }
        }
    }
    best
}

/// A query point's vote: the stored point it matched, its own place, the offset from it to the
/// stored point's, and their descriptors' bits apart.
struct Vote {
    stored: usize,
    x: f32,
    y: f32,
    dx: f32,
    dy: f32,
    bits: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(descriptor: u64, x: f32, y: f32) -> Point {
        Point::at(descriptor, x, y).unwrap()
    }

    /// Distinct descriptors, far apart from each other.
    fn descriptor(i: u64) -> u64 {
        (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    #[test]
    fn a_point_reads_back_as_written_and_its_key_is_its_key_bits() {
        let p = point(0x0123_4567_89ab_cdef, 511.875, 17.25);
        assert_eq!(Point::from_bytes(&p.to_bytes()), Some(p));
        assert_eq!((p.x_px(), p.y_px()), (511.875, 17.25));
        assert_eq!(Point::at(1, 512.0, 0.0), None);
        assert_eq!(Point::at(1, -0.5, 0.0), None);
        assert_eq!(Point::from_bytes(&[0; 10]), None);
        // Only the key bits make the key.
        let all_but_keys = KEY_BITS.iter().fold(u64::MAX, |d, &b| d & !(1 << b));
        assert_eq!(point(all_but_keys, 0.0, 0.0).key(), 0);
        assert_eq!(point(u64::MAX, 0.0, 0.0).key(), (1 << 24) - 1);
        assert_eq!(point(1 << KEY_BITS[3], 0.0, 0.0).key(), 1 << 3);
        assert_eq!(key_text(0xab), "p0000ab");
    }

    fn level(points: Vec<Point>) -> QueryLevel {
        QueryLevel {
            width: 170.0,
            height: 128.0,
            points: points.into_iter().map(|p| (p, 3)).collect(),
        }
    }

    #[test]
    fn points_agree_on_one_offset_spread_over_the_picture_and_nothing_less() {
        let places = [
            (20.0, 20.0),
            (90.0, 30.0),
            (150.0, 100.0),
            (40.0, 110.0),
            (100.0, 70.0),
        ];
        let stored: Vec<Point> = places
            .iter()
            .enumerate()
            .map(|(i, &(x, y))| point(descriptor(i as u64), x, y))
            .collect();
        // The copy: shifted by (-12, -7), a bit or two of noise on each descriptor.
        let shifted = |n: usize| -> Vec<Point> {
            places[..n]
                .iter()
                .enumerate()
                .map(|(i, &(x, y))| {
                    point(descriptor(i as u64) ^ (1 << i) ^ 1 << 40, x - 12.0, y - 7.5)
                })
                .collect()
        };
        let query = QueryPoints(vec![level(shifted(5))]);
        let found = agreeing(&query, &stored);
        assert_eq!(found.points, 5, "{found:?}");
        assert!(found.distance <= 2);
        assert_eq!(
            agreeing(&QueryPoints(vec![level(shifted(3))]), &stored).points,
            0
        );
        // Four points but each with its own offset: no agreement.
        let scattered: Vec<Point> = places[..4]
            .iter()
            .enumerate()
            .map(|(i, &(x, y))| point(descriptor(i as u64), x + 9.0 * i as f32, y))
            .collect();
        assert_eq!(
            agreeing(&QueryPoints(vec![level(scattered)]), &stored).points,
            0
        );
        // Descriptors too far apart.
        let far: Vec<Point> = places
            .iter()
            .enumerate()
            .map(|(i, &(x, y))| point(descriptor(i as u64) ^ 0x7f, x, y))
            .collect();
        assert_eq!(agreeing(&QueryPoints(vec![level(far)]), &stored).points, 0);
        // A stamp: four points in one corner, the same offset, not spread.
        let stamp = [(10.0, 10.0), (14.0, 12.0), (18.0, 10.0), (22.0, 14.0)];
        let stamped: Vec<Point> = stamp
            .iter()
            .enumerate()
            .map(|(i, &(x, y))| point(descriptor(i as u64), x, y))
            .collect();
        let query = QueryPoints(vec![level(stamped.clone())]);
        assert_eq!(agreeing(&query, &stamped).points, 0);
        // A repeated pattern: every stored point alike, four query points alike, at spacings
        // that give four pairs one offset; each query point votes once, for its nearest, so
        // they do not agree.
        let fence: Vec<Point> = (0..8)
            .map(|i| point(descriptor(99), 20.0 + 10.0 * i as f32, 60.0))
            .collect();
        let posts: Vec<Point> = (0..4)
            .map(|i| point(descriptor(99), 25.0 + 20.0 * i as f32, 50.0))
            .collect();
        assert_eq!(agreeing(&QueryPoints(vec![level(posts)]), &fence).points, 0);
    }

    #[test]
    fn a_lookups_points_read_back_as_written_and_nothing_else_does() {
        let level = |n: usize| QueryLevel {
            width: 158.0,
            height: 104.0,
            points: (0..n)
                .map(|i| (point(descriptor(i as u64), i as f32, 2.5), (i % 24) as u8))
                .collect(),
        };
        for query in [
            QueryPoints::default(),
            QueryPoints(vec![level(0)]),
            QueryPoints(vec![level(3), level(QUERY_POINTS)]),
        ] {
            assert_eq!(QueryPoints::parse(&query.to_text()), Some(query.clone()));
        }
        let good = BASE64
            .decode(QueryPoints(vec![level(2)]).to_text())
            .unwrap();
        let mut weak_past_key = good.clone();
        *weak_past_key.last_mut().unwrap() = KEY_BITS.len() as u8;
        let mut no_width = good.clone();
        no_width[..2].copy_from_slice(&[0, 0]);
        for bad in [
            good[..good.len() - 1].to_vec(),
            [good.clone(), vec![0]].concat(),
            weak_past_key,
            no_width,
            BASE64
                .decode(QueryPoints(vec![level(QUERY_POINTS + 1)]).to_text())
                .unwrap(),
            good.repeat(QUERY_SCALES.len() + 1),
        ] {
            assert_eq!(QueryPoints::parse(&BASE64.encode(&bad)), None, "{bad:?}");
        }
        assert_eq!(QueryPoints::parse("not base64!"), None);
    }

    #[test]
    fn a_lookup_reads_each_points_key_and_with_its_weakest_bit_flipped() {
        let p = point(0, 1.0, 1.0);
        let query = QueryPoints(vec![QueryLevel {
            width: 128.0,
            height: 128.0,
            points: vec![(p, 5), (p, 5)],
        }]);
        assert_eq!(query.keys(), BTreeSet::from([0, 1 << 5]));
        assert_eq!(QueryPoints::MAX_KEYS, 224);
    }
}
