//! Stored originals keep their pixels, orientation and profile and lose their location and
//! identity, in every container; variants carry no metadata at all. EXIF is read back with
//! kamadak-exif, as any reader would.
#![allow(clippy::unwrap_used)]

use std::io::Cursor;
use std::str::FromStr;

use exif::{Context, In, Tag};

use super::exif::tests::private_exif;
use crate::riff::tests::{riff_chunk, webp};
use crate::{Pipeline, PipelineConfig, Processed};
use imgest_core::domain::{OriginalMetadata, VariantSet};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/../../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pipeline(policy: OriginalMetadata) -> Pipeline {
    Pipeline::new(PipelineConfig {
        original_metadata: policy,
        ..PipelineConfig::default()
    })
}

/// Words that name private metadata in any container (EXIF's maker note and serial are
/// found by the reader; these catch XMP, comments and text chunks).
const PRIVATE_WORDS: [&[u8]; 6] = [
    b"Jane Seller",
    b"SN-0042",
    b"vendor secrets",
    b"ns.adobe.com/xap",
    b"a private comment",
    b"exif:GPS",
];

/// The EXIF fields of `bytes` (any container kamadak-exif reads), or none.
fn exif_fields(bytes: &[u8]) -> Vec<(Tag, In, String)> {
    match exif::Reader::new().read_from_container(&mut Cursor::new(bytes)) {
        Ok(read) => read
            .fields()
            .map(|f| (f.tag, f.ifd_num, f.display_value().to_string()))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[track_caller]
fn assert_nothing_private(bytes: &[u8]) {
    let fields = exif_fields(bytes);
    for (tag, ifd, _) in &fields {
        assert_ne!(tag.context(), Context::Gps, "{fields:?}");
        assert_eq!(*ifd, In::PRIMARY, "no thumbnail directory: {fields:?}");
        assert!(
            ![
                Tag::MakerNote,
                Tag::BodySerialNumber,
                Tag::Artist,
                Tag::UserComment
            ]
            .contains(tag),
            "{fields:?}"
        );
    }
    for word in PRIVATE_WORDS {
        assert!(
            memchr::memmem::find(bytes, word).is_none(),
            "{:?} left in the original",
            String::from_utf8_lossy(word)
        );
    }
}

#[track_caller]
fn orientation_of(bytes: &[u8]) -> Option<String> {
    exif_fields(bytes)
        .into_iter()
        .find(|(tag, _, _)| *tag == Tag::Orientation)
        .map(|(_, _, v)| v)
}

/// The photo's variants made from the stored original are the very ones made from the photo
/// sent: same pixels, orientation and colours.
#[track_caller]
fn renders_the_same(p: &Pipeline, sent: &[u8], processed: &Processed) {
    let stored = processed.original.as_deref().unwrap();
    let again = p.process(stored).unwrap();
    assert_eq!(again.variants, processed.variants);
    assert_eq!(
        (again.width, again.height),
        (processed.width, processed.height)
    );
    assert_eq!(again.colour, processed.colour);
    // Stripping what is already stripped changes nothing.
    assert_eq!(again.original.as_deref(), Some(stored));
    assert!(
        stored.len() <= sent.len() + 64,
        "{} > {}",
        stored.len(),
        sent.len()
    );
}

const XMP: &[u8] = b"<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:Description xmlns:xmp=\"http://ns.adobe.com/xap/1.0/\" exif:GPSLatitude=\"52,31.2N\" tiff:Orientation=\"6\"/></x:xmpmeta>";

/// A JPEG segment.
fn segment(marker: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0xFF, marker];
    out.extend_from_slice(&u16::try_from(body.len() + 2).unwrap().to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// `photo.jpg` with GPS and identity in EXIF (orientation 6), XMP, IPTC, a comment, a
/// multi-picture index and a second picture after its end.
fn private_jpeg() -> Vec<u8> {
    let photo = fixture("photo.jpg");
    let mut out = photo[..2].to_vec();
    out.extend(segment(
        0xE1,
        &[&b"Exif\0\0"[..], &private_exif(6)].concat(),
    ));
    out.extend(segment(
        0xE1,
        &[&b"http://ns.adobe.com/xap/1.0/\0"[..], XMP].concat(),
    ));
    out.extend(segment(0xED, b"Photoshop 3.0\08BIM Jane Seller"));
    out.extend(segment(0xFE, b"a private comment"));
    out.extend(segment(0xE2, b"MPF\0II*\0 SN-0042"));
    out.extend_from_slice(&photo[2..]);
    // What a phone appends after the picture: another JPEG with its own EXIF.
    out.extend_from_slice(&[0xFF, 0xD8]);
    out.extend(segment(
        0xE1,
        &[&b"Exif\0\0"[..], &private_exif(1)].concat(),
    ));
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}

#[test]
fn a_jpeg_original_loses_gps_identity_and_trailers_and_keeps_its_orientation() {
    let sent = private_jpeg();
    assert!(
        exif_fields(&sent)
            .iter()
            .any(|(t, ..)| t.context() == Context::Gps)
    );
    let p = pipeline(OriginalMetadata::StripPrivate);
    let processed = p.process(&sent).unwrap();
    // Turned by its EXIF: stored 1500x1000, shown 1000x1500.
    assert_eq!((processed.width, processed.height), (1000, 1500));
    let stored = processed.original.as_deref().unwrap();
    assert_nothing_private(stored);
    assert_eq!(
        orientation_of(stored).as_deref(),
        Some("row 0 at right and column 0 at top")
    );
    let fields = exif_fields(stored);
    assert!(fields.iter().any(|(t, ..)| *t == Tag::Model), "{fields:?}");
    assert!(stored.ends_with(&[0xFF, 0xD9]));
    renders_the_same(&p, &sent, &processed);
    assert_eq!(processed.original_metadata, OriginalMetadata::StripPrivate);

    let all = pipeline(OriginalMetadata::StripAll).process(&sent).unwrap();
    let stored = all.original.as_deref().unwrap();
    assert_nothing_private(stored);
    let fields: Vec<Tag> = exif_fields(stored).into_iter().map(|(t, ..)| t).collect();
    assert_eq!(fields, [Tag::Orientation]);

    let kept = pipeline(OriginalMetadata::Keep).process(&sent).unwrap();
    assert_eq!(kept.original, None, "kept as sent");
}

#[test]
fn an_orientation_from_xmp_alone_is_kept_as_exif() {
    let photo = fixture("photo.jpg");
    let mut sent = photo[..2].to_vec();
    sent.extend(segment(
        0xE1,
        &[&b"http://ns.adobe.com/xap/1.0/\0"[..], XMP].concat(),
    ));
    sent.extend_from_slice(&photo[2..]);
    let p = pipeline(OriginalMetadata::StripAll);
    let processed = p.process(&sent).unwrap();
    assert_eq!((processed.width, processed.height), (1000, 1500));
    let stored = processed.original.as_deref().unwrap();
    assert_nothing_private(stored);
    assert!(orientation_of(stored).is_some());
    renders_the_same(&p, &sent, &processed);
}

#[test]
fn a_jpeg_keeps_its_colour_profile_and_adobe_segment() {
    // cmyk.jpg: Adobe's APP14 says its inks are inverted; a profile'd photo keeps its profile.
    let p = pipeline(OriginalMetadata::StripAll);
    for name in ["cmyk.jpg", "rotated-exif6.jpg", "corrupt-exif.jpg"] {
        let sent = fixture(name);
        let processed = p.process(&sent).unwrap();
        let stored = processed.original.as_deref().unwrap();
        renders_the_same(&p, &sent, &processed);
        let structure = crate::jpeg::read(stored).unwrap();
        let before = crate::jpeg::read(&sent).unwrap();
        assert_eq!(structure.metadata.adobe, before.metadata.adobe, "{name}");
        assert_eq!(
            structure.metadata.icc(stored),
            before.metadata.icc(&sent),
            "{name}"
        );
    }
}

/// A PNG chunk.
fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = u32::try_from(data.len()).unwrap().to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
    out
}

#[test]
fn a_png_original_loses_its_text_and_exif_but_not_its_orientation() {
    let png = fixture("small.png");
    // After the signature and IHDR (8 + 25 bytes).
    let mut sent = png[..33].to_vec();
    sent.extend(png_chunk(b"eXIf", &private_exif(3)));
    sent.extend(png_chunk(b"tEXt", b"Comment\0a private comment"));
    sent.extend(png_chunk(
        b"iTXt",
        &[&b"XML:com.adobe.xmp\0\0\0\0\0"[..], XMP].concat(),
    ));
    sent.extend(png_chunk(b"prVt", b"SN-0042"));
    sent.extend_from_slice(&png[33..]);
    sent.extend_from_slice(b"trailing Jane Seller");
    let p = pipeline(OriginalMetadata::StripPrivate);
    let processed = p.process(&sent).unwrap();
    // Upside down (orientation 3): the same size.
    assert_eq!((processed.width, processed.height), (120, 80));
    let stored = processed.original.as_deref().unwrap();
    assert_nothing_private(stored);
    assert_eq!(
        orientation_of(stored).as_deref(),
        Some("row 0 at bottom and column 0 at right")
    );
    renders_the_same(&p, &sent, &processed);
    // Still a PNG every decoder reads.
    image::load_from_memory_with_format(stored, image::ImageFormat::Png).unwrap();
}

#[test]
fn a_webp_original_loses_exif_and_xmp_chunks_and_its_flags_say_so() {
    let simple = fixture("photo.webp");
    let vp8 = &simple[12..];
    // An extended WebP of the same image: VP8X (EXIF and XMP flags), the image, EXIF, XMP.
    let (w, h) = (400u32 - 1, 250u32 - 1);
    let mut vp8x = vec![0x08 | 0x04, 0, 0, 0];
    vp8x.extend_from_slice(&w.to_le_bytes()[..3]);
    vp8x.extend_from_slice(&h.to_le_bytes()[..3]);
    let sent = webp(&[
        riff_chunk(b"VP8X", &vp8x),
        vp8.to_vec(),
        riff_chunk(b"EXIF", &private_exif(8)),
        riff_chunk(b"XMP ", XMP),
        riff_chunk(b"SECR", b"SN-0042"),
    ]);
    let p = pipeline(OriginalMetadata::StripPrivate);
    let processed = p.process(&sent).unwrap();
    assert_eq!((processed.width, processed.height), (250, 400));
    let stored = processed.original.as_deref().unwrap();
    assert_nothing_private(stored);
    assert!(orientation_of(stored).is_some());
    assert_eq!(stored[20] & 0x0C, 0x08, "EXIF flag on, XMP flag off");
    renders_the_same(&p, &sent, &processed);
    // A simple WebP has nothing to lose.
    let plain = p.process(&simple).unwrap();
    assert_eq!(plain.original.as_deref(), Some(&simple[..]));
}

#[test]
fn a_gif_original_loses_comments_and_xmp_and_keeps_its_loop() {
    let gif = fixture("animated.gif");
    let flags = gif[10];
    let table = if flags & 0x80 == 0 {
        0
    } else {
        3 << ((flags & 7) + 1)
    };
    let at = 13 + table;
    let mut sent = gif[..at].to_vec();
    sent.extend_from_slice(b"!\xFE\x11a private comment\x00");
    sent.extend_from_slice(b"!\xFF\x0bXMP DataXMP\x0cJane Seller!\x00");
    sent.extend_from_slice(&gif[at..]);
    let p = pipeline(OriginalMetadata::StripPrivate);
    let processed = p.process(&sent).unwrap();
    let stored = processed.original.as_deref().unwrap();
    assert_nothing_private(stored);
    assert_eq!(
        memchr::memmem::find(&gif, b"NETSCAPE2.0").is_some(),
        memchr::memmem::find(stored, b"NETSCAPE2.0").is_some()
    );
    renders_the_same(&p, &sent, &processed);
}

#[test]
fn a_gif_original_ends_where_its_blocks_do() {
    // Bytes that start no block after a frame (here a second file appended, a comment in it):
    // decoders stop there, and so does the stored original, with a trailer.
    let gif = fixture("animated.gif");
    let end = gif.len() - 1;
    assert_eq!(gif[end], b';');
    let mut sent = gif[..end].to_vec();
    sent.extend_from_slice(b"GIF89a\x01\x00\x01\x00\x00\x00\x00!\xFE\x11a private comment\x00;");
    let p = pipeline(OriginalMetadata::StripPrivate);
    let processed = p.process(&sent).unwrap();
    let stored = processed.original.as_deref().unwrap();
    assert_eq!(stored, &gif[..]);
    assert_nothing_private(stored);
    renders_the_same(&p, &sent, &processed);
}

/// An ISO BMFF box.
fn bmff(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut out = u32::try_from(8 + body.len())
        .unwrap()
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(body);
    out
}

#[test]
fn an_avif_loses_its_exif_and_xmp_items_in_place() {
    // A container with two metadata items in `mdat` (no image: only the items are looked at).
    let exif_item = [&[0u8, 0, 0, 0][..], &private_exif(1)].concat();
    let infe = |id: u8, kind: &[u8; 4], extra: &[u8]| {
        bmff(
            b"infe",
            &[&[2, 0, 0, 0, 0, id, 0, 0][..], kind, b"\0", extra].concat(),
        )
    };
    let iinf = bmff(
        b"iinf",
        &[
            &[0u8, 0, 0, 0, 0, 2][..],
            &infe(1, b"Exif", b""),
            &infe(2, b"mime", b"application/rdf+xml\0"),
        ]
        .concat(),
    );
    let ftyp = bmff(b"ftyp", b"avif\0\0\0\0avifmif1");
    // iloc v0, offset and length 4 bytes, no base: two items, one extent each; offsets filled
    // in once the layout is known.
    let iloc_len = 8 + 4 + 2 + 2 + 2 * (2 + 2 + 2 + 8);
    let meta_len = 8 + 4 + iinf.len() + iloc_len;
    let mdat_at = ftyp.len() + meta_len + 8;
    let exif_at = mdat_at as u32;
    let xmp_at = exif_at + exif_item.len() as u32;
    let mut iloc = vec![0u8, 0, 0, 0, 0x44, 0x00, 0, 2];
    for (id, at, len) in [(1u16, exif_at, exif_item.len()), (2, xmp_at, XMP.len())] {
        iloc.extend_from_slice(&id.to_be_bytes());
        iloc.extend_from_slice(&[0, 0, 0, 1]);
        iloc.extend_from_slice(&at.to_be_bytes());
        iloc.extend_from_slice(&u32::try_from(len).unwrap().to_be_bytes());
    }
    let iloc = bmff(b"iloc", &iloc);
    let meta = bmff(b"meta", &[&[0u8, 0, 0, 0][..], &iinf, &iloc].concat());
    let sent = [
        ftyp,
        meta,
        bmff(b"mdat", &[&exif_item[..], XMP].concat()),
        bmff(b"uuid", b"0123456789abcdefSN-0042"),
    ]
    .concat();
    assert_eq!(mdat_at, sent.len() - exif_item.len() - XMP.len() - 31);
    let capture = super::exif::rewritten(
        Some(&private_exif(1)),
        image::metadata::Orientation::NoTransforms,
        OriginalMetadata::StripPrivate,
    );
    let stored = super::avif::strip(&sent, capture.as_deref()).unwrap();
    assert_eq!(stored.len(), sent.len(), "no offset moves");
    assert_nothing_private(&stored);
    let items = crate::avif::container::metadata_items(&stored).unwrap();
    let exif = &stored[items.iter().find(|i| &i.kind == b"Exif").unwrap().extents[0].clone()];
    let tags = super::exif::tests::tags(&exif[4..]);
    assert!(tags.iter().any(|(t, _)| *t == Tag::Model), "{tags:?}");
    assert!(
        tags.iter().all(|(t, _)| t.context() != Context::Gps),
        "{tags:?}"
    );
}

#[test]
fn avif_photos_without_metadata_are_stored_as_sent() {
    let p = pipeline(OriginalMetadata::StripPrivate);
    for name in ["alpha.avif", "grid.avif", "p3-nclx.avif"] {
        let sent = fixture(name);
        let processed = p.process(&sent).unwrap();
        assert_eq!(processed.original.as_deref(), Some(&sent[..]), "{name}");
    }
}

/// Every output format: a variant is pixels and nothing else (no EXIF, XMP, GPS, comment).
#[test]
fn variants_of_every_format_carry_no_metadata() {
    let formats = [
        "j=fit:320x320",
        #[cfg(feature = "libwebp")]
        "w=fit:320x320:webp",
        #[cfg(feature = "avif")]
        "a=fit:320x320:avif",
    ]
    .join(",");
    let p = Pipeline::new(PipelineConfig {
        variants: VariantSet::from_str(&formats).unwrap(),
        original_metadata: OriginalMetadata::Keep,
        ..PipelineConfig::default()
    });
    let sent = private_jpeg();
    let processed = p.process(&sent).unwrap();
    assert_eq!(processed.variants.len(), formats.split(',').count());
    for v in &processed.variants {
        assert_eq!(exif_fields(&v.bytes), [], "{} ({})", v.name, v.format);
        assert_nothing_private(&v.bytes);
        for word in [&b"Exif\0\0"[..], b"<x:xmpmeta", b"XMP "] {
            assert!(
                memchr::memmem::find(&v.bytes, word).is_none(),
                "{} ({}) holds {:?}",
                v.name,
                v.format,
                String::from_utf8_lossy(word)
            );
        }
    }
}
