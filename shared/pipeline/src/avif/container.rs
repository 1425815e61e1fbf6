//! An AVIF's container (HEIF on ISO base media boxes), read without decoding: the primary
//! image's coded data (one AV1 image, or a grid of them), its size, its alpha image, its
//! orientation (`irot`, `imir`) and its colour (`colr`: an ICC profile or coding points).
//!
//! Written here rather than taken from a crate: the parsers that read `irot`, `imir` and
//! `colr` (mp4parse, Firefox's) hand some of them out as raw pointers, which this workspace does
//! not dereference (`unsafe` is forbidden), and are under the MPL. What is read is a small part
//! of the format, every length checked against the bytes it lies in; anything else is refused
//! as corrupt or unsupported, never guessed.

use std::borrow::Cow;

use crate::PipelineError;

/// The most tiles a grid image may have (a 48 MP photo in 512x512 tiles has about 200).
pub(crate) const MAX_TILES: usize = 1024;

/// The most boxes in one list, items in the file, extents of all items together and item
/// references of all kinds together: room for two full grids (image and alpha) and their
/// metadata, and a bound on what a hostile file makes the parser hold (a few megabytes at
/// most), whatever the counts it declares.
const MAX_BOXES: usize = 16 * MAX_TILES;
const MAX_ITEMS: usize = 4 * MAX_TILES;
const MAX_EXTENTS: usize = 8 * MAX_TILES;
const MAX_REFERENCES: usize = 16 * MAX_TILES;

fn corrupt(why: impl Into<String>) -> PipelineError {
    PipelineError::CorruptImage(format!("AVIF: {}", why.into()))
}

fn unsupported(why: &str) -> PipelineError {
    PipelineError::UnsupportedFormat(format!("AVIF: {why}"))
}

/// What the container says about the photo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Avif<'a> {
    /// The image's size, as stored (before the orientation).
    pub width: u32,
    pub height: u32,
    pub image: Coded<'a>,
    /// The alpha channel, coded as an image of its own (the same size).
    pub alpha: Option<Coded<'a>>,
    /// The EXIF orientation (1-8) that `irot` and `imir` amount to.
    pub orientation: u8,
    /// The ICC profile (`colr` `prof` or `rICC`).
    pub icc: Option<&'a [u8]>,
    /// The coding points (`colr` `nclx`).
    pub nclx: Option<Nclx>,
}

/// One coded image: a single AV1 frame, or a grid of tiles (each one AV1 frame of `tile`'s
/// size, row by row) cut to the image's size once put together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Coded<'a> {
    Single(Cow<'a, [u8]>),
    Grid {
        columns: u32,
        tile: (u32, u32),
        tiles: Vec<Cow<'a, [u8]>>,
    },
}

/// `colr` `nclx`: ITU-T H.273 coding points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Nclx {
    pub primaries: u16,
    pub transfer: u16,
    pub matrix: u16,
    pub full_range: bool,
}

/// A box: its type and its content (after the header).
struct Box<'a> {
    kind: [u8; 4],
    body: &'a [u8],
    /// Where `body` starts in the file (for `idat` and `mdat` offsets).
    at: usize,
}

