//! Variant geometry (fit inside / cover and centre-crop, never upscaling) and Lanczos3 resizing
//! (of RGB here; of YCbCr planes in `planar.rs`).

use std::borrow::Cow;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{Filter, FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use image::RgbImage;

use super::PipelineError;
use super::scratch::{Buffers, Scratch};
use imgest_core::domain::{FitMode, VariantSpec};

/// Lanczos3, as `fast_image_resize`'s own, for every resize of the pipeline.
///
/// The resizer computes the filter's weights on every call (a dozen per output row and column,
/// for each pass and plane), and its own Lanczos3 takes two `sin` per weight from libm: about
/// 6 % of a photo's time. [`lanczos3_weight`] is the same function without a libm call.
pub(crate) fn lanczos3() -> ResizeAlg {
    // A positive, finite support cannot be refused; should it be, the resizer's own is the same.
    let filter = Filter::new("Lanczos3", lanczos3_weight, 3.0)
        .map(FilterType::Custom)
        .unwrap_or(FilterType::Lanczos3);
    ResizeAlg::Convolution(filter)
}

/// `sinc(x) sinc(x/3)` on `(-3, 3)`, else 0.
///
/// With `s = sin(πx/3)`, `sin(πx) = 3s - 4s³`, so the product is `3 s² (3 - 4s²) / (πx)²`: one
/// sine, of an angle within `[0, π/2]` once folded, where its Taylor series to the 15th power is
/// within 1e-11 (far below the precision of the resizer's 16-bit fixed-point weights).
fn lanczos3_weight(x: f64) -> f64 {
    use std::f64::consts::{FRAC_PI_2, PI};
    let x = x.abs();
    if x == 0.0 {
        return 1.0;
    }
    if x >= 3.0 {
        return 0.0;
    }
    let angle = PI * x / 3.0;
    let t = if angle > FRAC_PI_2 { PI - angle } else { angle };
    let t2 = t * t;
    let s = t
        * (1.0
            + t2 * (-1.0 / 6.0
                + t2 * (1.0 / 120.0
                    + t2 * (-1.0 / 5040.0
                        + t2 * (1.0 / 362_880.0
                            + t2 * (-1.0 / 39_916_800.0
                                + t2 * (1.0 / 6_227_020_800.0 - t2 / 1_307_674_368_000.0)))))));
    let s2 = s * s;
    let px = PI * x;
    3.0 * s2 * (3.0 - 4.0 * s2) / (px * px)
}

/// Which part of the source becomes the variant, and at which size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Geometry {
    /// The source region, in source pixels (fractional for an exact centre crop).
    pub left: f64,
    pub top: f64,
    pub crop_width: f64,
    pub crop_height: f64,
    /// The output size, at least 1x1.
    pub width: u32,
    pub height: u32,
}

impl Geometry {
    fn whole(width: u32, height: u32, out_width: u32, out_height: u32) -> Self {
        Self {
            left: 0.0,
            top: 0.0,
            crop_width: f64::from(width),
            crop_height: f64::from(height),
            width: out_width.max(1),
            height: out_height.max(1),
        }
    }

    /// The crop box kept inside a `w`x`h` image (floating-point rounding may push its edge a
    /// hair past the border, which the resizer refuses).
    fn clamped_to(&self, w: u32, h: u32) -> Self {
        let (fw, fh) = (f64::from(w), f64::from(h));
        let left = self.left.clamp(0.0, (fw - 1.0).max(0.0));
        let top = self.top.clamp(0.0, (fh - 1.0).max(0.0));
        Self {
            left,
            top,
            crop_width: self.crop_width.min(fw - left).max(f64::MIN_POSITIVE),
            crop_height: self.crop_height.min(fh - top).max(f64::MIN_POSITIVE),
            ..*self
        }
    }

    /// The same region and output in a `to_w`x`to_h` copy of a `from_w`x`from_h` source (a
    /// scaled decode). Multiplying before dividing keeps whole-picture regions exact.
    fn mapped(&self, (from_w, from_h): (u32, u32), (to_w, to_h): (u32, u32)) -> Self {
        if (from_w, from_h) == (to_w, to_h) {
            return *self;
        }
        let x = |v: f64| v * f64::from(to_w) / f64::from(from_w.max(1));
        let y = |v: f64| v * f64::from(to_h) / f64::from(from_h.max(1));
        Self {
            left: x(self.left),
            top: y(self.top),
            crop_width: x(self.crop_width),
            crop_height: y(self.crop_height),
            ..*self
        }
    }

