//! Photos built to cost far more than their size, and large ordinary ones: what the hostile
//! input tests and the memory benchmarks send. Generated, never stored: the large ones are
//! megabytes. (Feature `hostile`.)

use std::io::Write;

/// Smooth colour with a little texture: JPEGs of it are photo-sized, PNGs compress well.
fn pixel(x: u32, y: u32, w: u32, h: u32) -> [u8; 3] {
    let texture = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)) >> 28;
    [
        ((x * 255 / w.max(1)) as u8).wrapping_add(texture as u8),
        (y * 255 / h.max(1)) as u8,
        (((x + y) * 127 / (w + h).max(1)) as u8).wrapping_add(64),
    ]
}

fn rgb(w: u32, h: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            out.extend_from_slice(&pixel(x, y, w, h));
        }
    }
    out
}

/// A `w`x`h` JPEG (4:2:0, quality 85), baseline or progressive; `scans` sets a progressive
/// JPEG's scans per component (2..=64).
pub fn jpeg(w: u32, h: u32, progressive: bool, scans: Option<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut out, 85);
    encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::F_2_2);
    encoder.set_progressive(progressive);
    if let Some(scans) = scans {
        encoder.set_progressive_scans(scans.clamp(2, 64));
    }
    let (Ok(w16), Ok(h16)) = (u16::try_from(w), u16::try_from(h)) else {
        return out;
    };
    // Encoding into a Vec cannot fail for sizes a u16 holds.
    let _ = encoder.encode(&rgb(w, h), w16, h16, jpeg_encoder::ColorType::Rgb);
    out
}

/// A `w`x`h` PNG, RGB or RGBA, 8 or 16 bits a sample, compressed fast.
pub fn png(w: u32, h: u32, alpha: bool, sixteen: bool) -> Vec<u8> {
    png_with(w, h, alpha, sixteen, |_| Ok(()))
}

fn png_with(
    w: u32,
    h: u32,
    alpha: bool,
    sixteen: bool,
    before_pixels: impl FnOnce(&mut png::Writer<&mut Vec<u8>>) -> Result<(), png::EncodingError>,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(if alpha {
        png::ColorType::Rgba
    } else {
        png::ColorType::Rgb
    });
    encoder.set_depth(if sixteen {
        png::BitDepth::Sixteen
    } else {
        png::BitDepth::Eight
    });
    encoder.set_compression(png::Compression::Fast);
    let Ok(mut writer) = encoder.write_header() else {
        return Vec::new();
    };
    if before_pixels(&mut writer).is_err() {
        return Vec::new();
    }
    let samples = if alpha { 4 } else { 3 };
    let bytes = if sixteen { 2 } else { 1 };
    let Ok(mut stream) = writer.stream_writer() else {
        return Vec::new();
    };
    let mut row = Vec::with_capacity((w * samples * bytes) as usize);
    for y in 0..h {
        row.clear();
        for x in 0..w {
            // No texture: a large PNG must stay under the body limit.
            let [r, g, b] = [(x * 255 / w) as u8, (y * 255 / h) as u8, 128];
            let a = if (x / 64 + y / 64) % 2 == 0 { 255 } else { 128 };
            let px: &[u8] = if alpha { &[r, g, b, a] } else { &[r, g, b] };
            for &s in px {
                row.push(s);
                if sixteen {
                    row.push(s ^ 0x5A);
                }
            }
        }
        if stream.write_all(&row).is_err() {
            return Vec::new();
        }
    }
    if stream.finish().is_err() {
        return Vec::new();
    }
    drop(writer);
    out
}

/// A small PNG carrying a text (`zTXt`) or ICC profile (`iCCP`) chunk of `inflated` zero
/// bytes, deflated to about a thousandth of that.
pub fn inflating_png(inflated: usize, iccp: bool) -> Vec<u8> {
    let mut data = b"bomb\0\0".to_vec();
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    let zeros = vec![0u8; 1 << 20];
    let mut left = inflated;
    while left > 0 {
        let n = left.min(zeros.len());
        if z.write_all(&zeros[..n]).is_err() {
            return Vec::new();
        }
        left -= n;
    }
    let Ok(compressed) = z.finish() else {
        return Vec::new();
    };
    data.extend_from_slice(&compressed);
    let kind = if iccp {
        png::chunk::iCCP
    } else {
        png::chunk::zTXt
    };
    png_with(64, 64, false, false, |w| w.write_chunk(kind, &data))
}

