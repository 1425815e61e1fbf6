//! JPEG through libjpeg-turbo (feature `turbojpeg`): DCT-scaled decoding and encoding, to and
//! from RGB or YCbCr planes (see `planar.rs`).
//!
//! Decoding is most of a photo's time, and a JPEG can be decoded straight to 1/2, 3/8, 1/4 or
//! 1/8 of its size by running smaller inverse DCTs: far fewer pixels to reconstruct,
//! colour-convert and resample. [`decode_scaled`] picks the smallest such size that is still at
//! least as large as what the variants need (`jpeg::dct_scale`), so the resampler always scales
//! down, never up.
//!
//! Progressive JPEGs are the slow case: DCT scaling saves no entropy decoding, and they carry
//! several passes over the coefficients. When the output is small enough that only the lowest
//! frequencies of each 8x8 block can show in it, the scans that carry only higher frequencies
//! (and the refinement scans that depend on them) are left out before decoding
//! ([`without_unseen_scans`]): what they add lies above the output's Nyquist limit, which the
//! resampler would filter away anyway. When the output is at most about two thirds of the
//! stored size, the final refinement scans (the last bit of every AC coefficient) are left out
//! too: they are about a third of a progressive photo's time, and the resampled,
//! re-encoded variants barely show them (measured: SSIM of the 640 variant at most 0.002
//! lower on the progressive photos of `bench/pipeline.sh`, 0.001 on average).

use std::borrow::Cow;

use image::RgbImage;
use turbojpeg::{
    Colorspace, Compressor, DecompressHeader, Decompressor, Image, PixelFormat, ScalingFactor,
    Subsamp, YuvImage, YuvPlanesImage,
};

use super::PipelineError;
use super::jpeg::{MAX_SCANS, Scan, dct_scale};
use super::planar::{Plane, Yuv};
use super::scratch::{Buffers, Scratch};

/// What a decode through libjpeg-turbo gives: `Ok(None)` when it cannot or should not take
/// this JPEG (CMYK, a header it cannot read, a layout it does not decode to): the caller then
/// uses the general decoder. An error when it took the JPEG and the data is bad: not tried
/// again elsewhere, as a second full-size decode of bad data is what a hostile file wants.
type Decoded<T> = Result<Option<T>, PipelineError>;

/// Decodes `bytes` (as stored: no EXIF orientation) to RGB, reduced by the largest DCT scale
/// that keeps the result at least `min_scale` times the stored size on both axes.
///
/// `scans` are the JPEG's scans as `jpeg::read` found them (for a progressive JPEG, which of
/// them the output can do without).
pub(crate) fn decode_scaled(
    bytes: &[u8],
    scans: &[Scan],
    min_scale: f64,
    scratch: &Scratch,
) -> Decoded<RgbImage> {
    with_decompressor(scratch, |d| rgb_with(d, bytes, scans, min_scale))
}

/// Runs `f` with a decompressor kept from an earlier photo (or a new one), and keeps it for the
/// next photo if `f` decoded (after a failure it is dropped, whatever state it is in).
fn with_decompressor<T>(
    scratch: &Scratch,
    f: impl FnOnce(&mut Decompressor) -> Decoded<T>,
) -> Decoded<T> {
    let decompressor = scratch.decompressors.take().or_else(|| {
        let mut d = Decompressor::new().ok()?;
        // Refused by `jpeg::read` before this; kept as libjpeg-turbo's own guard too.
        d.set_scan_limit(u32::try_from(MAX_SCANS).ok()?).ok()?;
        Some(d)
    });
    let Some(mut decompressor) = decompressor else {
        return Ok(None);
    };
    let out = f(&mut decompressor)?;
    if out.is_some() {
        scratch.decompressors.put(decompressor);
    }
    Ok(out)
}

/// libjpeg-turbo's verdict on a decode. Its warnings fail the call too, and all but one mean
/// the pixels are not the photo (data missing, corrupt, or a bogus progression).
fn decompressed(result: Result<(), turbojpeg::Error>) -> Result<(), PipelineError> {
    match result {
        Ok(()) => Ok(()),
        // Stray bytes between segments (some cameras and editors write them): skipped, and the
        // pixels are whole.
        Err(e) if e.to_string().contains("extraneous bytes before marker") => Ok(()),
        Err(e) => Err(PipelineError::CorruptImage(format!("libjpeg-turbo: {e}"))),
    }
}

