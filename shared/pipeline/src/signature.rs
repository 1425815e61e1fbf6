//! The photo's perceptual signature (near-duplicate detection: `imgest_core::domain::Signature`),
//! made from one rendered variant's pixels as they are rendered (upright, in sRGB, before a
//! watermark): no second decode. PDQ samples a photo down to 64x64, so a variant a few hundred
//! pixels a side hashes as the original does, at a fraction of the cost.
//!
//! Besides the whole photo's hash and its mirror's, a photo with a flat border (a copy padded
//! to another shape, a frame) gets the hashes of what the border surrounds: a padded copy's
//! trimmed hash is then the original's whole one. And every photo gets the hash of its inner
//! part, the outer tenth of each side left out: a copy with a shop's name or a caption near an
//! edge is tens of bits off the whole photo's hash, not off that one. And its points
//! (`crate::points`), from the same luma: what finds a crop.

use image::RgbImage;
use imgest_core::domain::{HashPair, INNER_BAND, QueryPoints, Signature};

use crate::pdq::{self, Dct16};
use crate::points::Work;

/// The variant hashed is the smallest of the photo's shape with at least this many pixels on
/// its short side (twice PDQ's grid: finer pixels change no bit that matters).
const MIN_SOURCE_SIDE: u64 = 128;
/// A border line is flat when no pixel's luma is further than this from the line's mean, and
/// the mean no further than this from the outermost line's (JPEG's ringing stays within it on
/// a flat colour; a photo's detail does not).
const FLAT_TOLERANCE: f32 = 10.0;
/// A border is trimmed when it is at least this share of a side: thinner ones are JPEG's edge
/// or the photo's own.
const MIN_BORDER: f32 = 0.02;
/// And when what it surrounds is at least this share of each side.
const MIN_KEPT: f32 = 0.3;

/// Which of the rendered variants (their sizes; the photo `full`) the signature is made of: the
/// smallest of the photo's shape at least [`MIN_SOURCE_SIDE`] on its short side, else the
/// largest of its shape; `None` when none keeps its shape (only cropped thumbnails: they would
/// hash another picture than an uncropped copy's).
pub(crate) fn source(sizes: impl Iterator<Item = (u32, u32)>, full: (u32, u32)) -> Option<usize> {
    let shaped: Vec<(usize, u64, u64)> = sizes
        .enumerate()
        .map(|(i, (w, h))| (i, u64::from(w), u64::from(h)))
        .filter(|&(_, w, h)| crate::placeholder::keeps_shape(w, h, full))
        .collect();
    shaped
        .iter()
        .filter(|&&(_, w, h)| w.min(h) >= MIN_SOURCE_SIDE)
        .min_by_key(|&&(_, w, h)| w * h)
        .or_else(|| shaped.iter().max_by_key(|&&(_, w, h)| w * h))
        .map(|&(i, _, _)| i)
}

/// The signature of RGB pixels.
pub(crate) fn of_rgb(image: &RgbImage) -> Option<Signature> {
    of_rgb_with(image, &mut Work::default())
}

/// [`of_rgb`] with buffers kept from one photo to the next.
pub(crate) fn of_rgb_with(image: &RgbImage, work: &mut Work) -> Option<Signature> {
    let (luma, width, height) = hashed_luma(
        image.width() as usize,
        image.height() as usize,
        image.pixels().map(|p| pdq::luma_of(p.0)),
    );
    of_luma(&luma, width, height, work)
}

/// The signature of a JPEG's planes: PDQ's luma is BT.601's, the Y plane itself.
#[cfg(feature = "turbojpeg")]
pub(crate) fn of_yuv(yuv: &super::planar::Yuv, work: &mut Work) -> Option<Signature> {
    let (luma, width, height) = hashed_bytes(
        &yuv.y.data,
        yuv.y.width as usize,
        yuv.y.height as usize,
        work,
    );
    let signature = of_luma(&luma, width, height, work);
    work.give(luma);
    signature
}

/// The signature of luma values (`width` x `height`, row by row) already averaged down by
/// [`hashed_luma`].
fn of_luma(luma: &[f32], width: usize, height: usize, work: &mut Work) -> Option<Signature> {
    let (quality, whole) = pair(luma, width, height, (0, 0, width, height))?;
    let trimmed = framed(luma, width, height)
        .and_then(|part| pair(luma, width, height, part).map(|(_, p)| p));
    // The inner part's hash alone (no mirror, no weak bits): it is compared, never probed with.
    let (bx, by) = (
        (width as f32 * INNER_BAND) as usize,
        (height as f32 * INNER_BAND) as usize,
    );
    let inner = Dct16::of_part(luma, width, height, (bx, by, width - bx, height - by))
        .map_or(whole.hash, |dct| dct.hash());
    Some(Signature {
        quality,
        whole,
        trimmed,
        inner: Some(inner),
        points: Some(crate::points::stored(luma, width, height, work)),
    })
}

