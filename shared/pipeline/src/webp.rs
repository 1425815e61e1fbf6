//! WebP through libwebp (feature `libwebp`): the reference decoder, with SIMD, several times
//! faster than the pure-Rust `image-webp` on lossy photos; and the encoder of WebP variants
//! (lossy, no metadata: the pixels are upright and sRGB).
//!
//! Only still images: an animated WebP (and anything libwebp refuses) is left to the general
//! decoder, which takes the first frame and words the error if the data is really broken.

use image::{RgbImage, RgbaImage};

/// Decodes `bytes` to RGB (alpha composited over white by `flatten`), as stored: no EXIF
/// orientation. `None` when libwebp cannot or should not take it.
pub(crate) fn decode(bytes: &[u8], flatten: fn(RgbaImage) -> RgbImage) -> Option<RgbImage> {
    let features = webp::BitstreamFeatures::new(bytes)?;
    if features.has_animation() {
        return None;
    }
    let decoded = webp::Decoder::new(bytes).decode()?;
    let (width, height) = (decoded.width(), decoded.height());
    let pixels = decoded.to_vec();
    if decoded.is_alpha() {
        RgbaImage::from_raw(width, height, pixels).map(flatten)
    } else {
        RgbImage::from_raw(width, height, pixels)
    }
}

/// Encodes `image` as a lossy WebP at `quality` (1..=100, libwebp's scale; its default method 4).
pub(crate) fn encode(image: &RgbImage, quality: u8) -> Result<Vec<u8>, crate::PipelineError> {
    let (width, height) = image.dimensions();
    webp::Encoder::from_rgb(image.as_raw(), width, height)
        .encode_simple(false, f32::from(quality.clamp(1, 100)))
        .map(|memory| memory.to_vec())
        .map_err(|e| crate::PipelineError::CorruptImage(format!("WebP encoding failed: {e:?}")))
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
}
