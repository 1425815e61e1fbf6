//! Variant geometry (fit inside / cover and centre-crop, never upscaling) and Lanczos3 resizing.

use std::borrow::Cow;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use image::RgbImage;

use super::PipelineError;
use crate::domain::{FitMode, VariantSpec};

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

/// Makes one variant's pixels from the decoded source (borrowed when nothing changes).
pub(crate) fn render<'a>(
    resizer: &mut Resizer,
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
    let src_view = ImageRef::new(src.width(), src.height(), src.as_raw(), PixelType::U8x3)
        .map_err(|e| internal("source", &e))?;
    let mut dst = Image::new(geometry.width, geometry.height, PixelType::U8x3);
    let options = ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3))
        .crop(
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

    #[test]
    fn a_crop_copies_the_exact_pixels() {
        let src = RgbImage::from_fn(4, 2, |x, y| image::Rgb([x as u8, y as u8, 7]));
        let g = plan(4, 2, &spec("t=cover:10x10"));
        let out = render(&mut Resizer::new(), &src, &g).unwrap();
        assert_eq!((out.width(), out.height()), (2, 2));
        assert_eq!(out.get_pixel(0, 1), &image::Rgb([1, 1, 7]));
    }
}
