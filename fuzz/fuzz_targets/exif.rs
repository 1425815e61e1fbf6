//! The EXIF orientation reader the pipeline relies on (`image`'s): the fuzz bytes as a raw EXIF
//! block (the TIFF structure after `Exif\0\0`) for `Orientation::from_exif_chunk`, and the same
//! block in the APP1 segment of an otherwise valid JPEG, whose orientation the JPEG decoder is
//! asked for exactly as `shared/pipeline/src/decode.rs` asks it.
//!
//! Besides not panicking: an EXIF block, however broken, never makes the JPEG unreadable (the
//! pipeline treats a corrupt block as "no orientation", never as a failure), and the decoder
//! reads the orientation the block holds.
#![no_main]

use std::io::Cursor;
use std::sync::LazyLock;

use image::metadata::Orientation;
use image::{ExtendedColorType, ImageDecoder, ImageFormat, ImageReader};
use libfuzzer_sys::fuzz_target;

/// The largest EXIF block an APP1 segment holds: its length field (u16) counts itself (2
/// bytes) and `Exif\0\0` (6).
const MAX_BLOCK: usize = 0xFFFF - 2 - 6;

/// A valid 8x8 grey JPEG without its SOI marker: what follows the APP1 segment.
static JPEG_AFTER_SOI: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let mut jpeg = Vec::new();
    let encoded = image::codecs::jpeg::JpegEncoder::new(&mut jpeg).encode(
        &[128; 64],
        8,
        8,
        ExtendedColorType::L8,
    );
    match (encoded, jpeg.strip_prefix(&[0xFF, 0xD8])) {
        (Ok(()), Some(rest)) => rest.to_vec(),
        (result, _) => panic!("encoding the carrier JPEG failed: {result:?}"),
    }
});

fuzz_target!(|block: &[u8]| {
    let block = &block[..block.len().min(MAX_BLOCK)];
    let from_block = Orientation::from_exif_chunk(block);

    let segment_len = u16::try_from(2 + 6 + block.len()).unwrap_or(u16::MAX);
    let mut jpeg = Vec::with_capacity(12 + block.len() + JPEG_AFTER_SOI.len());
    jpeg.extend_from_slice(&[0xFF, 0xD8, 0xFF, 0xE1]);
    jpeg.extend_from_slice(&segment_len.to_be_bytes());
    jpeg.extend_from_slice(b"Exif\0\0");
    jpeg.extend_from_slice(block);
    jpeg.extend_from_slice(&JPEG_AFTER_SOI);

    let mut decoder =
        match ImageReader::with_format(Cursor::new(&jpeg), ImageFormat::Jpeg).into_decoder() {
            Ok(decoder) => decoder,
            Err(e) => panic!("an EXIF block made a valid JPEG unreadable: {e}"),
        };
    match decoder.orientation() {
        Ok(read) => assert_eq!(read, from_block.unwrap_or(Orientation::NoTransforms)),
        Err(e) => panic!("reading the orientation failed: {e}"),
    }
});
