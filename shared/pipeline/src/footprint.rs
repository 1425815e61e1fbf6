//! How much memory a photo will need at its peak, from its header, before anything is decoded.
//!
//! The callers reserve it from the process's memory budget (see `imgest_core::budget`) before
//! decoding, so what runs side by side fits: one 0.6 MB PNG can decode to 49 MP. Each figure is
//! an upper bound of what the path that photo takes holds at once (decoded pixels, the
//! decoder's own buffers, the orientation copy, the variants and the resizer's intermediates),
//! checked against the server's measured peak RSS by `cli/tests/hostile.rs` and
//! `bench/burst.sh`. Bytes kept between photos (the scratch's buffers, codec handles) are the
//! process's own, not counted here.

use image::metadata::Orientation;

use std::borrow::Cow;

use super::meta::Meta;
use super::{Footprint, PipelineError, SourceInfo, detect, jpeg, resize};
use imgest_core::domain::{OutputFormat, SourceFormat, VariantSpec};

/// Allocator rounding, decoder tables and row buffers not worth modelling one by one.
const SLACK: u64 = 4 << 20;

/// The footprint of `bytes` (whose header passes `detect::inspect`) for `specs`.
pub(crate) fn estimate(
    bytes: &[u8],
    limits: &detect::Limits,
    specs: &[VariantSpec],
) -> Result<Footprint, PipelineError> {
    let info = detect::inspect(bytes, limits)?;
    let (w, h) = (u64::from(info.width), u64::from(info.height));
    let pixels = w * h;
    // The decoded image (width, height, bytes) the variants are made from, what decoding
    // holds besides it, and the photo's ICC profile.
    let (decoded, decoding, meta) = match info.format {
        SourceFormat::Jpeg => jpeg_decode(bytes, info, specs)?,
        // One buffer of at most 4 bytes a pixel, made RGB in place (`png.rs`).
        SourceFormat::Png => {
            let meta = super::png::metadata(bytes);
            (
                (info.width, info.height, pixels * 3),
                super::png::peak_bytes(info.width, info.height) - pixels * 3
                    + rotation_copy(meta.orientation, pixels * 3),
                meta,
            )
        }
        // The first frame as RGBA, and the canvas it is drawn on when it is smaller than the
        // canvas, flattened in place; a copy of the file when it has no colour table (`gif.rs`).
        SourceFormat::Gif => (
            (info.width, info.height, pixels * 3),
            pixels * 5
                + if super::gif::lacks_global_table(bytes) {
                    bytes.len() as u64 + 768
                } else {
                    0
                },
            Meta::default(),
        ),
        // The RGB image made from the decoder's planes (and alpha), and the orientation copy.
        SourceFormat::Avif => {
            let avif = super::avif::container::parse(bytes)?;
            let rotated = avif.orientation != 1;
            let meta = Meta {
                icc: avif.icc.map(Cow::Borrowed),
                orientation: Orientation::from_exif(avif.orientation)
                    .unwrap_or(Orientation::NoTransforms),
                exif: None,
            };
            (
                (info.width, info.height, pixels * 3),
                super::avif::decoding_bytes(&avif) + if rotated { pixels * 3 } else { 0 },
                meta,
            )
        }
        // libwebp's output and our copy of it (RGBA), and a lossless image's own ARGB pixels.
        SourceFormat::Webp => {
            let meta = super::riff::metadata(bytes);
            (
                (info.width, info.height, pixels * 3),
                pixels * 9 + rotation_copy(meta.orientation, pixels * 3),
                meta,
            )
        }
    };
    let (dw, dh, decoded_bytes) = decoded;
    let variants = variants(info, (dw, dh), specs);
    Ok(Footprint {
        info,
        bytes: decoded_bytes
            + decoding
            + variants
            + encoding(info, specs)
            + colour(&meta, info, specs)
            + SLACK,
    })
}

/// What the WebP and AVIF encoders hold besides the variant's pixels and file, for the largest
/// such variant (variants are encoded one at a time). Measured as the peak RSS of `imgest-bench
/// pipeline` with one variant of each format, less JPEG's, on a 1280x853 and a 2560x1440 PNG:
/// libwebp 0 and 5.0 bytes a pixel (its YUV copy and token buffers), rav1e 35.8 and 32.0 (the
/// 10-bit 4:4:4 source and reconstruction frames, and its per-block state); counted here with
/// room to spare.
fn encoding(info: SourceInfo, specs: &[VariantSpec]) -> u64 {
    specs
        .iter()
        .map(|spec| {
            let g = resize::plan(info.width, info.height, spec);
            let out = u64::from(g.width) * u64::from(g.height);
            out * match spec.format {
                OutputFormat::Jpeg => 0,
                OutputFormat::Webp => WEBP_BYTES_PER_PIXEL,
                OutputFormat::Avif => AVIF_BYTES_PER_PIXEL,
            }
        })
        .max()
        .unwrap_or(0)
}

