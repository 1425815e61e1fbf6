//! The photo's placeholder, a ThumbHash, made from the smallest variant's pixels as they are
//! rendered (upright, in sRGB, before a watermark): no second decode, and no more work than
//! averaging that variant down to the encoder's 100x100 at most. Variants are composited over
//! white, so the placeholder is opaque too.

use image::RgbImage;
use imgest_core::domain::ThumbHash;

/// The most pixels across and down the encoder is given. The reference encoder takes up to 100
/// (and asserts it), but its cosines cost per pixel and per coefficient, and the few low
/// frequencies a ThumbHash keeps (at most 7 across) are as well measured from 32 samples a
/// side: at 100 a placeholder cost 1.2-2.1 ms, 6-10 % of a photo's whole pipeline
/// (`imgest-bench pipeline`); see docs/benchmarks.md#placeholders.
const MAX_SIDE: usize = 32;
/// The fewest pixels a side is given, when the picture has that many.
const MIN_SIDE: usize = 4;
/// Samples a side averaged into each pixel the encoder is given.
const SAMPLES: usize = 4;

/// Which of the rendered variants (by their sizes) the placeholder is made of: the one with
/// the fewest pixels among those of the photo's shape (a placeholder tells a page the photo's
/// aspect ratio: a thumbnail cropped to a square would not), else the smallest of all.
pub(crate) fn source(sizes: impl Iterator<Item = (u32, u32)>, full: (u32, u32)) -> Option<usize> {
    sizes
        .enumerate()
        .map(|(i, (w, h))| (i, u64::from(w), u64::from(h)))
        .min_by_key(|&(_, w, h)| (!keeps_shape(w, h, full), w * h))
        .map(|(i, _, _)| i)
}

/// Whether a `w`x`h` variant has the shape of the `full` photo: its aspect ratio within a
/// pixel's rounding.
pub(crate) fn keeps_shape(w: u64, h: u64, full: (u32, u32)) -> bool {
    let (width, height) = (u64::from(full.0), u64::from(full.1));
    (w * height).abs_diff(h * width) <= width.max(height)
}

/// The ThumbHash of 8-bit RGB pixels.
pub(crate) fn of_rgb(image: &RgbImage) -> Option<ThumbHash> {
    let (width, height) = (image.width() as usize, image.height() as usize);
    let raw = image.as_raw();
    encode(width, height, |x, y| {
        let i = (y * width + x) * 3;
        let px = raw.get(i..i + 3)?;
        Some([px[0], px[1], px[2]])
    })
}

/// The ThumbHash of YCbCr planes (a JPEG's, kept planar: see `planar.rs`), converted to RGB as
/// a JPEG decoder does (JFIF's full-range BT.601).
#[cfg(feature = "turbojpeg")]
pub(crate) fn of_yuv(yuv: &super::planar::Yuv) -> Option<ThumbHash> {
    let (width, height) = (yuv.y.width as usize, yuv.y.height as usize);
    let (sub_x, sub_y) = (yuv.sub.0.max(1) as usize, yuv.sub.1.max(1) as usize);
    let chroma_width = yuv.cb.width as usize;
    encode(width, height, |x, y| {
        let luma = f32::from(*yuv.y.data.get(y * width + x)?);
        let c = (y / sub_y) * chroma_width + x / sub_x;
        let cb = f32::from(*yuv.cb.data.get(c)?) - 128.0;
        let cr = f32::from(*yuv.cr.data.get(c)?) - 128.0;
        let to_u8 = |v: f32| v.round().clamp(0.0, 255.0) as u8;
        Some([
            to_u8(luma + 1.402 * cr),
            to_u8(luma - 0.344_136 * cb - 0.714_136 * cr),
            to_u8(luma + 1.772 * cb),
        ])
    })
}

