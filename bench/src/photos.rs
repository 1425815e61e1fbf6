//! Photos the crawl benchmarks serve from their partner hosts.

use anyhow::Result;

/// A 16×16 JPEG of its own colour with its number in an APP15 segment: a distinct image per
/// `n` that costs next to nothing to decode and resize.
pub fn tiny_jpeg(n: u64) -> Result<Vec<u8>> {
    let colour = [(n % 251) as u8, (n / 251 % 251) as u8, (n * 7 % 253) as u8];
    let pixels: Vec<u8> = colour.iter().copied().cycle().take(16 * 16 * 3).collect();
    let mut jpeg = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut jpeg, 80);
    encoder.add_app_segment(15, format!("imgest-bench-{n}").into_bytes())?;
    encoder.encode(&pixels, 16, 16, jpeg_encoder::ColorType::Rgb)?;
    Ok(jpeg)
}

/// One kind of photo in [`PhotoMix`]: its format and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jpeg,
    Png,
    WebP,
}

/// A photo of the mix, ready to be made distinct copy by copy.
struct Template {
    format: Format,
    width: u32,
    height: u32,
    /// JPEG and PNG: the file; WebP: the JPEG it is made from, copy by copy (a WebP has no
    /// segment a copy can be told apart by).
    bytes: Vec<u8>,
}

/// What partners serve a marketplace, by count: mostly JPEG from 0.3 to 24 megapixels and
/// from about 0.1 to 10 MB, with some PNG and lossy WebP. Made once from the sample photos
/// (scaled, with a little grain so that they compress as camera photos do), then copied:
/// each copy distinct in its bytes and, for WebP, in a pixel.
pub struct PhotoMix {
    templates: Vec<Template>,
    webp: imgest_pipeline::Pipeline,
}

/// (format, width, height) of the mix's photos, one each: the mix repeats in this order.
const MIX: [(Format, u32, u32); 10] = [
    (Format::Jpeg, 640, 480),
    (Format::WebP, 640, 480),
    (Format::Jpeg, 1152, 864),
    (Format::Png, 1152, 864),
    (Format::Jpeg, 1632, 1224),
    (Format::WebP, 1224, 1632),
    (Format::Jpeg, 2592, 1944),
    (Format::Jpeg, 3000, 4000),
    (Format::Jpeg, 4000, 3000),
    (Format::Jpeg, 6000, 4000),
];

impl PhotoMix {
    pub fn new(samples: &[&[u8]]) -> Result<Self> {
        Self::of(samples, &MIX)
    }

    /// A mix of these kinds (the tests' is small).
    fn of(samples: &[&[u8]], kinds: &[(Format, u32, u32)]) -> Result<Self> {
        let mut templates = Vec::new();
        for (i, &(format, width, height)) in kinds.iter().enumerate() {
            let sample = image::load_from_memory(samples[i % samples.len()])?.to_rgb8();
            let mut pixels = image::imageops::resize(
                &sample,
                width,
                height,
                image::imageops::FilterType::Triangle,
            );
            // Grain: a camera photo's noise, which an upscaled sample lacks.
            let mut state = 0x9E37_79B9_u32 ^ i as u32;
            for p in pixels.iter_mut() {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                *p = p.saturating_add((state % 25) as u8).saturating_sub(12);
            }
            let bytes = match format {
                Format::Jpeg | Format::WebP => jpeg(&pixels, 90)?,
                Format::Png => {
                    let mut out = std::io::Cursor::new(Vec::new());
                    pixels.write_to(&mut out, image::ImageFormat::Png)?;
                    out.into_inner()
                }
            };
            templates.push(Template {
                format,
                width,
                height,
                bytes,
            });
        }
        let spec: imgest_core::domain::VariantSpec = "webp=fit:10000x10000:webp:80".parse()?;
        let webp = imgest_pipeline::Pipeline::new(imgest_pipeline::PipelineConfig {
            variants: imgest_core::domain::VariantSet::new(vec![spec])?,
            ..Default::default()
        });
        Ok(Self { templates, webp })
    }

