//! Decoding, once per photo: pixels to 8-bit RGB (alpha over white) or a JPEG's own YCbCr planes,
//! EXIF orientation applied.
//!
//! JPEGs go through libjpeg-turbo's DCT-scaled decoder when the `turbojpeg` feature is on (see
//! `turbo.rs`): only as many pixels as the largest variant needs. Everything else, and any JPEG
//! libjpeg-turbo declines, is decoded at full size: WebP by libwebp when the `libwebp` feature is
//! on (see `webp.rs`), the rest (and any WebP libwebp declines) by the `image` crate's pure-Rust
//! decoders.

use std::panic::{AssertUnwindSafe, catch_unwind};

use image::{DynamicImage, ImageDecoder, RgbImage, RgbaImage, metadata::Orientation};

use super::PipelineError;
use super::detect::{self, Limits};
use super::scratch::Scratch;
use crate::domain::{SourceFormat, VariantSpec};

/// A decoded photo: upright pixels, possibly reduced (see [`Decoded::width`]).
pub(crate) struct Decoded {
    pub format: SourceFormat,
    /// The photo's full size after EXIF orientation; `pixels` may be smaller (a scaled decode),
    /// never with a different aspect ratio beyond rounding.
    pub width: u32,
    pub height: u32,
    pub pixels: Pixels,
}

/// Decoded pixels.
pub(crate) enum Pixels {
    /// 8-bit RGB, alpha composited over white.
    Rgb(RgbImage),
    /// A YCbCr JPEG's own planes (see `planar.rs`); only when the caller accepts them.
    #[cfg(feature = "turbojpeg")]
    Yuv(super::planar::Yuv),
}

/// Checks the limits, then decodes `bytes` into upright pixels, at least as large as every
/// variant of `specs` needs: YCbCr planes when `planar` allows them and the photo has them,
/// else 8-bit RGB.
///
/// The only entry point to decoding.
pub(crate) fn decode(
    bytes: &[u8],
    limits: &Limits,
    specs: &[VariantSpec],
    planar: bool,
    scratch: &Scratch,
) -> Result<Decoded, PipelineError> {
    // The decoders are third-party code fed untrusted bytes: should one of them panic, the
    // photo is refused as corrupt rather than the panic escaping to the caller.
    catch_unwind(AssertUnwindSafe(|| {
        decode_inner(bytes, limits, specs, planar, scratch)
    }))
    .unwrap_or_else(|_| {
        Err(PipelineError::CorruptImage(
            "the decoder failed on this data".into(),
        ))
    })
}

fn decode_inner(
    bytes: &[u8],
    limits: &Limits,
    specs: &[VariantSpec],
    planar: bool,
    scratch: &Scratch,
) -> Result<Decoded, PipelineError> {
    let (info, mut decoder) = detect::open(bytes, limits)?;
    if info.format == SourceFormat::Jpeg {
        check_jpeg_complete(bytes)?;
    }
    // A missing, unreadable or corrupt EXIF block means "no orientation", never a failure.
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    if decoder.total_bytes() > limits.max_alloc() {
        return Err(PipelineError::TooManyPixels {
            width: info.width,
            height: info.height,
            limit: limits.max_pixels,
        });
    }
    #[cfg(feature = "turbojpeg")]
    if info.format == SourceFormat::Jpeg {
        let (width, height) = upright(info.width, info.height, orientation);
        let min_scale = super::resize::min_scale(width, height, specs);
        let planes = match planar {
            true => super::turbo::decode_scaled_yuv(bytes, min_scale, scratch),
            false => None,
        };
        if let Some(stored) = planes {
            return Ok(Decoded {
                format: info.format,
                width,
                height,
                pixels: Pixels::Yuv(stored.oriented(orientation, &scratch.buffers)),
            });
        }
        if let Some(stored) = super::turbo::decode_scaled(bytes, min_scale, scratch) {
            return Ok(Decoded {
                format: info.format,
                width,
                height,
                pixels: Pixels::Rgb(oriented(stored, orientation)),
            });
        }
    }
    #[cfg(not(feature = "turbojpeg"))]
    let _ = (specs, planar, scratch);
    #[cfg(feature = "libwebp")]
    if info.format == SourceFormat::Webp
        && let Some(stored) = super::webp::decode(bytes, flatten_over_white)
    {
        let image = oriented(stored, orientation);
        return Ok(Decoded {
            format: info.format,
            width: image.width(),
            height: image.height(),
            pixels: Pixels::Rgb(image),
        });
    }
    let image = DynamicImage::from_decoder(decoder).map_err(|e| match e {
        image::ImageError::Limits(_) => PipelineError::TooManyPixels {
            width: info.width,
            height: info.height,
            limit: limits.max_pixels,
        },
        other => PipelineError::from_decoder(other),
    })?;
    let image = oriented(to_rgb_over_white(image), orientation);
    Ok(Decoded {
        format: info.format,
        width: image.width(),
        height: image.height(),
        pixels: Pixels::Rgb(image),
    })
}

