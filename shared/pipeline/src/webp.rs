//! WebP through libwebp (feature `libwebp`): the reference decoder, with SIMD, several times
//! faster than the pure-Rust `image-webp` on lossy photos.
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
