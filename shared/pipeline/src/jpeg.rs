//! A JPEG's marker structure, read without decoding: its frame (size, components, sampling)
//! and every scan (where it lies, which coefficients and bits it codes).
//!
//! A JPEG's decoding cost is not bounded by its size. Each scan of a progressive JPEG is a
//! pass over every block of its components, and a refinement scan with nothing to refine is a
//! few bytes: one megabyte can repeat one 30,000 times (libjpeg-turbo spent 16 CPU-seconds on
//! such a file before giving up). [`read`] refuses, before any decoder sees the bytes, a JPEG
//! with more than [`MAX_SCANS`] scans, and a progressive JPEG whose progression libjpeg would
//! only warn about (a scan refining bits that no earlier scan coded, or coding them again),
//! so every decoder makes at most `MAX_SCANS` passes. It also gives the memory estimate its
//! frame (`footprint.rs`) and `turbo.rs` the scans a reduced output can do without.
//!
//! The same walk collects what the photo says about itself in its application segments
//! (`Metadata`): its ICC profile (APP2, possibly split over several segments), its EXIF and
//! XMP blocks (APP1) for the orientation, and whether it has an Adobe segment (APP14, which
//! says a 4-component JPEG stores inverted CMYK).
//!
//! Some writers leave stray bytes between segments, or cut Adobe's segment short (libjpeg
//! skips both, with a warning, and so Pillow and libvips show such a file). Not every decoder
//! does: libjpeg-turbo's TurboJPEG API fails the header on the warning, zune-jpeg refuses a
//! short Adobe segment. [`read`] lists them ([`Structure::skipped`]) and [`without_skipped`]
//! gives the decoders a copy without them.
//!
//! [`dct_scale`] is the reduced size libjpeg-turbo is asked to decode at, here so that the
//! decoder and the memory estimate (which is built without libjpeg-turbo too) agree on it.

use std::borrow::Cow;

use super::PipelineError;
use super::detect::Limits;
use super::meta::Meta;

/// The most scans accepted. A progressive JPEG as libjpeg, mozjpeg or a camera writes it has
/// 10 or fewer (mozjpeg's optimised scripts up to a few more); a sequential one has at most
/// one per component. Each scan is a pass over the image: this bounds decoding to 64 passes.
pub(crate) const MAX_SCANS: usize = 64;

/// The reduced sizes decoded to, as fractions of the stored size, smallest first. 1/8, 1/4 and
/// 1/2 have SIMD inverse DCTs in libjpeg-turbo. 3/8 runs a plain C 3x3 inverse DCT, cheaper
/// than the 4x4 SIMD one on far fewer output pixels, and it is the scale of the common
/// 4000-to-5000-pixel camera photo made into a 1280 variant: decoding at 3/8 rather than 1/2
/// holds 44 % fewer pixels while a progressive JPEG's coefficients fill memory, at no cost in
/// time (`bench/process.sh`, `bench/pipeline.sh`). Other multiples of 1/8 are not used: 3/4,
/// with its C 6x6 inverse DCT, was slower than a full-size decode on 1920x1200 photos for a
/// 1280 output.
const DCT_SCALES: [(u8, u8); 4] = [(1, 8), (1, 4), (3, 8), (1, 2)];

/// The smallest of the reduced sizes that keeps at least `min_scale` of the stored size on both
/// axes, as (numerator, denominator); (1, 1) when none does.
pub(crate) fn dct_scale(min_scale: f64) -> (u8, u8) {
    DCT_SCALES
        .into_iter()
        .find(|&(n, d)| f64::from(n) / f64::from(d) >= min_scale)
        .unwrap_or((1, 1))
}

/// Components in a frame: JPEG allows up to 4 in a scan and 255 in a frame; libjpeg and every
/// decoder here take up to 4.
const MAX_COMPONENTS: usize = 4;

/// One component of the frame and its sampling factors (1..=4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Component {
    pub id: u8,
    pub h: u8,
    pub v: u8,
}

