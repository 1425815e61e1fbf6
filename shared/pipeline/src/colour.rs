//! Colour management: every variant is sRGB, whatever profile the photo carries.
//!
//! A photo's pixels mean something only with its colour profile: a Display P3 photo (what an
//! iPhone keeps when it turns HEIC into JPEG) shown as sRGB looks dull, a CMYK one (print-ready
//! photos) is not even RGB. The variants carry no profile (browsers take untagged pixels as
//! sRGB), so the pixels are converted to sRGB here, with moxcms (pure Rust; the same crate the
//! `image` crate uses for its own conversions), at the relative colorimetric intent without
//! black-point compensation, as libvips' `thumbnail` does by default:
//!
//! - no profile, or an sRGB one (recognised by its primaries and tone curves, whatever its
//!   version or description): nothing to do, at the cost of a digest and a lookup;
//! - an RGB or grey profile: one transform per photo, run on each variant after resizing
//!   ([`Transform::apply`]), so its cost follows the output's pixels, not the photo's;
//! - CMYK (and YCCK) JPEGs: converted at decode ([`Transform::cmyk_to_rgb`]), through their own
//!   profile, or the default CMYK profile (`profiles/FOGRA39L.icc`, see its README) when they
//!   have none, or none that fits;
//! - a profile that is broken, of another kind (Lab, multi-ink), or that moxcms cannot convert
//!   (a grey profile built on a table, for instance) is ignored and the pixels taken as sRGB:
//!   [`Colour::Ignored`] says why, and the flows log and count it. Never a failure.
//!
//! Transforms are kept per profile ([`Profiles`], by the MD5 of its bytes): the photos of one
//! phone or one shop carry the same profile, and building a transform costs up to a few
//! milliseconds (a CMYK one more), parsing one tens of microseconds.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use image::RgbImage;
use moxcms::{
    ColorProfile, DataColorSpace, Layout, ParsingOptions, RenderingIntent, Transform8BitExecutor,
    TransformOptions,
};

use super::avif::Nclx;
use super::jpeg::MAX_ICC;
use super::scratch::Buffers;
use super::{Colour, PipelineError};

/// What a transform converts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Rgb,
    Grey,
    Cmyk,
}

/// A conversion to sRGB, built once per profile.
pub(crate) struct Transform {
    executor: Arc<Transform8BitExecutor>,
    input: Input,
}

impl std::fmt::Debug for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transform")
            .field("input", &self.input)
            .finish_non_exhaustive()
    }
}

fn failed(e: impl std::fmt::Debug) -> PipelineError {
    PipelineError::CorruptImage(format!("the colour conversion failed: {e:?}"))
}

impl Transform {
    /// Converts `image` (a variant's RGB pixels; for a grey profile, grey ones: R = G = B) to
    /// sRGB, through a buffer from `buffers` (the old one goes back there).
    pub(crate) fn apply(
        &self,
        image: &mut RgbImage,
        buffers: &Buffers,
    ) -> Result<(), PipelineError> {
        let (width, height) = image.dimensions();
        let mut out = buffers.take(image.as_raw().len());
        let converted = catch_unwind(AssertUnwindSafe(|| match self.input {
            Input::Rgb => self.executor.transform(image.as_raw(), &mut out),
            Input::Grey => {
                let mut grey = buffers.take_empty(image.as_raw().len() / 3);
                grey.extend(image.as_raw().chunks_exact(3).map(|p| p[0]));
                let done = self.executor.transform(&grey, &mut out);
                buffers.put(grey);
                done
            }
            Input::Cmyk => Err(moxcms::CmsError::UnsupportedProfileConnection),
        }));
        match converted {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(failed(e)),
            Err(_) => return Err(failed("panic")),
        }
        let image_out = RgbImage::from_raw(width, height, out).ok_or_else(|| failed("size"))?;
        buffers.put(std::mem::replace(image, image_out).into_raw());
        Ok(())
    }

    /// Converts CMYK samples (4 a pixel, 0 = no ink) of a `width`x`height` photo to sRGB.
    pub(crate) fn cmyk_to_rgb(
        &self,
        cmyk: &[u8],
        width: u32,
        height: u32,
    ) -> Result<RgbImage, PipelineError> {
        let pixels = cmyk.len() / 4;
        if self.input != Input::Cmyk || pixels as u64 != u64::from(width) * u64::from(height) {
            return Err(failed("not CMYK pixels"));
        }
        let mut out = vec![0u8; pixels * 3];
        match catch_unwind(AssertUnwindSafe(|| self.executor.transform(cmyk, &mut out))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(failed(e)),
            Err(_) => return Err(failed("panic")),
        }
        RgbImage::from_raw(width, height, out).ok_or_else(|| failed("size"))
    }
}