/// A lookup's points (at each of its scales) of RGB pixels: the luma [`of_rgb`] hashes.
pub(crate) fn query_points(image: &RgbImage) -> QueryPoints {
    let (luma, width, height) = hashed_luma(
        image.width() as usize,
        image.height() as usize,
        image.pixels().map(|p| pdq::luma_of(p.0)),
    );
    crate::points::query(&luma, width, height)
}

/// The short side the luma is averaged down to (at least) before hashing: PDQ blurs and samples
/// it to 64x64 anyway, and each of a signature's four hashes costs per pixel (from a 640x480
/// variant, the four took 30 % of the pipeline's time: `bench/similar.sh`).
const HASHED_SIDE: usize = 128;

/// The luma values (`width` x `height` of them, row by row) averaged over `f` x `f` blocks as
/// they come, `f` the largest that keeps [`HASHED_SIDE`] pixels on the short side (1 for a
/// smaller picture: then a copy), and the averaged picture's sides. A variant's pixels are
/// read once and never held at full size as floats. A block cut by the right or bottom edge is
/// left out; values missing from `luma` count as 0.
fn hashed_luma(
    width: usize,
    height: usize,
    mut luma: impl Iterator<Item = f32>,
) -> (Vec<f32>, usize, usize) {
    let f = (width.min(height) / HASHED_SIDE).max(1);
    let (w, h) = (width / f, height / f);
    let mut out = vec![0f32; w * h];
    let scale = 1.0 / (f * f) as f32;
    let rest = width - w * f;
    for y in 0..h * f {
        if let Some(out_row) = out.get_mut((y / f) * w..(y / f + 1) * w) {
            for o in out_row {
                *o += luma.by_ref().take(f).sum::<f32>() * scale;
            }
        }
        if rest > 0 {
            luma.nth(rest - 1);
        }
    }
    (out, w, h)
}

/// [`hashed_luma`] of a plane of bytes (`width` x `height`, row by row): each block's `f` rows
/// added as integers first (whole rows at once, along memory), then its `f` columns, and the
/// block's exact sum scaled once (the floats' sum rounds each row's share; the two differ in
/// the last bits, no more). A block cut by the right or bottom edge is left out.
#[cfg(feature = "turbojpeg")]
fn hashed_bytes(
    plane: &[u8],
    width: usize,
    height: usize,
    work: &mut Work,
) -> (Vec<f32>, usize, usize) {
    let f = (width.min(height) / HASHED_SIDE).max(1);
    let (w, h) = (width / f, height / f);
    let scale = 1.0 / (f * f) as f32;
    let mut out = work.empty(w * h);
    let mut sums = vec![0u32; width];
    // `max(1)`: a plane 0 pixels wide has no rows to read (and chunks of 0 are refused).
    for rows in plane.chunks_exact((width * f).max(1)).take(h) {
        sums.fill(0);
        for row in rows.chunks_exact(width.max(1)) {
            for (s, &v) in sums.iter_mut().zip(row) {
                *s += u32::from(v);
            }
        }
        out.extend(
            sums.chunks_exact(f)
                .take(w)
                .map(|block| block.iter().sum::<u32>() as f32 * scale),
        );
    }
    out.resize(w * h, 0.0);
    (out, w, h)
}

/// The hash of a part of the picture (`(x0, y0, x1, y1)`, ends excluded) and of its mirror
/// image, the mirror's as a mirrored copy hashes (`Dct16::of_part_and_mirror`): PDQ's blur
/// windows are not centred, so the coefficients' sign changes (`Dct16::dihedral`) are a few to
/// tens of bits off a mirrored copy's own hash (`bench/similar.sh`: 86 % of mirrored copies
/// found that way).
fn pair(
    luma: &[f32],
    width: usize,
    height: usize,
    part: (usize, usize, usize, usize),
) -> Option<(u8, HashPair)> {
    let (dct, mirror) = Dct16::of_part_and_mirror(luma, width, height, part)?;
    Some((
        dct.quality,
        HashPair {
            hash: dct.hash(),
            mirror: mirror.hash(),
            hash_weak: dct.weak_bits(),
            mirror_weak: mirror.weak_bits(),
        },
    ))
}