/// The frame header (SOFn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub progressive: bool,
    pub width: u16,
    pub height: u16,
    pub components: Vec<Component>,
}

/// One scan: its bytes (header and entropy-coded data) and what it codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scan {
    pub start: usize,
    pub end: usize,
    pub components: Vec<u8>,
    pub ss: u8,
    pub se: u8,
    pub ah: u8,
    pub al: u8,
}

/// What [`read`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Structure {
    pub frame: Frame,
    pub scans: Vec<Scan>,
    pub metadata: Metadata,
    /// What libjpeg skips and other decoders may not: stray bytes before a marker, and APP14
    /// `Adobe` segments too short to be one (see [`without_skipped`]).
    pub skipped: Vec<std::ops::Range<usize>>,
}

/// The application segments that matter here, as positions in the JPEG's bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Metadata {
    /// The ICC profile's chunks (APP2 `ICC_PROFILE`): each one's sequence number and data.
    icc: Vec<(u8, std::ops::Range<usize>)>,
    /// The first APP1 `Exif` block, without its `Exif\0\0` prefix.
    pub exif: Option<std::ops::Range<usize>>,
    /// The first APP1 XMP packet.
    pub xmp: Option<std::ops::Range<usize>>,
    /// An APP14 `Adobe` segment with its colour transform byte was seen (libjpeg's
    /// `saw_Adobe_marker`: a shorter one is not one).
    pub adobe: bool,
}

/// The largest ICC profile read: a CMYK profile with large tables is about a megabyte (the
/// JPEG's own limit is 255 chunks of 65,519 bytes: 16 MB).
pub(crate) const MAX_ICC: usize = 4 << 20;

impl Metadata {
    const ICC: &[u8] = b"ICC_PROFILE\0";
    const EXIF: &[u8] = b"Exif\0\0";
    const XMP: &[u8] = b"http://ns.adobe.com/xap/1.0/\0";
    /// An APP14 `Adobe` segment's data: the name, version, two flag words and the transform.
    const ADOBE_LEN: usize = 12;

    /// Notes segment `marker` whose data lies at `at` in the JPEG.
    fn note(&mut self, marker: u8, segment: &[u8], at: usize) {
        let from = |prefix: &[u8]| at + prefix.len()..at + segment.len();
        match marker {
            0xE1 if self.exif.is_none() && segment.starts_with(Self::EXIF) => {
                self.exif = Some(from(Self::EXIF));
            }
            0xE1 if self.xmp.is_none() && segment.starts_with(Self::XMP) => {
                self.xmp = Some(from(Self::XMP));
            }
            // `ICC_PROFILE\0`, the chunk's sequence number (from 1) and the number of chunks.
            0xE2 if segment.starts_with(Self::ICC) && segment.len() > Self::ICC.len() + 2 => {
                let seq = segment[Self::ICC.len()];
                let start = at + Self::ICC.len() + 2;
                if !self.icc.iter().any(|(s, _)| *s == seq) {
                    self.icc.push((seq, start..at + segment.len()));
                }
            }
            0xEE if segment.len() >= Self::ADOBE_LEN && segment.starts_with(b"Adobe") => {
                self.adobe = true;
            }
            _ => {}
        }
    }

    /// The profile and the orientation, as every container gives them.
    pub(crate) fn meta(&self, bytes: &[u8]) -> Meta<'static> {
        let block =
            |range: &Option<std::ops::Range<usize>>| range.clone().and_then(|r| bytes.get(r));
        Meta::from_blocks(
            self.icc(bytes).map(Cow::Owned),
            block(&self.exif),
            block(&self.xmp),
        )
    }

    /// The ICC profile, its chunks joined in order; `None` when there is none, or when its
    /// chunks are not numbered 1, 2, ... without a gap, or it is over [`MAX_ICC`] bytes.
    pub(crate) fn icc(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let mut chunks = self.icc.clone();
        chunks.sort_by_key(|(seq, _)| *seq);
        let numbered = chunks
            .iter()
            .enumerate()
            .all(|(i, (seq, _))| usize::from(*seq) == i + 1);
        let len: usize = chunks.iter().map(|(_, r)| r.len()).sum();
        if chunks.is_empty() || !numbered || len > MAX_ICC {
            return None;
        }
        let mut icc = Vec::with_capacity(len);
        for (_, range) in chunks {
            icc.extend_from_slice(bytes.get(range)?);
        }
        Some(icc)
    }
}