/// The decision for one profile: a transform to run (`None`: nothing to convert) and what to
/// say about it.
type Resolved = (Option<Arc<Transform>>, Colour);

/// Profiles seen before and what was decided for each (see the module's documentation).
#[derive(Debug, Default)]
pub(crate) struct Profiles {
    seen: Mutex<Vec<([u8; 16], Resolved)>>,
}

/// Profiles whose decision is kept; the oldest goes first.
const KEPT_PROFILES: usize = 16;

impl Profiles {
    /// For a photo decoded to RGB (or grey, when `grey`) that carries `icc`: the transform to
    /// run on each variant, if any, and what was done.
    pub(crate) fn for_rgb(&self, icc: Option<&[u8]>, grey: bool) -> Resolved {
        let Some(icc) = icc else {
            return (None, Colour::Untagged);
        };
        match self.resolve(icc) {
            (Some(t), _) if t.input == Input::Cmyk => (
                None,
                Colour::Ignored("a CMYK profile on an RGB photo".into()),
            ),
            (Some(t), _) if t.input == Input::Grey && !grey => (
                None,
                Colour::Ignored("a grey profile on a colour photo".into()),
            ),
            resolved => resolved,
        }
    }

    /// For a CMYK photo that carries `icc` (or none): its transform to sRGB, the default CMYK
    /// profile's when its own is missing or unusable.
    pub(crate) fn for_cmyk(
        &self,
        icc: Option<&[u8]>,
    ) -> Result<(Arc<Transform>, Colour), PipelineError> {
        let default = || {
            DEFAULT_CMYK
                .clone()
                .ok_or_else(|| failed("the default CMYK profile"))
        };
        let Some(icc) = icc else {
            return Ok((default()?, Colour::DefaultCmyk));
        };
        match self.resolve(icc) {
            (Some(t), colour) if t.input == Input::Cmyk => Ok((t, colour)),
            (_, Colour::Ignored(why)) => Ok((default()?, Colour::Ignored(why))),
            _ => Ok((
                default()?,
                Colour::Ignored("a profile for RGB or grey on a CMYK photo".into()),
            )),
        }
    }

    /// For an RGB photo (an AVIF) whose colours are described by coding points rather than a
    /// profile: nothing to do for sRGB's primaries with a standard-range transfer curve (what
    /// browsers show such photos as); else the profile they amount to, converted.
    pub(crate) fn for_coding_points(&self, nclx: Nclx) -> Resolved {
        // BT.709 (sRGB's) or unspecified primaries; BT.709, unspecified, BT.601, sRGB or
        // BT.2020 (SDR) transfer.
        let srgb_like =
            matches!(nclx.primaries, 1 | 2) && matches!(nclx.transfer, 1 | 2 | 6 | 13 | 14 | 15);
        if srgb_like {
            return (None, Colour::Srgb);
        }
        let key = [
            &b"nclx"[..],
            &nclx.primaries.to_be_bytes(),
            &nclx.transfer.to_be_bytes(),
        ]
        .concat();
        self.resolve_with(&key, || {
            let primaries = u8::try_from(nclx.primaries)
                .ok()
                .and_then(|p| p.try_into().ok());
            let transfer = u8::try_from(nclx.transfer)
                .ok()
                .and_then(|t| t.try_into().ok());
            let (Some(color_primaries), Some(transfer_characteristics)) = (primaries, transfer)
            else {
                return (
                    None,
                    Colour::Ignored(format!("unknown coding points {nclx:?}")),
                );
            };
            let profile = ColorProfile::new_from_cicp(moxcms::CicpProfile {
                color_primaries,
                transfer_characteristics,
                matrix_coefficients: moxcms::MatrixCoefficients::Bt709,
                full_range: true,
            });
            build(&profile, Input::Rgb)
        })
    }

    /// The decision for `icc`, kept from an earlier photo or made now.
    fn resolve(&self, icc: &[u8]) -> Resolved {
        self.resolve_with(icc, || decide(icc))
    }

    /// The decision kept for `key` (a profile, or a description of one), or `make`'s.
    fn resolve_with(&self, key: &[u8], make: impl FnOnce() -> Resolved) -> Resolved {
        use md5::{Digest, Md5};
        let key: [u8; 16] = Md5::digest(key).into();
        let lock = || self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, resolved)) = lock().iter().find(|(k, _)| *k == key) {
            return resolved.clone();
        }
        let resolved = make();
        let mut seen = lock();
        if seen.len() >= KEPT_PROFILES {
            seen.remove(0);
        }
        seen.push((key, resolved.clone()));
        resolved
    }
}

/// The default CMYK profile: a FOGRA39 (offset, coated paper) characterisation, the usual
/// European print condition (see `profiles/README.md`).
static DEFAULT_CMYK_ICC: &[u8] = include_bytes!("../profiles/FOGRA39L.icc");

