//! The optional watermark: a PNG overlay alpha-blended into a corner (or the centre) of chosen variants.

use std::fmt;
use std::io::Cursor;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use image::{ImageFormat, ImageReader, RgbImage};

use super::{PipelineError, WatermarkPosition};
use imgest_core::domain::VariantName;

/// A PNG overlay blended into the variants it names.
///
/// It is scaled down (never up) to at most a quarter of the variant's width and half its
/// height, placed with a margin of 2 % of the variant's shorter side, and its alpha is
/// multiplied by `opacity`.
#[derive(Clone)]
pub struct Watermark {
    /// Straight (not premultiplied) RGBA.
    rgba: Vec<u8>,
    width: u32,
    height: u32,
    position: WatermarkPosition,
    opacity: f32,
    variants: Vec<VariantName>,
}

impl fmt::Debug for Watermark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watermark")
            .field("width", &self.width)
            .field("height", &self.height)
            .field("position", &self.position)
            .field("opacity", &self.opacity)
            .field("variants", &self.variants)
            .finish_non_exhaustive()
    }
}

impl Watermark {
    /// The largest overlay accepted, per side.
    pub const MAX_SIDE: u32 = 4096;

    /// Loads a PNG overlay from bytes. `variants`: names of the variants it is applied to.
    pub fn from_png(
        png: &[u8],
        position: WatermarkPosition,
        opacity: f32,
        variants: Vec<VariantName>,
    ) -> Result<Self, PipelineError> {
        if !(0.0..=1.0).contains(&opacity) {
            return Err(PipelineError::Watermark(format!(
                "opacity must be from 0.0 to 1.0, got {opacity}"
            )));
        }
        if image::guess_format(png).ok() != Some(ImageFormat::Png) {
            return Err(PipelineError::Watermark("the overlay must be a PNG".into()));
        }
        let mut reader = ImageReader::with_format(Cursor::new(png), ImageFormat::Png);
        let mut limits = image::Limits::default();
        limits.max_image_width = Some(Self::MAX_SIDE);
        limits.max_image_height = Some(Self::MAX_SIDE);
        limits.max_alloc = Some(256 << 20);
        reader.limits(limits);
        let rgba = reader
            .decode()
            .map_err(|e| PipelineError::Watermark(format!("cannot decode the PNG: {e}")))?
            .into_rgba8();
        Ok(Self {
            width: rgba.width(),
            height: rgba.height(),
            rgba: rgba.into_raw(),
            position,
            opacity,
            variants,
        })
    }

    /// What the watermark contributes to the variant set's version: a digest of everything
    /// that changes its pixels.
    pub fn fingerprint(&self) -> String {
        use md5::{Digest, Md5};
        let mut md5 = Md5::new();
        md5.update(self.width.to_le_bytes());
        md5.update(self.height.to_le_bytes());
        md5.update(&self.rgba);
        md5.update(format!("{:?}", self.position).as_bytes());
        md5.update(self.opacity.to_le_bytes());
        for v in &self.variants {
            md5.update(v.as_str().as_bytes());
            md5.update(b",");
        }
        hex::encode(md5.finalize())
    }

    pub fn position(&self) -> WatermarkPosition {
        self.position
    }

    pub fn opacity(&self) -> f32 {
        self.opacity
    }

    pub fn variants(&self) -> &[VariantName] {
        &self.variants
    }

