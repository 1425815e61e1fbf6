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