static DEFAULT_CMYK: LazyLock<Option<Arc<Transform>>> =
    LazyLock::new(|| match decide(DEFAULT_CMYK_ICC) {
        (Some(t), _) if t.input == Input::Cmyk => Some(t),
        _ => None,
    });

/// Parses `icc` and builds its transform to sRGB (`None` for sRGB itself). Whatever fails
/// (parsing, an unsupported kind, building the transform, a panic in moxcms on hostile bytes)
/// ignores the profile.
fn decide(icc: &[u8]) -> Resolved {
    let ignored = |why: String| (None, Colour::Ignored(why));
    let profile = match catch_unwind(|| ColorProfile::new_from_slice_with_options(icc, parsing())) {
        Ok(Ok(profile)) => profile,
        Ok(Err(e)) => return ignored(format!("an unreadable ICC profile ({e})")),
        Err(_) => return ignored("an unreadable ICC profile".into()),
    };
    let input = match profile.color_space {
        DataColorSpace::Rgb if is_srgb(&profile) => return (None, Colour::Srgb),
        DataColorSpace::Rgb => Input::Rgb,
        DataColorSpace::Gray => Input::Grey,
        DataColorSpace::Cmyk => Input::Cmyk,
        other => return ignored(format!("an ICC profile for {other:?} colours")),
    };
    build(&profile, input)
}

/// The transform from `profile` (of `input` pixels) to sRGB.
fn build(profile: &ColorProfile, input: Input) -> Resolved {
    let ignored = |why: String| (None, Colour::Ignored(why));
    let layout = match input {
        Input::Rgb => Layout::Rgb,
        Input::Grey => Layout::Gray,
        // moxcms takes 8-bit CMYK in the RGBA layout.
        Input::Cmyk => Layout::Rgba,
    };
    let options = TransformOptions {
        rendering_intent: RenderingIntent::RelativeColorimetric,
        ..TransformOptions::default()
    };
    let built = catch_unwind(AssertUnwindSafe(|| {
        profile.create_transform_8bit(layout, &SRGB, Layout::Rgb, options)
    }));
    match built {
        Ok(Ok(executor)) => (
            Some(Arc::new(Transform { executor, input })),
            Colour::Converted,
        ),
        Ok(Err(e)) => ignored(format!("an ICC profile moxcms cannot convert ({e})")),
        Err(_) => ignored("an ICC profile moxcms cannot convert".into()),
    }
}

static SRGB: LazyLock<ColorProfile> = LazyLock::new(ColorProfile::new_srgb);

/// How much of a profile is read: at most [`MAX_ICC`] bytes, and tables of at most a few
/// megabytes (a CMYK profile's largest are about a megabyte).
fn parsing() -> ParsingOptions {
    ParsingOptions {
        max_profile_size: MAX_ICC + 1,
        max_allowed_clut_size: 4_000_000,
        ..ParsingOptions::default()
    }
}

