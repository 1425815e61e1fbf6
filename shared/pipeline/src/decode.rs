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
use imgest_core::domain::{SourceFormat, VariantSpec};

/// A decoded photo: upright pixels, possibly reduced (see [`Decoded::width`]).
pub(crate) struct Decoded {
    pub format: SourceFormat,
    /// The photo's full size after EXIF orientation; `pixels` may be smaller (a scaled decode),
    /// never with a different aspect ratio beyond rounding.
    pub width: u32,
    pub height: u32,
    pub pixels: Pixels,
}

impl Decoded {
    /// A photo decoded at its full size, as stored: turned upright.
    fn full_size(format: SourceFormat, stored: RgbImage, orientation: Orientation) -> Self {
        let image = oriented(stored, orientation);
        Self {
            format,
            width: image.width(),
            height: image.height(),
            pixels: Pixels::Rgb(image),
        }
    }
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
    detect::check_size(bytes, limits)?;
    if detect::sniff(bytes)? == SourceFormat::Png {
        let info = detect::inspect(bytes, limits)?;
        let (stored, orientation) = super::png::decode(bytes, limits.max_alloc())?;
        return Ok(Decoded::full_size(info.format, stored, orientation));
    }
    let (info, mut decoder) = detect::open(bytes, limits)?;
    // A JPEG's markers are checked before any decoder sees it (see `jpeg.rs`).
    let scans = match info.format {
        SourceFormat::Jpeg => super::jpeg::read(bytes)?.scans,
        _ => Vec::new(),
    };
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
    let decoder = if info.format == SourceFormat::Jpeg {
        // The general decoder holds a copy of the whole file: not kept while libjpeg-turbo
        // decodes (a progressive JPEG's coefficients are in memory then), made again only if
        // libjpeg-turbo declines this JPEG.
        drop(decoder);
        let (width, height) = upright(info.width, info.height, orientation);
        let min_scale = super::resize::min_scale(width, height, specs);
        let planes = match planar {
            true => super::turbo::decode_scaled_yuv(bytes, &scans, min_scale, scratch)?,
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
        if let Some(stored) = super::turbo::decode_scaled(bytes, &scans, min_scale, scratch)? {
            return Ok(Decoded {
                format: info.format,
                width,
                height,
                pixels: Pixels::Rgb(oriented(stored, orientation)),
            });
        }
        detect::open(bytes, limits)?.1
    } else {
        decoder
    };
    #[cfg(not(feature = "turbojpeg"))]
    let _ = (specs, planar, scratch, scans);
    #[cfg(feature = "libwebp")]
    if info.format == SourceFormat::Webp
        && let Some(stored) = super::webp::decode(bytes, flatten_over_white)
    {
        return Ok(Decoded::full_size(info.format, stored, orientation));
    }
    let image = DynamicImage::from_decoder(decoder).map_err(|e| match e {
        image::ImageError::Limits(_) => PipelineError::TooManyPixels {
            width: info.width,
            height: info.height,
            limit: limits.max_pixels,
        },
        other => PipelineError::from_decoder(other),
    })?;
    Ok(Decoded::full_size(
        info.format,
        to_rgb_over_white(image),
        orientation,
    ))
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
/// 8-bit RGBA (what the GIF and WebP decoders give) becomes RGB in its own buffer.
fn to_rgb_over_white(image: DynamicImage) -> RgbImage {
    match image {
        DynamicImage::ImageRgb8(rgb) => rgb,
        DynamicImage::ImageRgba8(rgba) => flatten_over_white(rgba),
        other if other.color().has_alpha() => flatten_over_white(other.into_rgba8()),
        other => other.into_rgb8(),
    }
}

/// RGBA to RGB over white, in the same buffer.
pub(crate) fn flatten_over_white(rgba: RgbaImage) -> RgbImage {
    let (width, height) = rgba.dimensions();
    let mut buf = rgba.into_raw();
    let pixels = buf.len() / 4;
    super::png::to_rgb_in_place(&mut buf, pixels, png::ColorType::Rgba);
    buf.truncate(pixels * 3);
    RgbImage::from_raw(width, height, buf).unwrap_or_else(|| RgbImage::new(width, height))
}

/// A colour sample of opacity `a` over white: `c*a + 255*(255-a)`, divided by 255 with
/// rounding.
pub(crate) fn over_white(c: u8, a: u8) -> u8 {
    let (c, a) = (u32::from(c), u32::from(a));
    let v = (c * a + 255 * (255 - a) + 127) / 255;
    u8::try_from(v).unwrap_or(u8::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn alpha_is_composited_over_white() {
        let rgba =
            RgbaImage::from_raw(3, 1, vec![255, 0, 0, 255, 0, 0, 255, 128, 10, 20, 30, 0]).unwrap();
        let rgb = flatten_over_white(rgba);
        assert_eq!(rgb.as_raw(), &[255, 0, 0, 127, 127, 255, 255, 255, 255]);
    }
}
