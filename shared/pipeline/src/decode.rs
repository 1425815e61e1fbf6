//! Decoding, once per photo: pixels to 8-bit RGB (alpha over white) or a JPEG's own YCbCr planes,
//! turned upright, CMYK converted to sRGB; the colour conversion the variants still need.
//!
//! JPEGs go through libjpeg-turbo's DCT-scaled decoder when the `turbojpeg` feature is on (see
//! `turbo.rs`): only as many pixels as the largest variant needs. Everything else, and any JPEG
//! libjpeg-turbo declines, is decoded at full size: WebP by libwebp when the `libwebp` feature is
//! on (see `webp.rs`), the rest (and any WebP libwebp declines) by the `image` crate's pure-Rust
//! decoders. The orientation and the colour profile come from the container (`meta.rs`), not
//! from the decoders.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use image::{DynamicImage, ImageDecoder, RgbImage, RgbaImage, metadata::Orientation};

use super::Colour;
use super::PipelineError;
use super::colour::Transform;
use super::detect::{self, Limits};
use super::jpeg::Structure;
use super::meta::Meta;
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
    /// The conversion to sRGB each variant still needs (only ever with RGB pixels).
    pub transform: Option<Arc<Transform>>,
    /// What was done about the photo's colour profile.
    pub colour: Colour,
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
            transform: None,
            colour: Colour::Untagged,
        }
    }

    fn with_colour(self, (transform, colour): (Option<Arc<Transform>>, Colour)) -> Self {
        Self {
            transform,
            colour,
            ..self
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
/// variant of `specs` needs: YCbCr planes when `planar` allows them and the photo has them
/// (and needs no colour conversion), else 8-bit RGB.
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
    match detect::sniff(bytes)? {
        SourceFormat::Jpeg => decode_jpeg(bytes, limits, specs, planar, scratch),
        SourceFormat::Png => {
            let info = detect::inspect(bytes, limits)?;
            let meta = super::png::metadata(bytes);
            let decoded = super::png::decode(bytes, limits.max_alloc())?;
            let colour = scratch.profiles.for_rgb(meta.icc.as_deref(), decoded.grey);
            Ok(
                Decoded::full_size(info.format, decoded.image, meta.orientation)
                    .with_colour(colour),
            )
        }
        SourceFormat::Webp => {
            let meta = super::riff::metadata(bytes);
            let colour = scratch.profiles.for_rgb(meta.icc.as_deref(), false);
            #[cfg(feature = "libwebp")]
            {
                detect::inspect(bytes, limits)?;
                if let Some(stored) = super::webp::decode(bytes, flatten_over_white) {
                    return Ok(
                        Decoded::full_size(SourceFormat::Webp, stored, meta.orientation)
                            .with_colour(colour),
                    );
                }
            }
            general(bytes, limits, &meta).map(|d| d.with_colour(colour))
        }
        SourceFormat::Gif => {
            let greyed = super::gif::with_grey_palette(bytes);
            general(greyed.as_deref().unwrap_or(bytes), limits, &Meta::default())
        }
        SourceFormat::Avif => {
            let info = detect::inspect(bytes, limits)?;
            let decoded = super::avif::decode(bytes, limits.max_pixels)?;
            let orientation =
                Orientation::from_exif(decoded.orientation).unwrap_or(Orientation::NoTransforms);
            let colour = match (&decoded.icc, decoded.nclx) {
                (Some(icc), _) => scratch.profiles.for_rgb(Some(icc), decoded.grey),
                (None, Some(nclx)) => scratch.profiles.for_coding_points(nclx),
                (None, None) => (None, Colour::Untagged),
            };
            Ok(Decoded::full_size(info.format, decoded.image, orientation).with_colour(colour))
        }
    }
}

/// A JPEG: checked by `jpeg::read` before any decoder sees it; CMYK converted to sRGB here.
fn decode_jpeg(
    bytes: &[u8],
    limits: &Limits,
    specs: &[VariantSpec],
    planar: bool,
    scratch: &Scratch,
) -> Result<Decoded, PipelineError> {
    let structure = super::jpeg::read(bytes)?;
    // Stray bytes or a short Adobe segment: the decoders see the JPEG as libjpeg reads it.
    let cleaned = super::jpeg::without_skipped(bytes, &structure)?;
    let (bytes, structure) = match &cleaned {
        Some((kept, structure)) => (kept.as_slice(), structure),
        None => (bytes, &structure),
    };
    let frame = &structure.frame;
    let info = detect::checked(
        SourceFormat::Jpeg,
        u32::from(frame.width),
        u32::from(frame.height),
        limits,
    )?;
    let meta = structure.metadata.meta(bytes);
    let orientation = meta.orientation;
    let (width, height) = upright(info.width, info.height, orientation);
    let min_scale = super::resize::min_scale(width, height, specs);
    if frame.components.len() == 4 {
        let (transform, colour) = scratch.profiles.for_cmyk(meta.icc.as_deref())?;
        let (w, h, mut cmyk) = decode_cmyk(bytes, structure, min_scale, limits, scratch)?;
        // libjpeg's rule: a 4-component JPEG with an Adobe segment (Photoshop's) stores its
        // inks inverted (255 = no ink).
        if structure.metadata.adobe {
            cmyk.iter_mut().for_each(|v| *v = 255 - *v);
        }
        let rgb = transform.cmyk_to_rgb(&cmyk, w, h)?;
        drop(cmyk);
        return Ok(Decoded {
            format: info.format,
            width,
            height,
            pixels: Pixels::Rgb(oriented(rgb, orientation)),
            transform: None,
            colour,
        });
    }
    let colour = scratch
        .profiles
        .for_rgb(meta.icc.as_deref(), frame.components.len() == 1);
    #[cfg(feature = "turbojpeg")]
    {
        let scans = &structure.scans;
        // Planes only when no variant needs the pixels converted.
        let planes = match planar && colour.0.is_none() {
            true => super::turbo::decode_scaled_yuv(bytes, scans, min_scale, scratch)?,
            false => None,
        };
        if let Some(stored) = planes {
            return Ok(Decoded {
                format: info.format,
                width,
                height,
                pixels: Pixels::Yuv(stored.oriented(orientation, &scratch.buffers)),
                transform: None,
                colour: colour.1,
            });
        }
        if let Some(stored) = super::turbo::decode_scaled(bytes, scans, min_scale, scratch)? {
            return Ok(Decoded {
                format: info.format,
                width,
                height,
                pixels: Pixels::Rgb(oriented(stored, orientation)),
                transform: colour.0,
                colour: colour.1,
            });
        }
    }
    #[cfg(not(feature = "turbojpeg"))]
    let _ = (planar, min_scale);
    general(bytes, limits, &meta).map(|d| d.with_colour(colour))
}

/// A CMYK or YCCK JPEG's inks as stored (4 bytes a pixel), with its size: scaled by
/// libjpeg-turbo when it takes it, else at full size by zune-jpeg.
fn decode_cmyk(
    bytes: &[u8],
    structure: &Structure,
    min_scale: f64,
    limits: &Limits,
    scratch: &Scratch,
) -> Result<(u32, u32, Vec<u8>), PipelineError> {
    #[cfg(feature = "turbojpeg")]
    if let Some(cmyk) =
        super::turbo::decode_scaled_cmyk(bytes, &structure.scans, min_scale, scratch)?
    {
        return Ok(cmyk);
    }
    #[cfg(not(feature = "turbojpeg"))]
    let _ = (structure, min_scale, scratch);
    super::jpeg::decode_cmyk(bytes, limits)
}

/// The `image` crate's decoder, at full size; `meta` says how to turn the result.
fn general(bytes: &[u8], limits: &Limits, meta: &Meta<'_>) -> Result<Decoded, PipelineError> {
    let (info, decoder) = detect::open(bytes, limits)?;
    if decoder.total_bytes() > limits.max_alloc() {
        return Err(PipelineError::TooManyPixels {
            width: info.width,
            height: info.height,
            limit: limits.max_pixels,
        });
    }
    let image = DynamicImage::from_decoder(decoder).map_err(|e| match e {
        image::ImageError::Limits(_) => PipelineError::TooManyPixels {
            width: info.width,
            height: info.height,
            limit: limits.max_pixels,
        },
        other => super::error::from_decoder(other),
    })?;
    Ok(Decoded::full_size(
        info.format,
        to_rgb_over_white(image),
        meta.orientation,
    ))
}

/// The size after `orientation`: the quarter turns swap the sides.
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