fn rgb_with(
    decompressor: &mut Decompressor,
    bytes: &[u8],
    scans: &[Scan],
    min_scale: f64,
) -> Decoded<RgbImage> {
    // CMYK and YCCK are decoded to their inks (`decode_scaled_cmyk`).
    let decoded = pixels_with(
        decompressor,
        (bytes, scans, min_scale),
        &[Colorspace::YCbCr, Colorspace::Gray, Colorspace::RGB],
        PixelFormat::RGB,
    )?;
    // Not from the scratch: decoded RGB is freed, not kept (see `Pipeline::process`).
    Ok(decoded.and_then(|(width, height, pixels)| RgbImage::from_raw(width, height, pixels)))
}

/// [`decode_scaled`] for CMYK and YCCK JPEGs: their inks as stored (4 bytes a pixel; a YCCK
/// JPEG's converted to CMYK by libjpeg-turbo), with the scaled size. `Ok(None)` for any other
/// JPEG.
pub(crate) fn decode_scaled_cmyk(
    bytes: &[u8],
    scans: &[Scan],
    min_scale: f64,
    scratch: &Scratch,
) -> Decoded<(u32, u32, Vec<u8>)> {
    with_decompressor(scratch, |decompressor| {
        pixels_with(
            decompressor,
            (bytes, scans, min_scale),
            &[Colorspace::CMYK, Colorspace::YCCK],
            PixelFormat::CMYK,
        )
    })
}

/// The JPEG `bytes` (with its `scans`, at the DCT scale for `min_scale`) decoded to `format`,
/// if its colourspace is one of `colorspaces`: the scaled width and height and the pixels.
/// `Ok(None)` for a JPEG of another colourspace, or one libjpeg-turbo cannot set up.
fn pixels_with(
    decompressor: &mut Decompressor,
    (bytes, scans, min_scale): (&[u8], &[Scan], f64),
    colorspaces: &[Colorspace],
    format: PixelFormat,
) -> Decoded<(u32, u32, Vec<u8>)> {
    let Ok(header) = decompressor.read_header(bytes) else {
        return Ok(None);
    };
    if !colorspaces.contains(&header.colorspace) {
        return Ok(None);
    }
    let Some((scaled, pruned)) = prepare(decompressor, &header, bytes, scans, min_scale) else {
        return Ok(None);
    };
    let bytes = pruned.as_deref().unwrap_or(bytes);
    let (Ok(width), Ok(height)) = (u32::try_from(scaled.width), u32::try_from(scaled.height))
    else {
        return Ok(None);
    };
    let channels = format.size();
    let mut pixels = vec![0u8; scaled.width * scaled.height * channels];
    let output = Image {
        pixels: pixels.as_mut_slice(),
        width: scaled.width,
        pitch: scaled.width * channels,
        height: scaled.height,
        format,
    };
    decompressed(decompressor.decompress(bytes, output))?;
    Ok(Some((width, height, pixels)))
}

/// Sets the DCT scale for `min_scale` (see [`decode_scaled`]); the scaled header, and the
/// progressive JPEG without the scans the output cannot show, if any.
fn prepare(
    decompressor: &mut Decompressor,
    header: &DecompressHeader,
    bytes: &[u8],
    scans: &[Scan],
    min_scale: f64,
) -> Option<(DecompressHeader, Option<Vec<u8>>)> {
    let factor = if header.is_lossless {
        ScalingFactor::ONE
    } else {
        let (num, denom) = dct_scale(min_scale);
        ScalingFactor::new(num.into(), denom.into())
    };
    decompressor.set_scaling_factor(factor).ok()?;
    let pruned = if header.is_progressive {
        without_unseen_scans(bytes, scans, min_scale)
    } else {
        None
    };
    Some((header.scaled(factor), pruned))
}

