//! WebP through libwebp (feature `libwebp`, by `webpx` over `libwebp-sys`, which builds the
//! libwebp sources it vendors: 1.5 or later, a test holds it): the reference decoder, with SIMD,
//! several times faster than the pure-Rust `image-webp` on lossy photos; and the encoder of WebP
//! variants (lossy, no metadata: the pixels are upright and sRGB).
//!
//! Only still images: an animated WebP (and anything libwebp refuses) is left to the general
//! decoder, which takes the first frame and words the error if the data is really broken.

use image::{RgbImage, RgbaImage};

/// Decodes `bytes` to RGB (alpha composited over white by `flatten`), as stored: no EXIF
/// orientation. `None` when libwebp cannot or should not take it. The caller checked the
/// photo's size and pixels against the pipeline's limits first (`detect::inspect`): webpx's
/// own default limits, other numbers, would refuse photos those allow.
pub(crate) fn decode(bytes: &[u8], flatten: fn(RgbaImage) -> RgbImage) -> Option<RgbImage> {
    let decoder = webpx::Decoder::new(bytes).ok()?;
    let info = decoder.info();
    if info.has_animation {
        return None;
    }
    let alpha = info.has_alpha;
    let decoder = decoder.config(webpx::DecoderConfig::new().limits(webpx::Limits::none()));
    if alpha {
        let (pixels, width, height) = decoder.decode_rgba_raw().ok()?;
        RgbaImage::from_raw(width, height, pixels).map(flatten)
    } else {
        let (pixels, width, height) = decoder.decode_rgb_raw().ok()?;
        RgbImage::from_raw(width, height, pixels)
    }
}

/// Encodes `image` as a lossy WebP at `quality` (1..=100, libwebp's scale; its default method 4).
pub(crate) fn encode(image: &RgbImage, quality: u8) -> Result<Vec<u8>, crate::PipelineError> {
    let (width, height) = image.dimensions();
    webpx::Encoder::new_rgb(image.as_raw(), width, height)
        .quality(f32::from(quality.clamp(1, 100)))
        .encode(webpx::Unstoppable)
        .map_err(|e| crate::PipelineError::CorruptImage(format!("WebP encoding failed: {e}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn encodes_the_smallest_and_thinnest_variants() {
        for (w, h) in [(1, 1), (1, 97), (97, 1), (2, 3)] {
            let img = RgbImage::from_pixel(w, h, image::Rgb([200, 30, 90]));
            let webp = encode(&img, 88).unwrap();
            let back = decode(&webp, |rgba| image::DynamicImage::from(rgba).into_rgb8()).unwrap();
            assert_eq!(back.dimensions(), (w, h));
        }
    }

    #[test]
    fn the_linked_libwebp_is_1_5_or_later() {
        // Hostile bytes reach this decoder: older libwebp releases have decoder bugs fixed since.
        let (major, minor, patch) = webpx::version();
        assert!((major, minor) >= (1, 5), "libwebp {major}.{minor}.{patch}");
    }
}