/// An RGB profile with sRGB's primaries (within 1e-3, as stored: adapted to D50) and tone
/// curves (within half a step of 8 bits, at 33 points): converting through it would change
/// nothing. Recognises the v2 and v4 sRGB profiles of ICC, Microsoft/HP, colord, Ghostscript
/// and LittleCMS alike, and display calibrations built on sRGB.
fn is_srgb(p: &ColorProfile) -> bool {
    if p.color_space != DataColorSpace::Rgb || !p.is_matrix_shaper() {
        return false;
    }
    let close = |a: moxcms::Xyzd, b: moxcms::Xyzd| {
        (a.x - b.x).abs() < 1e-3 && (a.y - b.y).abs() < 1e-3 && (a.z - b.z).abs() < 1e-3
    };
    let s = &*SRGB;
    if !(close(p.red_colorant, s.red_colorant)
        && close(p.green_colorant, s.green_colorant)
        && close(p.blue_colorant, s.blue_colorant))
    {
        return false;
    }
    let Some(Ok(reference)) = s.red_trc.as_ref().map(|t| t.make_linear_evaluator()) else {
        return false;
    };
    [&p.red_trc, &p.green_trc, &p.blue_trc]
        .into_iter()
        .all(|trc| {
            let Some(Ok(curve)) = trc.as_ref().map(|t| t.make_linear_evaluator()) else {
                return false;
            };
            (0..=32u8).all(|i| {
                let x = f32::from(i) / 32.0;
                (curve.evaluate_value(x) - reference.evaluate_value(x)).abs() <= 0.5 / 255.0
            })
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// moxcms' own Display P3 profile, encoded.
    pub(crate) fn display_p3() -> Vec<u8> {
        ColorProfile::new_display_p3().encode().unwrap()
    }

    #[test]
    fn srgb_is_recognised_and_other_rgb_profiles_are_not() {
        let profiles = Profiles::default();
        let srgb = ColorProfile::new_srgb().encode().unwrap();
        assert_eq!(profiles.for_rgb(Some(&srgb), false).1, Colour::Srgb);
        assert_eq!(profiles.for_rgb(None, false).1, Colour::Untagged);
        for other in [
            display_p3(),
            ColorProfile::new_adobe_rgb().encode().unwrap(),
            ColorProfile::new_bt2020().encode().unwrap(),
        ] {
            let (transform, colour) = profiles.for_rgb(Some(&other), false);
            assert_eq!(colour, Colour::Converted);
            assert_eq!(transform.unwrap().input, Input::Rgb);
        }
    }

    #[test]
    fn broken_and_foreign_profiles_are_ignored_with_a_reason() {
        let profiles = Profiles::default();
        let p3 = display_p3();
        let grey = ColorProfile::new_gray_with_gamma(2.2).encode().unwrap();
        let cases: Vec<(Vec<u8>, bool, &str)> = vec![
            (p3[..400].to_vec(), false, "unreadable"),
            (b"not a profile".to_vec(), false, "unreadable"),
            (grey.clone(), false, "grey profile on a colour photo"),
            (
                DEFAULT_CMYK_ICC.to_vec(),
                false,
                "CMYK profile on an RGB photo",
            ),
        ];
        for (icc, is_grey, why) in cases {
            let (transform, colour) = profiles.for_rgb(Some(&icc), is_grey);
            assert!(transform.is_none());
            match colour {
                Colour::Ignored(reason) => assert!(reason.contains(why), "{reason}"),
                other => panic!("{why}: {other:?}"),
            }
        }
        assert_eq!(profiles.for_rgb(Some(&grey), true).1, Colour::Converted);
    }

    #[test]
    fn a_p3_red_becomes_the_srgb_red_it_looks_like() {
        let (transform, _) = Profiles::default().for_rgb(Some(&display_p3()), false);
        let mut image = RgbImage::from_pixel(4, 2, image::Rgb([255, 0, 0]));
        transform
            .unwrap()
            .apply(&mut image, &Buffers::new(4, 1 << 20))
            .unwrap();
        // P3's red is outside sRGB: clipped to sRGB's own red (as LittleCMS does); P3's
        // green and blue leak out of it less than a step.
        let [r, g, b] = image.get_pixel(1, 1).0;
        assert_eq!(r, 255);
        assert!(g < 3 && b < 3, "{g} {b}");
        let mut mid = RgbImage::from_pixel(1, 1, image::Rgb([200, 100, 50]));
        let (transform, _) = Profiles::default().for_rgb(Some(&display_p3()), false);
        transform
            .unwrap()
            .apply(&mut mid, &Buffers::new(4, 1 << 20))
            .unwrap();
        // LittleCMS (relative colorimetric, through Pillow) gives (215, 93, 31).
        let got = mid.get_pixel(0, 0).0;
        for (g, want) in got.iter().zip([215u8, 93, 31]) {
            assert!(g.abs_diff(want) <= 2, "{got:?}");
        }
    }

    #[test]
    fn cmyk_goes_through_its_own_profile_or_the_default() {
        let profiles = Profiles::default();
        let (_, colour) = profiles.for_cmyk(None).unwrap();
        assert_eq!(colour, Colour::DefaultCmyk);
        let (_, colour) = profiles.for_cmyk(Some(DEFAULT_CMYK_ICC)).unwrap();
        assert_eq!(colour, Colour::Converted);
        let (_, colour) = profiles.for_cmyk(Some(&display_p3())).unwrap();
        assert!(matches!(colour, Colour::Ignored(_)), "{colour:?}");
        let (transform, _) = profiles.for_cmyk(None).unwrap();
        // No ink is paper white; full cyan is a blue-green; all inks are near black.
        let rgb = transform
            .cmyk_to_rgb(&[0, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255], 3, 1)
            .unwrap();
        let px = |x| rgb.get_pixel(x, 0).0;
        assert!(px(0).iter().all(|&v| v >= 240), "{:?}", px(0));
        let [r, g, b] = px(1);
        assert!(r < 60 && g > 120 && b > 200, "{:?}", px(1));
        assert!(px(2).iter().all(|&v| v < 40), "{:?}", px(2));
    }

    #[test]
    fn a_decision_is_kept_per_profile() {
        let profiles = Profiles::default();
        let p3 = display_p3();
        let (a, _) = profiles.for_rgb(Some(&p3), false);
        let (b, _) = profiles.for_rgb(Some(&p3), false);
        assert!(Arc::ptr_eq(&a.unwrap(), &b.unwrap()));
        for i in 0..KEPT_PROFILES + 3 {
            profiles.for_rgb(Some(format!("junk {i}").as_bytes()), false);
        }
        assert_eq!(profiles.seen.lock().unwrap().len(), KEPT_PROFILES);
    }
}