/// What a flat border surrounds, `(x0, y0, x1, y1)` (ends excluded); `None` when there is no
/// border worth trimming.
fn framed(luma: &[f32], width: usize, height: usize) -> Option<(usize, usize, usize, usize)> {
    let row = |y: usize| luma.get(y * width..(y + 1) * width);
    let column = |x: usize| (0..height).filter_map(move |y| luma.get(y * width + x).copied());
    let top = flat_run((0..height).map(|y| row(y).map(|r| r.to_vec()).unwrap_or_default()));
    let bottom = flat_run(
        (0..height)
            .rev()
            .map(|y| row(y).map(|r| r.to_vec()).unwrap_or_default()),
    );
    let left = flat_run((0..width).map(|x| column(x).collect()));
    let right = flat_run((0..width).rev().map(|x| column(x).collect()));
    let min_x = (width as f32 * MIN_BORDER).ceil() as usize;
    let min_y = (height as f32 * MIN_BORDER).ceil() as usize;
    let worth = top >= min_y || bottom >= min_y || left >= min_x || right >= min_x;
    let (x0, x1) = (left, width.saturating_sub(right));
    let (y0, y1) = (top, height.saturating_sub(bottom));
    let kept = x1 > x0
        && y1 > y0
        && (x1 - x0) as f32 >= width as f32 * MIN_KEPT
        && (y1 - y0) as f32 >= height as f32 * MIN_KEPT;
    (worth && kept).then_some((x0, y0, x1, y1))
}

