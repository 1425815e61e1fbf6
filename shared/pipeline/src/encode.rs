//! Encoding fresh pixels in a variant's format, without metadata (the pixels are upright and
//! sRGB: neither EXIF nor an ICC profile is needed to show them). JPEG here (baseline, 4:2:0
//! chroma); WebP in `webp.rs`, AVIF in `avif/encode.rs`.

use image::RgbImage;
use imgest_core::domain::OutputFormat;
use jpeg_encoder::{ChromaSubsamplingMethod, ColorType, Encoder, SamplingFactor};

use super::PipelineError;
use super::scratch::Scratch;

/// A WebP variant's quality unless it names one: the butteraugli distance of JPEG at the default
/// `IMGEST_JPEG_QUALITY` (82), interpolated on the benchmark photos (`bench/formats.sh`,
/// docs/benchmarks.md#output-formats).
pub const DEFAULT_WEBP_QUALITY: u8 = 88;
/// An AVIF variant's quality unless it names one (ravif's scale), chosen the same way.
pub const DEFAULT_AVIF_QUALITY: u8 = 83;

/// Whether this build can encode `format` (WebP needs the `libwebp` feature, AVIF `avif`).
pub fn supports(format: OutputFormat) -> bool {
    match format {
        OutputFormat::Jpeg => true,
        OutputFormat::Webp => cfg!(feature = "libwebp"),
        OutputFormat::Avif => cfg!(feature = "avif"),
    }
}

/// The other formats' defaults and encoder settings, for the variant set's version.
pub(crate) fn settings() -> String {
    #[cfg(feature = "avif")]
    let speed = super::avif::encode::SPEED;
    #[cfg(not(feature = "avif"))]
    let speed = 0;
    format!("webp:{DEFAULT_WEBP_QUALITY},avif:{DEFAULT_AVIF_QUALITY}:speed{speed}")
}

/// Encodes RGB pixels as `format` at `quality` (1..=100, the format's own scale).
pub(crate) fn encode(
    image: &RgbImage,
    format: OutputFormat,
    quality: u8,
    scratch: &Scratch,
) -> Result<Vec<u8>, PipelineError> {
    match format {
        OutputFormat::Jpeg => encode_jpeg(image, quality, scratch),
        #[cfg(feature = "libwebp")]
        OutputFormat::Webp => super::webp::encode(image, quality),
        #[cfg(feature = "avif")]
        OutputFormat::Avif => super::avif::encode::encode(image, quality),
        #[allow(unreachable_patterns)]
        other => Err(PipelineError::UnsupportedFormat(format!(
            "{other} variants (this build has no {other} encoder)"
        ))),
    }
}

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