    /// No resampling needed: the output is a pixel-exact copy of the crop.
    fn is_copy(&self) -> bool {
        self.left.fract() == 0.0
            && self.top.fract() == 0.0
            && self.crop_width == f64::from(self.width)
            && self.crop_height == f64::from(self.height)
    }
}

/// `a * b / c` rounded to nearest, clamped to `1..=max`.
fn scaled(a: u32, b: u32, c: u32, max: u32) -> u32 {
    let c = u64::from(c.max(1));
    let v = (2 * u64::from(a) * u64::from(b) + c) / (2 * c);
    u32::try_from(v).unwrap_or(u32::MAX).clamp(1, max.max(1))
}

/// Where a `width`x`height` source goes in `spec`'s box.
///
/// - `fit`: scaled down to fit inside the box, aspect ratio kept; a source that already fits
///   is kept at its size (never upscaled).
/// - `cover`: scaled to cover the box, then centre-cropped to exactly the box. A source smaller
///   than the box on either side is not upscaled: the output is the largest centre crop with
///   the box's aspect ratio, so it is smaller than the box.
pub(crate) fn plan(width: u32, height: u32, spec: &VariantSpec) -> Geometry {
    let (w, h) = (width.max(1), height.max(1));
    let (bw, bh) = (spec.width.max(1), spec.height.max(1));
    // Compare aspect ratios exactly: w/h > bw/bh  <=>  w*bh > h*bw.
    let wider = u64::from(w) * u64::from(bh) > u64::from(h) * u64::from(bw);
    match spec.mode {
        FitMode::Fit => {
            if w <= bw && h <= bh {
                Geometry::whole(w, h, w, h)
            } else if wider {
                Geometry::whole(w, h, bw, scaled(h, bw, w, bh))
            } else {
                Geometry::whole(w, h, scaled(w, bh, h, bw), bh)
            }
        }
        FitMode::Cover if w >= bw && h >= bh => {
            let (fw, fh, fbw, fbh) = (f64::from(w), f64::from(h), f64::from(bw), f64::from(bh));
            let (crop_width, crop_height) = if wider {
                (fh * fbw / fbh, fh)
            } else {
                (fw, fw * fbh / fbw)
            };
            Geometry {
                left: (fw - crop_width) / 2.0,
                top: (fh - crop_height) / 2.0,
                crop_width,
                crop_height,
                width: bw,
                height: bh,
            }
        }
        FitMode::Cover => {
            let (cw, ch) = if wider {
                (scaled(h, bw, bh, w), h)
            } else {
                (w, scaled(w, bh, bw, h))
            };
            Geometry {
                left: f64::from((w - cw) / 2),
                top: f64::from((h - ch) / 2),
                crop_width: f64::from(cw),
                crop_height: f64::from(ch),
                width: cw,
                height: ch,
            }
        }
    }
}

/// The smallest fraction of a `width`x`height` source that still holds every variant's region
/// at (at least) its output size: how far a decoder may scale the source down on load.
/// (Only the libjpeg-turbo path scales on load.)
#[cfg_attr(not(feature = "turbojpeg"), allow(dead_code))]
pub(crate) fn min_scale(width: u32, height: u32, specs: &[VariantSpec]) -> f64 {
    specs
        .iter()
        .map(|s| plan(width, height, s))
        .map(|g| (f64::from(g.width) / g.crop_width).max(f64::from(g.height) / g.crop_height))
        .fold(0.0, f64::max)
}

/// How much larger than the output an intermediate variant's region must be (on both axes)
/// for the output to be resampled from it rather than from the source.
const CASCADE_MIN_FACTOR: f64 = 2.0;