/// Reads bytes in order, every read checked.
#[derive(Clone)]
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PipelineError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or_else(|| corrupt("a length overflows"))?;
        let out = self
            .bytes
            .get(self.pos..end)
            .ok_or_else(|| corrupt("a box is cut short"))?;
        self.pos = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, PipelineError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, PipelineError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, PipelineError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An unsigned number of `size` bytes (0, 4 or 8 in `iloc`; 0 reads as 0).
    fn sized(&mut self, size: u8) -> Result<u64, PipelineError> {
        match size {
            0 => Ok(0),
            4 => self.u32().map(u64::from),
            8 => {
                let b = self.take(8)?;
                Ok(u64::from_be_bytes([
                    b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                ]))
            }
            _ => Err(corrupt(format!("a field of {size} bytes"))),
        }
    }

    /// An item id: 16 bits, or 32 when `wide`.
    fn id(&mut self, wide: bool) -> Result<u32, PipelineError> {
        if wide {
            self.u32()
        } else {
            self.u16().map(u32::from)
        }
    }

    /// A full box's version and flags.
    fn full(&mut self) -> Result<(u8, u32), PipelineError> {
        let v = self.u32()?;
        Ok(((v >> 24) as u8, v & 0x00FF_FFFF))
    }

    fn done(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// The next box of the sequence; `at` is where `bytes` starts in the file.
    fn next_box(&mut self, at: usize) -> Result<Box<'a>, PipelineError> {
        let start = self.pos;
        let size = self.u32()?;
        let kind: [u8; 4] = self
            .take(4)?
            .try_into()
            .map_err(|_| corrupt("a box type"))?;
        let size = match size {
            0 => (self.bytes.len() - start) as u64,
            1 => self.sized(8)?,
            n => u64::from(n),
        };
        let header = self.pos - start;
        let size = usize::try_from(size).map_err(|_| corrupt("a box is too large"))?;
        if size < header {
            return Err(corrupt("a box shorter than its header"));
        }
        let body = self.take(size - header)?;
        Ok(Box {
            kind,
            body,
            at: at + start + header,
        })
    }
}

/// Every box in `bytes`, which starts at `at` in the file.
fn boxes(bytes: &[u8], at: usize) -> Result<Vec<Box<'_>>, PipelineError> {
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    while !r.done() {
        if out.len() >= MAX_BOXES {
            return Err(unsupported("more boxes in one list than a photo has"));
        }
        out.push(r.next_box(at)?);
    }
    Ok(out)
}

fn find<'a, 'b>(boxes: &'b [Box<'a>], kind: &[u8; 4]) -> Option<&'b Box<'a>> {
    boxes.iter().find(|b| &b.kind == kind)
}

/// Whether `bytes` start with an `ftyp` box naming AVIF (`avif`, or `avis` for a sequence)
/// as its major or a compatible brand.
pub(crate) fn is_avif(bytes: &[u8]) -> bool {
    brands(bytes).is_some_and(|brands| brands.iter().any(|b| b == b"avif" || b == b"avis"))
}

/// The major and compatible brands of the `ftyp` box at the start of `bytes`.
pub(crate) fn brands(bytes: &[u8]) -> Option<Vec<[u8; 4]>> {
    let mut r = Reader::new(bytes);
    let ftyp = r.next_box(0).ok()?;
    if &ftyp.kind != b"ftyp" || ftyp.body.len() < 8 {
        return None;
    }
    let mut brands = vec![ftyp.body[..4].try_into().ok()?];
    brands.extend(
        ftyp.body[8..]
            .chunks_exact(4)
            .filter_map(|b| <[u8; 4]>::try_from(b).ok()),
    );
    Some(brands)
}

/// A metadata item of the file (`Exif`, `mime`: XMP, `uri `) or a top-level `uuid` box, as the
/// byte ranges of its data in the file (a stored original blanks them: `strip/avif.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetadataItem {
    pub kind: [u8; 4],
    pub extents: Vec<std::ops::Range<usize>>,
}

