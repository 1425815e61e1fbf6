//! JPEG encoding of fresh pixels: baseline, 4:2:0 chroma, no metadata (the pixels are upright
//! and sRGB: neither EXIF nor an ICC profile is needed to show them).

use image::RgbImage;
use jpeg_encoder::{ChromaSubsamplingMethod, ColorType, Encoder, SamplingFactor};

use super::PipelineError;
use super::scratch::Scratch;

/// Encodes RGB pixels at `quality` (1..=100) with 4:2:0 chroma subsampling (libvips' default):
/// with libjpeg-turbo when the `turbojpeg` feature is on (about 2.8 times faster), else with
/// the pure-Rust `jpeg-encoder`.
pub(crate) fn encode_jpeg(
    image: &RgbImage,
    quality: u8,
    scratch: &Scratch,
) -> Result<Vec<u8>, PipelineError> {
    #[cfg(feature = "turbojpeg")]
    return super::turbo::encode(image, quality, scratch);
    #[cfg(not(feature = "turbojpeg"))]
    {
        let _ = scratch;
        encode_pure(image, quality)
    }
}

/// The pure-Rust encoder (the fallback build's).
#[cfg_attr(feature = "turbojpeg", allow(dead_code))]
fn encode_pure(image: &RgbImage, quality: u8) -> Result<Vec<u8>, PipelineError> {
    let fail = |e: &dyn std::fmt::Display| {
        PipelineError::CorruptImage(format!("JPEG encoding failed: {e}"))
    };
    let width = u16::try_from(image.width()).map_err(|e| fail(&e))?;
    let height = u16::try_from(image.height()).map_err(|e| fail(&e))?;
    // Roughly what a q82 photo compresses to, so the buffer rarely grows.
    let mut out = Vec::with_capacity(image.as_raw().len() / 8 + 1024);
    let mut encoder = Encoder::new(&mut out, quality.clamp(1, 100));
    encoder.set_sampling_factor(SamplingFactor::F_2_2);
    encoder.set_chroma_subsampling_method(ChromaSubsamplingMethod::Average);
    encoder
        .encode(image.as_raw(), width, height, ColorType::Rgb)
        .map_err(|e| fail(&e))?;
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn encodes_a_decodable_jpeg_of_the_same_size() {
        let img = RgbImage::from_fn(33, 17, |x, y| image::Rgb([x as u8 * 7, y as u8 * 15, 200]));
        let jpeg = encode_pure(&img, 82).unwrap();
        assert_eq!(&jpeg[..2], &[0xFF, 0xD8]);
        let back = image::load_from_memory(&jpeg).unwrap();
        assert_eq!((back.width(), back.height()), (33, 17));
    }
}
