//! Planar YCbCr photos (feature `turbojpeg`): a JPEG kept as its Y, Cb and Cr planes from
//! decoding to encoding.
//!
//! A JPEG stores YCbCr with subsampled chroma, and every variant is written as YCbCr 4:2:0. Going
//! through RGB costs chroma upsampling and colour conversion on decode, three channels to
//! resample, then colour conversion and chroma downsampling on encode. Kept planar, the luma
//! plane is resampled at full resolution and each chroma plane straight from its stored
//! resolution to the output's half resolution: half the samples to resample, and neither
//! conversion. The two colour conversions are (up to rounding) inverses, so the pixels are the
//! same but for rounding. (Cb and Cr interleaved as one two-channel plane were measured no
//! faster: the interleaving copies and the larger peak of memory cost what the shared filter
//! weights save.)
//!
//! Used when nothing needs RGB pixels (no watermark) and the JPEG is YCbCr that libjpeg-turbo
//! can hand over as planes; everything else goes through RGB.

use std::borrow::Cow;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{PixelType, ResizeOptions, Resizer};
use image::{GrayImage, metadata::Orientation};

use super::PipelineError;
use super::resize::{Geometry, Raster, lanczos3};
use super::scratch::Buffers;

/// One plane of samples, `width * height` bytes, rows packed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plane {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

impl Plane {
    pub(crate) fn new(width: u32, height: u32, data: Vec<u8>) -> Option<Self> {
        let len = usize::try_from(u64::from(width) * u64::from(height)).ok()?;
        (data.len() == len).then_some(Self {
            width,
            height,
            data,
        })
    }

    /// The top-left `width`x`height` samples (dropping the padding of a decoder's plane), in a
    /// buffer from `buffers` (this plane's goes back there).
    pub(crate) fn cropped(self, width: u32, height: u32, buffers: &Buffers) -> Option<Self> {
        if (width, height) == (self.width, self.height) {
            return Some(self);
        }
        if width > self.width || height > self.height {
            return None;
        }
        let (w, stride) = (width as usize, self.width as usize);
        let mut data = buffers.take_empty(w * height as usize);
        for row in self.data.chunks_exact(stride.max(1)).take(height as usize) {
            data.extend_from_slice(row.get(..w)?);
        }
        buffers.put(self.data);
        Self::new(width, height, data)
    }

    /// A copy grown to `width`x`height` by repeating the last column and row (what an encoder
    /// pads partial blocks with), in a buffer from `buffers`.
    pub(crate) fn padded(&self, width: u32, height: u32, buffers: &Buffers) -> Cow<'_, Self> {
        if (width, height) == (self.width, self.height) || self.data.is_empty() {
            return Cow::Borrowed(self);
        }
        let (w, stride) = (width as usize, self.width as usize);
        let mut data = buffers.take_empty(w * height as usize);
        let mut last: &[u8] = &[];
        for y in 0..height as usize {
            if let Some(row) = self.data.get(y * stride..(y + 1) * stride) {
                last = row;
            }
            data.extend_from_slice(last);
            let edge = last.last().copied().unwrap_or(0);
            data.resize(data.len() + w.saturating_sub(stride), edge);
        }
        Cow::Owned(Self {
            width,
            height,
            data,
        })
    }

    /// Turned and flipped upright as `orientation` says (as `image`'s `apply_orientation`), a
    /// quarter turn into a buffer from `buffers` (this plane's goes back there).
    fn oriented(self, orientation: Orientation, buffers: &Buffers) -> Self {
        use image::imageops::{
            flip_horizontal_in_place, flip_vertical_in_place, rotate90_in, rotate180_in_place,
            rotate270_in,
        };
        // `new` checked the length, so the conversions cannot fail; if one did, the empty plane
        // would fail resizing as a corrupt image.
        let empty = Self {
            width: 0,
            height: 0,
            data: Vec::new(),
        };
        let (w, h) = (self.width, self.height);
        let Some(gray) = GrayImage::from_raw(w, h, self.data) else {
            return empty;
        };
        let rotate = match orientation {
            Orientation::Rotate90 | Orientation::Rotate90FlipH => Some(true),
            Orientation::Rotate270 | Orientation::Rotate270FlipH => Some(false),
            _ => None,
        };
        let mut upright = match rotate {
            None => gray,
            Some(clockwise) => {
                let Some(mut turned) = GrayImage::from_raw(h, w, buffers.take(gray.len())) else {
                    return empty;
                };
                let done = match clockwise {
                    true => rotate90_in(&gray, &mut turned),
                    false => rotate270_in(&gray, &mut turned),
                };
                if done.is_err() {
                    return empty;
                }
                buffers.put(gray.into_raw());
                turned
            }
        };
        match orientation {
            Orientation::Rotate180 => rotate180_in_place(&mut upright),
            Orientation::FlipHorizontal
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH => flip_horizontal_in_place(&mut upright),
            Orientation::FlipVertical => flip_vertical_in_place(&mut upright),
            _ => {}
        }
        Self {
            width: upright.width(),
            height: upright.height(),
            data: upright.into_raw(),
        }
    }
}