fn corrupt(why: impl Into<String>) -> PipelineError {
    PipelineError::CorruptImage(why.into())
}

fn truncated() -> PipelineError {
    corrupt("truncated JPEG (no end-of-image marker)")
}

/// Walks the markers from the start of image to the end-of-image marker. Refuses a JPEG that
/// stops before its end-of-image marker (decoders fill the missing part with grey and report
/// success), has no frame before its first scan, more than [`MAX_SCANS`] scans, or an invalid
/// progression. Stops at the end-of-image marker: what follows is not looked at.
pub(crate) fn read(bytes: &[u8]) -> Result<Structure, PipelineError> {
    walk(bytes, false)
}

/// The frame header alone: the markers walked as [`read`] walks them, up to the first frame
/// header (the header checks, before the rest of the file is looked at).
pub(crate) fn frame(bytes: &[u8]) -> Result<Frame, PipelineError> {
    walk(bytes, true).map(|s| s.frame)
}

fn walk(bytes: &[u8], frame_only: bool) -> Result<Structure, PipelineError> {
    if bytes.get(..2) != Some(&[0xFF, 0xD8]) {
        return Err(corrupt("not a JPEG (no start-of-image marker)"));
    }
    let mut frame: Option<Frame> = None;
    let mut scans: Vec<Scan> = Vec::new();
    let mut metadata = Metadata::default();
    let mut progression = Progression::default();
    let mut skipped = Vec::new();
    let mut i = 2;
    loop {
        // libjpeg skips stray bytes before a marker (with a warning): so do we.
        let stray = bytes
            .get(i..)
            .and_then(|rest| memchr::memchr(0xFF, rest))
            .ok_or_else(truncated)?;
        if stray > 0 {
            skipped.push(i..i + stray);
        }
        i += stray;
        // Markers may be preceded by any number of 0xFF fill bytes.
        while bytes.get(i + 1) == Some(&0xFF) {
            i += 1;
        }
        let marker = *bytes.get(i + 1).ok_or_else(truncated)?;
        match marker {
            0xD9 => break,
            // Standalone markers carry no length.
            0x00 | 0x01 | 0xD0..=0xD8 => {
                i += 2;
                continue;
            }
            _ => {}
        }
        let len = match (bytes.get(i + 2), bytes.get(i + 3)) {
            (Some(&hi), Some(&lo)) => usize::from(u16::from_be_bytes([hi, lo])),
            _ => return Err(truncated()),
        };
        if len < 2 {
            return Err(corrupt(format!("a marker segment of length {len}")));
        }
        let segment = bytes.get(i + 4..i + 2 + len).ok_or_else(truncated)?;
        match marker {
            0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF if frame.is_none() => {
                let found = parse_frame(marker, segment)?;
                if frame_only {
                    return Ok(Structure {
                        frame: found,
                        scans,
                        metadata,
                        skipped,
                    });
                }
                frame = Some(found);
            }
            0xDA => {
                let frame = frame
                    .as_ref()
                    .ok_or_else(|| corrupt("a scan before the frame header"))?;
                if scans.len() == MAX_SCANS {
                    return Err(corrupt(format!("the JPEG has more than {MAX_SCANS} scans")));
                }
                let end = entropy_end(bytes, i + 2 + len).ok_or_else(truncated)?;
                let scan = parse_scan(segment, i, end)?;
                if frame.progressive {
                    progression.check(frame, &scan)?;
                }
                scans.push(scan);
                i = end;
                continue;
            }
            // Too short for its transform byte: libjpeg ignores it, zune-jpeg refuses the file.
            0xEE if segment.starts_with(b"Adobe") && segment.len() < Metadata::ADOBE_LEN => {
                skipped.push(i..i + 2 + len);
            }
            0xE1 | 0xE2 | 0xEE => metadata.note(marker, segment, i + 4),
            _ => {}
        }
        i += 2 + len;
    }
    let frame = frame.ok_or_else(truncated)?;
    if scans.is_empty() {
        return Err(truncated());
    }
    Ok(Structure {
        frame,
        scans,
        metadata,
        skipped,
    })
}