/// Every metadata item of the file and every top-level `uuid` box (see [`MetadataItem`]), with
/// each extent checked to lie in the file.
pub(crate) fn metadata_items(bytes: &[u8]) -> Result<Vec<MetadataItem>, PipelineError> {
    let top = boxes(bytes, 0)?;
    let mut out: Vec<MetadataItem> = top
        .iter()
        .filter(|b| &b.kind == b"uuid")
        .map(|b| MetadataItem {
            kind: b.kind,
            extents: std::iter::once(b.at..b.at + b.body.len()).collect(),
        })
        .collect();
    let Some(meta) = find(&top, b"meta") else {
        return Ok(out);
    };
    let mut r = Reader::new(meta.body);
    r.full()?;
    let children = boxes(&meta.body[4..], meta.at + 4)?;
    let types = match find(&children, b"iinf") {
        Some(iinf) => item_types(iinf)?,
        None => return Ok(out),
    };
    let locations = match find(&children, b"iloc") {
        Some(iloc) => locations(iloc.body)?,
        None => return Ok(out),
    };
    let idat = find(&children, b"idat");
    for (id, kind) in types {
        if !matches!(&kind, b"Exif" | b"mime" | b"uri ") {
            continue;
        }
        let Some(loc) = locations.iter().find(|l| l.id == id) else {
            continue;
        };
        let (origin, limit) = match (loc.method, idat) {
            (0, _) => (0u64, bytes.len() as u64),
            (1, Some(idat)) => (idat.at as u64, (idat.at + idat.body.len()) as u64),
            _ => return Err(unsupported("metadata built from other items")),
        };
        let mut extents = Vec::with_capacity(loc.extents.len());
        for &(offset, len) in &loc.extents {
            let start = origin
                .checked_add(loc.base)
                .and_then(|v| v.checked_add(offset))
                .ok_or_else(|| corrupt("an extent's offset overflows"))?;
            // A length of 0 is "to the end" of the data it lies in.
            let end = if len == 0 {
                limit
            } else {
                start
                    .checked_add(len)
                    .ok_or_else(|| corrupt("an extent's length overflows"))?
            };
            if end > limit || start > end {
                return Err(corrupt("a metadata item beyond the file"));
            }
            extents.push(start as usize..end as usize);
        }
        out.push(MetadataItem { kind, extents });
    }
    Ok(out)
}

/// One item's place in the file (`iloc`).
struct Location {
    id: u32,
    /// 0: offsets into the file; 1: into the `idat` box.
    method: u8,
    base: u64,
    extents: Vec<(u64, u64)>,
}

/// The item properties of `ipco`, in order (they are referred to by index from 1).
enum Property<'a> {
    Size(u32, u32),
    Rotation(u8),
    Mirror(u8),
    Icc(&'a [u8]),
    Nclx(Nclx),
    Alpha,
    Other,
}

