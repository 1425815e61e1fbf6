//! PDQ, Meta's perceptual hash: 256 bits that stay within a small Hamming distance of each
//! other when a photo is re-encoded, resized or lightly edited, with a quality score that says
//! whether the photo has enough detail for the bits to mean anything (a flat one does not).
//! The first brick of near-duplicate detection (issue 45): written from the published
//! algorithm (hashing.pdf in facebook/ThreatExchange, BSD) and checked against the reference
//! implementation's output in the tests below.
//!
//! The steps: the photo's luma (BT.601, as a JPEG's Y plane), blurred by two passes of a box
//! filter along rows and columns with a window of about 1/128 of each side (the "Jarosz"
//! tent filter) and sampled at the centres of a 64x64 grid; the quality from that grid's
//! gradients; its 2-D DCT's 16x16 lowest frequencies but the constant one; a bit per
//! coefficient, set when it is above their median. The eight rotations and mirrors of a
//! photo come from sign changes and a transpose of those coefficients ([`Dct16::dihedral`]),
//! without hashing the photo again.

use image::RgbImage;
pub use imgest_core::domain::PdqHash;
use imgest_core::domain::{SLICES, WeakBits};

use crate::weigh::weigh;

/// The side of the grid the photo is sampled to.
const GRID: usize = 64;
/// The side of the block of frequencies kept.
const KEPT: usize = 16;
/// Images smaller than this on a side get no hash (the reference's minimum).
const MIN_SIDE: usize = 5;

/// A photo's kept frequencies, before they become bits: what its rotations and mirrors are
/// computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct Dct16 {
    coefficients: [[f32; KEPT]; KEPT],
    /// 0 to 100: the reference says a hash below 50 is too flat to match on.
    pub quality: u8,
}

/// One of the eight ways to turn or mirror a photo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dihedral {
    Original,
    Rotate90,
    Rotate180,
    Rotate270,
    /// Mirrored top to bottom (about the horizontal axis: the reference's "flip X").
    FlipX,
    /// Mirrored left to right (the reference's "flip Y").
    FlipY,
    /// Mirrored about the main diagonal (transposed).
    FlipPlus1,
    /// Mirrored about the other diagonal.
    FlipMinus1,
}

impl Dct16 {
    /// The PDQ of luma values (`width` × `height`, row by row, 0 to 255); `None` for a photo
    /// smaller than 5 pixels on a side.
    pub fn of_luma(luma: &[f32], width: usize, height: usize) -> Option<Self> {
        Self::of_part(luma, width, height, (0, 0, width, height))
    }

    /// The PDQ of the part `(x0, y0, x1, y1)` (ends excluded) of luma values (`width` ×
    /// `height`, row by row); `None` for a part smaller than 5 pixels on a side or outside the
    /// picture.
    pub fn of_part(
        luma: &[f32],
        width: usize,
        height: usize,
        part: (usize, usize, usize, usize),
    ) -> Option<Self> {
        let region = Region::of(luma, width, height, part)?;
        let rows = region.grid_rows();
        Some(Self::of_grid(&grid(
            &rows,
            region.width,
            &Taps::new(region.width),
        )))
    }

    /// [`Self::of_part`] and the same of the part mirrored left to right, as a mirrored copy
    /// hashes (the blur along columns is the same for both: it is made once).
    pub fn of_part_and_mirror(
        luma: &[f32],
        width: usize,
        height: usize,
        part: (usize, usize, usize, usize),
    ) -> Option<(Self, Self)> {
        let region = Region::of(luma, width, height, part)?;
        let rows = region.grid_rows();
        let taps = Taps::new(region.width);
        let mirror = grid(&rows, region.width, &taps.reversed(region.width));
        Some((
            Self::of_grid(&grid(&rows, region.width, &taps)),
            Self::of_grid(&mirror),
        ))
    }

    fn of_grid(grid: &[f32]) -> Self {
        Self {
            coefficients: dct(grid),
            quality: quality(grid),
        }
    }

    /// The PDQ of RGB pixels.
    pub fn of_rgb(image: &RgbImage) -> Option<Self> {
        let luma: Vec<f32> = image.pixels().map(|p| luma_of(p.0)).collect();
        Self::of_luma(&luma, image.width() as usize, image.height() as usize)
    }