/// `bytes` without the ranges `structure` lists as [`skipped`](Structure::skipped), read again
/// (the positions of the scans and segments move); `None` when there are none. The pixels are
/// the same: libjpeg skips these bytes too.
pub(crate) fn without_skipped(
    bytes: &[u8],
    structure: &Structure,
) -> Result<Option<(Vec<u8>, Structure)>, PipelineError> {
    if structure.skipped.is_empty() {
        return Ok(None);
    }
    let mut kept = Vec::with_capacity(bytes.len());
    let mut from = 0;
    for range in &structure.skipped {
        kept.extend_from_slice(bytes.get(from..range.start).ok_or_else(truncated)?);
        from = range.end;
    }
    kept.extend_from_slice(bytes.get(from..).ok_or_else(truncated)?);
    let structure = read(&kept)?;
    Ok(Some((kept, structure)))
}

fn parse_frame(marker: u8, segment: &[u8]) -> Result<Frame, PipelineError> {
    let bad = || corrupt("invalid frame header");
    let height = u16::from_be_bytes([
        *segment.get(1).ok_or_else(bad)?,
        *segment.get(2).ok_or_else(bad)?,
    ]);
    let width = u16::from_be_bytes([
        *segment.get(3).ok_or_else(bad)?,
        *segment.get(4).ok_or_else(bad)?,
    ]);
    let n = usize::from(*segment.get(5).ok_or_else(bad)?);
    if n == 0 || n > MAX_COMPONENTS {
        return Err(corrupt(format!("a frame of {n} components")));
    }
    let components = (0..n)
        .map(|k| {
            let id = *segment.get(6 + 3 * k)?;
            let sampling = *segment.get(7 + 3 * k)?;
            let (h, v) = (sampling >> 4, sampling & 0x0F);
            ((1..=4).contains(&h) && (1..=4).contains(&v)).then_some(Component { id, h, v })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    Ok(Frame {
        // SOF2 (Huffman) and SOF10 (arithmetic) are the progressive frames.
        progressive: matches!(marker, 0xC2 | 0xCA),
        width,
        height,
        components,
    })
}

fn parse_scan(segment: &[u8], start: usize, end: usize) -> Result<Scan, PipelineError> {
    let bad = || corrupt("invalid scan header");
    let n = usize::from(*segment.first().ok_or_else(bad)?);
    if n == 0 || n > MAX_COMPONENTS {
        return Err(bad());
    }
    let components = (0..n)
        .map(|k| segment.get(1 + 2 * k).copied())
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    let (ss, se, a) = (
        *segment.get(1 + 2 * n).ok_or_else(bad)?,
        *segment.get(2 + 2 * n).ok_or_else(bad)?,
        *segment.get(3 + 2 * n).ok_or_else(bad)?,
    );
    Ok(Scan {
        start,
        end,
        components,
        ss,
        se,
        ah: a >> 4,
        al: a & 0x0F,
    })
}

/// Where entropy-coded data starting at `from` ends: the next marker that is neither a stuffed
/// zero (FF 00) nor a restart marker.
pub(crate) fn entropy_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        i += memchr::memchr(0xFF, bytes.get(i..)?)?;
        match *bytes.get(i + 1)? {
            0x00 | 0xD0..=0xD7 | 0xFF => i += 1,
            _ => return Some(i),
        }
    }
}

