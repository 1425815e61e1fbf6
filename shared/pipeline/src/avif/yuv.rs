//! A decoded AV1 frame's planes (Y, Cb and Cr, 8 to 12 bits, 4:4:4 to 4:2:0 or grey) to 8-bit
//! RGB, as its coding points say (ITU-T H.273: the matrix and the range). Subsampled chroma is
//! upsampled with the triangle filter libjpeg and libavif use (each chroma sample centred on
//! the luma samples it covers).

/// One plane: `width`x`height` samples, rows `stride` bytes apart, 8-bit or (`wide`) 16-bit
/// little-endian.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plane<'a> {
    pub data: &'a [u8],
    pub stride: usize,
    pub width: usize,
    pub height: usize,
    pub wide: bool,
}

impl Plane<'_> {
    fn at(&self, x: usize, y: usize) -> f32 {
        let (x, y) = (x.min(self.width - 1), y.min(self.height - 1));
        if self.wide {
            let i = y * self.stride + 2 * x;
            match self.data.get(i..i + 2) {
                Some(b) => f32::from(u16::from_le_bytes([b[0], b[1]])),
                None => 0.0,
            }
        } else {
            self.data
                .get(y * self.stride + x)
                .copied()
                .map_or(0.0, f32::from)
        }
    }

    /// Whether the plane's rows fit in its data.
    fn fits(&self) -> bool {
        let row = if self.wide {
            2 * self.width
        } else {
            self.width
        };
        self.width > 0
            && self.height > 0
            && row <= self.stride
            && (self.height - 1)
                .checked_mul(self.stride)
                .and_then(|n| n.checked_add(row))
                .is_some_and(|n| n <= self.data.len())
    }
}

/// How Y, Cb and Cr become R, G and B (H.273 `MatrixCoefficients`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Matrix {
    /// R, G, B stored as Cr, Y, Cb (`Identity`, 0).
    Identity,
    /// Luma weights of red and blue.
    Ycbcr { kr: f32, kb: f32 },
    /// YCgCo (8).
    Ycgco,
}

impl Matrix {
    /// The matrix of H.273 code `code`; the unspecified and unknown ones are BT.601's, as
    /// libavif takes them.
    pub(crate) fn from_code(code: u16) -> Self {
        match code {
            0 => Self::Identity,
            1 => Self::Ycbcr {
                kr: 0.2126,
                kb: 0.0722,
            },
            4 => Self::Ycbcr { kr: 0.30, kb: 0.11 },
            7 => Self::Ycbcr {
                kr: 0.212,
                kb: 0.087,
            },
            8 => Self::Ycgco,
            9 | 10 => Self::Ycbcr {
                kr: 0.2627,
                kb: 0.0593,
            },
            _ => Self::Ycbcr {
                kr: 0.299,
                kb: 0.114,
            },
        }
    }
}

/// A frame's planes and how to read them.
pub(crate) struct Frame<'a> {
    pub y: Plane<'a>,
    /// Cb and Cr, absent for a grey frame.
    pub chroma: Option<(Plane<'a>, Plane<'a>)>,
    /// Luma samples per chroma sample, across and down (1 or 2).
    pub sub: (usize, usize),
    pub bits: u32,
    pub full_range: bool,
    pub matrix: Matrix,
}

/// Where a chroma sample lies for output position `i` (1:1 or 2:1), and the weight of the
/// next sample (towards which the position leans): the triangle filter's 3/4 and 1/4.
fn chroma_pos(i: usize, sub: usize) -> (usize, usize, f32) {
    if sub == 1 {
        return (i, i, 0.0);
    }
    let k = i / 2;
    if i.is_multiple_of(2) {
        (k, k.saturating_sub(1), if k == 0 { 0.0 } else { 0.25 })
    } else {
        (k, k + 1, 0.25)
    }
}