    /// The hash: a bit per coefficient above their median.
    pub fn hash(&self) -> PdqHash {
        let median = self.median();
        let mut hash = PdqHash::default();
        for (k, c) in self.coefficients.iter().flatten().enumerate() {
            if *c > median {
                hash.set(k);
            }
        }
        hash
    }

    /// The lower median of the 256 coefficients, as the reference's Torben median gives.
    fn median(&self) -> f32 {
        let mut values: Vec<f32> = self.coefficients.iter().flatten().copied().collect();
        let lower = values.len() / 2 - 1;
        *values.select_nth_unstable_by(lower, f32::total_cmp).1
    }

    /// Per slice of the hash, its two bits whose coefficients are nearest the median: those a
    /// re-encoded or resized copy flips first.
    pub fn weak_bits(&self) -> WeakBits {
        let median = self.median();
        let mut weakest = [[(f32::INFINITY, 0u8); 2]; SLICES];
        for (k, c) in self.coefficients.iter().flatten().enumerate() {
            let margin = (c - median).abs();
            let (slice, place) = PdqHash::slice_bit(k);
            let Some(two) = weakest.get_mut(slice) else {
                continue;
            };
            if margin < two[0].0 {
                two[1] = two[0];
                two[0] = (margin, place);
            } else if margin < two[1].0 {
                two[1] = (margin, place);
            }
        }
        let mut out = [0u8; SLICES];
        for (o, two) in out.iter_mut().zip(weakest) {
            *o = two[0].1 | (two[1].1 << 4);
        }
        WeakBits(out)
    }

    /// The coefficients of the photo turned or mirrored as `d` says. A cosine of odd frequency
    /// changes sign when its axis is reversed (the kept block starts at frequency 1, so those
    /// are the even indices), and a quarter turn swaps the axes.
    pub fn dihedral(&self, d: Dihedral) -> Dct16 {
        let a = &self.coefficients;
        let mut b = [[0f32; KEPT]; KEPT];
        let flips = |i: usize| i.is_multiple_of(2);
        for (i, row) in a.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                let (negate, transpose) = match d {
                    Dihedral::Original => (false, false),
                    Dihedral::Rotate90 => (flips(j), true),
                    Dihedral::Rotate180 => (flips(i) != flips(j), false),
                    Dihedral::Rotate270 => (flips(i), true),
                    Dihedral::FlipX => (flips(i), false),
                    Dihedral::FlipY => (flips(j), false),
                    Dihedral::FlipPlus1 => (false, true),
                    Dihedral::FlipMinus1 => (flips(i) != flips(j), true),
                };
                let v = if negate { -v } else { v };
                if transpose {
                    b[j][i] = v;
                } else {
                    b[i][j] = v;
                }
            }
        }
        Dct16 {
            coefficients: b,
            quality: self.quality,
        }
    }
}

/// A pixel's luma as PDQ computes it (BT.601's weights).
pub(crate) fn luma_of([r, g, b]: [u8; 3]) -> f32 {
    0.299 * f32::from(r) + 0.587 * f32::from(g) + 0.114 * f32::from(b)
}

/// The blur's window along a side of `len` pixels: half of a grid cell, rounded up (two passes
/// make a tent a cell wide).
fn window(len: usize) -> usize {
    len.div_ceil(2 * GRID)
}

/// The two passes of the box filter along one side of `len` values, sampled at the grid's 64
/// places, as weights: place `g` is `span` values from `first[g]` weighted by
/// `weights[g * span..]`. Each pass averages `window` values centred on a value (`behind` it
/// and `ahead` of it), its window cut short at the ends; two passes are a tent of
/// `2 * window - 1` values. The filter is linear, so its output at the 64 places is all the
/// grid needs: the other values are never computed.
struct Taps {
    first: [usize; GRID],
    span: usize,
    weights: Vec<f32>,
}

