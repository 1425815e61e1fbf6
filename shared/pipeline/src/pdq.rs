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
        if width < MIN_SIDE || height < MIN_SIDE || luma.len() != width * height {
            return None;
        }
        let grid = downsample(luma, width, height);
        let quality = quality(&grid);
        Some(Self {
            coefficients: dct(&grid),
            quality,
        })
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
        let mut sorted: Vec<f32> = self.coefficients.iter().flatten().copied().collect();
        sorted.sort_by(f32::total_cmp);
        sorted.get(sorted.len() / 2 - 1).copied().unwrap_or(0.0)
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

/// A centred moving average of `window` values along each row (`width` x `height`, row by
/// row), its window cut short at the ends: a running sum, `LANES` rows at a time (each row's
/// sum is a chain of dependent additions; side by side they run together).
fn box_rows(input: &[f32], output: &mut [f32], width: usize, height: usize, window: usize) {
    const LANES: usize = 8;
    // The window covers `behind` values before a position and `ahead` after it.
    let ahead = window / 2;
    let behind = window - 1 - ahead;
    for first in (0..height).step_by(LANES) {
        let rows = (height - first).min(LANES);
        let at = |r: usize, i: usize| (first + r) * width + i;
        let mut sums = [0f32; LANES];
        let mut count = 0usize;
        // Prime with the values ahead of the first position.
        for i in 0..ahead.min(width) {
            for (r, sum) in sums.iter_mut().enumerate().take(rows) {
                *sum += input[at(r, i)];
            }
            count += 1;
        }
        for i in 0..width {
            let enters = i + ahead;
            if enters < width {
                for (r, sum) in sums.iter_mut().enumerate().take(rows) {
                    *sum += input[at(r, enters)];
                }
                count += 1;
            }
            if i > behind {
                for (r, sum) in sums.iter_mut().enumerate().take(rows) {
                    *sum -= input[at(r, i - behind - 1)];
                }
                count -= 1;
            }
            let count = count as f32;
            for (r, sum) in sums.iter().enumerate().take(rows) {
                output[at(r, i)] = sum / count;
            }
        }
    }
}

/// The same moving average along every column (`width` x `height`, row by row), each
/// column's sums made in the order [`box_rows`] makes a row's, whole rows added and taken away
/// (along memory, where a column at a time strides across it).
fn box_columns(input: &[f32], output: &mut [f32], width: usize, height: usize, window: usize) {
    let ahead = window / 2;
    let behind = window - 1 - ahead;
    let row = |y: usize| &input[y * width..(y + 1) * width];
    let mut sums = vec![0f32; width];
    let mut count = 0usize;
    for y in 0..ahead.min(height) {
        sums.iter_mut().zip(row(y)).for_each(|(s, v)| *s += v);
        count += 1;
    }
    for (y, out) in output.chunks_exact_mut(width).take(height).enumerate() {
        let enters = y + ahead;
        if enters < height {
            sums.iter_mut().zip(row(enters)).for_each(|(s, v)| *s += v);
            count += 1;
        }
        if y > behind {
            sums.iter_mut()
                .zip(row(y - behind - 1))
                .for_each(|(s, v)| *s -= v);
            count -= 1;
        }
        let count = count as f32;
        out.iter_mut().zip(&sums).for_each(|(o, s)| *o = s / count);
    }
}

/// Two passes of the box filter along rows then columns, sampled at the centres of a 64x64
/// grid.
fn downsample(luma: &[f32], width: usize, height: usize) -> Vec<f32> {
    let (along_rows, along_columns) = (window(width), window(height));
    let mut a = luma.to_vec();
    let mut b = vec![0f32; a.len()];
    for _ in 0..2 {
        box_rows(&a, &mut b, width, height, along_rows);
        box_columns(&b, &mut a, width, height, along_columns);
    }
    let mut grid = vec![0f32; GRID * GRID];
    for gy in 0..GRID {
        let y = ((gy as f64 + 0.5) * height as f64 / GRID as f64) as usize;
        for gx in 0..GRID {
            let x = ((gx as f64 + 0.5) * width as f64 / GRID as f64) as usize;
            grid[gy * GRID + gx] = a[y.min(height - 1) * width + x.min(width - 1)];
        }
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
    let mut b = [[0f32; KEPT]; KEPT];
    for i in 0..KEPT {
        for j in 0..KEPT {
            b[i][j] = (0..GRID).map(|k| t[i][k] * d[j][k]).sum();
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

    #[test]
    fn hashes_and_qualities_are_the_references() {
        for &(kind, w, h, hex, quality) in REFERENCE {
            let dct = Dct16::of_rgb(&synth(kind, w, h)).unwrap();
            let want = PdqHash::from_hex(hex).unwrap();
            assert_eq!(dct.hash(), want, "{kind} {w}x{h}");
            assert_eq!(dct.quality, quality, "{kind} {w}x{h}");
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