/// Which bit each coefficient of each component is coded down to so far, as libjpeg tracks it
/// (`coef_bits`): `None` until a scan first codes it.
struct Progression {
    bits: [[Option<u8>; 64]; MAX_COMPONENTS],
}

impl Default for Progression {
    fn default() -> Self {
        Self {
            bits: [[None; 64]; MAX_COMPONENTS],
        }
    }
}

impl Progression {
    /// libjpeg's checks of a progressive scan (`start_pass_phuff_decoder`), its warnings
    /// included: a DC scan codes no AC coefficient, an AC scan one component and a band within
    /// the block; a refinement scan codes exactly the next bit; every coefficient's first scan
    /// starts at its top bit, and every later one continues where the previous stopped.
    fn check(&mut self, frame: &Frame, scan: &Scan) -> Result<(), PipelineError> {
        let bad = |why: &str| {
            corrupt(format!(
                "invalid progression (scan Ss={} Se={} Ah={} Al={}): {why}",
                scan.ss, scan.se, scan.ah, scan.al
            ))
        };
        let dc = scan.ss == 0;
        if dc && scan.se != 0 {
            return Err(bad("a DC scan with AC coefficients"));
        }
        if !dc && (scan.ss > scan.se || scan.se > 63 || scan.components.len() != 1) {
            return Err(bad(
                "an AC scan must code one component and a band of its block",
            ));
        }
        if scan.ah != 0 && scan.al + 1 != scan.ah {
            return Err(bad("a refinement must code exactly one more bit"));
        }
        if scan.al > 13 {
            return Err(bad("a point transform beyond 13 bits"));
        }
        for id in &scan.components {
            let index = frame
                .components
                .iter()
                .position(|c| c.id == *id)
                .ok_or_else(|| bad("a component the frame does not have"))?;
            let bits = &mut self.bits[index];
            if !dc && bits[0].is_none() {
                return Err(bad("AC coefficients before the DC coefficient"));
            }
            for bit in &mut bits[usize::from(scan.ss)..=usize::from(scan.se)] {
                if scan.ah != bit.unwrap_or(0) || (scan.ah == 0 && bit.is_some()) {
                    return Err(bad("bits coded twice or out of order"));
                }
                *bit = Some(scan.al);
            }
        }
        Ok(())
    }
}

/// A CMYK or YCCK JPEG's inks as stored (4 bytes a pixel), at full size, with its size: by
/// zune-jpeg (without libjpeg-turbo, or when it declines). zune-jpeg gives YCCK as it is coded:
/// its Y, Cb and Cr are turned back into the three inks here, as libjpeg does.
pub(crate) fn decode_cmyk(
    bytes: &[u8],
    limits: &Limits,
) -> Result<(u32, u32, Vec<u8>), PipelineError> {
    use zune_core::bytestream::ZCursor;
    use zune_core::colorspace::ColorSpace;
    use zune_core::options::DecoderOptions;
    let fail = |e: zune_jpeg::errors::DecodeErrors| corrupt(format!("zune-jpeg: {e:?}"));
    let side = usize::try_from(limits.max_pixels).unwrap_or(usize::MAX);
    let options = DecoderOptions::default()
        .set_max_width(side)
        .set_max_height(side)
        .jpeg_set_out_colorspace(ColorSpace::CMYK);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(fail)?;
    let ycck = decoder.input_colorspace() == Some(ColorSpace::YCCK);
    if ycck {
        decoder.set_options(options.jpeg_set_out_colorspace(ColorSpace::YCCK));
    }
    let info = decoder.info().ok_or_else(|| corrupt("no frame header"))?;
    let (width, height) = (u32::from(info.width), u32::from(info.height));
    let expected = u64::from(width) * u64::from(height) * 4;
    if decoder.output_buffer_size().map(|n| n as u64) != Some(expected) {
        return Err(corrupt(
            "a 4-component JPEG that does not decode to 4 samples a pixel",
        ));
    }
    let mut samples = decoder.decode().map_err(fail)?;
    if ycck {
        for px in samples.chunks_exact_mut(4) {
            let [r, g, b] = ycc_to_rgb(px[0], px[1], px[2]);
            px[..3].copy_from_slice(&[255 - r, 255 - g, 255 - b]);
        }
    }
    Ok((width, height, samples))
}