impl Taps {
    fn new(len: usize) -> Self {
        let window = window(len);
        let ahead = window / 2;
        let behind = window - 1 - ahead;
        let pass = |k: usize| k.saturating_sub(behind)..=(k + ahead).min(len - 1);
        let span = (2 * window - 1).min(len);
        let mut first = [0; GRID];
        let mut weights = vec![0f32; GRID * span];
        let mut sums = vec![0f64; span];
        for (g, (first, weights)) in first
            .iter_mut()
            .zip(weights.chunks_exact_mut(span))
            .enumerate()
        {
            let at = (((g as f64 + 0.5) * len as f64 / GRID as f64) as usize).min(len - 1);
            *first = at.saturating_sub(2 * behind).min(len - span);
            sums.fill(0.0);
            let outer = pass(at);
            let outer_count = outer.clone().count() as f64;
            for k in outer {
                let inner = pass(k);
                let share = 1.0 / (outer_count * inner.clone().count() as f64);
                for j in inner {
                    if let Some(sum) = sums.get_mut(j - *first) {
                        *sum += share;
                    }
                }
            }
            weights
                .iter_mut()
                .zip(&sums)
                .for_each(|(w, s)| *w = *s as f32);
        }
        Self {
            first,
            span,
            weights,
        }
    }

    /// The filter and the places of the side reversed (a mirror image's), as weights of the
    /// unreversed values: a mirrored copy's grid without mirroring its pixels (the windows'
    /// unequal halves and the places' rounding fall as they do on the copy).
    fn reversed(&self, len: usize) -> Self {
        let mut first = [0; GRID];
        let mut weights = Vec::with_capacity(self.weights.len());
        for (f, g) in first.iter_mut().zip(0..GRID) {
            *f = len - self.span - self.first[g];
            weights.extend(self.place(g).iter().rev());
        }
        Self {
            first,
            span: self.span,
            weights,
        }
    }

    fn place(&self, g: usize) -> &[f32] {
        &self.weights[g * self.span..(g + 1) * self.span]
    }
}

/// A rectangle of a picture's luma: `width` x `height` values from `(x0, y0)`, in a picture
/// `stride` values wide stored row by row.
#[derive(Clone, Copy)]
struct Region<'a> {
    luma: &'a [f32],
    stride: usize,
    x0: usize,
    y0: usize,
    width: usize,
    height: usize,
}

impl<'a> Region<'a> {
    /// The part `(x0, y0, x1, y1)` (ends excluded) of `luma` (`width` x `height`); `None` when
    /// it is smaller than PDQ hashes or outside the values.
    fn of(
        luma: &'a [f32],
        width: usize,
        height: usize,
        (x0, y0, x1, y1): (usize, usize, usize, usize),
    ) -> Option<Self> {
        let fits = x0 <= x1 && y0 <= y1 && x1 <= width && y1 <= height;
        if !fits || x1 - x0 < MIN_SIDE || y1 - y0 < MIN_SIDE || luma.len() != width * height {
            return None;
        }
        Some(Self {
            luma,
            stride: width,
            x0,
            y0,
            width: x1 - x0,
            height: y1 - y0,
        })
    }

    /// The region's row `y` (below its height: [`Region::of`] checked the picture holds it).
    fn row(&self, y: usize) -> &[f32] {
        let from = (self.y0 + y) * self.stride + self.x0;
        &self.luma[from..from + self.width]
    }

    /// The blur along columns, at the grid's 64 rows: whole rows weighed (along memory),
    /// `width` values a grid row.
    fn grid_rows(&self) -> Vec<f32> {
        let taps = Taps::new(self.height);
        let mut out = vec![0f32; GRID * self.width];
        for (g, out) in out.chunks_exact_mut(self.width).enumerate() {
            weigh(out, taps.place(g), |k| self.row(taps.first[g] + k));
        }
        out
    }
}

/// The 64x64 grid from [`Region::grid_rows`]' rows (`width` values each), blurred and sampled
/// along them by `taps`.
fn grid(rows: &[f32], width: usize, taps: &Taps) -> Vec<f32> {
    let mut grid = Vec::with_capacity(GRID * GRID);
    for row in rows.chunks_exact(width) {
        grid.extend((0..GRID).map(|g| {
            let from = taps.first[g];
            row.get(from..from + taps.span)
                .unwrap_or_default()
                .iter()
                .zip(taps.place(g))
                .map(|(v, w)| v * w)
                .sum::<f32>()
        }));
    }
    grid
}