/// Parses the container (see the module's documentation).
pub(crate) fn parse(bytes: &[u8]) -> Result<Avif<'_>, PipelineError> {
    if !is_avif(bytes) {
        return Err(unsupported("not an AVIF file (no avif brand)"));
    }
    let top = boxes(bytes, 0)?;
    let meta =
        find(&top, b"meta").ok_or_else(|| unsupported("no still image (an animation only)"))?;
    let mut r = Reader::new(meta.body);
    r.full()?;
    let children = boxes(&meta.body[4..], meta.at + 4)?;
    let primary = {
        let pitm = find(&children, b"pitm").ok_or_else(|| corrupt("no primary item"))?;
        let mut r = Reader::new(pitm.body);
        let (version, _) = r.full()?;
        r.id(version > 0)?
    };
    let types = item_types(find(&children, b"iinf").ok_or_else(|| corrupt("no item list"))?)?;
    let locations = match find(&children, b"iloc") {
        Some(iloc) => locations(iloc.body)?,
        None => return Err(corrupt("no item locations")),
    };
    let references = match find(&children, b"iref") {
        Some(iref) => references(iref.body)?,
        None => Vec::new(),
    };
    let (properties, associations) = match find(&children, b"iprp") {
        Some(iprp) => properties(iprp)?,
        None => return Err(corrupt("no item properties")),
    };
    let idat = find(&children, b"idat");
    let data = |id: u32| -> Result<Cow<'_, [u8]>, PipelineError> {
        let loc = locations
            .iter()
            .find(|l| l.id == id)
            .ok_or_else(|| corrupt(format!("item {id} has no location")))?;
        let (source, origin) = match loc.method {
            0 => (bytes, 0u64),
            1 => {
                let idat = idat.ok_or_else(|| corrupt("an item in a missing idat box"))?;
                (idat.body, 0)
            }
            _ => return Err(unsupported("items built from other items")),
        };
        let mut parts = Vec::with_capacity(loc.extents.len());
        let mut total = 0u64;
        for &(offset, len) in &loc.extents {
            // Extents are parts of the file: together no longer than it (overlapping ones
            // would make a copy larger than the file).
            total = total.saturating_add(len);
            if total > source.len() as u64 {
                return Err(corrupt("an item's extents longer than the file"));
            }
            let start = origin
                .checked_add(loc.base)
                .and_then(|v| v.checked_add(offset))
                .ok_or_else(|| corrupt("an extent's offset overflows"))?;
            let end = start
                .checked_add(len)
                .ok_or_else(|| corrupt("an extent's length overflows"))?;
            let (start, end) = (
                usize::try_from(start).map_err(|_| corrupt("an extent beyond the file"))?,
                usize::try_from(end).map_err(|_| corrupt("an extent beyond the file"))?,
            );
            parts.push(
                source
                    .get(start..end)
                    .ok_or_else(|| corrupt("an extent beyond the file"))?,
            );
        }
        Ok(match parts.as_slice() {
            [one] => Cow::Borrowed(*one),
            _ => Cow::Owned(parts.concat()),
        })
    };
    let props_of = |id: u32| -> Vec<&Property<'_>> {
        associations
            .iter()
            .filter(|(item, _)| *item == id)
            .filter_map(|(_, index)| properties.get(usize::from(*index).checked_sub(1)?))
            .collect()
    };
    let size_of = |id: u32| -> Option<(u32, u32)> {
        props_of(id).into_iter().find_map(|p| match p {
            Property::Size(w, h) => Some((*w, *h)),
            _ => None,
        })
    };
    let coded = |id: u32| -> Result<(Coded<'_>, u32, u32), PipelineError> {
        let kind = types
            .iter()
            .find(|(item, _)| *item == id)
            .map(|(_, kind)| kind)
            .ok_or_else(|| corrupt(format!("item {id} is not listed")))?;
        match kind {
            b"av01" => {
                let (w, h) =
                    size_of(id).ok_or_else(|| corrupt("an image without its size (ispe)"))?;
                Ok((Coded::Single(data(id)?), w, h))
            }
            b"grid" => {
                let grid = data(id)?;
                let mut r = Reader::new(&grid);
                let (_, flags) = (r.u8()?, r.u8()?);
                let rows = u32::from(r.u8()?) + 1;
                let columns = u32::from(r.u8()?) + 1;
                let wide = flags & 1 == 1;
                let (width, height) = if wide {
                    (r.u32()?, r.u32()?)
                } else {
                    (u32::from(r.u16()?), u32::from(r.u16()?))
                };
                let ids: Vec<u32> = references
                    .iter()
                    .filter(|(kind, from, _)| kind == b"dimg" && *from == id)
                    .flat_map(|(_, _, to)| to.iter().copied())
                    .collect();
                let count = usize::try_from(rows * columns).unwrap_or(usize::MAX);
                if count > MAX_TILES {
                    return Err(unsupported("a grid of more than 1024 tiles"));
                }
                if ids.len() != count {
                    return Err(corrupt("a grid whose tiles are not all there"));
                }
                let mut tiles = Vec::with_capacity(count);
                let mut tile = None;
                // What the tiles of several extents are copied into: no more than the file.
                let mut copied = 0usize;
                for id in ids {
                    let is_av1 = types
                        .iter()
                        .any(|(item, kind)| *item == id && kind == b"av01");
                    if !is_av1 {
                        return Err(unsupported("a grid of other than AV1 tiles"));
                    }
                    let size =
                        size_of(id).ok_or_else(|| corrupt("a tile without its size (ispe)"))?;
                    if *tile.get_or_insert(size) != size {
                        return Err(corrupt("grid tiles of different sizes"));
                    }
                    let data = data(id)?;
                    if let Cow::Owned(copy) = &data {
                        copied = copied.saturating_add(copy.len());
                        if copied > bytes.len() {
                            return Err(corrupt("grid tiles longer than the file"));
                        }
                    }
                    tiles.push(data);
                }
                // The tiles cover the image, without a whole row or column to spare.
                let (tw, th) = tile.unwrap_or((0, 0));
                let covers = |tile: u32, count: u32, side: u32| {
                    let (tile, count, side) = (u64::from(tile), u64::from(count), u64::from(side));
                    tile * count >= side && tile * (count - 1) < side
                };
                if !covers(tw, columns, width) || !covers(th, rows, height) {
                    return Err(corrupt("grid tiles that do not cover the image"));
                }
                Ok((
                    Coded::Grid {
                        columns,
                        tile: (tw, th),
                        tiles,
                    },
                    width,
                    height,
                ))
            }
            other => Err(unsupported(&format!(
                "a primary image of type {:?}",
                String::from_utf8_lossy(other)
            ))),
        }
    };
    let (image, width, height) = coded(primary)?;
    // The alpha image: an auxiliary image of the primary one whose auxC says it is alpha.
    let alpha_id = references
        .iter()
        .filter(|(kind, _, to)| kind == b"auxl" && to.contains(&primary))
        .map(|(_, from, _)| *from)
        .find(|id| props_of(*id).iter().any(|p| matches!(p, Property::Alpha)));
    let alpha = match alpha_id {
        Some(id) => {
            let (alpha, w, h) = coded(id)?;
            if (w, h) != (width, height) {
                return Err(unsupported("an alpha image of another size"));
            }
            Some(alpha)
        }
        None => None,
    };
    let props = props_of(primary);
    let rotation = props.iter().find_map(|p| match p {
        Property::Rotation(a) => Some(*a),
        _ => None,
    });
    let mirror = props.iter().find_map(|p| match p {
        Property::Mirror(axis) => Some(*axis),
        _ => None,
    });
    Ok(Avif {
        width,
        height,
        image,
        alpha,
        orientation: orientation(rotation.unwrap_or(0), mirror),
        icc: props.iter().find_map(|p| match p {
            Property::Icc(icc) => Some(*icc),
            _ => None,
        }),
        nclx: props.iter().find_map(|p| match p {
            Property::Nclx(nclx) => Some(*nclx),
            _ => None,
        }),
    })
}

