//! The sample format an AV1 stream declares in its sequence header (AV1 specification 5.5):
//! bit depth, chroma subsampling, monochrome. Read before decoding, so that the memory estimate
//! rests on what the decoder will allocate for, not on what the container claims.

/// A frame's samples, as the sequence header declares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SampleFormat {
    /// 8, 10 or 12.
    pub bit_depth: u8,
    pub monochrome: bool,
    /// Chroma halved across and down.
    pub subsampling: (bool, bool),
    /// Film grain may be synthesised (`film_grain_params_present`): the decoder then makes a
    /// second picture, the grainy one, beside the decoded one.
    pub grain: bool,
}

impl SampleFormat {
    /// The worst case, for a stream whose header cannot be read: 16-bit samples, 4:4:4, film
    /// grain.
    pub(crate) const WORST: Self = Self {
        bit_depth: 12,
        monochrome: false,
        subsampling: (false, false),
        grain: true,
    };

    /// Bytes a frame of `pixels` pixels takes: every plane, 1 byte a sample at 8 bits, 2 above.
    pub(crate) fn frame_bytes(self, pixels: u64) -> u64 {
        let bytes = if self.bit_depth > 8 { 2 } else { 1 };
        let chroma = match (self.monochrome, self.subsampling) {
            (true, _) => 0,
            (false, (true, true)) => pixels / 2,
            (false, (true, false) | (false, true)) => pixels,
            (false, (false, false)) => pixels * 2,
        };
        (pixels + chroma) * bytes
    }
}

/// Reads bits, most significant first.
struct Bits<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Bits<'_> {
    fn bit(&mut self) -> Option<bool> {
        let byte = *self.bytes.get(self.pos / 8)?;
        let bit = byte >> (7 - self.pos % 8) & 1;
        self.pos += 1;
        Some(bit == 1)
    }

    fn bits(&mut self, n: u32) -> Option<u32> {
        (0..n).try_fold(0u32, |v, _| Some(v << 1 | u32::from(self.bit()?)))
    }

    /// `uvlc()`: leading zeros, then that many bits.
    fn uvlc(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while !self.bit()? {
            zeros += 1;
            if zeros >= 32 {
                return None;
            }
        }
        Some(self.bits(zeros)? + ((1u32 << zeros) - 1))
    }
}

/// `leb128()`: the size of an OBU.
fn leb128(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let mut value = 0u64;
    for i in 0..8 {
        let b = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return usize::try_from(value).ok();
        }
    }
    None
}

/// The sample format the sequence headers among the OBUs of `data` declare (the widest, should
/// there be several that differ), if there is one and every one can be read.
pub(crate) fn sample_format(data: &[u8]) -> Option<SampleFormat> {
    let mut at = 0;
    let mut widest: Option<SampleFormat> = None;
    while at < data.len() {
        let header = data[at];
        let kind = (header >> 3) & 0xF;
        let extension = header & 0x04 != 0;
        let has_size = header & 0x02 != 0;
        at += 1 + usize::from(extension);
        let size = if has_size {
            leb128(data, &mut at)?
        } else {
            data.len().checked_sub(at)?
        };
        let payload = data.get(at..at.checked_add(size)?)?;
        if kind == 1 {
            let format = sequence_header(payload)?;
            if widest.is_none_or(|w| format.frame_bytes(64) > w.frame_bytes(64)) {
                widest = Some(format);
            }
        }
        at += size;
    }
    widest
}