/// The sum of the grid's steps between neighbours, each in whole percent of the full range,
/// scaled so that a photo of ordinary detail scores 100 (the reference's heuristic).
fn quality(grid: &[f32]) -> u8 {
    let step = |u: f32, v: f32| (((u - v) * 100.0) / 255.0) as i32;
    let mut sum: i64 = 0;
    for y in 0..GRID {
        for x in 0..GRID {
            let here = grid[y * GRID + x];
            if y + 1 < GRID {
                sum += i64::from(step(here, grid[(y + 1) * GRID + x]).abs());
            }
            if x + 1 < GRID {
                sum += i64::from(step(here, grid[y * GRID + x + 1]).abs());
            }
        }
    }
    (sum / 90).min(100) as u8
}

/// The DCT-II basis for frequencies 1 to 16 over 64 samples, scaled as the reference scales
/// it (`sqrt(2 / 64)`).
fn basis() -> [[f32; GRID]; KEPT] {
    let mut d = [[0f32; GRID]; KEPT];
    // The reference rounds the scale to a float before it multiplies in double precision.
    let scale = f64::from((2.0 / GRID as f64).sqrt() as f32);
    for (i, row) in d.iter_mut().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            let angle =
                std::f64::consts::PI / 2.0 / GRID as f64 * (i + 1) as f64 * (2 * j + 1) as f64;
            *v = (scale * angle.cos()) as f32;
        }
    }
    d
}