/// Every variant's pixels, in `specs`' order, without watermark. `full` is the photo's size;
/// `src` may be a reduced copy of it (a scaled decode): the variants' sizes and regions are
/// planned on `full`, and read from `src`.
///
/// Larger variants are made first, and a smaller one is resampled from an already made
/// variant when that is still at least [`CASCADE_MIN_FACTOR`] times its size ("cascade"): the
/// same Lanczos3 filter on far fewer pixels, with no visible difference (a test checks it).
pub(crate) fn render_all<'a, P: Raster>(
    src: &'a P,
    full: (u32, u32),
    specs: &[VariantSpec],
    scratch: &Scratch,
) -> Result<Vec<Cow<'a, P>>, PipelineError> {
    let (w, h) = src.size();
    let plans: Vec<Geometry> = specs
        .iter()
        .map(|s| plan(full.0, full.1, s).mapped(full, (w, h)))
        .collect();
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by_key(|&i| {
        std::cmp::Reverse(u64::from(plans[i].width) * u64::from(plans[i].height))
    });
    // Kept between photos with its intermediate buffer (see `scratch.rs`).
    let mut resizer = scratch.resizers.take().unwrap_or_default();
    let buffers = &scratch.buffers;
    let mut out: Vec<Option<Cow<'a, P>>> = plans.iter().map(|_| None).collect();
    for &i in &order {
        let target = &plans[i];
        let base = if target.is_copy() {
            None
        } else {
            cascade_base(target, &plans, &out, w, h)
        };
        let image = match base {
            Some((j, geometry)) => {
                let Some(base_image) = out[j].as_deref() else {
                    continue;
                };
                Cow::Owned(
                    base_image
                        .render(&mut resizer, buffers, &geometry)?
                        .into_owned(),
                )
            }
            None => src.render(&mut resizer, buffers, target)?,
        };
        out[i] = Some(image);
    }
    scratch.resizers.put(resizer);
    out.into_iter()
        .map(|o| o.ok_or_else(|| PipelineError::CorruptImage("a variant was not rendered".into())))
        .collect()
}

/// The smallest made variant `target` can be resampled from, with `target`'s geometry mapped
/// into it. Only whole-picture resamples qualify (not crops, not the source itself).
fn cascade_base<P: Raster>(
    target: &Geometry,
    plans: &[Geometry],
    made: &[Option<Cow<'_, P>>],
    w: u32,
    h: u32,
) -> Option<(usize, Geometry)> {
    plans
        .iter()
        .enumerate()
        .filter(|(j, p)| {
            made.get(*j).is_some_and(Option::is_some)
                && p.left == 0.0
                && p.top == 0.0
                && p.crop_width == f64::from(w)
                && p.crop_height == f64::from(h)
                && (p.width, p.height) != (w, h)
        })
        .filter_map(|(j, p)| {
            let (sx, sy) = (
                f64::from(p.width) / f64::from(w),
                f64::from(p.height) / f64::from(h),
            );
            let mapped = Geometry {
                left: target.left * sx,
                top: target.top * sy,
                crop_width: target.crop_width * sx,
                crop_height: target.crop_height * sy,
                ..*target
            };
            // Less one pixel: rounding (853 = 1280 * 1000 / 1500 rounded vs 2 x 427).
            let big_enough = mapped.crop_width
                >= CASCADE_MIN_FACTOR * f64::from(target.width) - 1.0
                && mapped.crop_height >= CASCADE_MIN_FACTOR * f64::from(target.height) - 1.0;
            big_enough.then_some((j, mapped, u64::from(p.width) * u64::from(p.height)))
        })
        .min_by_key(|&(_, _, area)| area)
        .map(|(j, mapped, _)| (j, mapped))
}

/// Pixels a variant can be resampled from: RGB, or YCbCr planes (`planar.rs`).
pub(crate) trait Raster: Clone {
    /// Width and height, in pixels.
    fn size(&self) -> (u32, u32);
    /// Makes one variant's pixels (borrowed when nothing changes), in buffers from `buffers`.
    fn render<'a>(
        &'a self,
        resizer: &mut Resizer,
        buffers: &Buffers,
        geometry: &Geometry,
    ) -> Result<Cow<'a, Self>, PipelineError>;
    /// Hands the pixel buffers back to `buffers` for the next photo.
    fn recycle(self, buffers: &Buffers);
}

impl Raster for RgbImage {
    fn size(&self) -> (u32, u32) {
        self.dimensions()
    }

    fn render<'a>(
        &'a self,
        resizer: &mut Resizer,
        buffers: &Buffers,
        geometry: &Geometry,
    ) -> Result<Cow<'a, Self>, PipelineError> {
        render(resizer, buffers, self, geometry)
    }

    fn recycle(self, buffers: &Buffers) {
        buffers.put(self.into_raw());
    }
}