/// The EXIF orientation of `irot` (`angle` quarter turns anticlockwise) followed by `imir`
/// (axis 0: top and bottom exchanged; 1: left and right), as MIAF orders them.
fn orientation(angle: u8, mirror: Option<u8>) -> u8 {
    match (angle & 3, mirror) {
        (0, None) => 1,
        (0, Some(0)) | (2, Some(1)) => 4,
        (0, Some(_)) | (2, Some(0)) => 2,
        (1, None) => 8,
        (1, Some(0)) | (3, Some(1)) => 5,
        (1, Some(_)) | (3, Some(0)) => 7,
        (2, None) => 3,
        (3, None) => 6,
        _ => 1,
    }
}

/// `iinf`: each item's id and type.
fn item_types(iinf: &Box<'_>) -> Result<Vec<(u32, [u8; 4])>, PipelineError> {
    let mut r = Reader::new(iinf.body);
    let (version, _) = r.full()?;
    let _count = if version == 0 {
        u32::from(r.u16()?)
    } else {
        r.u32()?
    };
    let mut out = Vec::new();
    for infe in boxes(&iinf.body[r.pos..], 0)? {
        if &infe.kind != b"infe" {
            continue;
        }
        let mut r = Reader::new(infe.body);
        let (version, _) = r.full()?;
        if version < 2 {
            continue;
        }
        let id = r.id(version > 2)?;
        r.u16()?;
        let kind: [u8; 4] = r.take(4)?.try_into().map_err(|_| corrupt("an item type"))?;
        out.push((id, kind));
    }
    Ok(out)
}