/// A YCbCr photo as planes: Y is the picture's size, Cb and Cr cover it at `1 / sub` of it
/// (rounded up: a partial chroma sample covers the last column or row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Yuv {
    /// Luma samples per chroma sample, across and down (4:2:0 is (2, 2)).
    pub sub: (u32, u32),
    pub y: Plane,
    pub cb: Plane,
    pub cr: Plane,
}

impl Yuv {
    /// Checks that the planes fit together as described above.
    pub(crate) fn new(sub: (u32, u32), y: Plane, cb: Plane, cr: Plane) -> Option<Self> {
        let chroma = (
            y.width.div_ceil(sub.0.max(1)),
            y.height.div_ceil(sub.1.max(1)),
        );
        let fits = sub.0 > 0
            && sub.1 > 0
            && (cb.width, cb.height) == chroma
            && (cr.width, cr.height) == chroma;
        fits.then_some(Self { sub, y, cb, cr })
    }

    /// Upright: every plane turned and flipped alike; a quarter turn swaps the subsampling.
    pub(crate) fn oriented(self, orientation: Orientation, buffers: &Buffers) -> Self {
        if orientation == Orientation::NoTransforms {
            return self;
        }
        let sub = match orientation {
            Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH => (self.sub.1, self.sub.0),
            _ => self.sub,
        };
        Self {
            sub,
            y: self.y.oriented(orientation, buffers),
            cb: self.cb.oriented(orientation, buffers),
            cr: self.cr.oriented(orientation, buffers),
        }
    }
}

impl Raster for Yuv {
    fn size(&self) -> (u32, u32) {
        (self.y.width, self.y.height)
    }

    /// Always 4:2:0 (what the encoder writes): borrowed only when already 4:2:0 and unchanged.
    fn render<'a>(
        &'a self,
        resizer: &mut Resizer,
        buffers: &Buffers,
        geometry: &Geometry,
    ) -> Result<Cow<'a, Self>, PipelineError> {
        let whole = geometry.left == 0.0
            && geometry.top == 0.0
            && geometry.crop_width == f64::from(self.y.width)
            && geometry.crop_height == f64::from(self.y.height)
            && (geometry.width, geometry.height) == (self.y.width, self.y.height);
        if whole && self.sub == (2, 2) {
            return Ok(Cow::Borrowed(self));
        }
        let y = resample(resizer, buffers, &self.y, (1, 1), geometry, (1, 1))?;
        let cb = resample(resizer, buffers, &self.cb, self.sub, geometry, (2, 2))?;
        let cr = resample(resizer, buffers, &self.cr, self.sub, geometry, (2, 2))?;
        Self::new((2, 2), y, cb, cr)
            .map(Cow::Owned)
            .ok_or_else(|| PipelineError::CorruptImage("resizing failed (planes)".into()))
    }

    fn recycle(self, buffers: &Buffers) {
        buffers.put(self.y.data);
        buffers.put(self.cb.data);
        buffers.put(self.cr.data);
    }
}

