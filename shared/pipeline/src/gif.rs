//! A GIF without a global colour table. Its frames should each bring their own, but some
//! writers leave both out (Pillow's `no_palette.gif`): the `gif` crate then refuses the frame
//! ("no color table available"), while Pillow reads its indices as grey levels (mode `L`).
//! [`with_grey_palette`] gives such a file a global table of the 256 greys, so it reads as
//! Pillow shows it; a frame with its own table still uses that one.

/// The header (`GIF87a`/`GIF89a`) and the logical screen descriptor: width, height, flags,
/// background index, aspect ratio.
const SCREEN_END: usize = 13;
/// The flags byte of the logical screen descriptor.
const FLAGS: usize = 10;
/// Flags: a global colour table follows; its size is 2^(1 + the low three bits) entries.
const GLOBAL_TABLE: u8 = 0x80;
const TABLE_SIZE_BITS: u8 = 0x07;

/// Whether [`with_grey_palette`] gives `bytes` a table: a GIF's screen descriptor without a
/// global colour table (only the first [`SCREEN_END`] bytes are looked at).
pub(crate) fn lacks_global_table(bytes: &[u8]) -> bool {
    bytes.len() >= SCREEN_END && bytes[FLAGS] & GLOBAL_TABLE == 0
}

/// `bytes` with a global table of the 256 greys (entry i is (i, i, i)) when it has none;
/// `None` when it has one (or is too short to say: the decoder refuses it then).
pub(crate) fn with_grey_palette(bytes: &[u8]) -> Option<Vec<u8>> {
    if !lacks_global_table(bytes) {
        return None;
    }
    let flags = bytes[FLAGS];
    let mut out = Vec::with_capacity(bytes.len() + 3 * 256);
    out.extend_from_slice(&bytes[..FLAGS]);
    out.push(flags | GLOBAL_TABLE | TABLE_SIZE_BITS);
    out.extend_from_slice(&bytes[FLAGS + 1..SCREEN_END]);
    out.extend((0..=255u8).flat_map(|grey| [grey; 3]));
    out.extend_from_slice(&bytes[SCREEN_END..]);
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// A GIF87a of `width`x1 pixels with the given indices, without any colour table (the
    /// frame's LZW data as Pillow's `no_palette.gif` has it: minimum code size 8, clear code,
    /// one literal per pixel, end code, written uncompressed in 9-bit codes).
    pub(crate) fn gif_without_palette(indices: &[u8]) -> Vec<u8> {
        let width = u16::try_from(indices.len()).unwrap();
        let mut out = b"GIF87a".to_vec();
        out.extend_from_slice(&width.to_le_bytes());
        out.extend_from_slice(&[1, 0, 0, 0, 0]);
        out.push(b',');
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(&width.to_le_bytes());
        out.extend_from_slice(&[1, 0, 0, 8]);
        // 9-bit codes, least significant bit first: clear (256), the indices, end (257). Each
        // literal is a new code for the decoder, but with at most 254 of them the codes stay
        // 9 bits wide.
        let codes: Vec<u16> = std::iter::once(256)
            .chain(indices.iter().map(|&i| u16::from(i)))
            .chain(std::iter::once(257))
            .collect();
        let (mut data, mut acc, mut nbits) = (Vec::new(), 0u32, 0);
        for code in codes {
            acc |= u32::from(code) << nbits;
            nbits += 9;
            while nbits >= 8 {
                data.push(acc as u8);
                acc >>= 8;
                nbits -= 8;
            }
        }
        if nbits > 0 {
            data.push(acc as u8);
        }
        for block in data.chunks(255) {
            out.push(block.len() as u8);
            out.extend_from_slice(block);
        }
        out.extend_from_slice(&[0, b';']);
        out
    }

    #[test]
    fn a_gif_without_a_global_table_gets_the_greys() {
        let bare = gif_without_palette(&[0, 128, 255]);
        let greyed = with_grey_palette(&bare).unwrap();
        assert_eq!(greyed.len(), bare.len() + 768);
        assert_eq!(greyed[FLAGS], 0x87);
        assert_eq!(&greyed[SCREEN_END..SCREEN_END + 6], &[0, 0, 0, 1, 1, 1]);
        assert_eq!(&greyed[SCREEN_END + 768..], &bare[SCREEN_END..]);
        // One with a table, or too short to have a screen descriptor, is left alone.
        assert_eq!(with_grey_palette(&greyed), None);
        assert_eq!(with_grey_palette(b"GIF89a\x01\x00"), None);
    }
}