/// `D · grid · Dᵀ`, only the 16x16 frequencies kept.
fn dct(grid: &[f32]) -> [[f32; KEPT]; KEPT] {
    // 1,024 cosines, the same for every photo: computed once.
    static BASIS: std::sync::LazyLock<[[f32; GRID]; KEPT]> = std::sync::LazyLock::new(basis);
    let d = &*BASIS;
    // Each of `t`'s sums in the same order as one over `k` per value, but a grid row at a time
    // (along memory).
    let mut t = [[0f32; GRID]; KEPT];
    for (t, d) in t.iter_mut().zip(d) {
        for (k, row) in grid.chunks_exact(GRID).enumerate() {
            for (t, v) in t.iter_mut().zip(row) {
                *t += d[k] * v;
            }
        }
    }
    // Each of `b`'s sums over `k` in order too, but a row's 16 side by side (one chain of 64
    // dependent additions each, where they would otherwise run one after another).
    static TRANSPOSED: std::sync::LazyLock<[[f32; KEPT]; GRID]> = std::sync::LazyLock::new(|| {
        let mut dt = [[0f32; KEPT]; GRID];
        for (j, row) in BASIS.iter().enumerate() {
            for (k, &v) in row.iter().enumerate() {
                dt[k][j] = v;
            }
        }
        dt
    });
    let mut b = [[0f32; KEPT]; KEPT];
    for (b, t) in b.iter_mut().zip(&t) {
        for (&t, d) in t.iter().zip(TRANSPOSED.iter()) {
            for (b, d) in b.iter_mut().zip(d) {
                *b += t * d;
            }
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pixels from integer formulas, so that the reference's tool and this module hash the
    /// same bytes (no decoder between them).
    fn synth(kind: &str, w: u32, h: u32) -> RgbImage {
        RgbImage::from_fn(w, h, |x, y| {
            let (x, y, w, h) = (i64::from(x), i64::from(y), i64::from(w), i64::from(h));
            let [r, g, b] = match kind {
                "noise" => [
                    (x * 7 + y * 3) % 256,
                    (x * y / 37) % 256,
                    ((x ^ y) * 5) % 256,
                ],
                "scene" => {
                    let inside = (x - w / 2).pow(2) + (y - h / 2).pow(2) < (h / 3).pow(2);
                    [x * 255 / w, y * 255 / h, if inside { 230 } else { 40 }]
                }
                "stripes" => [
                    ((x / 9 + y / 13) % 2) * 200 + 20,
                    (x * 3 + y * 11) % 251,
                    (x * x + y) % 256,
                ],
                _ => [120, 120, 120],
            };
            image::Rgb([r as u8, g as u8, b as u8])
        })
    }

    /// The reference's hashes and qualities of [`synth`]'s pictures: facebook/ThreatExchange's
    /// C++ PDQ as PyPI's `pdqhash` 0.2.8 builds it (`pdqhash.compute` on the same RGB array;
    /// its bit vector is in the hex's reading order, bit 255 first).
    const REFERENCE: &[(&str, u32, u32, &str, u8)] = &[
        (
            "noise",
            640,
            480,
            "070e1f0e1e0e7e0e7c3ed01cd03ec07c81fe04fc0ffc1ff8ffd8ffe0ff000000",
            100,
        ),
        (
            "scene",
            1000,
            750,
            "962659c79963699c7996a79961999679961878665a69e1a661e6921f96963c78",
            12,
        ),
        (
            "stripes",
            333,
            517,
            "2a7354532a7f5513884f5f20aa7fffa279555d15087dd6772948390c087f390c",
            100,
        ),
        (
            "scene",
            90,
            60,
            "b324338cda73d3630cb2ce3334cc2cb6f3c972c9cf3cc30c3c732c30f2c3b2c3",
            22,
        ),
    ];

    /// The blur is computed as weights at the grid's places (the same filter, its sums in
    /// another order than the reference's running sums), so a coefficient moves in its last
    /// bits: a picture with detail hashes as the reference does, bit for bit; a nearly flat
    /// one, whose coefficients crowd the median (and which is too flat to be matched on,
    /// `imgest_core::domain::MIN_QUALITY`), may have a pair of them swap sides.
    #[test]
    fn hashes_and_qualities_are_the_references() {
        for &(kind, w, h, hex, quality) in REFERENCE {
            let dct = Dct16::of_rgb(&synth(kind, w, h)).unwrap();
            let want = PdqHash::from_hex(hex).unwrap();
            let allowed = if quality >= imgest_core::domain::MIN_QUALITY {
                0
            } else {
                2
            };
            let distance = dct.hash().distance(&want);
            assert!(distance <= allowed, "{kind} {w}x{h}: {distance} bits off");
            assert_eq!(dct.quality, quality, "{kind} {w}x{h}");
        }
    }

    fn luma(picture: &RgbImage) -> Vec<f32> {
        picture.pixels().map(|p| luma_of(p.0)).collect()
    }

    #[test]
    fn a_part_and_its_mirror_hash_as_their_copies_do() {
        for (kind, w, h) in [
            ("noise", 640, 480),
            ("stripes", 333, 517),
            ("noise", 97, 300),
        ] {
            let picture = synth(kind, w, h);
            let (w, h) = (w as usize, h as usize);
            let values = luma(&picture);
            for part in [(0, 0, w, h), (w / 10, h / 7, w - w / 9, h - h / 5)] {
                let (x0, y0, x1, y1) = part;
                let copy: Vec<f32> = values
                    .chunks_exact(w)
                    .skip(y0)
                    .take(y1 - y0)
                    .flat_map(|row| &row[x0..x1])
                    .copied()
                    .collect();
                let mirrored: Vec<f32> = copy
                    .chunks_exact(x1 - x0)
                    .flat_map(|row| row.iter().rev())
                    .copied()
                    .collect();
                let (dct, mirror) = Dct16::of_part_and_mirror(&values, w, h, part).unwrap();
                let of_copy = Dct16::of_luma(&copy, x1 - x0, y1 - y0).unwrap();
                let of_mirrored = Dct16::of_luma(&mirrored, x1 - x0, y1 - y0).unwrap();
                assert_eq!(dct, of_copy, "{kind} {part:?}");
                assert_eq!(Dct16::of_part(&values, w, h, part).unwrap(), of_copy);
                // The mirror's weights are the same numbers in the other order: its sums may
                // round otherwise, never by a bit of the hash here.
                assert_eq!(mirror.hash(), of_mirrored.hash(), "{kind} {part:?}");
                assert_eq!(mirror.quality, of_mirrored.quality, "{kind} {part:?}");
            }
        }
        let values = luma(&synth("noise", 50, 40));
        for outside in [(0, 0, 51, 40), (10, 0, 9, 40), (0, 0, 4, 40)] {
            assert!(
                Dct16::of_part(&values, 50, 40, outside).is_none(),
                "{outside:?}"
            );
        }
    }

    #[test]
    fn turns_and_mirrors_come_from_the_coefficients_as_the_reference_computes_them() {
        // pdqhash.compute_dihedral of the 640x480 noise: original, rotated 90, 180, 270,
        // flipped X, Y, about the main diagonal and the other.
        let reference = [
            (
                Dihedral::Rotate90,
                "078ee0f1180e81e1783e0781f03e3f4100fcfe030bf4e007fff8001ffb80ffff",
            ),
            (
                Dihedral::Rotate180,
                "525ba5a44b5bd4a4296b7ab6856b6ad4d4abaa565aa9a552aa8d554aaa55aaaa",
            ),
            (
                Dihedral::Rotate270,
                "52db4a5b4d5a2b4b2d4bad2ba56b95e954a954a956a14aa9aaadaa85aa555555",
            ),
            (
                Dihedral::FlipX,
                "070ee0f11e0e81e17c1e2fe1d03e3f0181fcfb0307f8e003ffd8000ffe00dfff",
            ),
            (
                Dihedral::FlipY,
                "525b4a5b4b5b2b4b296b8549856b952bd4ab51a95aa94aadaa8daab5aa555555",
            ),
            (
                Dihedral::FlipPlus1,
                "078e1f0e180e7e1e783ef87ef03ec0be00fc01fc0bf40ff8fff8ffe0fa800000",
            ),
            (
                Dihedral::FlipMinus1,
                "52dbb5a44d5b94a42d6b5294a56b6a1455a9ab565ea1a552aaad554aaed5aaaa",
            ),
        ];
        let dct = Dct16::of_rgb(&synth("noise", 640, 480)).unwrap();
        for (d, hex) in reference {
            assert_eq!(dct.dihedral(d).hash().to_hex(), hex, "{d:?}");
        }
        assert_eq!(dct.dihedral(Dihedral::Original), dct);
    }

    #[test]
    fn a_mirrored_photo_hashes_as_its_mirrored_coefficients() {
        let picture = synth("stripes", 333, 517);
        let dct = Dct16::of_rgb(&picture).unwrap();
        let left_right = Dct16::of_rgb(&image::imageops::flip_horizontal(&picture)).unwrap();
        let top_bottom = Dct16::of_rgb(&image::imageops::flip_vertical(&picture)).unwrap();
        // Within a few bits: the blur's windows fall on other pixels once mirrored.
        assert!(
            dct.dihedral(Dihedral::FlipY)
                .hash()
                .distance(&left_right.hash())
                <= 8
        );
        assert!(
            dct.dihedral(Dihedral::FlipX)
                .hash()
                .distance(&top_bottom.hash())
                <= 8
        );
        assert!(
            dct.hash().distance(&left_right.hash()) > 64,
            "a mirror is another hash"
        );
    }

    #[test]
    fn each_slices_weak_bits_are_those_nearest_the_median() {
        let dct = Dct16::of_rgb(&synth("scene", 640, 480)).unwrap();
        let median = dct.median();
        let weak = dct.weak_bits();
        let mut margins = vec![Vec::new(); SLICES];
        for (k, c) in dct.coefficients.iter().flatten().enumerate() {
            let (slice, place) = PdqHash::slice_bit(k);
            margins[slice].push((place, (c - median).abs()));
        }
        for (slice, places) in margins.iter().enumerate() {
            let (first, second) = weak.of_slice(slice);
            assert_ne!(first, second);
            let margin = |p: u8| places.iter().find(|(q, _)| *q == p).unwrap().1;
            for (place, m) in places {
                if *place != first && *place != second {
                    assert!(margin(first) <= *m && margin(second) <= *m, "slice {slice}");
                }
            }
            assert!(margin(first) <= margin(second));
        }
    }

    #[test]
    fn a_flat_picture_has_no_quality_and_a_tiny_one_no_hash() {
        assert_eq!(Dct16::of_rgb(&synth("flat", 200, 100)).unwrap().quality, 0);
        assert!(Dct16::of_rgb(&synth("noise", 4, 100)).is_none());
        assert!(Dct16::of_luma(&[0.0; 10], 5, 5).is_none(), "too few values");
    }

    #[test]
    fn hex_round_trips_and_distance_counts_bits() {
        let a = PdqHash::from_hex(REFERENCE[0].3).unwrap();
        assert_eq!(a.to_hex(), REFERENCE[0].3);
        assert_eq!(a.distance(&a), 0);
        assert_eq!(
            a.distance(&PdqHash::default()),
            (0..256).filter(|&k| a.bit(k)).count() as u32
        );
        assert!(PdqHash::from_hex("00").is_none());
        assert!(PdqHash::from_hex(&"zz".repeat(32)).is_none());
    }
}