/// Writes the frame's RGB into `out` (`out_width` pixels a row), from its top-left corner at
/// (`x0`, `y0`), the part of it that fits. `false` if the planes do not fit their data.
pub(crate) fn to_rgb(
    frame: &Frame<'_>,
    out: &mut [u8],
    out_width: usize,
    (x0, y0): (usize, usize),
) -> bool {
    let y_plane = &frame.y;
    if !y_plane.fits() || frame.chroma.is_some_and(|(u, v)| !u.fits() || !v.fits()) {
        return false;
    }
    let max = ((1u32 << frame.bits) - 1) as f32;
    let scale = (1u32 << (frame.bits - 8)) as f32;
    let (y_off, y_range, c_off, c_range) = if frame.full_range {
        (0.0, max, 128.0 * scale, max)
    } else {
        (16.0 * scale, 219.0 * scale, 128.0 * scale, 224.0 * scale)
    };
    let out_height = out.len() / (3 * out_width.max(1));
    let (w, h) = (
        y_plane.width.min(out_width.saturating_sub(x0)),
        y_plane.height.min(out_height.saturating_sub(y0)),
    );
    let to_u8 = |v: f32| (v * 255.0).round().clamp(0.0, 255.0) as u8;
    for y in 0..h {
        let (cy, cy2, wy) = chroma_pos(y, frame.sub.1);
        let row = &mut out[((y0 + y) * out_width + x0) * 3..((y0 + y) * out_width + x0 + w) * 3];
        for (x, px) in row.chunks_exact_mut(3).enumerate() {
            let luma = (y_plane.at(x, y) - y_off) / y_range;
            let Some((u, v)) = &frame.chroma else {
                px.fill(to_u8(luma));
                continue;
            };
            let (cx, cx2, wx) = chroma_pos(x, frame.sub.0);
            let sample = |p: &Plane<'_>| {
                let top = p.at(cx, cy) * (1.0 - wx) + p.at(cx2, cy) * wx;
                let bottom = p.at(cx, cy2) * (1.0 - wx) + p.at(cx2, cy2) * wx;
                top * (1.0 - wy) + bottom * wy
            };
            let (u, v) = (sample(u), sample(v));
            let (cb, cr) = ((u - c_off) / c_range, (v - c_off) / c_range);
            let (r, g, b) = match frame.matrix {
                // G, B and R coded as Y, Cb and Cr, each scaled like luma.
                Matrix::Identity => ((v - y_off) / y_range, luma, (u - y_off) / y_range),
                Matrix::Ycbcr { kr, kb } => {
                    let r = luma + 2.0 * (1.0 - kr) * cr;
                    let b = luma + 2.0 * (1.0 - kb) * cb;
                    (r, (luma - kr * r - kb * b) / (1.0 - kr - kb), b)
                }
                Matrix::Ycgco => {
                    let t = luma - cb;
                    (t + cr, luma + cb, t - cr)
                }
            };
            px.copy_from_slice(&[to_u8(r), to_u8(g), to_u8(b)]);
        }
    }
    true
}

/// A grey plane (an alpha image's luma) to 8-bit samples, written into `out` as `to_rgb`
/// writes RGB. `false` if the plane does not fit its data.
pub(crate) fn to_grey(
    plane: &Plane<'_>,
    bits: u32,
    full_range: bool,
    out: &mut [u8],
    out_width: usize,
    (x0, y0): (usize, usize),
) -> bool {
    if !plane.fits() {
        return false;
    }
    let scale = (1u32 << (bits - 8)) as f32;
    let (off, range) = if full_range {
        (0.0, ((1u32 << bits) - 1) as f32)
    } else {
        (16.0 * scale, 219.0 * scale)
    };
    let out_height = out.len() / out_width.max(1);
    let (w, h) = (
        plane.width.min(out_width.saturating_sub(x0)),
        plane.height.min(out_height.saturating_sub(y0)),
    );
    for y in 0..h {
        let row = &mut out[(y0 + y) * out_width + x0..(y0 + y) * out_width + x0 + w];
        for (x, a) in row.iter_mut().enumerate() {
            *a = (((plane.at(x, y) - off) / range) * 255.0)
                .round()
                .clamp(0.0, 255.0) as u8;
        }
    }
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn plane(data: &[u8], width: usize, height: usize, wide: bool) -> Plane<'_> {
        let stride = if wide { 2 * width } else { width };
        Plane {
            data,
            stride,
            width,
            height,
            wide,
        }
    }

    #[test]
    fn limited_range_bt709_grey_and_full_range_bt601_red() {
        // 2x2 4:2:0, 8-bit limited range: Y 16 (black) and 235 (white), neutral chroma.
        let (y, neutral) = ([16u8, 235, 235, 16], [128u8]);
        let frame = Frame {
            y: plane(&y, 2, 2, false),
            chroma: Some((plane(&neutral, 1, 1, false), plane(&neutral, 1, 1, false))),
            sub: (2, 2),
            bits: 8,
            full_range: false,
            matrix: Matrix::from_code(1),
        };
        let mut out = vec![0u8; 12];
        assert!(to_rgb(&frame, &mut out, 2, (0, 0)));
        assert_eq!(out, [0, 0, 0, 255, 255, 255, 255, 255, 255, 0, 0, 0]);
        // Full-range BT.601 red: Y 76, Cb 85, Cr 255.
        let (y, cb, cr) = ([76u8], [85u8], [255u8]);
        let red = Frame {
            y: plane(&y, 1, 1, false),
            chroma: Some((plane(&cb, 1, 1, false), plane(&cr, 1, 1, false))),
            sub: (1, 1),
            bits: 8,
            full_range: true,
            matrix: Matrix::from_code(6),
        };
        let mut px = [0u8; 3];
        assert!(to_rgb(&red, &mut px, 1, (0, 0)));
        assert!(px[0] >= 253 && px[1] <= 2 && px[2] <= 2, "{px:?}");
    }

    #[test]
    fn ten_bit_samples_and_planes_that_do_not_fit_their_data() {
        // 10-bit full-range 1023 is white.
        let data = [0xFF, 0x03];
        let frame = Frame {
            y: plane(&data, 1, 1, true),
            chroma: None,
            sub: (1, 1),
            bits: 10,
            full_range: true,
            matrix: Matrix::from_code(1),
        };
        let mut px = [0u8; 3];
        assert!(to_rgb(&frame, &mut px, 1, (0, 0)));
        assert_eq!(px, [255, 255, 255]);
        let short = Frame {
            y: plane(&data, 1, 2, true),
            ..frame
        };
        assert!(!to_rgb(&short, &mut [0u8; 6], 1, (0, 0)));
    }
}
