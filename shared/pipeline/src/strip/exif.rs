//! An EXIF block rewritten with only the fields a stored original keeps: the orientation the
//! pipeline applies (whichever block it came from) and, under `strip-private`, the fields that
//! describe the capture. Everything else goes: the GPS directory, maker notes, serial numbers,
//! owners, unique ids, comments and the thumbnail directory (a small copy of the photo as it
//! was before any crop). A list of what stays, not of what goes: a field nobody listed (a
//! vendor's, a new standard's) is dropped.

use std::panic::{AssertUnwindSafe, catch_unwind};

use exif::experimental::Writer;
use exif::{Context, Field, In, Tag, Value};
use image::metadata::Orientation;

use imgest_core::domain::OriginalMetadata;

/// The fields `strip-private` keeps (of the primary image's directories): the capture's
/// description and what rendering may read (resolution, colour space, interoperability).
const CAPTURE: &[Tag] = &[
    Tag::XResolution,
    Tag::YResolution,
    Tag::ResolutionUnit,
    Tag::YCbCrPositioning,
    Tag::Make,
    Tag::Model,
    Tag::DateTime,
    Tag::ExifVersion,
    Tag::FlashpixVersion,
    Tag::ColorSpace,
    Tag::ComponentsConfiguration,
    Tag::PixelXDimension,
    Tag::PixelYDimension,
    Tag::DateTimeOriginal,
    Tag::DateTimeDigitized,
    Tag::OffsetTime,
    Tag::OffsetTimeOriginal,
    Tag::OffsetTimeDigitized,
    Tag::SubSecTime,
    Tag::SubSecTimeOriginal,
    Tag::SubSecTimeDigitized,
    Tag::ExposureTime,
    Tag::FNumber,
    Tag::ExposureProgram,
    Tag::PhotographicSensitivity,
    Tag::ExposureBiasValue,
    Tag::MeteringMode,
    Tag::Flash,
    Tag::FocalLength,
    Tag::FocalLengthIn35mmFilm,
    Tag::WhiteBalance,
    Tag::ExposureMode,
    Tag::SceneCaptureType,
    Tag::LensMake,
    Tag::LensModel,
    Tag::LensSpecification,
    Tag::InteroperabilityIndex,
    Tag::InteroperabilityVersion,
];

/// The EXIF block (a TIFF structure, without an `Exif\0\0` prefix) that a stored original
/// carries in place of `exif` (the photo's, if it has one, with or without the prefix), or
/// `None` for none at all. `orientation` is the one the pipeline applies, written as the only
/// orientation field (so a photo turned by its XMP packet stays turned with no XMP left).
pub(crate) fn rewritten(
    exif: Option<&[u8]>,
    orientation: Orientation,
    policy: OriginalMetadata,
) -> Option<Vec<u8>> {
    let mut kept: Vec<Field> = match (policy, exif) {
        (OriginalMetadata::StripPrivate, Some(exif)) => capture_fields(exif),
        _ => Vec::new(),
    };
    if orientation != Orientation::NoTransforms {
        kept.push(Field {
            tag: Tag::Orientation,
            ifd_num: In::PRIMARY,
            value: Value::Short(vec![u16::from(orientation.to_exif())]),
        });
    }
    if kept.is_empty() {
        return None;
    }
    let mut writer = Writer::new();
    for field in &kept {
        writer.push_field(field);
    }
    let mut out = std::io::Cursor::new(Vec::new());
    // Big-endian, as most cameras write it; every field kept is rewritten in it.
    match writer.write(&mut out, false) {
        Ok(()) => Some(out.into_inner()),
        // A kept value the writer cannot encode: the orientation alone then.
        Err(_) => orientation_only(orientation),
    }
}

fn orientation_only(orientation: Orientation) -> Option<Vec<u8>> {
    rewritten(None, orientation, OriginalMetadata::StripAll)
}