/// [`decode_scaled`] to YCbCr planes, for JPEGs stored as YCbCr with 4:4:4, 4:2:2, 4:2:0 or
/// 4:4:0 chroma: no chroma upsampling, no colour conversion. `Ok(None)` for anything else
/// (grey, RGB, CMYK, other subsamplings, lossless).
pub(crate) fn decode_scaled_yuv(
    bytes: &[u8],
    scans: &[Scan],
    min_scale: f64,
    scratch: &Scratch,
) -> Decoded<Yuv> {
    with_decompressor(scratch, |d| {
        yuv_with(d, bytes, scans, min_scale, &scratch.buffers).transpose()
    })
}

/// `None` when declined, else the planes or why the data is bad.
fn yuv_with(
    decompressor: &mut Decompressor,
    bytes: &[u8],
    scans: &[Scan],
    min_scale: f64,
    buffers: &Buffers,
) -> Option<Result<Yuv, PipelineError>> {
    let header = decompressor.read_header(bytes).ok()?;
    if header.colorspace != Colorspace::YCbCr || header.is_lossless {
        return None;
    }
    let sub: (u32, u32) = match header.subsamp {
        Subsamp::None => (1, 1),
        Subsamp::Sub2x1 => (2, 1),
        Subsamp::Sub2x2 => (2, 2),
        Subsamp::Sub1x2 => (1, 2),
        _ => return None,
    };
    let (scaled, pruned) = prepare(decompressor, &header, bytes, scans, min_scale)?;
    let bytes = pruned.as_deref().unwrap_or(bytes);
    let (width, height) = (
        u32::try_from(scaled.width).ok()?,
        u32::try_from(scaled.height).ok()?,
    );
    // libjpeg-turbo's planes (row alignment 1): Y padded to whole chroma samples, then Cb, Cr.
    let (luma_w, luma_h) = (
        width.div_ceil(sub.0) * sub.0,
        height.div_ceil(sub.1) * sub.1,
    );
    let (chroma_w, chroma_h) = (luma_w / sub.0, luma_h / sub.1);
    let luma_len = usize::try_from(u64::from(luma_w) * u64::from(luma_h)).ok()?;
    let chroma_len = usize::try_from(u64::from(chroma_w) * u64::from(chroma_h)).ok()?;
    let len = turbojpeg::yuv_pixels_len(scaled.width, 1, scaled.height, header.subsamp).ok()?;
    if len != luma_len + 2 * chroma_len {
        return None;
    }
    let mut pixels = buffers.take(len);
    let output = YuvImage {
        pixels: pixels.as_mut_slice(),
        width: scaled.width,
        align: 1,
        height: scaled.height,
        subsamp: header.subsamp,
    };
    if let Err(e) = decompressed(decompressor.decompress_to_yuv(bytes, output)) {
        return Some(Err(e));
    }
    // Each plane its own buffer; the luma plane keeps the decoder's.
    let chroma = |from: usize| {
        let mut plane = buffers.take_empty(chroma_len);
        plane.extend_from_slice(pixels.get(from..from + chroma_len)?);
        Some(plane)
    };
    let cb = chroma(luma_len)?;
    let cr = chroma(luma_len + chroma_len)?;
    pixels.truncate(luma_len);
    Yuv::new(
        sub,
        Plane::new(luma_w, luma_h, pixels)?.cropped(width, height, buffers)?,
        Plane::new(chroma_w, chroma_h, cb)?,
        Plane::new(chroma_w, chroma_h, cr)?,
    )
    .map(Ok)
}

/// Natural (row-major) position of each zig-zag index in an 8x8 block.
const ZIGZAG: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// The largest scale (output over stored size) at which the final AC refinement scans are left
/// out (see the module's documentation): two thirds, with room for rounding.
const DROP_LAST_BIT_SCALE: f64 = 0.7;