const WEBP_BYTES_PER_PIXEL: u64 = 8;
const AVIF_BYTES_PER_PIXEL: u64 = 40;

/// Converting the variants' colours: the profile, twice (its bytes and what is parsed from
/// them), and the largest variant's converted copy (and its grey samples, for a grey
/// profile). Transforms themselves are the process's own (kept per profile, `colour.rs`).
fn colour(meta: &Meta<'_>, info: SourceInfo, specs: &[VariantSpec]) -> u64 {
    let Some(icc) = &meta.icc else {
        return 0;
    };
    let largest = specs
        .iter()
        .map(|spec| {
            let g = resize::plan(info.width, info.height, spec);
            u64::from(g.width) * u64::from(g.height)
        })
        .max()
        .unwrap_or(0);
    icc.len() as u64 * 2 + largest * 4
}

/// A second copy of the decoded image when the EXIF orientation turns or flips it.
fn rotation_copy(orientation: Orientation, decoded: u64) -> u64 {
    if orientation == Orientation::NoTransforms {
        0
    } else {
        decoded
    }
}

/// The decoded image (width, height, bytes), what decoding holds besides it, and the photo's
/// metadata.
type Decoding<'a> = ((u32, u32, u64), u64, Meta<'a>);

/// A JPEG: decoded by libjpeg-turbo at the DCT scale the variants allow, with a progressive
/// JPEG's whole-image coefficients (2 bytes each) besides; else by the general decoder at full
/// size. A CMYK JPEG's inks (4 bytes a pixel) are held while they become RGB.
fn jpeg_decode<'a>(
    bytes: &'a [u8],
    info: SourceInfo,
    specs: &[VariantSpec],
) -> Result<Decoding<'a>, PipelineError> {
    let structure = jpeg::read(bytes)?;
    let meta = structure.metadata.meta(bytes);
    let frame = &structure.frame;
    let (w, h) = (u64::from(info.width), u64::from(info.height));
    let components = frame.components.len() as u64;
    let (hmax, vmax) = frame.components.iter().fold((1u64, 1u64), |(h, v), c| {
        (h.max(u64::from(c.h)), v.max(u64::from(c.v)))
    });
    // Blocks of every component, padded to whole MCUs, 64 coefficients of 2 bytes each.
    let coefficients: u64 = frame
        .components
        .iter()
        .map(|c| {
            let bw = (w * u64::from(c.h))
                .div_ceil(hmax * 8)
                .div_ceil(u64::from(c.h))
                * u64::from(c.h);
            let bh = (h * u64::from(c.v))
                .div_ceil(vmax * 8)
                .div_ceil(u64::from(c.v))
                * u64::from(c.v);
            bw * bh * 128
        })
        .sum();
    let inks = |pixels: u64| if components == 4 { pixels * 4 } else { 0 };
    // The copy without stray bytes the decoders are given (`jpeg::without_skipped`).
    let cleaned = if structure.skipped.is_empty() {
        0
    } else {
        bytes.len() as u64
    };
    if !cfg!(feature = "turbojpeg") {
        // Full size: coefficients (progressive), the decoder's own samples, RGB (or the inks),
        // and the orientation copy.
        let pixels = w * h;
        let progressive = if frame.progressive { coefficients } else { 0 };
        return Ok((
            (info.width, info.height, pixels * 3),
            cleaned + progressive + pixels * components + inks(pixels) + pixels * 3,
            meta,
        ));
    }
    // The largest upright box any variant needs, and the DCT scale that keeps it.
    let scale = resize::min_scale(info.width, info.height, specs).max(resize::min_scale(
        info.height,
        info.width,
        specs,
    ));
    let (num, denom) = jpeg::dct_scale(scale);
    let factor = f64::from(num) / f64::from(denom);
    let sw = ((w as f64) * factor).ceil() as u64;
    let sh = ((h as f64) * factor).ceil() as u64;
    let decoded = sw * sh * 3;
    let progressive = if frame.progressive {
        // The whole-image coefficients, and the copy of the file without the unseen scans.
        coefficients + bytes.len() as u64
    } else {
        0
    };
    // libjpeg-turbo's row buffers: a few MCU rows at full width.
    let rows = w * vmax * 8 * components * 4;
    let (dw, dh) = (
        u32::try_from(sw).unwrap_or(u32::MAX),
        u32::try_from(sh).unwrap_or(u32::MAX),
    );
    // The orientation copy, at the scaled size.
    Ok((
        (dw, dh, decoded),
        cleaned + progressive + rows + inks(sw * sh) + decoded,
        meta,
    ))
}