    /// The `n`th photo of the mix, distinct from every other `n` (`tag` names it in its
    /// bytes), with its format.
    pub fn photo(&self, n: usize, tag: &str) -> Result<(Format, Vec<u8>)> {
        let t = &self.templates[n % self.templates.len()];
        let bytes = match t.format {
            Format::Jpeg => jpeg_comment(&t.bytes, tag),
            Format::Png => png_text(&t.bytes, tag),
            Format::WebP => {
                let mut pixels = image::load_from_memory(&t.bytes)?.to_rgb8();
                let x = (n as u32 / self.templates.len() as u32) % t.width;
                let y = (n as u32 / self.templates.len() as u32 / t.width) % t.height;
                let p = pixels.get_pixel_mut(x, y);
                p.0[0] = p.0[0].wrapping_add(97);
                let processed = self.webp.process(&jpeg(&pixels, 95)?)?;
                processed
                    .variants
                    .into_iter()
                    .next()
                    .map(|v| v.bytes)
                    .ok_or_else(|| anyhow::anyhow!("no WebP made"))?
            }
        };
        Ok((t.format, bytes))
    }

    /// Width × height and size of each kind, for the benchmark's report.
    pub fn describe(&self) -> String {
        self.templates
            .iter()
            .map(|t| {
                format!(
                    "{:?} {}x{} ({:.1} MP, {:.2} MB)",
                    t.format,
                    t.width,
                    t.height,
                    f64::from(t.width) * f64::from(t.height) / 1e6,
                    t.bytes.len() as f64 / 1e6
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn jpeg(pixels: &image::RgbImage, quality: u8) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let (w, h) = pixels.dimensions();
    jpeg_encoder::Encoder::new(&mut out, quality).encode(
        pixels.as_raw(),
        u16::try_from(w)?,
        u16::try_from(h)?,
        jpeg_encoder::ColorType::Rgb,
    )?;
    Ok(out)
}

/// `bytes` (a JPEG) with a comment segment naming `tag` after its start marker.
pub fn jpeg_comment(bytes: &[u8], tag: &str) -> Vec<u8> {
    let comment = format!("imgest-bench {tag}");
    let len = u16::try_from(comment.len() + 2).unwrap_or(u16::MAX);
    let mut out = Vec::with_capacity(bytes.len() + comment.len() + 4);
    out.extend_from_slice(&bytes[..2]);
    out.extend_from_slice(&[0xFF, 0xFE]);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(comment.as_bytes());
    out.extend_from_slice(&bytes[2..]);
    out
}

/// `bytes` (a PNG) with a `tEXt` chunk naming `tag` after its header chunk.
fn png_text(bytes: &[u8], tag: &str) -> Vec<u8> {
    // The signature (8 bytes), then IHDR: length, type, 13 bytes, CRC.
    const AFTER_IHDR: usize = 8 + 4 + 4 + 13 + 4;
    let mut data = b"Comment\0".to_vec();
    data.extend_from_slice(format!("imgest-bench {tag}").as_bytes());
    let mut chunk = Vec::with_capacity(data.len() + 12);
    chunk.extend_from_slice(&u32::try_from(data.len()).unwrap_or(0).to_be_bytes());
    chunk.extend_from_slice(b"tEXt");
    chunk.extend_from_slice(&data);
    let crc = crc32fast::hash(&chunk[4..]);
    chunk.extend_from_slice(&crc.to_be_bytes());
    let mut out = Vec::with_capacity(bytes.len() + chunk.len());
    out.extend_from_slice(&bytes[..AFTER_IHDR]);
    out.extend_from_slice(&chunk);
    out.extend_from_slice(&bytes[AFTER_IHDR..]);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_distinct_copy_by_copy_and_every_copy_decodes_at_its_size() {
        let samples: [&[u8]; 2] = [
            include_bytes!("../../samples/dune.jpg"),
            include_bytes!("../../samples/storm.jpg"),
        ];
        let kinds = [
            (Format::Jpeg, 320, 240),
            (Format::Png, 300, 200),
            (Format::WebP, 240, 320),
        ];
        let mix = PhotoMix::of(&samples, &kinds).unwrap();
        let pipeline = imgest_pipeline::Pipeline::new(imgest_pipeline::PipelineConfig::default());
        let mut seen = std::collections::HashSet::new();
        let mut formats = std::collections::HashSet::new();
        for n in 0..3 * kinds.len() {
            let (format, bytes) = mix.photo(n, &format!("copy {n}")).unwrap();
            assert!(
                seen.insert(bytes.clone()),
                "copy {n} repeats another's bytes"
            );
            let (kind, width, height) = kinds[n % kinds.len()];
            assert_eq!(format, kind);
            let info = pipeline.inspect(&bytes).unwrap();
            assert_eq!((info.width, info.height), (width, height), "copy {n}");
            formats.insert(format!("{format:?}"));
        }
        assert_eq!(formats.len(), 3);
    }
}
