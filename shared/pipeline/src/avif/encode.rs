//! AVIF variants: the RGB pixels encoded by rav1e (through `ravif`) as one AV1 key frame in an
//! AVIF container, 10-bit 4:4:4 YCbCr (ravif's choice: fewer bytes than 8-bit at the same
//! quality), no metadata (the pixels are upright and sRGB, which AVIF assumes untagged).

use image::RgbImage;
use rgb::FromSlice;

use crate::PipelineError;

/// rav1e's speed, 1 (slowest, fewest bytes) to 10 (ravif's default is 5). Even at 6 a 1280x853
/// variant takes 1 to 2 s of one core (docs/benchmarks.md#output-formats): AVIF variants are
/// for deployments whose CDN bill outweighs it (docs/cost.md#an-avif-variant).
pub(crate) const SPEED: u8 = 6;

/// Encodes `image` at `quality` (1..=100, ravif's scale), on this thread.
pub(crate) fn encode(image: &RgbImage, quality: u8) -> Result<Vec<u8>, PipelineError> {
    let (width, height) = image.dimensions();
    let pixels = image.as_raw().as_rgb();
    let img = ravif::Img::new(pixels, width as usize, height as usize);
    let encoded = ravif::Encoder::new()
        .with_quality(f32::from(quality.clamp(1, 100)))
        .with_speed(SPEED)
        .with_num_threads(Some(1))
        .encode_rgb(img)
        .map_err(|e| PipelineError::CorruptImage(format!("AVIF encoding failed: {e}")))?;
    Ok(encoded.avif_file)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn encodes_an_avif_the_decoder_reads_back_as_the_same_picture() {
        let img = RgbImage::from_fn(67, 41, |x, y| image::Rgb([x as u8 * 3, y as u8 * 5, 120]));
        let avif = encode(&img, 80).unwrap();
        assert_eq!(&avif[4..12], b"ftypavif");
        let back = crate::avif::decode(&avif, 1 << 20).unwrap().image;
        assert_eq!(back.dimensions(), (67, 41));
        let diff: u64 = img
            .as_raw()
            .iter()
            .zip(back.as_raw())
            .map(|(a, b)| u64::from(a.abs_diff(*b)))
            .sum();
        assert!(
            diff / img.as_raw().len() as u64 <= 3,
            "mean difference {diff}"
        );
    }

    #[test]
    fn encodes_the_smallest_and_thinnest_variants() {
        for (w, h) in [(1, 1), (1, 97), (97, 1), (2, 3)] {
            let img = RgbImage::from_pixel(w, h, image::Rgb([200, 30, 90]));
            let avif = encode(&img, 83).unwrap();
            let back = crate::avif::decode(&avif, 1 << 20).unwrap().image;
            assert_eq!(back.dimensions(), (w, h));
        }
    }
}