/// A progressive JPEG whose last scan is repeated until the file is `len` bytes: each repeat
/// is a pass over the whole image for a decoder that takes it.
pub fn scan_bomb(len: usize) -> Vec<u8> {
    let base = jpeg(1280, 1280, true, None);
    let Some(last) = base.windows(2).rposition(|w| w == [0xFF, 0xDA]) else {
        return base;
    };
    let end = base.len() - 2;
    let scan = base[last..end].to_vec();
    let mut out = base[..end].to_vec();
    while out.len() + scan.len() + 2 <= len {
        out.extend_from_slice(&scan);
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}

/// A small baseline JPEG whose frame header declares `w`x`h`: little data for a large image.
pub fn declared_huge_jpeg(w: u16, h: u16) -> Vec<u8> {
    let mut bytes = jpeg(64, 64, false, None);
    if let Some(sof) = bytes.windows(2).position(|m| m == [0xFF, 0xC0]) {
        bytes[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
        bytes[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    }
    bytes
}

/// A `w`x`h` GIF of `frames` frames.
pub fn many_frame_gif(w: u16, h: u16, frames: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let Ok(mut encoder) = gif::Encoder::new(&mut out, w, h, &[0, 0, 0, 255, 255, 255]) else {
        return Vec::new();
    };
    let pixels = vec![0u8; usize::from(w) * usize::from(h)];
    for i in 0..frames {
        let mut frame = gif::Frame::from_indexed_pixels(w, h, pixels.clone(), None);
        frame.delay = (i % 2) as u16;
        if encoder.write_frame(&frame).is_err() {
            return Vec::new();
        }
    }
    drop(encoder);
    out
}

/// An animated WebP whose canvas is the largest a WebP may declare (16384x16384, 268 MP),
/// with one tiny frame.
pub fn huge_canvas_webp() -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, fourcc: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(fourcc);
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
        if data.len() % 2 == 1 {
            out.push(0);
        }
    }
    let side = 16383u32.to_le_bytes();
    let mut vp8x = vec![0x02, 0, 0, 0];
    vp8x.extend_from_slice(&side[..3]);
    vp8x.extend_from_slice(&side[..3]);
    let mut body = b"WEBP".to_vec();
    chunk(&mut body, b"VP8X", &vp8x);
    chunk(&mut body, b"ANIM", &[255, 255, 255, 255, 0, 0]);
    // One 1x1 frame at the origin, lossless, one green pixel.
    let mut anmf = vec![0u8; 16];
    anmf[12..15].copy_from_slice(&[100, 0, 0]);
    chunk(
        &mut anmf,
        b"VP8L",
        &[
            0x2F, 0, 0, 0, 0x00, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xFE, 0x07, 0x00,
        ],
    );
    chunk(&mut body, b"ANMF", &anmf);
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// A small AVIF (48x32, from `tests/fixtures/orientation/`) whose every image size property
/// (`ispe`) is made to say `w`x`h`: a container that lies about its stream either way.
pub fn avif_declaring(w: u32, h: u32) -> Vec<u8> {
    let mut bytes = include_bytes!("../../tests/fixtures/orientation/avif-1.avif").to_vec();
    let mut at = 0;
    while let Some(found) = bytes[at..].windows(4).position(|b| b == b"ispe") {
        let ispe = at + found;
        // The type, then version and flags, then width and height.
        if let Some(size) = bytes.get_mut(ispe + 8..ispe + 16) {
            size[..4].copy_from_slice(&w.to_be_bytes());
            size[4..].copy_from_slice(&h.to_be_bytes());
        }
        at = ispe + 4;
    }
    bytes
}

/// A 7000x7000 AVIF of one colour (8-bit 4:2:0, 754 bytes): the largest photo the default pixel
/// limit takes.
pub fn flat_avif_49mp() -> Vec<u8> {
    include_bytes!("../../tests/fixtures/large/flat-49mp.avif").to_vec()
}

/// One photo of the hostile corpus.
pub struct Case {
    /// What it is, for messages.
    pub name: &'static str,
    /// A file name for it.
    pub file: &'static str,
    pub bytes: Vec<u8>,
    /// The error kind it is refused with (422), or `None` when it is taken (201).
    pub refused: Option<&'static str>,
}

/// The hostile corpus: every kind of photo built to cost far more than its size, each under the
/// 20 MB body limit, and how imgest answers it. The hostile-input test sends it to `imgest serve`;
/// `bench/process.sh` measures what each costs `imgest process`.
pub fn corpus() -> Vec<Case> {
    let case = |name, file, bytes, refused| Case {
        name,
        file,
        bytes,
        refused,
    };
    let corrupt = Some("corrupt_image");
    vec![
        case(
            "scan bomb, 1 MB",
            "scan-bomb-1mb.jpg",
            scan_bomb(1_000_000),
            corrupt,
        ),
        case(
            "scan bomb, at the body limit",
            "scan-bomb-20mb.jpg",
            scan_bomb(19_999_000),
            corrupt,
        ),
        case(
            "192 valid scans",
            "192-scans.jpg",
            jpeg(512, 512, true, Some(64)),
            corrupt,
        ),
        case(
            "49 MP progressive JPEG, 63 scans (the most taken)",
            "63-scans-49mp.jpg",
            jpeg(7000, 7000, true, Some(21)),
            None,
        ),
        case(
            "49 MP declared, 1 kB sent",
            "declared-49mp.jpg",
            declared_huge_jpeg(7000, 7000),
            corrupt,
        ),
        case(
            "49 MP 16-bit RGBA PNG",
            "rgba16-49mp.png",
            png(7000, 7000, true, true),
            None,
        ),
        case(
            "49 MP 8-bit RGBA PNG",
            "rgba8-49mp.png",
            png(7000, 7000, true, false),
            None,
        ),
        case(
            "1 GiB zTXt chunk",
            "ztxt-1gib.png",
            inflating_png(1 << 30, false),
            None,
        ),
        case(
            "1 GiB iCCP chunk",
            "iccp-1gib.png",
            inflating_png(1 << 30, true),
            None,
        ),
        case(
            "3000-frame GIF",
            "3000-frames.gif",
            many_frame_gif(200, 200, 3000),
            None,
        ),
        case(
            "268 MP WebP canvas",
            "canvas-268mp.webp",
            huge_canvas_webp(),
            Some("too_many_pixels"),
        ),
        case(
            "49 MP AVIF, 754 bytes",
            "flat-49mp.avif",
            flat_avif_49mp(),
            None,
        ),
        case(
            "AVIF declaring 16 MP, its stream 48x32",
            "declared-16mp.avif",
            avif_declaring(4000, 4000),
            corrupt,
        ),
        case(
            "AVIF declaring 8x8, its stream 48x32 (refused before the decoder allocates)",
            "understated.avif",
            avif_declaring(8, 8),
            corrupt,
        ),
        case(
            "AVIF declaring 268 MP",
            "declared-268mp.avif",
            avif_declaring(16384, 16384),
            Some("too_many_pixels"),
        ),
    ]
}
