//! AVIF: the container read here (`container.rs`), each AV1 image decoded by rav1d (a Rust port
//! of dav1d, through `re_rav1d`'s safe API; feature `avif`), its planes made RGB (`yuv.rs`),
//! alpha composited over white; and AVIF variants encoded (`encode.rs`, rav1e).
//!
//! The decoder runs on the calling thread (one photo per core, as every decoder here) and is
//! told the frame size the container declares before it allocates anything: a stream that
//! claims more is refused (`ERANGE`), so the header's size, which the pixel limit and the
//! memory estimate were checked against, is what is decoded.

pub(crate) mod container;
#[cfg(feature = "avif")]
pub(crate) mod encode;
mod obu;
#[cfg(feature = "avif")]
mod yuv;

pub(crate) use container::{Avif, Coded, Nclx};

#[cfg(not(feature = "avif"))]
use crate::PipelineError;

/// What decoding one AVIF holds besides its RGB pixels, in bytes, for the memory estimate, for
/// one frame (a grid's largest tile: they are decoded one at a time): rav1d's picture in the
/// format the sequence header declares (16-bit 4:4:4 with film grain when it cannot be read),
/// a second one when film grain is synthesised, its own state for the frame (block modes,
/// motion vectors, loop filter levels: a byte a pixel covers it) and a copy of the coded data;
/// the same for the alpha image, and its 8-bit mask.
pub(crate) fn decoding_bytes(avif: &Avif<'_>) -> u64 {
    let pixels = u64::from(avif.width) * u64::from(avif.height);
    let frame = |coded: &Coded<'_>| -> u64 {
        let (data, frame_pixels): (Vec<&[u8]>, u64) = match coded {
            Coded::Single(data) => (vec![data], pixels),
            Coded::Grid { tile, tiles, .. } => (
                tiles.iter().map(|t| &t[..]).collect(),
                u64::from(tile.0) * u64::from(tile.1),
            ),
        };
        data.iter()
            .map(|d| {
                let format = obu::sample_format(d).unwrap_or(obu::SampleFormat::WORST);
                let pictures = if format.grain { 2 } else { 1 };
                format.frame_bytes(frame_pixels) * pictures + frame_pixels + d.len() as u64
            })
            .max()
            .unwrap_or(0)
    };
    frame(&avif.image) + avif.alpha.as_ref().map_or(0, |a| frame(a) + pixels)
}

#[cfg(feature = "avif")]
pub(crate) use decode::decode;

#[cfg(not(feature = "avif"))]
pub(crate) fn decode(_: &[u8], _: u64) -> Result<Decoded, PipelineError> {
    Err(PipelineError::UnsupportedFormat(
        "AVIF (this build has no AVIF decoder; send the photo as JPEG)".into(),
    ))
}

/// A decoded AVIF: RGB over white, as stored (not yet turned), and what to do with it.
pub(crate) struct Decoded {
    pub image: image::RgbImage,
    pub orientation: u8,
    pub icc: Option<Vec<u8>>,
    pub nclx: Option<Nclx>,
    pub grey: bool,
}

#[cfg(feature = "avif")]
mod decode {
    use re_rav1d::{Decoder, Picture, PixelLayout, PlanarImageComponent, Settings};

    use super::Decoded;
    use super::container::{self, Coded};
    use super::yuv::{self, Frame, Matrix, Plane};
    use crate::PipelineError;
    use crate::decode::over_white;

    fn corrupt(why: impl std::fmt::Display) -> PipelineError {
        PipelineError::CorruptImage(format!("AVIF: {why}"))
    }

    /// Decodes an AVIF whose container declares at most `max_pixels` pixels.
    pub(crate) fn decode(bytes: &[u8], max_pixels: u64) -> Result<Decoded, PipelineError> {
        let avif = container::parse(bytes)?;
        let (width, height) = (avif.width, avif.height);
        if width == 0 || height == 0 || u64::from(width) * u64::from(height) > max_pixels {
            return Err(PipelineError::TooManyPixels {
                width,
                height,
                limit: max_pixels,
            });
        }
        let (w, h) = (width as usize, height as usize);
        let mut rgb = vec![0u8; w * h * 3];
        let grey = render(&avif.image, (width, height), &mut |frame, at| {
            if yuv::to_rgb(frame, &mut rgb, w, at) {
                Ok(())
            } else {
                Err(corrupt("planes that do not fit their data"))
            }
        })?;
        if let Some(alpha) = &avif.alpha {
            let mut mask = vec![255u8; w * h];
            render(alpha, (width, height), &mut |frame, at| {
                if yuv::to_grey(&frame.y, frame.bits, frame.full_range, &mut mask, w, at) {
                    Ok(())
                } else {
                    Err(corrupt("an alpha plane that does not fit its data"))
                }
            })?;
            for (px, &a) in rgb.chunks_exact_mut(3).zip(&mask) {
                if a != 255 {
                    px.iter_mut().for_each(|c| *c = over_white(*c, a));
                }
            }
        }
        let image = image::RgbImage::from_raw(width, height, rgb)
            .ok_or_else(|| corrupt("an image of an impossible size"))?;
        Ok(Decoded {
            image,
            orientation: avif.orientation,
            icc: avif.icc.map(<[u8]>::to_vec),
            nclx: avif.nclx,
            grey,
        })
    }