/// A progressive JPEG whose output will be `scale` times its stored size, without the scans
/// that output cannot show; `None` when there are none (or the data is not a progressive JPEG
/// this understands: then it is decoded whole, as usual).
///
/// An 8x8 block's coefficient `u` is a frequency of `u / 16` cycles per pixel; the output keeps
/// frequencies below `scale / 2`, so only `u, v < ceil(8 * scale)` matter. A first scan (`Ah`
/// = 0) whose band starts past the last such coefficient (in zig-zag order) is dropped, and so
/// is every later refinement scan overlapping a dropped band of its component (it cannot be
/// decoded without that band's earlier bits). At a scale up to [`DROP_LAST_BIT_SCALE`], so is
/// every AC refinement scan that brings the last bit (`Ah` > 0, `Al` = 0). What is left ends with
/// the end-of-image marker, as any progressive JPEG may: the decoder leaves missing
/// coefficients (and bits) at zero.
pub(crate) fn without_unseen_scans(bytes: &[u8], scans: &[Scan], scale: f64) -> Option<Vec<u8>> {
    let needed = (8.0 * scale).ceil().clamp(1.0, 8.0) as u8;
    let last_needed = ZIGZAG
        .iter()
        .rposition(|&natural| natural / 8 < needed && natural % 8 < needed)
        .and_then(|k| u8::try_from(k).ok())?;
    if last_needed >= 63 {
        return None;
    }
    let first_scan = scans.first()?.start;
    // (component, Ss, Se) bands whose coefficients were dropped.
    let mut dropped: Vec<(u8, u8, u8)> = Vec::new();
    let mut keep = Vec::with_capacity(scans.len());
    for scan in scans {
        let overlaps = scan.components.iter().any(|&c| {
            dropped
                .iter()
                .any(|&(dc, ss, se)| dc == c && scan.ss <= se && ss <= scan.se)
        });
        let unseen = scan.ah == 0 && scan.ss > last_needed;
        let last_bit = scan.ah > 0 && scan.al == 0 && scale <= DROP_LAST_BIT_SCALE;
        let drop = scan.ss > 0 && (overlaps || unseen || last_bit);
        if drop {
            dropped.extend(scan.components.iter().map(|&c| (c, scan.ss, scan.se)));
        }
        keep.push(!drop);
    }
    if dropped.is_empty() {
        return None;
    }
    // Sized exactly: it is held while the coefficients fill memory.
    let dropped_len: usize = scans
        .iter()
        .zip(&keep)
        .filter(|&(_, &keep)| !keep)
        .map(|(scan, _)| scan.end.saturating_sub(scan.start))
        .sum();
    let mut out = Vec::with_capacity(bytes.len().saturating_sub(dropped_len) + 2);
    out.extend_from_slice(bytes.get(..first_scan)?);
    let mut previous_end = first_scan;
    for (scan, keep) in scans.iter().zip(keep) {
        // Tables (DHT) between scans stay: a later kept scan may need them.
        out.extend_from_slice(bytes.get(previous_end..scan.start)?);
        if keep {
            out.extend_from_slice(bytes.get(scan.start..scan.end)?);
        }
        previous_end = scan.end;
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    Some(out)
}

fn encode_failed(e: turbojpeg::Error) -> PipelineError {
    PipelineError::CorruptImage(format!("JPEG encoding failed: {e}"))
}

/// Runs `f` with a compressor kept from an earlier photo (or a new one) set to `quality` and
/// 4:2:0, and an output buffer large enough for any `width`x`height` JPEG; the result is copied
/// out of that buffer. Compressor and buffer are kept for the next photo if `f` succeeded.
fn compress_with(
    scratch: &Scratch,
    quality: u8,
    (width, height): (usize, usize),
    f: impl FnOnce(&mut Compressor, &mut [u8]) -> Result<usize, turbojpeg::Error>,
) -> Result<Vec<u8>, PipelineError> {
    let mut compressor = match scratch.compressors.take() {
        Some(c) => c,
        None => Compressor::new().map_err(encode_failed)?,
    };
    compressor
        .set_quality(i32::from(quality.clamp(1, 100)))
        .map_err(encode_failed)?;
    compressor
        .set_subsamp(Subsamp::Sub2x2)
        .map_err(encode_failed)?;
    let len = compressor.buf_len(width, height).map_err(encode_failed)?;
    // libjpeg-turbo's worst case for this size: a few times the JPEG, but kept, so its pages
    // are touched once, not on every photo (as a buffer the encoder allocates would be).
    let mut out = scratch.buffers.take(len);
    let written = f(&mut compressor, &mut out).map_err(encode_failed)?;
    let jpeg = out.get(..written).map(<[u8]>::to_vec);
    scratch.buffers.put(out);
    scratch.compressors.put(compressor);
    jpeg.ok_or_else(|| encode_failed(turbojpeg::Error::Null))
}

/// Encodes RGB pixels at `quality` with 4:2:0 chroma and libjpeg-turbo's standard Huffman
/// tables (what libvips writes by default), no metadata.
pub(crate) fn encode(
    image: &RgbImage,
    quality: u8,
    scratch: &Scratch,
) -> Result<Vec<u8>, PipelineError> {
    let (width, height) = (image.width() as usize, image.height() as usize);
    compress_with(scratch, quality, (width, height), |compressor, out| {
        compressor.compress_to_slice(
            Image {
                pixels: image.as_raw().as_slice(),
                width,
                pitch: width * 3,
                height,
                format: PixelFormat::RGB,
            },
            out,
        )
    })
}

/// Encodes 4:2:0 planes (what [`Yuv`]'s rendering makes) like [`encode`] encodes RGB.
pub(crate) fn encode_yuv(
    image: &Yuv,
    quality: u8,
    scratch: &Scratch,
) -> Result<Vec<u8>, PipelineError> {
    if image.sub != (2, 2) {
        return Err(PipelineError::CorruptImage(
            "JPEG encoding failed: planes are not 4:2:0".into(),
        ));
    }
    let (width, height) = (image.y.width, image.y.height);
    // The encoder would panic on an empty image rather than fail: refuse it here.
    if width == 0 || height == 0 {
        return Err(PipelineError::CorruptImage(
            "JPEG encoding failed: empty image".into(),
        ));
    }
    // libjpeg-turbo reads the luma plane in whole chroma samples: an odd side is padded.
    let y = image.y.padded(
        width.div_ceil(2) * 2,
        height.div_ceil(2) * 2,
        &scratch.buffers,
    );
    let (width, height) = (width as usize, height as usize);
    let jpeg = compress_with(scratch, quality, (width, height), |compressor, out| {
        compressor.compress_yuv_planes_to_slice(
            &YuvPlanesImage {
                y_plane: y.data.as_slice(),
                u_plane: image.cb.data.as_slice(),
                v_plane: image.cr.data.as_slice(),
                width,
                height,
                y_stride: y.width as usize,
                u_stride: image.cb.width as usize,
                v_stride: image.cr.width as usize,
                subsamp: Subsamp::Sub2x2,
            },
            out,
        )
    });
    if let Cow::Owned(padded) = y {
        scratch.buffers.put(padded.data);
    }
    jpeg
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::jpeg::read;
    use super::*;

    fn photo() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/photo.jpg"
        ))
        .unwrap()
    }

    #[test]
    fn the_smallest_scale_that_is_still_large_enough_is_used() {
        let bytes = photo(); // 1500x1000
        let scans = read(&bytes).unwrap().scans;
        let dims = |s| {
            let img = decode_scaled(&bytes, &scans, s, &Scratch::default())
                .unwrap()
                .unwrap();
            (img.width(), img.height())
        };
        assert_eq!(dims(1.0), (1500, 1000));
        assert_eq!(dims(0.86), (1500, 1000));
        assert_eq!(dims(0.5), (750, 500));
        assert_eq!(dims(0.38), (750, 500));
        // 3/8, rounded up as libjpeg-turbo does.
        assert_eq!(dims(0.375), (563, 375));
        assert_eq!(dims(0.3), (563, 375));
        assert_eq!(dims(0.25), (375, 250));
        assert_eq!(dims(0.01), (188, 125));
    }

    #[test]
    fn cmyk_and_unreadable_headers_are_left_to_the_general_decoder_and_bad_data_refused() {
        let cmyk = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/cmyk.jpg"
        ))
        .unwrap();
        let scratch = Scratch::default();
        assert!(
            decode_scaled(&cmyk, &read(&cmyk).unwrap().scans, 1.0, &scratch)
                .unwrap()
                .is_none()
        );
        let garbage = b"\xff\xd8\xff\xe0 not a jpeg";
        assert!(
            decode_scaled(garbage, &[], 1.0, &scratch)
                .unwrap()
                .is_none()
        );
        let bytes = photo();
        let err = decode_scaled(&bytes[..bytes.len() / 2], &[], 1.0, &scratch).unwrap_err();
        assert_eq!(err.kind(), "corrupt_image");
    }

    fn progressive(width: usize, height: usize) -> Vec<u8> {
        let img = turbojpeg::Image::mandelbrot(width, height, PixelFormat::RGB);
        let mut c = Compressor::new().unwrap();
        c.set_progressive(true).unwrap();
        c.set_quality(90).unwrap();
        c.set_subsamp(Subsamp::Sub2x2).unwrap();
        c.compress_to_vec(img.as_deref()).unwrap()
    }

    /// Decodes exactly these bytes at a quarter of 400x300.
    fn quarter(jpeg: &[u8]) -> Vec<u8> {
        let mut d = Decompressor::new().unwrap();
        d.set_scaling_factor(ScalingFactor::ONE_QUARTER).unwrap();
        let mut pixels = vec![0u8; 100 * 75 * 3];
        let out = Image {
            pixels: pixels.as_mut_slice(),
            width: 100,
            pitch: 300,
            height: 75,
            format: PixelFormat::RGB,
        };
        d.decompress(jpeg, out).unwrap();
        pixels
    }

    #[test]
    fn a_small_output_drops_the_high_frequency_scans_of_a_progressive_jpeg() {
        let jpeg = progressive(400, 300);
        // 6x6 coefficients, every bit: all of it.
        assert!(without_unseen_scans(&jpeg, &read(&jpeg).unwrap().scans, 0.75).is_none());
        assert!(without_unseen_scans(&jpeg, &read(&jpeg).unwrap().scans, 1.0).is_none());
        // 4x4 coefficients are in every band, but not their last bits: the final refinements
        // (one a component) go, and the rest still decodes.
        let half = without_unseen_scans(&jpeg, &read(&jpeg).unwrap().scans, 0.5).unwrap();
        let (all, kept) = (read(&jpeg).unwrap().scans, read(&half).unwrap().scans);
        assert_eq!(kept.len(), all.len() - 3);
        assert!(kept.iter().all(|s| s.ss == 0 || s.ah == 0 || s.al > 0));
        let diff = quarter(&half)
            .iter()
            .zip(&quarter(&jpeg))
            .map(|(&a, &b)| f64::from(a.abs_diff(b)))
            .sum::<f64>()
            / (100.0 * 75.0 * 3.0);
        assert!(diff < 4.0, "mean difference {diff}");
        let pruned = without_unseen_scans(&jpeg, &read(&jpeg).unwrap().scans, 0.2).unwrap();
        assert!(
            pruned.len() < jpeg.len() * 3 / 4,
            "{} of {}",
            pruned.len(),
            jpeg.len()
        );
        // Still a valid JPEG, close to the whole one at the scale it is decoded at.
        let (whole, part) = (quarter(&jpeg), quarter(&pruned));
        let diff = part
            .iter()
            .zip(&whole)
            .map(|(&a, &b)| f64::from(a.abs_diff(b)))
            .sum::<f64>()
            / whole.len() as f64;
        assert!(diff < 8.0, "mean difference {diff}");
        let scratch = Scratch::default();
        assert_eq!(
            decode_scaled(&jpeg, &read(&jpeg).unwrap().scans, 0.2, &scratch)
                .unwrap()
                .unwrap()
                .as_raw(),
            &part
        );
        // Baseline JPEGs are left alone.
        assert!(without_unseen_scans(&photo(), &read(&photo()).unwrap().scans, 0.1).is_none());
    }

    #[test]
    fn encoding_round_trips() {
        let img = RgbImage::from_fn(33, 17, |x, y| image::Rgb([x as u8 * 7, y as u8 * 15, 200]));
        let jpeg = encode(&img, 82, &Scratch::default()).unwrap();
        let back = image::load_from_memory(&jpeg).unwrap();
        assert_eq!((back.width(), back.height()), (33, 17));
    }
}