/// Makes one variant's pixels from `src` (borrowed when nothing changes).
pub(crate) fn render<'a>(
    resizer: &mut Resizer,
    buffers: &Buffers,
    src: &'a RgbImage,
    geometry: &Geometry,
) -> Result<Cow<'a, RgbImage>, PipelineError> {
    let internal = |what: &str, e: &dyn std::fmt::Display| {
        PipelineError::CorruptImage(format!("resizing failed ({what}): {e}"))
    };
    if geometry.is_copy() {
        if geometry.width == src.width() && geometry.height == src.height() {
            return Ok(Cow::Borrowed(src));
        }
        return Ok(Cow::Owned(copy_crop(src, geometry)));
    }
    let geometry = geometry.clamped_to(src.width(), src.height());
    let src_view = ImageRef::new(src.width(), src.height(), src.as_raw(), PixelType::U8x3)
        .map_err(|e| internal("source", &e))?;
    let len = geometry.width as usize * geometry.height as usize * 3;
    let mut dst = Image::from_vec_u8(
        geometry.width,
        geometry.height,
        buffers.take(len),
        PixelType::U8x3,
    )
    .map_err(|e| internal("buffer", &e))?;
    let options = ResizeOptions::new().resize_alg(lanczos3()).crop(
        geometry.left,
        geometry.top,
        geometry.crop_width,
        geometry.crop_height,
    );
    resizer
        .resize(&src_view, &mut dst, &options)
        .map_err(|e| internal("resize", &e))?;
    RgbImage::from_raw(geometry.width, geometry.height, dst.into_vec())
        .map(Cow::Owned)
        .ok_or_else(|| internal("buffer", &"size mismatch"))
}