    /// What takes each decoded frame, with where its top-left corner goes.
    type Put<'p> = dyn FnMut(&Frame<'_>, (usize, usize)) -> Result<(), PipelineError> + 'p;

    /// Decodes `coded` (one frame, or a grid's tiles one after another) and hands each frame
    /// to `put` with where its top-left corner goes. Whether the image is grey.
    fn render(
        coded: &Coded<'_>,
        (width, height): (u32, u32),
        put: &mut Put<'_>,
    ) -> Result<bool, PipelineError> {
        match coded {
            Coded::Single(data) => {
                let picture = av1(data, (width, height))?;
                with_frame(&picture, |frame| put(frame, (0, 0)))
            }
            Coded::Grid {
                columns,
                tile,
                tiles,
            } => {
                let mut grey = true;
                for (i, data) in tiles.iter().enumerate() {
                    let (row, column) = (i as u32 / columns, i as u32 % columns);
                    let picture = av1(data, *tile)?;
                    let at = ((column * tile.0) as usize, (row * tile.1) as usize);
                    grey &= with_frame(&picture, |frame| put(frame, at))?;
                }
                Ok(grey)
            }
        }
    }

    /// One AV1 frame of `width`x`height`, decoded: anything larger is refused before rav1d
    /// allocates for it, anything else not that size is corrupt.
    fn av1(data: &[u8], (width, height): (u32, u32)) -> Result<Picture, PipelineError> {
        let pixels = u32::try_from(u64::from(width) * u64::from(height))
            .map_err(|_| corrupt("a frame too large"))?;
        // rav1d takes a limit of 0 as no limit at all.
        if pixels == 0 {
            return Err(corrupt("an empty frame"));
        }
        let picture = decode_frame(data, pixels)?;
        if (picture.width(), picture.height()) != (width, height) {
            return Err(corrupt(format!(
                "a frame of {}x{} where the container says {width}x{height}",
                picture.width(),
                picture.height()
            )));
        }
        Ok(picture)
    }

    fn decode_frame(data: &[u8], limit: u32) -> Result<Picture, PipelineError> {
        // rav1d checks its arguments, and a debug build aborts the process on an empty buffer:
        // refused here, as the corrupt file it comes from.
        if data.is_empty() {
            return Err(corrupt("an empty AV1 image"));
        }
        let mut settings = Settings::new();
        settings.set_n_threads(1);
        settings.set_max_frame_delay(1);
        settings.set_frame_size_limit(limit);
        let failed = |e: re_rav1d::Error| corrupt(format!("rav1d: {e}"));
        let mut decoder = Decoder::with_settings(&settings).map_err(failed)?;
        let mut pending = match decoder.send_data(data.to_vec(), None, None, None) {
            Ok(()) => false,
            Err(e) if e.is_again() => true,
            Err(e) => return Err(failed(e)),
        };
        // A still image is one frame: a few rounds at most (a bound, not a guess: a stream
        // that never gives its picture is refused).
        for _ in 0..64 {
            match decoder.get_picture() {
                Ok(picture) => return Ok(picture),
                Err(e) if e.is_again() && pending => match decoder.send_pending_data() {
                    Ok(()) => pending = false,
                    Err(e) if e.is_again() => {}
                    Err(e) => return Err(failed(e)),
                },
                Err(e) if e.is_again() => return Err(corrupt("no picture in the data")),
                Err(e) => return Err(failed(e)),
            }
        }
        Err(corrupt("no picture in the data"))
    }

    /// The picture as planes for `yuv.rs`; whether it is grey.
    fn with_frame(
        picture: &Picture,
        f: impl FnOnce(&Frame<'_>) -> Result<(), PipelineError>,
    ) -> Result<bool, PipelineError> {
        let wide = picture.bit_depth() > 8;
        let bits = match picture.bits_per_component() {
            Some(b) => b.0 as u32,
            None => return Err(corrupt("an unknown bit depth")),
        };
        let (width, height) = (picture.width() as usize, picture.height() as usize);
        let layout = picture.pixel_layout();
        let sub = match layout {
            PixelLayout::I400 | PixelLayout::I444 => (1, 1),
            PixelLayout::I422 => (2, 1),
            PixelLayout::I420 => (2, 2),
        };
        let y_data = picture.plane(PlanarImageComponent::Y);
        let stride = |component| picture.stride(component) as usize;
        let plane = |data, stride, width, height| Plane {
            data,
            stride,
            width,
            height,
            wide,
        };
        let y = plane(&y_data, stride(PlanarImageComponent::Y), width, height);
        let (cw, ch) = (width.div_ceil(sub.0), height.div_ceil(sub.1));
        let matrix = Matrix::from_code(picture.matrix_coefficients() as u16);
        let full_range = matches!(picture.color_range(), re_rav1d::pixel::YUVRange::Full);
        if matches!(layout, PixelLayout::I400) {
            f(&Frame {
                y,
                chroma: None,
                sub,
                bits,
                full_range,
                matrix,
            })?;
            return Ok(true);
        }
        let (u_data, v_data) = (
            picture.plane(PlanarImageComponent::U),
            picture.plane(PlanarImageComponent::V),
        );
        f(&Frame {
            y,
            chroma: Some((
                plane(&u_data, stride(PlanarImageComponent::U), cw, ch),
                plane(&v_data, stride(PlanarImageComponent::V), cw, ch),
            )),
            sub,
            bits,
            full_range,
            matrix,
        })?;
        Ok(false)
    }
}
