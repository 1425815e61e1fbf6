//! JPEG through libjpeg-turbo (feature `turbojpeg`): DCT-scaled decoding and encoding.
//!
//! Decoding is most of a photo's time, and a JPEG can be decoded straight to 1/2, 1/4 or 1/8 of
//! its size by running smaller inverse DCTs: far fewer pixels to reconstruct, colour-convert and
//! resample. [`decode_scaled`] picks the smallest such size that is still at least as large as
//! what the variants need, so the resampler always scales down, never up.

use image::RgbImage;
use turbojpeg::{Colorspace, Compressor, Decompressor, Image, PixelFormat, ScalingFactor, Subsamp};

use super::PipelineError;

/// The scales with SIMD inverse DCTs in libjpeg-turbo (the other multiples of 1/8 run plain C
/// code), largest reduction first.
const SCALES: [ScalingFactor; 3] = [
    ScalingFactor::ONE_EIGHTH,
    ScalingFactor::ONE_QUARTER,
    ScalingFactor::ONE_HALF,
];

/// Decodes `bytes` (as stored: no EXIF orientation) to RGB, reduced by the largest DCT scale
/// that keeps the result at least `min_scale` times the stored size on both axes.
///
/// `None` when libjpeg-turbo cannot or should not take this JPEG (CMYK, a header or data it
/// refuses): the caller then uses the general decoder, which also words the error if the data
/// is really broken.
pub(crate) fn decode_scaled(bytes: &[u8], min_scale: f64) -> Option<RgbImage> {
    let mut decompressor = Decompressor::new().ok()?;
    let header = decompressor.read_header(bytes).ok()?;
    // CMYK and YCCK need the Adobe inversion handling of the general decoder.
    if !matches!(
        header.colorspace,
        Colorspace::YCbCr | Colorspace::Gray | Colorspace::RGB
    ) {
        return None;
    }
    let factor = if header.is_lossless {
        ScalingFactor::ONE
    } else {
        SCALES
            .into_iter()
            .find(|f| f.num() as f64 / f.denom() as f64 >= min_scale)
            .unwrap_or(ScalingFactor::ONE)
    };
    decompressor.set_scaling_factor(factor).ok()?;
    let scaled = header.scaled(factor);
    let len = scaled.width.checked_mul(scaled.height)?.checked_mul(3)?;
    let mut pixels = vec![0u8; len];
    let output = Image {
        pixels: pixels.as_mut_slice(),
        width: scaled.width,
        pitch: scaled.width * 3,
        height: scaled.height,
        format: PixelFormat::RGB,
    };
    // Warnings (corrupt or missing data) count as failures: the general decoder decides.
    decompressor.decompress(bytes, output).ok()?;
    RgbImage::from_raw(
        u32::try_from(scaled.width).ok()?,
        u32::try_from(scaled.height).ok()?,
        pixels,
    )
}

/// Encodes RGB pixels at `quality` with 4:2:0 chroma and libjpeg-turbo's standard Huffman
/// tables (what libvips writes by default), no metadata.
pub(crate) fn encode(image: &RgbImage, quality: u8) -> Result<Vec<u8>, PipelineError> {
    let fail =
        |e: turbojpeg::Error| PipelineError::CorruptImage(format!("JPEG encoding failed: {e}"));
    let mut compressor = Compressor::new().map_err(fail)?;
    compressor
        .set_quality(i32::from(quality.clamp(1, 100)))
        .map_err(fail)?;
    compressor.set_subsamp(Subsamp::Sub2x2).map_err(fail)?;
    let width = image.width() as usize;
    compressor
        .compress_to_vec(Image {
            pixels: image.as_raw().as_slice(),
            width,
            pitch: width * 3,
            height: image.height() as usize,
            format: PixelFormat::RGB,
        })
        .map_err(fail)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn photo() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/photo.jpg"
        ))
        .unwrap()
    }

    #[test]
    fn the_smallest_scale_that_is_still_large_enough_is_used() {
        let bytes = photo(); // 1500x1000
        let dims = |s| {
            let img = decode_scaled(&bytes, s).unwrap();
            (img.width(), img.height())
        };
        assert_eq!(dims(1.0), (1500, 1000));
        assert_eq!(dims(0.86), (1500, 1000));
        assert_eq!(dims(0.5), (750, 500));
        assert_eq!(dims(0.3), (750, 500));
        assert_eq!(dims(0.25), (375, 250));
        assert_eq!(dims(0.01), (188, 125));
    }

    #[test]
    fn cmyk_and_garbage_are_left_to_the_general_decoder() {
        let cmyk = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/cmyk.jpg"
        ))
        .unwrap();
        assert!(decode_scaled(&cmyk, 1.0).is_none());
        assert!(decode_scaled(b"\xff\xd8\xff\xe0 not a jpeg", 1.0).is_none());
        let bytes = photo();
        assert!(decode_scaled(&bytes[..bytes.len() / 2], 1.0).is_none());
    }

    #[test]
    fn encoding_round_trips() {
        let img = RgbImage::from_fn(33, 17, |x, y| image::Rgb([x as u8 * 7, y as u8 * 15, 200]));
        let jpeg = encode(&img, 82).unwrap();
        let back = image::load_from_memory(&jpeg).unwrap();
        assert_eq!((back.width(), back.height()), (33, 17));
    }
}