/// The variants: each one's pixels and its JPEG (at most 3 bytes a pixel before it is cut to
/// size), and the resizer's horizontal pass (the output's width by the source's height).
fn variants(info: SourceInfo, (_, decoded_height): (u32, u32), specs: &[VariantSpec]) -> u64 {
    specs
        .iter()
        .map(|spec| {
            let g = resize::plan(info.width, info.height, spec);
            let out = u64::from(g.width) * u64::from(g.height);
            let pass = u64::from(g.width.max(g.height)) * u64::from(decoded_height.max(1)) * 3;
            out * 6 + pass
        })
        .sum()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use imgest_core::domain::VariantSet;

    const LIMITS: detect::Limits = detect::Limits {
        max_body: 20_000_000,
        max_pixels: 50_000_000,
    };

    fn png(width: u32, height: u32, color: png::ColorType, depth: png::BitDepth) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, width, height);
        e.set_color(color);
        e.set_depth(depth);
        e.set_compression(png::Compression::Fast);
        let mut w = e.write_header().unwrap();
        let len = (width * height) as usize * color.samples() * (depth as usize).div_ceil(8);
        w.write_image_data(&vec![0u8; len]).unwrap();
        w.finish().unwrap();
        out
    }

    #[test]
    fn a_webp_or_avif_variant_reserves_its_encoder_once_for_the_largest() {
        let photo = png(2000, 1000, png::ColorType::Rgb, png::BitDepth::Eight);
        let of = |variants: &str| {
            let set: VariantSet = variants.parse().unwrap();
            estimate(&photo, &LIMITS, set.specs()).unwrap().bytes
        };
        let jpeg = of("l=fit:1000x1000,s=fit:100x100");
        // A 1000x500 AVIF variant: its encoder, beside what the JPEG one holds.
        let avif = of("l=fit:1000x1000:avif,s=fit:100x100");
        assert_eq!(avif - jpeg, 500_000 * AVIF_BYTES_PER_PIXEL);
        // The small one's encoder is done before the large one's starts.
        let both = of("l=fit:1000x1000:avif,s=fit:100x100:webp");
        assert_eq!(both, avif);
    }

    #[test]
    fn a_large_png_needs_about_four_bytes_a_pixel_whatever_its_depth() {
        let specs = VariantSet::default();
        let needs = |w, h, depth| {
            let bytes = png(w, h, png::ColorType::Rgba, depth);
            estimate(&bytes, &LIMITS, specs.specs()).unwrap().bytes
        };
        let small = needs(1000, 1000, png::BitDepth::Sixteen);
        assert!(
            (4_000_000..4_000_000 + 40_000_000).contains(&small),
            "{small}"
        );
        let eight = needs(4000, 3000, png::BitDepth::Eight);
        let sixteen = needs(4000, 3000, png::BitDepth::Sixteen);
        assert_eq!(eight, sixteen);
        assert!(eight > 48_000_000, "{eight}");
    }

    fn jpeg(width: u16, height: u16, progressive: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = jpeg_encoder::Encoder::new(&mut out, 90);
        e.set_progressive(progressive);
        e.set_sampling_factor(jpeg_encoder::SamplingFactor::R_4_2_0);
        let rgb = vec![128u8; usize::from(width) * usize::from(height) * 3];
        e.encode(&rgb, width, height, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        out
    }

    #[test]
    fn a_progressive_jpeg_needs_its_whole_image_coefficients_a_baseline_one_does_not() {
        let specs = VariantSet::default();
        let needs = |progressive| {
            estimate(&jpeg(4000, 3000, progressive), &LIMITS, specs.specs())
                .unwrap()
                .bytes
        };
        // 4:2:0: 1.5 blocks' worth of 64 two-byte coefficients per 64 pixels.
        let coefficients = 4000 * 3000 * 3;
        let (progressive, baseline) = (needs(true), needs(false));
        if cfg!(feature = "turbojpeg") {
            // Decoded at 3/8 for the 1280 variant: 1500x1125.
            let decoded = 1500 * 1125 * 3;
            assert!(progressive >= coefficients + decoded, "{progressive}");
            assert!(baseline < coefficients, "{baseline}");
        }
        assert!(progressive > baseline, "{progressive} vs {baseline}");
    }

    #[test]
    fn a_photo_over_the_pixel_limit_has_no_footprint() {
        let specs = VariantSet::default();
        let limits = detect::Limits {
            max_pixels: 1000,
            ..LIMITS
        };
        let err = estimate(
            &png(100, 100, png::ColorType::Rgb, png::BitDepth::Eight),
            &limits,
            specs.specs(),
        )
        .unwrap_err();
        assert_eq!(err.kind(), "too_many_pixels");
    }
}