/// One plane of the variant `geometry` describes (in luma samples): `plane` holds one sample per
/// `from` luma samples (across, down), the result one per `to`.
///
/// Output sample `j` covers output luma `[to * j, to * (j + 1))`, so source luma `left + to * j *
/// scale` onwards, which is plane position `(left + to * j * scale) / from`. The last output
/// sample may reach past the plane's edge by under one sample (a partial chroma sample): the crop
/// is clamped there, a sub-sample stretch of the last chroma column or row at most.
fn resample(
    resizer: &mut Resizer,
    buffers: &Buffers,
    plane: &Plane,
    from: (u32, u32),
    geometry: &Geometry,
    to: (u32, u32),
) -> Result<Plane, PipelineError> {
    let internal = |what: &str, e: &dyn std::fmt::Display| {
        PipelineError::CorruptImage(format!("resizing failed ({what}): {e}"))
    };
    let (out_w, out_h) = (
        geometry.width.div_ceil(to.0).max(1),
        geometry.height.div_ceil(to.1).max(1),
    );
    let scale_x = geometry.crop_width / f64::from(geometry.width.max(1));
    let scale_y = geometry.crop_height / f64::from(geometry.height.max(1));
    let (pw, ph) = (f64::from(plane.width), f64::from(plane.height));
    let left = (geometry.left / f64::from(from.0)).clamp(0.0, (pw - 1.0).max(0.0));
    let top = (geometry.top / f64::from(from.1)).clamp(0.0, (ph - 1.0).max(0.0));
    let crop_w = (f64::from(out_w * to.0) * scale_x / f64::from(from.0))
        .min(pw - left)
        .max(f64::MIN_POSITIVE);
    let crop_h = (f64::from(out_h * to.1) * scale_y / f64::from(from.1))
        .min(ph - top)
        .max(f64::MIN_POSITIVE);
    let src = ImageRef::new(plane.width, plane.height, &plane.data, PixelType::U8)
        .map_err(|e| internal("source", &e))?;
    let len = out_w as usize * out_h as usize;
    let mut dst = Image::from_vec_u8(out_w, out_h, buffers.take(len), PixelType::U8)
        .map_err(|e| internal("buffer", &e))?;
    let options = ResizeOptions::new()
        .resize_alg(lanczos3())
        .crop(left, top, crop_w, crop_h);
    resizer
        .resize(&src, &mut dst, &options)
        .map_err(|e| internal("resize", &e))?;
    Plane::new(out_w, out_h, dst.into_vec()).ok_or_else(|| internal("buffer", &"size mismatch"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn plane(width: u32, height: u32, f: impl Fn(u32, u32) -> u8) -> Plane {
        let data = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .map(|(x, y)| f(x, y))
            .collect();
        Plane::new(width, height, data).unwrap()
    }

    #[test]
    fn planes_must_fit_their_subsampling() {
        let y = plane(5, 3, |_, _| 0);
        let c = |w, h| plane(w, h, |_, _| 0);
        assert!(Yuv::new((2, 2), y.clone(), c(3, 2), c(3, 2)).is_some());
        assert!(Yuv::new((2, 1), y.clone(), c(3, 2), c(3, 2)).is_none());
        assert!(Yuv::new((2, 2), y, c(2, 2), c(3, 2)).is_none());
        assert!(Plane::new(2, 2, vec![0; 3]).is_none());
    }

    #[test]
    fn padding_repeats_the_last_column_and_row_and_cropping_drops_it() {
        let p = plane(3, 2, |x, y| (10 * y + x) as u8);
        let buffers = Buffers::new(4, 1 << 10);
        let padded = p.padded(4, 3, &buffers).into_owned();
        assert_eq!(padded.data, [0, 1, 2, 2, 10, 11, 12, 12, 10, 11, 12, 12]);
        assert_eq!(padded.cropped(3, 2, &buffers).unwrap(), p);
        assert!(matches!(p.padded(3, 2, &buffers), Cow::Borrowed(_)));
    }

    #[test]
    fn a_quarter_turn_turns_every_plane_and_swaps_the_subsampling() {
        // 4:2:2, 6x2: chroma 3x2, Cb the column and Cr the row.
        let yuv = Yuv::new(
            (2, 1),
            plane(6, 2, |x, y| (10 * y + x) as u8),
            plane(3, 2, |x, _| x as u8),
            plane(3, 2, |_, y| y as u8),
        )
        .unwrap();
        let turned = yuv.oriented(Orientation::Rotate90, &Buffers::new(4, 1 << 10));
        assert_eq!(turned.sub, (1, 2));
        assert_eq!((turned.y.width, turned.y.height), (2, 6));
        assert_eq!((turned.cb.width, turned.cb.height), (2, 3));
        // Clockwise: the stored bottom-left corner is now the top-left one.
        assert_eq!(turned.y.data[0], 10);
        assert_eq!(turned.cb.data[..2], [0, 0]);
        assert_eq!(turned.cr.data[..2], [1, 0]);
    }

    #[test]
    fn every_orientation_matches_the_image_crate() {
        let buffers = Buffers::new(4, 1 << 10);
        for orientation in (1..=8).filter_map(Orientation::from_exif) {
            let p = plane(5, 3, |x, y| (10 * y + x) as u8);
            let mut want =
                image::DynamicImage::ImageLuma8(GrayImage::from_raw(5, 3, p.data.clone()).unwrap());
            want.apply_orientation(orientation);
            let got = p.oriented(orientation, &buffers);
            assert_eq!((got.width, got.height), (want.width(), want.height()));
            assert_eq!(got.data, want.into_bytes(), "{orientation:?}");
        }
    }

    #[test]
    fn variants_come_out_4_2_0_at_the_planned_size() {
        let yuv = Yuv::new(
            (2, 1),
            plane(300, 200, |x, _| (x % 256) as u8),
            plane(150, 200, |_, _| 90),
            plane(150, 200, |_, _| 160),
        )
        .unwrap();
        let g = super::super::resize::plan(300, 200, &"m=fit:101x101".parse().unwrap());
        let buffers = Buffers::new(8, 1 << 20);
        let out = yuv.render(&mut Resizer::new(), &buffers, &g).unwrap();
        assert_eq!(out.sub, (2, 2));
        assert_eq!((out.y.width, out.y.height), (101, 67));
        assert_eq!((out.cb.width, out.cb.height), (51, 34));
        assert!(out.cb.data.iter().all(|&v| v.abs_diff(90) <= 1));
        assert!(out.cr.data.iter().all(|&v| v.abs_diff(160) <= 1));
        // Unchanged 4:2:0 is borrowed, anything else resampled into 4:2:0.
        let same = super::super::resize::plan(101, 67, &"m=fit:200x200".parse().unwrap());
        let again = out.render(&mut Resizer::new(), &buffers, &same).unwrap();
        assert!(matches!(again, Cow::Borrowed(_)));
    }
}