/// The size after `orientation`: the quarter turns swap the sides.
#[cfg(feature = "turbojpeg")]
fn upright(width: u32, height: u32, orientation: Orientation) -> (u32, u32) {
    match orientation {
        Orientation::Rotate90
        | Orientation::Rotate270
        | Orientation::Rotate90FlipH
        | Orientation::Rotate270FlipH => (height, width),
        _ => (width, height),
    }
}

fn oriented(image: RgbImage, orientation: Orientation) -> RgbImage {
    if orientation == Orientation::NoTransforms {
        return image;
    }
    let mut image = DynamicImage::ImageRgb8(image);
    image.apply_orientation(orientation);
    image.into_rgb8()
}

/// 8-bit RGB; transparent pixels are composited over white, 16-bit samples rounded to 8 bits.
fn to_rgb_over_white(image: DynamicImage) -> RgbImage {
    match image {
        DynamicImage::ImageRgb8(rgb) => rgb,
        other if other.color().has_alpha() => flatten_over_white(&other.into_rgba8()),
        other => other.into_rgb8(),
    }
}

fn flatten_over_white(rgba: &RgbaImage) -> RgbImage {
    let mut out = Vec::with_capacity(rgba.as_raw().len() / 4 * 3);
    for px in rgba.as_raw().chunks_exact(4) {
        let a = u32::from(px[3]);
        for &c in &px[..3] {
            // c*a + 255*(255-a), divided by 255 with rounding; always <= 255.
            let v = (u32::from(c) * a + 255 * (255 - a) + 127) / 255;
            out.push(u8::try_from(v).unwrap_or(u8::MAX));
        }
    }
    RgbImage::from_raw(rgba.width(), rgba.height(), out)
        .unwrap_or_else(|| RgbImage::new(rgba.width(), rgba.height()))
}

/// Refuses a JPEG whose compressed data stops before the end-of-image marker (the decoder
/// would otherwise fill the missing part with grey and report success).
fn check_jpeg_complete(bytes: &[u8]) -> Result<(), PipelineError> {
    let truncated =
        || PipelineError::CorruptImage("truncated JPEG (no end-of-image marker)".into());
    let scan = start_of_scan(bytes).ok_or_else(truncated)?;
    // In entropy-coded data 0xFF is always followed by 0x00 or a restart marker, so FF D9 after
    // the first scan is the end-of-image marker. Search from the end: that is where it is.
    let rest = bytes.get(scan..).unwrap_or_default();
    if rest.windows(2).rev().any(|w| w == [0xFF, 0xD9]) {
        Ok(())
    } else {
        Err(truncated())
    }
}

/// The offset of the first start-of-scan marker, walking the marker segments from the start.
fn start_of_scan(bytes: &[u8]) -> Option<usize> {
    let mut i = 2; // after SOI
    loop {
        if *bytes.get(i)? != 0xFF {
            return None;
        }
        // Markers may be preceded by any number of 0xFF fill bytes.
        while *bytes.get(i + 1)? == 0xFF {
            i += 1;
        }
        let marker = *bytes.get(i + 1)?;
        match marker {
            0xDA => return Some(i),
            // Standalone markers carry no length.
            0x01 | 0xD0..=0xD8 => i += 2,
            _ => {
                let len = usize::from(u16::from_be_bytes([*bytes.get(i + 2)?, *bytes.get(i + 3)?]));
                i = i.checked_add(2 + len)?;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn alpha_is_composited_over_white() {
        let rgba =
            RgbaImage::from_raw(3, 1, vec![255, 0, 0, 255, 0, 0, 255, 128, 10, 20, 30, 0]).unwrap();
        let rgb = flatten_over_white(&rgba);
        assert_eq!(rgb.as_raw(), &[255, 0, 0, 127, 127, 255, 255, 255, 255]);
    }

    #[test]
    fn a_jpeg_without_its_end_marker_is_truncated() {
        let good = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 1, 2, 0xFF, 0xDA, 0, 2, 9, 9, 0xFF, 0xD9,
        ];
        assert!(check_jpeg_complete(&good).is_ok());
        assert!(check_jpeg_complete(&good[..14]).is_err());
        assert!(check_jpeg_complete(&good[..7]).is_err());
        assert!(check_jpeg_complete(&[0xFF, 0xD8]).is_err());
    }
}