/// The sequence header's fields up to `film_grain_params_present`, its last.
fn sequence_header(payload: &[u8]) -> Option<SampleFormat> {
    let mut b = Bits {
        bytes: payload,
        pos: 0,
    };
    let profile = b.bits(3)?;
    let _still_picture = b.bit()?;
    let reduced = b.bit()?;
    if reduced {
        b.bits(5)?;
    } else {
        let timing_info = b.bit()?;
        let mut decoder_model = false;
        let mut buffer_delay_length = 0;
        if timing_info {
            b.bits(32)?;
            b.bits(32)?;
            if b.bit()? {
                b.uvlc()?;
            }
            decoder_model = b.bit()?;
            if decoder_model {
                buffer_delay_length = b.bits(5)? + 1;
                b.bits(32)?;
                b.bits(10)?;
            }
        }
        let initial_display_delay = b.bit()?;
        let operating_points = b.bits(5)? + 1;
        for _ in 0..operating_points {
            b.bits(12)?;
            if b.bits(5)? > 7 {
                b.bit()?;
            }
            if decoder_model && b.bit()? {
                b.bits(buffer_delay_length)?;
                b.bits(buffer_delay_length)?;
                b.bit()?;
            }
            if initial_display_delay && b.bit()? {
                b.bits(4)?;
            }
        }
    }
    let width_bits = b.bits(4)? + 1;
    let height_bits = b.bits(4)? + 1;
    b.bits(width_bits)?;
    b.bits(height_bits)?;
    if !reduced && b.bit()? {
        b.bits(7)?;
    }
    b.bits(3)?;
    if !reduced {
        b.bits(4)?;
        let order_hint = b.bit()?;
        if order_hint {
            b.bits(2)?;
        }
        let force_screen_content_tools = if b.bit()? { 2 } else { b.bits(1)? };
        if force_screen_content_tools > 0 && !b.bit()? {
            b.bit()?;
        }
        if order_hint {
            b.bits(3)?;
        }
    }
    b.bits(3)?;
    color_config(&mut b, profile)
}

fn color_config(b: &mut Bits<'_>, profile: u32) -> Option<SampleFormat> {
    let high_bitdepth = b.bit()?;
    let bit_depth = match (profile, high_bitdepth) {
        (2, true) => {
            if b.bit()? {
                12
            } else {
                10
            }
        }
        (_, true) => 10,
        (_, false) => 8,
    };
    let monochrome = profile != 1 && b.bit()?;
    let (mut primaries, mut transfer, mut matrix) = (2, 2, 2);
    if b.bit()? {
        primaries = b.bits(8)?;
        transfer = b.bits(8)?;
        matrix = b.bits(8)?;
    }
    let subsampling = if monochrome {
        // color_range; no separate_uv_delta_q.
        b.bit()?;
        (true, true)
    } else if (primaries, transfer, matrix) == (1, 13, 0) {
        // sRGB coded as RGB: 4:4:4, full range implied; separate_uv_delta_q.
        b.bit()?;
        (false, false)
    } else {
        // color_range, the subsampling, chroma_sample_position, separate_uv_delta_q.
        b.bit()?;
        let subsampling = match profile {
            0 => (true, true),
            1 => (false, false),
            _ if bit_depth == 12 => {
                let x = b.bit()?;
                (x, x && b.bit()?)
            }
            _ => (true, false),
        };
        if subsampling == (true, true) {
            b.bits(2)?;
        }
        b.bit()?;
        subsampling
    };
    Some(SampleFormat {
        bit_depth,
        monochrome,
        subsampling,
        grain: b.bit()?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::container::{Coded, parse};
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/../../tests/fixtures/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    fn format_of(name: &str) -> SampleFormat {
        let bytes = fixture(name);
        let avif = parse(&bytes).unwrap();
        let data = match &avif.image {
            Coded::Single(data) => data.clone(),
            Coded::Grid { tiles, .. } => tiles[0].clone(),
        };
        sample_format(&data).unwrap()
    }

    #[test]
    fn the_sequence_header_says_depth_and_subsampling() {
        let cases = [
            ("ten-bit.avif", 10, false, (true, true)),
            ("grid.avif", 8, false, (false, false)),
            ("grey.avif", 8, true, (true, true)),
            ("orientation/avif-1.avif", 8, false, (false, false)),
        ];
        for (name, bit_depth, monochrome, subsampling) in cases {
            let want = SampleFormat {
                bit_depth,
                monochrome,
                subsampling,
                grain: false,
            };
            assert_eq!(format_of(name), want, "{name}");
        }
        assert_eq!(sample_format(b""), None);
        assert_eq!(sample_format(&[0x0A, 0x05, 0, 0]), None);
    }

    #[test]
    fn frame_bytes_follow_the_format() {
        let eight_420 = SampleFormat {
            bit_depth: 8,
            monochrome: false,
            subsampling: (true, true),
            grain: false,
        };
        assert_eq!(eight_420.frame_bytes(100), 150);
        assert_eq!(SampleFormat::WORST.frame_bytes(100), 600);
    }
}