/// JFIF's YCbCr to RGB (full range, BT.601), rounded.
fn ycc_to_rgb(y: u8, cb: u8, cr: u8) -> [u8; 3] {
    let (y, cb, cr) = (f32::from(y), f32::from(cb) - 128.0, f32::from(cr) - 128.0);
    let clamp = |v: f32| v.round().clamp(0.0, 255.0) as u8;
    [
        clamp(y + 1.402 * cr),
        clamp(y - 0.344_136 * cb - 0.714_136 * cr),
        clamp(y + 1.772 * cb),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// A scan as (components, Ss, Se, Ah, Al).
    pub(crate) type ScanSpec = (&'static [u8], u8, u8, u8, u8);

    /// A JPEG's markers around scans given as (components, Ss, Se, Ah, Al), each with a few
    /// bytes of entropy-coded data: enough for [`read`], not for a decoder.
    pub(crate) fn jpeg_with_scans(progressive: bool, scans: &[ScanSpec]) -> Vec<u8> {
        let mut out = vec![0xFF, 0xD8];
        let sof = if progressive { 0xC2 } else { 0xC0 };
        out.extend_from_slice(&[0xFF, sof, 0, 17, 8, 0, 16, 0, 16, 3]);
        out.extend_from_slice(&[1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
        for (components, ss, se, ah, al) in scans {
            let len = 6 + 2 * components.len() as u16;
            out.extend_from_slice(&[0xFF, 0xDA]);
            out.extend_from_slice(&len.to_be_bytes());
            out.push(components.len() as u8);
            for c in *components {
                out.extend_from_slice(&[*c, 0]);
            }
            out.extend_from_slice(&[*ss, *se, (ah << 4) | al]);
            out.extend_from_slice(&[0x12, 0xFF, 0x00, 0x34]);
        }
        out.extend_from_slice(&[0xFF, 0xD9]);
        out
    }

    /// libjpeg's default progression for YCbCr (`jpeg_simple_progression`).
    pub(crate) const STANDARD: &[ScanSpec] = &[
        (&[1, 2, 3], 0, 0, 0, 1),
        (&[1], 1, 5, 0, 2),
        (&[3], 1, 63, 0, 1),
        (&[2], 1, 63, 0, 1),
        (&[1], 6, 63, 0, 2),
        (&[1], 1, 63, 2, 1),
        (&[1, 2, 3], 0, 0, 1, 0),
        (&[3], 1, 63, 1, 0),
        (&[2], 1, 63, 1, 0),
        (&[1], 1, 63, 1, 0),
    ];

    #[test]
    fn a_standard_progression_is_read_whole() {
        let bytes = jpeg_with_scans(true, STANDARD);
        let s = read(&bytes).unwrap();
        assert_eq!(s.scans.len(), 10);
        assert!(s.frame.progressive);
        assert_eq!((s.frame.width, s.frame.height), (16, 16));
        assert_eq!(s.frame.components[0], Component { id: 1, h: 2, v: 2 });
        assert_eq!(s.scans[9].end, bytes.len() - 2);
    }

    #[test]
    fn a_repeated_refinement_is_refused() {
        let mut scans = STANDARD.to_vec();
        scans.push((&[1], 1, 63, 1, 0));
        let err = read(&jpeg_with_scans(true, &scans)).unwrap_err();
        assert_eq!(err.kind(), "corrupt_image");
        assert!(err.to_string().contains("invalid progression"), "{err}");
    }

    #[test]
    fn bad_progressions_are_refused() {
        let cases: &[&[ScanSpec]] = &[
            &[(&[1], 1, 63, 0, 0)],                                // AC before DC
            &[(&[1, 2, 3], 0, 5, 0, 0)],                           // DC scan with AC
            &[(&[1, 2, 3], 0, 0, 0, 0), (&[1, 2], 1, 63, 0, 0)],   // AC of two components
            &[(&[1, 2, 3], 0, 0, 0, 1), (&[1, 2, 3], 0, 0, 2, 1)], // refines a bit not coded
            &[(&[1, 2, 3], 0, 0, 0, 0), (&[1, 2, 3], 0, 0, 0, 0)], // codes DC twice
            &[(&[9], 0, 0, 0, 0)],                                 // unknown component
        ];
        for scans in cases {
            let err = read(&jpeg_with_scans(true, scans)).unwrap_err();
            assert!(
                err.to_string().contains("invalid progression"),
                "{scans:?}: {err}"
            );
        }
    }

    #[test]
    fn more_scans_than_the_limit_are_refused_even_in_a_sequential_jpeg() {
        let scans = vec![(&[1u8][..], 0, 63, 0, 0); MAX_SCANS];
        assert_eq!(
            read(&jpeg_with_scans(false, &scans)).unwrap().scans.len(),
            MAX_SCANS
        );
        let scans = vec![(&[1u8][..], 0, 63, 0, 0); MAX_SCANS + 1];
        let err = read(&jpeg_with_scans(false, &scans)).unwrap_err();
        assert!(err.to_string().contains("more than 64 scans"), "{err}");
    }

    /// `jpeg` with `inserted` right after its start-of-image marker.
    pub(crate) fn with_after_soi(jpeg: &[u8], inserted: &[u8]) -> Vec<u8> {
        [&jpeg[..2], inserted, &jpeg[2..]].concat()
    }

    /// An APP14 `Adobe` segment cut one byte short (its transform byte left behind as a stray
    /// byte), as in Pillow's `truncated_app14.jpg`.
    pub(crate) const SHORT_ADOBE: &[u8] = b"\xFF\xEE\x00\x0DAdobe\x00\x64\x40\x00\x00\x00\x01";

    #[test]
    fn stray_bytes_and_a_short_adobe_segment_are_skipped() {
        let good = jpeg_with_scans(false, &[(&[1, 2, 3], 0, 63, 0, 0)]);
        assert!(read(&good).unwrap().skipped.is_empty());
        assert!(
            without_skipped(&good, &read(&good).unwrap())
                .unwrap()
                .is_none()
        );
        let odd = with_after_soi(&good, SHORT_ADOBE);
        let s = read(&odd).unwrap();
        // The segment (2 + 13 bytes), then the byte after it.
        assert_eq!(s.skipped, vec![2..17, 17..18]);
        assert!(!s.metadata.adobe);
        let (kept, again) = without_skipped(&odd, &s).unwrap().unwrap();
        assert_eq!(kept, good);
        assert_eq!(again, read(&good).unwrap());
        // A whole Adobe segment is kept, and noted.
        let adobe = with_after_soi(&good, b"\xFF\xEE\x00\x0EAdobe\x00\x64\x40\x00\x00\x00\x01");
        let s = read(&adobe).unwrap();
        assert!(s.skipped.is_empty() && s.metadata.adobe);
    }

    #[test]
    fn a_jpeg_without_its_end_marker_is_truncated() {
        let good = jpeg_with_scans(false, &[(&[1, 2, 3], 0, 63, 0, 0)]);
        assert!(read(&good).is_ok());
        for cut in [good.len() - 2, good.len() - 5, 12, 2] {
            let err = read(&good[..cut]).unwrap_err();
            assert!(err.to_string().contains("truncated"), "{cut}: {err}");
        }
    }
}