/// `iloc`: where each item's data lies.
fn locations(body: &[u8]) -> Result<Vec<Location>, PipelineError> {
    let mut r = Reader::new(body);
    let (version, _) = r.full()?;
    let sizes = r.u16()?;
    let (offset_size, length_size, base_size) = (
        (sizes >> 12) as u8,
        ((sizes >> 8) & 0xF) as u8,
        ((sizes >> 4) & 0xF) as u8,
    );
    let index_size = if version > 0 { (sizes & 0xF) as u8 } else { 0 };
    let count = if version < 2 {
        u32::from(r.u16()?)
    } else {
        r.u32()?
    };
    if count as usize > MAX_ITEMS {
        return Err(unsupported("more items than a photo has"));
    }
    let mut out = Vec::new();
    let mut all_extents = 0usize;
    for _ in 0..count {
        let id = r.id(version == 2)?;
        let method = if version > 0 {
            (r.u16()? & 0xF) as u8
        } else {
            0
        };
        r.u16()?;
        let base = r.sized(base_size)?;
        let extents = r.u16()?;
        all_extents += usize::from(extents);
        if all_extents > MAX_EXTENTS {
            return Err(unsupported("more item extents than a photo has"));
        }
        let mut list = Vec::new();
        for _ in 0..extents {
            r.sized(index_size)?;
            let offset = r.sized(offset_size)?;
            let len = r.sized(length_size)?;
            list.push((offset, len));
        }
        out.push(Location {
            id,
            method,
            base,
            extents: list,
        });
    }
    Ok(out)
}

/// One item reference: its type, the item it is from and the items it is to.
type Reference = ([u8; 4], u32, Vec<u32>);

/// `iref`: every reference.
fn references(body: &[u8]) -> Result<Vec<Reference>, PipelineError> {
    let mut r = Reader::new(body);
    let (version, _) = r.full()?;
    let mut out = Vec::new();
    let mut all = 0usize;
    for reference in boxes(body.get(4..).unwrap_or_default(), 0)? {
        let mut r = Reader::new(reference.body);
        let from = r.id(version > 0)?;
        let count = r.u16()?;
        all += usize::from(count);
        if all > MAX_REFERENCES {
            return Err(unsupported("more item references than a photo has"));
        }
        let to = (0..count)
            .map(|_| r.id(version > 0))
            .collect::<Result<Vec<_>, _>>()?;
        out.push((reference.kind, from, to));
    }
    Ok(out)
}