/// How many of `lines` (from the outside in) are flat and of the outermost one's level.
fn flat_run(lines: impl Iterator<Item = Vec<f32>>) -> usize {
    let mut level = None;
    let mut run = 0;
    for line in lines {
        if line.is_empty() {
            break;
        }
        let mean = line.iter().sum::<f32>() / line.len() as f32;
        let flat = line.iter().all(|v| (v - mean).abs() <= FLAT_TOLERANCE);
        let level = *level.get_or_insert(mean);
        if !flat || (mean - level).abs() > FLAT_TOLERANCE {
            break;
        }
        run += 1;
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{Rgb, imageops};
    use imgest_core::domain::MATCH_DISTANCE;

    /// A picture with detail everywhere (no flat border of its own).
    fn picture(w: u32, h: u32) -> RgbImage {
        RgbImage::from_fn(w, h, |x, y| {
            let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
            let v = |a: f32| ((a.sin() * 0.5 + 0.5) * 255.0) as u8;
            Rgb([
                v(fx * 17.0 + fy * 5.0),
                v(fx * 3.0 - fy * 13.0 + (fx * fy * 40.0).sin()),
                v((fx - 0.4).hypot(fy - 0.6) * 30.0),
            ])
        })
    }

    fn padded(image: &RgbImage, share: f32, colour: [u8; 3]) -> RgbImage {
        let (w, h) = image.dimensions();
        let (px, py) = ((w as f32 * share) as u32, (h as f32 * share) as u32);
        let mut out = RgbImage::from_pixel(w + 2 * px, h + 2 * py, Rgb(colour));
        imageops::replace(&mut out, image, i64::from(px), i64::from(py));
        out
    }

    #[test]
    fn a_padded_copy_trims_to_the_original_and_a_photo_without_border_is_not_trimmed() {
        let original = picture(400, 300);
        let signature = of_rgb(&original).unwrap();
        assert!(signature.trimmed.is_none(), "{signature:?}");
        assert!(signature.is_matchable());
        for (share, colour) in [
            (0.05, [255, 255, 255]),
            (0.2, [0, 0, 0]),
            (0.1, [90, 120, 30]),
        ] {
            let copy = of_rgb(&padded(&original, share, colour)).unwrap();
            let trimmed = copy.trimmed.expect("a padded copy is trimmed");
            let d = trimmed.hash.distance(&signature.whole.hash);
            // Within the distance with room to spare (the copy is averaged down by another
            // factor than the original, and its border's edge blurs into a line of the part).
            assert!(
                d <= MATCH_DISTANCE - 8,
                "padded {share} in {colour:?}: {d} bits from the original"
            );
            assert!(copy.whole.hash.distance(&signature.whole.hash) > MATCH_DISTANCE / 2);
        }
    }

    #[test]
    fn a_mirrored_copy_hashes_as_the_originals_mirror() {
        let original = picture(320, 240);
        let signature = of_rgb(&original).unwrap();
        let mirrored = of_rgb(&imageops::flip_horizontal(&original)).unwrap();
        assert!(mirrored.whole.hash.distance(&signature.whole.mirror) <= 4);
        assert!(mirrored.whole.mirror.distance(&signature.whole.hash) <= 4);
        assert!(mirrored.whole.hash.distance(&signature.whole.hash) > MATCH_DISTANCE);
    }

    /// `image` with a shop's name in its top left corner, the way sellers stamp photos: dark
    /// letters on a light box, about a twentieth of the photo high, a fortieth from its edges.
    fn stamped(image: &RgbImage) -> RgbImage {
        let mut out = image.clone();
        let (w, h) = image.dimensions();
        let (x0, y0, bw, bh) = (w / 40, h / 40, w * 2 / 5, h / 16);
        for y in y0..y0 + bh {
            for x in x0..x0 + bw {
                // Letters: dark strokes in a light box.
                let stroke = (x - x0) % 9 < 3 && (y - y0) % (bh / 2).max(1) > 1;
                out.put_pixel(
                    x,
                    y,
                    Rgb(if stroke {
                        [20, 20, 20]
                    } else {
                        [250, 250, 250]
                    }),
                );
            }
        }
        out
    }

    #[test]
    fn a_copy_stamped_near_an_edge_keeps_the_inner_hash_the_whole_one_moves() {
        for (w, h) in [(400, 300), (300, 400), (1024, 768)] {
            // A dim, low-contrast photo (a night shot): the stamp is what stands out most.
            let mut dim = picture(w, h);
            for p in dim.pixels_mut() {
                p.0 = p.0.map(|c| 40 + c / 6);
            }
            let original = of_rgb(&dim).unwrap();
            let copy = of_rgb(&stamped(&dim)).unwrap();
            let (whole, inner) = (
                copy.whole.hash.distance(&original.whole.hash),
                copy.inner.unwrap().distance(&original.inner.unwrap()),
            );
            assert!(
                whole > MATCH_DISTANCE,
                "{w}x{h}: the whole hash {whole} bits off"
            );
            assert!(inner <= 4, "{w}x{h}: the inner hash {inner} bits off");
            // Not a border: nothing is trimmed.
            assert!(copy.trimmed.is_none());
        }
        // A photo too small to lose its edges: its inner hash is its whole one's.
        let tiny = of_rgb(&picture(8, 6)).unwrap();
        assert_eq!(tiny.inner, Some(tiny.whole.hash));
    }

    #[test]
    fn luma_is_averaged_down_to_the_hashed_side() {
        let luma = |w: usize, h: usize| (0..w * h).map(move |i| (i % w + i / w) as f32);
        let (small, w, h) = hashed_luma(641, 481, luma(641, 481));
        assert_eq!((w, h), (213, 160));
        // Rows 0-2 and columns 0-2 averaged; the column past the last block left out, so the
        // next row's blocks start where they should.
        assert!((small[0] - 2.0).abs() < 1e-3 && (small[1] - 5.0).abs() < 1e-3);
        assert!((small[213] - 5.0).abs() < 1e-3, "{}", small[213]);
        assert!((small[213 * 160 - 1] - (636.0 + 477.0 + 2.0)).abs() < 1e-2);
        // A picture already small is copied.
        let (copy, w, h) = hashed_luma(200, 150, luma(200, 150));
        assert_eq!((w, h), (200, 150));
        assert!(copy.iter().copied().eq(luma(200, 150)));
    }

    #[cfg(feature = "turbojpeg")]
    #[test]
    fn a_planes_bytes_are_averaged_as_their_floats_are() {
        // Sizes with a column and a row past the last block, a picture already small, one
        // averaged by 2 and by 3, empty planes; values that fill a byte's range.
        let sizes = [
            (641, 481),
            (640, 360),
            (200, 150),
            (1283, 390),
            (0, 5),
            (7, 0),
        ];
        for (w, h) in sizes {
            let plane: Vec<u8> = (0..w * h).map(|i| ((i * 7919) % 251) as u8).collect();
            let floats = hashed_luma(w, h, plane.iter().map(|&v| f32::from(v)));
            let bytes = hashed_bytes(&plane, w, h, &mut Work::default());
            assert_eq!((bytes.1, bytes.2), (floats.1, floats.2), "{w}x{h}");
            assert_eq!(bytes.0.len(), floats.0.len());
            for (a, b) in bytes.0.iter().zip(&floats.0) {
                assert!((a - b).abs() < 1e-3, "{w}x{h}: {a} against {b}");
            }
        }
    }

    #[test]
    fn the_source_is_the_smallest_of_the_photos_shape_big_enough() {
        let full = (4000, 3000);
        // large, medium, a square thumbnail, a small one.
        let sizes = [(1280, 960), (640, 480), (200, 200), (100, 75)];
        assert_eq!(source(sizes.into_iter(), full), Some(1));
        assert_eq!(source([(100, 75), (60, 45)].into_iter(), full), Some(0));
        assert_eq!(source([(200, 200)].into_iter(), full), None);
    }
}