/// The listed fields of the photo's primary directories; none if the block does not read.
fn capture_fields(exif: &[u8]) -> Vec<Field> {
    let tiff = exif.strip_prefix(b"Exif\0\0").unwrap_or(exif).to_vec();
    // A third-party parser fed untrusted bytes: a panic in it drops the fields, nothing more.
    let read = catch_unwind(AssertUnwindSafe(|| exif::Reader::new().read_raw(tiff)));
    let Ok(Ok(read)) = read else {
        return Vec::new();
    };
    let mut kept: Vec<Field> = Vec::new();
    for field in read.fields() {
        let listed = field.ifd_num == In::PRIMARY
            && CAPTURE.contains(&field.tag)
            && !matches!(field.value, Value::Unknown(..))
            && !kept.iter().any(|k| k.tag == field.tag);
        if listed {
            kept.push(field.clone());
        }
    }
    debug_assert!(kept.iter().all(|f| f.tag.context() != Context::Gps));
    kept
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// A little-endian EXIF block with a camera model, a serial number, a maker note, GPS
    /// coordinates and `orientation`, written with the same crate that reads them back.
    pub(crate) fn private_exif(orientation: u16) -> Vec<u8> {
        let fields = [
            Field {
                tag: Tag::Model,
                ifd_num: In::PRIMARY,
                value: Value::Ascii(vec![b"Phone 12".to_vec()]),
            },
            Field {
                tag: Tag::Orientation,
                ifd_num: In::PRIMARY,
                value: Value::Short(vec![orientation]),
            },
            Field {
                tag: Tag::Artist,
                ifd_num: In::PRIMARY,
                value: Value::Ascii(vec![b"Jane Seller".to_vec()]),
            },
            Field {
                tag: Tag::BodySerialNumber,
                ifd_num: In::PRIMARY,
                value: Value::Ascii(vec![b"SN-0042".to_vec()]),
            },
            Field {
                tag: Tag::MakerNote,
                ifd_num: In::PRIMARY,
                value: Value::Undefined(b"vendor secrets".to_vec(), 0),
            },
            Field {
                tag: Tag::DateTimeOriginal,
                ifd_num: In::PRIMARY,
                value: Value::Ascii(vec![b"2024:05:01 10:00:00".to_vec()]),
            },
            Field {
                tag: Tag::GPSLatitudeRef,
                ifd_num: In::PRIMARY,
                value: Value::Ascii(vec![b"N".to_vec()]),
            },
            Field {
                tag: Tag::GPSLatitude,
                ifd_num: In::PRIMARY,
                value: Value::Rational(vec![(52, 1).into(), (31, 1).into(), (1234, 100).into()]),
            },
            Field {
                tag: Tag::GPSLongitude,
                ifd_num: In::PRIMARY,
                value: Value::Rational(vec![(13, 1).into(), (24, 1).into(), (5678, 100).into()]),
            },
            Field {
                tag: Tag::ImageDescription,
                ifd_num: In::THUMBNAIL,
                value: Value::Ascii(vec![b"thumbnail".to_vec()]),
            },
        ];
        let mut writer = Writer::new();
        for f in &fields {
            writer.push_field(f);
        }
        let mut out = std::io::Cursor::new(Vec::new());
        writer.write(&mut out, true).unwrap();
        out.into_inner()
    }

    pub(crate) fn tags(tiff: &[u8]) -> Vec<(Tag, In)> {
        let read = exif::Reader::new().read_raw(tiff.to_vec()).unwrap();
        read.fields().map(|f| (f.tag, f.ifd_num)).collect()
    }

    #[test]
    fn strip_private_keeps_the_capture_and_the_orientation_only() {
        let exif = private_exif(6);
        let kept = rewritten(
            Some(&exif),
            Orientation::Rotate90,
            OriginalMetadata::StripPrivate,
        )
        .unwrap();
        let tags = tags(&kept);
        assert!(tags.contains(&(Tag::Model, In::PRIMARY)), "{tags:?}");
        assert!(
            tags.contains(&(Tag::DateTimeOriginal, In::PRIMARY)),
            "{tags:?}"
        );
        assert!(tags.contains(&(Tag::Orientation, In::PRIMARY)), "{tags:?}");
        for (tag, _) in &tags {
            assert_ne!(tag.context(), Context::Gps, "{tags:?}");
            assert!(
                ![Tag::Artist, Tag::BodySerialNumber, Tag::MakerNote].contains(tag),
                "{tags:?}"
            );
        }
        assert!(tags.iter().all(|(_, ifd)| *ifd == In::PRIMARY), "{tags:?}");
        // With the `Exif\0\0` prefix some containers keep, the same.
        let prefixed = [&b"Exif\0\0"[..], &exif].concat();
        assert_eq!(
            rewritten(
                Some(&prefixed),
                Orientation::Rotate90,
                OriginalMetadata::StripPrivate
            ),
            Some(kept)
        );
    }

    #[test]
    fn strip_all_keeps_the_orientation_alone_and_nothing_when_upright() {
        let exif = private_exif(3);
        let kept = rewritten(
            Some(&exif),
            Orientation::Rotate180,
            OriginalMetadata::StripAll,
        );
        assert_eq!(tags(&kept.unwrap()), [(Tag::Orientation, In::PRIMARY)]);
        assert_eq!(
            rewritten(
                Some(&exif),
                Orientation::NoTransforms,
                OriginalMetadata::StripAll
            ),
            None
        );
        // An unreadable block under strip-private: the orientation (from elsewhere) alone.
        let from_xmp = rewritten(
            Some(b"Exif\0\0garbage"),
            Orientation::Rotate270,
            OriginalMetadata::StripPrivate,
        )
        .unwrap();
        assert_eq!(
            super::super::super::meta::exif_orientation(&from_xmp),
            Some(Orientation::Rotate270)
        );
    }
}