/// A pixel-exact crop (integer geometry within the source).
fn copy_crop(src: &RgbImage, g: &Geometry) -> RgbImage {
    // Geometry from `plan` is integral and inside the source here.
    let (left, top) = (g.left as usize, g.top as usize);
    let (w, h) = (g.width as usize, g.height as usize);
    let stride = src.width() as usize * 3;
    let raw = src.as_raw();
    let mut out = Vec::with_capacity(w * h * 3);
    for y in top..top + h {
        let start = y * stride + left * 3;
        if let Some(row) = raw.get(start..start + w * 3) {
            out.extend_from_slice(row);
        }
    }
    out.resize(w * h * 3, 255);
    RgbImage::from_raw(g.width, g.height, out).unwrap_or_else(|| RgbImage::new(g.width, g.height))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec(s: &str) -> VariantSpec {
        s.parse().unwrap()
    }

    fn dims(g: Geometry) -> (u32, u32) {
        (g.width, g.height)
    }

    #[test]
    fn fit_scales_down_keeping_the_aspect_ratio_and_never_up() {
        let large = spec("large=fit:1280x1280");
        assert_eq!(dims(plan(4000, 3000, &large)), (1280, 960));
        assert_eq!(dims(plan(3000, 4000, &large)), (960, 1280));
        assert_eq!(dims(plan(1500, 1000, &large)), (1280, 853));
        assert_eq!(dims(plan(1281, 1, &large)), (1280, 1));
        assert_eq!(dims(plan(1, 5000, &large)), (1, 1280));
        assert_eq!(dims(plan(120, 80, &large)), (120, 80));
        assert_eq!(dims(plan(1280, 1280, &large)), (1280, 1280));
        assert!(plan(120, 80, &large).is_copy());
    }

    #[test]
    fn cover_crops_the_centre_to_exactly_the_box() {
        let thumb = spec("thumb=cover:200x200");
        let g = plan(1500, 1000, &thumb);
        assert_eq!(dims(g), (200, 200));
        assert_eq!(
            (g.left, g.top, g.crop_width, g.crop_height),
            (250.0, 0.0, 1000.0, 1000.0)
        );
        let g = plan(1000, 1500, &thumb);
        assert_eq!(
            (g.left, g.top, g.crop_width, g.crop_height),
            (0.0, 250.0, 1000.0, 1000.0)
        );
    }

    #[test]
    fn cover_of_a_small_source_is_the_largest_centre_crop_not_an_upscale() {
        let thumb = spec("thumb=cover:200x200");
        let g = plan(120, 80, &thumb);
        assert_eq!(dims(g), (80, 80));
        assert_eq!((g.left, g.top), (20.0, 0.0));
        assert!(g.is_copy());
        assert_eq!(dims(plan(300, 150, &thumb)), (150, 150));
        assert_eq!(dims(plan(1, 5000, &thumb)), (1, 1));
        let wide = spec("banner=cover:400x100");
        assert_eq!(dims(plan(300, 300, &wide)), (300, 75));
    }

    /// Peak signal-to-noise ratio between two same-sized images, in dB.
    fn psnr(a: &RgbImage, b: &RgbImage) -> f64 {
        assert_eq!(a.dimensions(), b.dimensions());
        let se: f64 = a
            .as_raw()
            .iter()
            .zip(b.as_raw())
            .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
            .sum();
        let mse = se / a.as_raw().len() as f64;
        10.0 * (255.0 * 255.0 / mse.max(1e-9)).log10()
    }

    #[test]
    fn cascaded_variants_match_variants_made_from_the_source() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/photo.jpg"
        );
        let src = image::open(path).unwrap().into_rgb8();
        let specs: Vec<VariantSpec> = [
            "large=fit:1280x1280",
            "medium=fit:640x640",
            "thumb=cover:200x200",
            "wide=cover:300x100",
            "small=fit:100x100",
        ]
        .iter()
        .map(|s| spec(s))
        .collect();
        let scratch = Scratch::default();
        let all = render_all(&src, (1500, 1000), &specs, &scratch).unwrap();
        // medium comes from large, thumb, wide and small from medium.
        let plans: Vec<_> = specs.iter().map(|s| plan(1500, 1000, s)).collect();
        let empty: Vec<Option<Cow<'_, RgbImage>>> = vec![Some(Cow::Borrowed(&src)); 5];
        assert_eq!(
            cascade_base(&plans[1], &plans, &empty, 1500, 1000)
                .unwrap()
                .0,
            0
        );
        assert_eq!(
            cascade_base(&plans[2], &plans, &empty, 1500, 1000)
                .unwrap()
                .0,
            1
        );
        assert_eq!(
            cascade_base(&plans[4], &plans, &empty, 1500, 1000)
                .unwrap()
                .0,
            1
        );
        assert!(cascade_base(&plans[0], &plans, &empty, 1500, 1000).is_none());
        let mut resizer = Resizer::new();
        for (s, (cascaded, g)) in specs.iter().zip(all.iter().zip(&plans)) {
            let direct = render(&mut resizer, &scratch.buffers, &src, g).unwrap();
            assert_eq!(cascaded.dimensions(), (g.width, g.height), "{s}");
            let db = psnr(cascaded, &direct);
            assert!(db > 45.0, "{s}: {db:.1} dB");
        }
    }

    #[test]
    fn the_lanczos3_weights_are_the_textbook_ones() {
        let sinc = |x: f64| {
            let px = std::f64::consts::PI * x;
            if x == 0.0 { 1.0 } else { px.sin() / px }
        };
        for i in -700..=700 {
            let x = f64::from(i) / 200.0;
            let want = if x.abs() < 3.0 {
                sinc(x) * sinc(x / 3.0)
            } else {
                0.0
            };
            let got = lanczos3_weight(x);
            assert!((got - want).abs() < 1e-10, "{x}: {got} vs {want}");
        }
    }

    #[test]
    fn a_crop_copies_the_exact_pixels() {
        let src = RgbImage::from_fn(4, 2, |x, y| image::Rgb([x as u8, y as u8, 7]));
        let g = plan(4, 2, &spec("t=cover:10x10"));
        let out = render(&mut Resizer::new(), &Buffers::new(1, 1), &src, &g).unwrap();
        assert_eq!((out.width(), out.height()), (2, 2));
        assert_eq!(out.get_pixel(0, 1), &image::Rgb([1, 1, 7]));
    }

    #[test]
    fn a_scaled_source_gives_the_sizes_planned_on_the_full_photo() {
        let specs: Vec<VariantSpec> = [
            "large=fit:1280x1280",
            "medium=fit:640x640",
            "thumb=cover:200x200",
        ]
        .iter()
        .map(|s| spec(s))
        .collect();
        // 5000x3333 needs 1280 wide: a quarter (1250) is too small, a half (2500) is enough.
        let need = min_scale(5000, 3333, &specs);
        assert!(need > 0.25 && need <= 0.5, "{need}");
        assert_eq!(min_scale(1000, 800, &specs), 1.0);
        let half = RgbImage::from_pixel(2500, 1667, image::Rgb([10, 200, 30]));
        let all = render_all(&half, (5000, 3333), &specs, &Scratch::default()).unwrap();
        let dims: Vec<_> = all.iter().map(|i| i.dimensions()).collect();
        assert_eq!(dims, [(1280, 853), (640, 427), (200, 200)]);
        assert_eq!(all[2].get_pixel(100, 100), &image::Rgb([10, 200, 30]));
    }
}