/// `iprp`: the properties (`ipco`) and which item has which (`ipma`: item, index from 1).
#[allow(clippy::type_complexity)]
fn properties<'a>(iprp: &Box<'a>) -> Result<(Vec<Property<'a>>, Vec<(u32, u16)>), PipelineError> {
    let children = boxes(iprp.body, iprp.at)?;
    let ipco = find(&children, b"ipco").ok_or_else(|| corrupt("no item properties"))?;
    let mut properties = Vec::new();
    for p in boxes(ipco.body, ipco.at)? {
        let mut r = Reader::new(p.body);
        properties.push(match &p.kind {
            b"ispe" => {
                r.full()?;
                Property::Size(r.u32()?, r.u32()?)
            }
            b"irot" => Property::Rotation(r.u8()? & 3),
            b"imir" => Property::Mirror(r.u8()? & 1),
            b"colr" => match r.take(4)? {
                b"nclx" => Property::Nclx(Nclx {
                    primaries: r.u16()?,
                    transfer: r.u16()?,
                    matrix: r.u16()?,
                    full_range: r.u8()? & 0x80 != 0,
                }),
                b"prof" | b"rICC" => Property::Icc(&p.body[4..]),
                _ => Property::Other,
            },
            b"auxC" => {
                r.full()?;
                let urn = &p.body[4..];
                let urn = urn.split(|&b| b == 0).next().unwrap_or(&[]);
                match urn {
                    b"urn:mpeg:mpegB:cicp:systems:auxiliary:alpha"
                    | b"urn:mpeg:hevc:2015:auxid:1" => Property::Alpha,
                    _ => Property::Other,
                }
            }
            _ => Property::Other,
        });
    }
    let mut associations = Vec::new();
    for ipma in children.iter().filter(|b| &b.kind == b"ipma") {
        let mut r = Reader::new(ipma.body);
        let (version, flags) = r.full()?;
        let count = r.u32()?;
        if count as usize > MAX_ITEMS {
            return Err(unsupported("properties for more items than a photo has"));
        }
        for _ in 0..count {
            let item = r.id(version > 0)?;
            let n = r.u8()?;
            for _ in 0..n {
                let index = if flags & 1 == 1 {
                    r.u16()? & 0x7FFF
                } else {
                    u16::from(r.u8()? & 0x7F)
                };
                associations.push((item, index));
            }
        }
    }
    Ok((properties, associations))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../tests/fixtures/orientation/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn the_orientations_of_irot_and_imir_are_read() {
        for n in 1..=8u8 {
            let bytes = fixture(&format!("avif-{n}.avif"));
            let avif = parse(&bytes).unwrap();
            assert_eq!(avif.orientation, n, "avif-{n}");
            // Stored turned by a quarter for 5 to 8.
            let stored = if n >= 5 { (32, 48) } else { (48, 32) };
            assert_eq!((avif.width, avif.height), stored, "avif-{n}");
            assert!(matches!(avif.image, Coded::Single(ref d) if !d.is_empty()));
            assert_eq!(avif.alpha, None);
        }
    }

    #[test]
    fn brands_tell_avif_from_heif() {
        let avif = fixture("avif-1.avif");
        assert!(is_avif(&avif));
        let mut heic = avif.clone();
        heic[8..12].copy_from_slice(b"heic");
        // Its compatible brands still say avif.
        assert!(is_avif(&heic));
        assert!(!is_avif(b"\0\0\0\x14ftypheic\0\0\0\0mif1"));
        assert!(!is_avif(b"\0\0\0\x14ftyp"));
    }

    /// A box of `kind` around `body`.
    fn boxed(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        [&(8 + body.len() as u32).to_be_bytes()[..], kind, body].concat()
    }

    /// An AVIF whose `meta` holds a primary item, an empty item list and `iloc`.
    fn with_iloc(iloc: &[u8]) -> Vec<u8> {
        let meta = [
            &[0u8; 4][..],
            &boxed(b"pitm", &[0, 0, 0, 0, 0, 1]),
            &boxed(b"iinf", &[0, 0, 0, 0, 0, 0]),
            &boxed(b"iloc", iloc),
        ]
        .concat();
        [boxed(b"ftyp", b"avif\0\0\0\0avif"), boxed(b"meta", &meta)].concat()
    }

    #[test]
    fn declared_counts_are_bounded_before_anything_is_held_for_them() {
        // Version 2: a u32 count of items, each of zero-sized fields but its id.
        let mut items = vec![2, 0, 0, 0, 0, 0];
        items.extend_from_slice(&u32::MAX.to_be_bytes());
        let err = parse(&with_iloc(&items)).unwrap_err();
        assert_eq!(err.kind(), "unsupported_format", "{err}");
        // Version 1, two items of 65,535 extents whose offsets and lengths take no bytes.
        let mut extents = vec![1, 0, 0, 0, 0, 0, 0, 2];
        for id in [1u8, 2] {
            extents.extend_from_slice(&[0, id, 0, 0, 0, 0, 0xFF, 0xFF]);
        }
        let err = parse(&with_iloc(&extents)).unwrap_err();
        assert_eq!(err.kind(), "unsupported_format", "{err}");
        // A list of more boxes than any photo has.
        let many = [0u8, 0, 0, 8, b'f', b'r', b'e', b'e'].repeat(MAX_BOXES + 1);
        let file = [boxed(b"ftyp", b"avif\0\0\0\0avif"), many].concat();
        assert_eq!(parse(&file).unwrap_err().kind(), "unsupported_format");
    }

    #[test]
    fn every_cut_of_a_file_is_refused_not_misread() {
        let bytes = fixture("avif-6.avif");
        assert!(parse(&bytes).is_ok());
        // Every length, the coded data's included, is checked against the bytes there are:
        // no cut reads as a smaller photo, each is refused with its kind.
        for cut in 0..bytes.len() {
            match parse(&bytes[..cut]) {
                Ok(avif) => panic!("a cut at {cut} of {} parsed: {avif:?}", bytes.len()),
                Err(e) => assert!(
                    ["corrupt_image", "unsupported_format"].contains(&e.kind()),
                    "{cut}: {e}"
                ),
            }
        }
    }
}