    /// The overlay's own size in pixels.
    pub fn dimensions(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    pub fn applies_to(&self, variant: &VariantName) -> bool {
        self.variants.contains(variant)
    }

    /// Blends the overlay into `image` (a variant's pixels).
    pub(crate) fn apply(&self, image: &mut RgbImage) -> Result<(), PipelineError> {
        let (iw, ih) = (image.width(), image.height());
        let margin = (f64::from(iw.min(ih)) * 0.02).round() as u32;
        // Scale down to fit in a quarter of the width and half the height (never up).
        let (max_w, max_h) = ((iw / 4).max(1), (ih / 2).max(1));
        let scale = (f64::from(max_w) / f64::from(self.width))
            .min(f64::from(max_h) / f64::from(self.height))
            .min(1.0);
        let ow = ((f64::from(self.width) * scale).round() as u32).clamp(1, iw);
        let oh = ((f64::from(self.height) * scale).round() as u32).clamp(1, ih);
        let scaled;
        let overlay: &[u8] = if (ow, oh) == (self.width, self.height) {
            &self.rgba
        } else {
            scaled = self.scaled(ow, oh)?;
            &scaled
        };
        let x0 = match self.position {
            WatermarkPosition::TopLeft | WatermarkPosition::BottomLeft => margin,
            WatermarkPosition::TopRight | WatermarkPosition::BottomRight => {
                iw.saturating_sub(ow + margin)
            }
            WatermarkPosition::Center => (iw - ow) / 2,
        };
        let y0 = match self.position {
            WatermarkPosition::TopLeft | WatermarkPosition::TopRight => margin,
            WatermarkPosition::BottomLeft | WatermarkPosition::BottomRight => {
                ih.saturating_sub(oh + margin)
            }
            WatermarkPosition::Center => (ih - oh) / 2,
        };
        // Opacity as a 0..=256 fixed-point factor on the overlay's alpha.
        let opacity = (self.opacity * 256.0).round().clamp(0.0, 256.0) as u32;
        let (iw, x0, y0, ow) = (iw as usize, x0 as usize, y0 as usize, ow as usize);
        // The columns that land inside the image (all of them unless the image is tiny).
        let visible = ow.min(iw.saturating_sub(x0));
        let dst = image.as_mut();
        for (oy, row) in overlay.chunks_exact(ow * 4).enumerate() {
            let start = ((y0 + oy) * iw + x0) * 3;
            let Some(dst_row) = dst.get_mut(start..start + visible * 3) else {
                break;
            };
            for (d, s) in dst_row.chunks_exact_mut(3).zip(row.chunks_exact(4)) {
                let a = (u32::from(s[3]) * opacity + 128) >> 8;
                if a == 0 {
                    continue;
                }
                for (dc, &sc) in d.iter_mut().zip(&s[..3]) {
                    let v = (u32::from(sc) * a + u32::from(*dc) * (255 - a) + 127) / 255;
                    *dc = u8::try_from(v).unwrap_or(u8::MAX);
                }
            }
        }
        Ok(())
    }

    /// The overlay resized to `w`x`h` (alpha-aware Lanczos3).
    fn scaled(&self, w: u32, h: u32) -> Result<Vec<u8>, PipelineError> {
        let fail = |e: &dyn fmt::Display| {
            PipelineError::Watermark(format!("cannot scale the overlay: {e}"))
        };
        let src = ImageRef::new(self.width, self.height, &self.rgba, PixelType::U8x4)
            .map_err(|e| fail(&e))?;
        let mut dst = Image::new(w, h, PixelType::U8x4);
        let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3));
        Resizer::new()
            .resize(&src, &mut dst, &options)
            .map_err(|e| fail(&e))?;
        Ok(dst.into_vec())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn positions_parse_and_print_back() {
        for s in [
            "top-left",
            "top-right",
            "bottom-left",
            "bottom-right",
            "center",
        ] {
            assert_eq!(s.parse::<WatermarkPosition>().unwrap().to_string(), s);
        }
        let err = "middle".parse::<WatermarkPosition>().unwrap_err();
        assert_eq!(err.kind(), "invalid_watermark");
    }

    #[test]
    fn bad_overlays_and_opacities_are_config_errors() {
        let pos = WatermarkPosition::Center;
        for (png, opacity) in [
            (&b"not a png"[..], 0.5),
            (b"\x89PNG\r\n\x1a\n\x00\x00", 0.5),
            (b"\x89PNG\r\n\x1a\n", f32::NAN),
            (b"\x89PNG\r\n\x1a\n", 1.5),
        ] {
            let err = Watermark::from_png(png, pos, opacity, vec![]).unwrap_err();
            assert_eq!(err.kind(), "invalid_watermark");
        }
    }

    #[test]
    fn an_opaque_overlay_replaces_pixels_in_its_corner_only() {
        let mut png = Vec::new();
        image::RgbaImage::from_pixel(4, 4, image::Rgba([255, 0, 0, 255]))
            .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
            .unwrap();
        let wm = Watermark::from_png(&png, WatermarkPosition::BottomRight, 1.0, vec![]).unwrap();
        let mut img = RgbImage::from_pixel(100, 50, image::Rgb([0, 0, 255]));
        wm.apply(&mut img).unwrap();
        // Margin: 2 % of 50 = 1 pixel.
        assert_eq!(img.get_pixel(98, 48), &image::Rgb([255, 0, 0]));
        assert_eq!(img.get_pixel(95, 45), &image::Rgb([255, 0, 0]));
        assert_eq!(img.get_pixel(99, 49), &image::Rgb([0, 0, 255]));
        assert_eq!(img.get_pixel(0, 0), &image::Rgb([0, 0, 255]));
    }
}