/// Averages a `width`x`height` picture (read through `pixel`) down to fit in
/// [`MAX_SIDE`]x[`MAX_SIDE`], keeping its aspect ratio, and encodes it. `None` for an empty
/// picture or a pixel out of reach (never expected of a rendered variant).
fn encode(
    width: usize,
    height: usize,
    pixel: impl Fn(usize, usize) -> Option<[u8; 3]>,
) -> Option<ThumbHash> {
    if width == 0 || height == 0 {
        return None;
    }
    // At least a few pixels a side where the photo has them: the encoder's colours go wrong on
    // a single row or column (a long strip's).
    let scale = |side: usize, long: usize| {
        (side * MAX_SIDE)
            .div_ceil(long)
            .max(MIN_SIDE)
            .clamp(1, side)
    };
    let long = width.max(height).max(MAX_SIDE);
    let (w, h) = (scale(width, long), scale(height, long));
    let mut rgba = Vec::with_capacity(w * h * 4);
    // Each output pixel averages at most SAMPLES x SAMPLES pixels spread over its box: a blur
    // of a few cosines needs no more, and reading every pixel of a 640x400 variant cost more
    // than the encoding.
    let samples = |from: usize, to: usize| (from..to).step_by((to - from).div_ceil(SAMPLES).max(1));
    for ty in 0..h {
        let (y0, y1) = (
            ty * height / h,
            ((ty + 1) * height / h).clamp(ty * height / h + 1, height),
        );
        for tx in 0..w {
            let (x0, x1) = (
                tx * width / w,
                ((tx + 1) * width / w).clamp(tx * width / w + 1, width),
            );
            let (mut sum, mut n) = ([0u32; 3], 0u32);
            for y in samples(y0, y1) {
                for x in samples(x0, x1) {
                    let px = pixel(x, y)?;
                    for (s, v) in sum.iter_mut().zip(px) {
                        *s += u32::from(v);
                    }
                    n += 1;
                }
            }
            rgba.extend(sum.iter().map(|s| (s / n.max(1)) as u8));
            rgba.push(u8::MAX);
        }
    }
    ThumbHash::from_bytes(thumbhash::rgba_to_thumb_hash(w, h, &rgba)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A picture whose left half is red and right half blue.
    fn halves(width: u32, height: u32) -> RgbImage {
        RgbImage::from_fn(width, height, |x, _| {
            if x < width / 2 {
                image::Rgb([220, 20, 20])
            } else {
                image::Rgb([20, 20, 220])
            }
        })
    }

    #[test]
    fn a_placeholder_keeps_the_aspect_ratio_and_the_colours() {
        for (width, height) in [(200, 200), (640, 240), (37, 512), (1, 1), (100, 3)] {
            let hash = of_rgb(&halves(width, height)).unwrap();
            assert!(hash.as_bytes().len() <= 25, "{width}x{height}: {hash:?}");
            let ratio = thumbhash::thumb_hash_to_approximate_aspect_ratio(hash.as_bytes()).unwrap();
            let want = width as f32 / height as f32;
            // ThumbHash stores the ratio coarsely (and clamps it past 1:7 or so).
            if want.max(1.0 / want) < 4.0 {
                assert!(
                    (ratio / want - 1.0).abs() < 0.35,
                    "{width}x{height}: {ratio}"
                );
            }
            let (w, h, rgba) = thumbhash::thumb_hash_to_rgba(hash.as_bytes()).unwrap();
            // Across, a ThumbHash keeps as many frequencies as the photo is wide for its
            // height (one for a 1:14 strip): the halves show when there are a few.
            if width >= 8 && 2 * width >= height {
                let at = |x: usize| &rgba[(h / 2 * w + x) * 4..][..4];
                let (left, right) = (at(0), at(w - 1));
                assert!(
                    left[0] > left[2] && right[2] > right[0],
                    "{width}x{height}: {left:?} {right:?}"
                );
            }
            assert!(rgba.chunks(4).all(|p| p[3] == 255), "opaque");
        }
    }

    #[test]
    fn the_placeholder_is_made_of_the_smallest_variant_of_the_photos_shape() {
        // large=fit:1280x1280, medium=fit:640x640, thumb=cover:200x200 of a 1600x1000 photo.
        let sizes = [(1280, 800), (640, 400), (200, 200)];
        assert_eq!(source(sizes.into_iter(), (1600, 1000)), Some(1));
        // Rounded by a pixel: still the photo's shape.
        assert_eq!(
            source([(1000, 667), (150, 101)].into_iter(), (3000, 2000)),
            Some(1)
        );
        // Every variant cropped: the smallest.
        assert_eq!(
            source([(400, 400), (200, 200)].into_iter(), (1600, 1000)),
            Some(1)
        );
        assert_eq!(source(std::iter::empty(), (1600, 1000)), None);
    }

    #[test]
    fn an_empty_picture_has_no_placeholder() {
        assert_eq!(of_rgb(&RgbImage::new(0, 0)), None);
    }
}
