//! The pipeline end to end on the fixture corpus (`tests/fixtures/`, see its README).
#![allow(clippy::unwrap_used)]

use std::io::Cursor;
use std::str::FromStr;
use std::time::{Duration, Instant};

use image::{ImageFormat, Rgb, RgbImage};

use super::*;
use imgest_core::domain::{FitMode, OutputFormat, VariantName};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/../../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pipeline() -> Pipeline {
    Pipeline::new(PipelineConfig::default())
}

fn variant<'a>(p: &'a Processed, name: &str) -> &'a EncodedVariant {
    p.variants.iter().find(|v| v.name.as_str() == name).unwrap()
}

fn pixels(v: &EncodedVariant) -> RgbImage {
    let img = match v.format {
        OutputFormat::Jpeg => image::load_from_memory_with_format(&v.bytes, ImageFormat::Jpeg)
            .unwrap()
            .into_rgb8(),
        OutputFormat::Webp => image::load_from_memory_with_format(&v.bytes, ImageFormat::WebP)
            .unwrap()
            .into_rgb8(),
        #[cfg(feature = "avif")]
        OutputFormat::Avif => crate::avif::decode(&v.bytes, 1 << 26).unwrap().image,
        #[cfg(not(feature = "avif"))]
        OutputFormat::Avif => panic!("no AVIF decoder in this build"),
    };
    assert_eq!((img.width(), img.height()), (v.width, v.height));
    img
}

#[track_caller]
fn assert_colour(img: &RgbImage, x: u32, y: u32, want: [u8; 3]) {
    let got = img.get_pixel(x, y).0;
    let close = got.iter().zip(want).all(|(&g, w)| g.abs_diff(w) <= 12);
    assert!(close, "pixel ({x},{y}) is {got:?}, expected about {want:?}");
}

fn with_variants(variants: &str) -> Pipeline {
    Pipeline::new(PipelineConfig {
        variants: VariantSet::from_str(variants).unwrap(),
        ..PipelineConfig::default()
    })
}

#[cfg(all(feature = "libwebp", feature = "avif"))]
#[test]
fn a_variant_may_be_webp_or_avif_and_shows_the_same_picture_as_the_jpeg() {
    let variants = "j=fit:320x320,w=fit:320x320:webp,a=fit:320x320:avif,small=fit:320x320:webp:10";
    let processed = with_variants(variants)
        .process(&fixture("photo.jpg"))
        .unwrap();
    let magic = |v: &EncodedVariant| match v.format {
        OutputFormat::Jpeg => v.bytes.starts_with(&[0xFF, 0xD8]),
        OutputFormat::Webp => v.bytes.starts_with(b"RIFF") && &v.bytes[8..12] == b"WEBP",
        OutputFormat::Avif => &v.bytes[4..12] == b"ftypavif",
    };
    let formats: Vec<_> = processed.variants.iter().map(|v| v.format).collect();
    use OutputFormat::{Avif, Jpeg, Webp};
    assert_eq!(formats, [Jpeg, Webp, Avif, Webp]);
    assert!(processed.variants.iter().all(magic));
    let jpeg = pixels(variant(&processed, "j"));
    for name in ["w", "a"] {
        let diff = mean_difference(&jpeg, &pixels(variant(&processed, name)));
        assert!(
            diff < 3.0,
            "{name}: mean difference {diff:.2} from the JPEG"
        );
    }
    // Its own quality where it names one.
    assert!(variant(&processed, "small").bytes.len() < variant(&processed, "w").bytes.len() / 2);
}

#[test]
fn a_set_of_jpeg_variants_versions_as_before_formats_existed() {
    // Naming the default format and quality changes nothing but the version.
    let plain = with_variants("large=fit:1280x1280");
    assert_eq!(plain.version(), pipeline_version_of("large=fit:1280x1280"));
    assert_ne!(
        with_variants("large=fit:1280x1280:jpeg:82").version(),
        plain.version()
    );
    assert_ne!(
        with_variants("large=fit:1280x1280:webp").version(),
        plain.version()
    );
}

/// The version a set of JPEG variants had before variants had formats: its specs as printed,
/// the default quality, no watermark.
fn pipeline_version_of(variants: &str) -> &'static VariantSetVersion {
    Box::leak(Box::new(VariantSetVersion::of(&[
        variants.as_bytes(),
        &[PipelineConfig::DEFAULT_JPEG_QUALITY],
        b"none",
    ])))
}

#[test]
fn the_pipeline_is_shareable_across_threads() {
    fn check<T: Send + Sync + 'static>() {}
    check::<Pipeline>();
    check::<PipelineError>();
    // Shared in use, not only in type: clones of one pipeline (sharing its working memory)
    // moved to threads that all start at once, each result (errors too, carried back) what a
    // fresh pipeline makes of the photo.
    let names = ["photo.jpg", "photo.webp", "small.png", "truncated.jpg"];
    let fresh: Vec<_> = names
        .iter()
        .map(|n| pipeline().process(&fixture(n)))
        .collect();
    assert!(fresh[3].is_err(), "one photo fails");
    let shared = pipeline();
    let threads = 2 * names.len();
    let start = std::sync::Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (pipeline, start) = (shared.clone(), std::sync::Arc::clone(&start));
            std::thread::spawn(move || {
                let k = t % names.len();
                let bytes = fixture(names[k]);
                start.wait();
                (k, pipeline.process(&bytes))
            })
        })
        .collect();
    for handle in handles {
        let (k, got) = handle.join().unwrap();
        assert_eq!(got, fresh[k], "{}", names[k]);
    }
}

#[test]
fn working_memory_kept_between_photos_changes_no_result() {
    // Photos of every kind and size in turn, then again on several threads at once, through one
    // pipeline: each result is what a fresh pipeline makes of it. Failures in between too.
    let names = [
        "photo.jpg",
        "small.png",
        "rotated-exif6.jpg",
        "truncated.jpg",
        "photo.webp",
        "cmyk.jpg",
        "rgba16.png",
        "photo.jpg",
    ];
    let fresh: Vec<_> = names
        .iter()
        .map(|n| pipeline().process(&fixture(n)))
        .collect();
    let shared = std::sync::Arc::new(pipeline());
    for (name, want) in names.iter().zip(&fresh) {
        assert_eq!(&shared.process(&fixture(name)), want, "{name}");
    }
    std::thread::scope(|s| {
        for offset in 0..3 {
            let (shared, fresh) = (&shared, &fresh);
            s.spawn(move || {
                for i in 0..names.len() {
                    let k = (i + offset) % names.len();
                    let got = shared.process(&fixture(names[k]));
                    assert_eq!(&got, &fresh[k], "{}", names[k]);
                }
            });
        }
    });
}

#[test]
fn empty_text_and_other_formats_are_unsupported() {
    for name in ["empty.jpg", "text.jpg", "bitmap-named.jpg"] {
        let bytes = fixture(name);
        for err in [
            pipeline().inspect(&bytes).unwrap_err(),
            pipeline().process(&bytes).unwrap_err(),
        ] {
            assert!(
                matches!(err, PipelineError::UnsupportedFormat(_)),
                "{name}: {err:?}"
            );
            assert_eq!(err.kind(), "unsupported_format");
            assert!(!err.is_retryable());
        }
    }
}

#[test]
fn a_truncated_jpeg_is_corrupt() {
    let bytes = fixture("truncated.jpg");
    // The header is intact, so inspecting succeeds; decoding does not.
    assert_eq!(pipeline().inspect(&bytes).unwrap().width, 1500);
    let err = pipeline().process(&bytes).unwrap_err();
    assert!(matches!(err, PipelineError::CorruptImage(_)), "{err:?}");
    assert_eq!(err.kind(), "corrupt_image");
}

#[test]
fn truncated_pngs_gifs_and_webps_are_corrupt() {
    // A GIF is cut inside its first frame (the later frames are never read): its first image
    // descriptor is at byte 52 and the frame's data ends before byte 131.
    for (name, cuts) in [
        ("small.png", &[30, 150, 276][..]),
        ("rgba16.png", &[30, 80, 118]),
        ("photo.webp", &[30, 4000, 8049]),
        ("animated.gif", &[30, 70, 100]),
    ] {
        let bytes = fixture(name);
        for &cut in cuts {
            let err = pipeline().process(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(err, PipelineError::CorruptImage(_)),
                "{name} cut at {cut}: {err:?}"
            );
        }
    }
}

#[test]
fn a_decompression_bomb_is_refused_from_its_header_quickly() {
    for (name, side) in [("huge-declared.png", 30_000), ("huge-declared.jpg", 65_000)] {
        let bytes = fixture(name);
        let started = Instant::now();
        let want = PipelineError::TooManyPixels {
            width: side,
            height: side,
            limit: 50_000_000,
        };
        assert_eq!(pipeline().inspect(&bytes).unwrap_err(), want, "{name}");
        assert_eq!(pipeline().process(&bytes).unwrap_err(), want, "{name}");
        assert_eq!(want.kind(), "too_many_pixels");
        assert!(started.elapsed() < Duration::from_secs(1), "{name}");
    }
}

#[test]
fn a_pixel_limit_applies_to_ordinary_photos_too() {
    let p = Pipeline::new(PipelineConfig {
        max_pixels: 1_000_000,
        ..PipelineConfig::default()
    });
    let err = p.process(&fixture("photo.jpg")).unwrap_err();
    assert_eq!(
        err,
        PipelineError::TooManyPixels {
            width: 1500,
            height: 1000,
            limit: 1_000_000
        }
    );
}

#[test]
fn a_body_over_the_limit_is_too_large_before_anything_else() {
    let p = Pipeline::new(PipelineConfig {
        max_body: 1000,
        ..PipelineConfig::default()
    });
    let photo = fixture("photo.jpg");
    let want = PipelineError::TooLarge {
        size: photo.len() as u64,
        limit: 1000,
    };
    assert_eq!(p.inspect(&photo).unwrap_err(), want);
    assert_eq!(p.process(&photo).unwrap_err(), want);
    assert_eq!(want.kind(), "too_large");
    // Even bytes that are not an image at all.
    let err = p.process(&vec![b'x'; 1001]).unwrap_err();
    assert_eq!(err.kind(), "too_large");
}

#[test]
fn a_garbage_exif_block_does_not_fail_the_photo() {
    let p = pipeline().process(&fixture("corrupt-exif.jpg")).unwrap();
    assert_eq!((p.width, p.height), (64, 48));
    assert_eq!(variant(&p, "large").width, 64);
}

#[test]
fn a_cmyk_jpeg_is_converted_through_the_default_cmyk_profile() {
    let p = pipeline().process(&fixture("cmyk.jpg")).unwrap();
    assert_eq!(p.format, SourceFormat::Jpeg);
    assert_eq!(p.colour, Colour::DefaultCmyk);
    let img = pixels(variant(&p, "large"));
    // LittleCMS (Pillow's ImageCms, relative colorimetric) through the same FOGRA39 profile:
    // magenta and yellow inks print (228, 30, 37), cyan ink (0, 161, 228).
    assert_colour(&img, 10, 32, [228, 30, 37]);
    assert_colour(&img, 54, 32, [0, 161, 228]);
}

/// A 64x48 JPEG of one colour, with `icc` embedded (jpeg-encoder, q95, 4:4:4).
fn jpeg_with_profile(rgb: [u8; 3], icc: Option<&[u8]>) -> Vec<u8> {
    let pixels: Vec<u8> = rgb.repeat(64 * 48);
    let mut out = Vec::new();
    let mut e = jpeg_encoder::Encoder::new(&mut out, 95);
    if let Some(icc) = icc {
        e.add_icc_profile(icc).unwrap();
    }
    e.encode(&pixels, 64, 48, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    out
}

#[test]
fn a_jpeg_with_a_short_adobe_segment_and_stray_bytes_is_read_as_libjpeg_reads_it() {
    let plain = jpeg_with_profile([200, 40, 60], None);
    let want = pixels(variant(&pipeline().process(&plain).unwrap(), "large"));
    let odd = jpeg::tests::with_after_soi(&plain, jpeg::tests::SHORT_ADOBE);
    let p = pipeline().process(&odd).unwrap();
    assert_eq!((p.width, p.height), (64, 48));
    assert_eq!(pixels(variant(&p, "large")), want);
    // Stray bytes alone, after an empty APP15 segment (libjpeg-turbo's header read fails on
    // its warning about them).
    let stray = jpeg::tests::with_after_soi(&plain, b"\xFF\xEF\x00\x02\x00\x01\x02");
    let p = pipeline().process(&stray).unwrap();
    assert_eq!(pixels(variant(&p, "large")), want);
}

/// A 64x48 PNG of one colour, with `icc` in an `iCCP` chunk.
fn png_with_profile(rgb: [u8; 3], icc: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(icc).unwrap();
    let iccp = [&b"P3\0\0"[..], &z.finish().unwrap()].concat();
    let plain = {
        let img = RgbImage::from_pixel(64, 48, Rgb(rgb));
        let mut out = Vec::new();
        img.write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .unwrap();
        out
    };
    png::tests::with_chunks(&plain, &[png::tests::png_chunk(b"iCCP", &iccp)], &[])
}

/// A 64x48 lossless WebP of one colour, extended with an `ICCP` chunk.
fn webp_with_profile(rgb: [u8; 3], icc: &[u8]) -> Vec<u8> {
    use riff::tests::{riff_chunk, webp};
    let img = RgbImage::from_pixel(64, 48, Rgb(rgb));
    let mut plain = Vec::new();
    img.write_to(&mut Cursor::new(&mut plain), ImageFormat::WebP)
        .unwrap();
    // The one `VP8L` chunk after the RIFF header, behind a `VP8X` that announces the profile.
    let vp8l = plain[12..].to_vec();
    let mut vp8x = vec![0x20, 0, 0, 0];
    vp8x.extend_from_slice(&63u32.to_le_bytes()[..3]);
    vp8x.extend_from_slice(&47u32.to_le_bytes()[..3]);
    let mut chunks = vec![riff_chunk(b"VP8X", &vp8x), riff_chunk(b"ICCP", icc)];
    chunks.push(vp8l);
    webp(&chunks)
}

#[test]
fn a_display_p3_photo_is_converted_to_srgb_in_every_container() {
    let p3 = colour::tests::display_p3();
    // P3 (200, 100, 50) is sRGB (215, 93, 31) for LittleCMS (relative colorimetric): what
    // a colour-managed browser shows; untagged, it would be shown as (200, 100, 50).
    let want = [215, 93, 31];
    for (name, bytes) in [
        ("jpeg", jpeg_with_profile([200, 100, 50], Some(&p3))),
        ("png", png_with_profile([200, 100, 50], &p3)),
        ("webp", webp_with_profile([200, 100, 50], &p3)),
    ] {
        let p = pipeline().process(&bytes).unwrap();
        assert_eq!(p.colour, Colour::Converted, "{name}");
        for v in &p.variants {
            let img = pixels(v);
            let got = img.get_pixel(v.width / 2, v.height / 2).0;
            let close = got.iter().zip(want).all(|(&g, w)| g.abs_diff(w) <= 3);
            assert!(close, "{name} {}: {got:?}, expected about {want:?}", v.name);
        }
    }
}

#[test]
fn srgb_and_broken_profiles_leave_the_pixels_alone() {
    let srgb = moxcms::ColorProfile::new_srgb().encode().unwrap();
    let p3 = colour::tests::display_p3();
    let untagged = pipeline()
        .process(&jpeg_with_profile([200, 100, 50], None))
        .unwrap();
    assert_eq!(untagged.colour, Colour::Untagged);
    let tagged = pipeline()
        .process(&jpeg_with_profile([200, 100, 50], Some(&srgb)))
        .unwrap();
    assert_eq!(tagged.colour, Colour::Srgb);
    let broken = pipeline()
        .process(&jpeg_with_profile([200, 100, 50], Some(&p3[..300])))
        .unwrap();
    assert!(matches!(&broken.colour, Colour::Ignored(why) if why.contains("unreadable")));
    for p in [&tagged, &broken] {
        for (a, b) in p.variants.iter().zip(&untagged.variants) {
            assert_eq!(pixels(a), pixels(b), "{:?} {}", p.colour, a.name);
        }
    }
}

#[cfg(feature = "turbojpeg")]
#[test]
fn an_srgb_jpeg_stays_planar_and_a_p3_one_goes_through_rgb() {
    let specs = pipeline().config().variants.specs().to_vec();
    let scratch = scratch::Scratch::default();
    let srgb = moxcms::ColorProfile::new_srgb().encode().unwrap();
    let decode =
        |bytes: &[u8]| decode::decode(bytes, &pipeline().limits(), &specs, true, &scratch).unwrap();
    let tagged = decode(&jpeg_with_profile([200, 100, 50], Some(&srgb)));
    assert!(matches!(tagged.pixels, decode::Pixels::Yuv(_)));
    assert!(tagged.transform.is_none());
    let p3 = decode(&jpeg_with_profile(
        [200, 100, 50],
        Some(&colour::tests::display_p3()),
    ));
    assert!(matches!(p3.pixels, decode::Pixels::Rgb(_)));
    assert!(p3.transform.is_some());
}

#[test]
fn an_animated_gif_gives_its_first_frame() {
    let p = pipeline().process(&fixture("animated.gif")).unwrap();
    assert_eq!((p.format, p.width, p.height), (SourceFormat::Gif, 40, 30));
    let img = pixels(variant(&p, "large"));
    assert_colour(&img, 20, 15, [255, 0, 0]);
}

#[test]
fn a_gif_without_any_colour_table_reads_its_indices_as_greys() {
    for grey in [0, 200] {
        let bare = gif::tests::gif_without_palette(&[grey; 16]);
        let p = pipeline().process(&bare).unwrap();
        assert_eq!((p.format, p.width, p.height), (SourceFormat::Gif, 16, 1));
        assert_colour(&pixels(variant(&p, "large")), 8, 0, [grey; 3]);
    }
}

#[test]
fn sixteen_bit_alpha_is_reduced_and_composited_over_white() {
    let p = pipeline().process(&fixture("rgba16.png")).unwrap();
    assert_eq!((p.format, p.width, p.height), (SourceFormat::Png, 32, 32));
    let img = pixels(variant(&p, "large"));
    assert_colour(&img, 4, 16, [255, 0, 0]);
    assert_colour(&img, 20, 16, [127, 127, 255]);
    assert_colour(&img, 29, 16, [255, 255, 255]);
}

#[test]
fn webp_lossy_and_lossless_with_alpha_decode() {
    let p = pipeline().process(&fixture("photo.webp")).unwrap();
    assert_eq!(
        (p.format, p.width, p.height),
        (SourceFormat::Webp, 400, 250)
    );
    assert_eq!(
        (variant(&p, "thumb").width, variant(&p, "thumb").height),
        (200, 200)
    );
    let p = pipeline().process(&fixture("alpha.webp")).unwrap();
    let img = pixels(variant(&p, "large"));
    assert_colour(&img, 5, 20, [0, 200, 0]);
    assert_colour(&img, 34, 20, [255, 255, 255]);
}

#[test]
fn exif_orientation_6_is_applied() {
    let bytes = fixture("rotated-exif6.jpg");
    // The header reports the stored size; processing reports the upright one.
    let info = pipeline().inspect(&bytes).unwrap();
    assert_eq!((info.width, info.height), (300, 200));
    let p = pipeline().process(&bytes).unwrap();
    assert_eq!((p.width, p.height), (200, 300));
    let large = variant(&p, "large");
    assert_eq!((large.width, large.height), (200, 300));
    // The red square stored top-left is displayed top-right.
    let img = pixels(large);
    assert_colour(&img, 190, 10, [255, 0, 0]);
    assert_colour(&img, 10, 10, [0, 0, 255]);
    assert_colour(&img, 190, 290, [0, 0, 255]);
    // Fresh pixels, no metadata: the orientation tag is not carried over.
    assert!(!large.bytes.windows(4).any(|w| w == b"Exif"));
}

#[test]
fn every_orientation_is_applied_from_every_container_that_carries_one() {
    // `tests/fixtures/orientation/{form}-{n}.{ext}`: one upright 48x32 picture, stored so that
    // orientation n turns it upright (see make_orientation.py), in nine forms.
    let dir = format!(
        "{}/../../tests/fixtures/orientation",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 9 * 8);
    // Red top-left, green top-right, blue bottom-left, yellow bottom-right.
    let quadrants = [
        ((12, 8), [220, 30, 30]),
        ((36, 8), [30, 190, 30]),
        ((12, 24), [30, 30, 220]),
        ((36, 24), [230, 220, 40]),
    ];
    for name in names {
        let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
        let p = pipeline()
            .process(&bytes)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((p.width, p.height), (48, 32), "{name}");
        let img = pixels(variant(&p, "large"));
        for ((x, y), want) in quadrants {
            let got = img.get_pixel(x, y).0;
            let close = got.iter().zip(want).all(|(&g, w)| g.abs_diff(w) <= 24);
            assert!(
                close,
                "{name}: ({x},{y}) is {got:?}, expected about {want:?}"
            );
        }
    }
}

#[cfg(feature = "avif")]
#[test]
fn avif_photos_of_every_kind_decode() {
    // Alpha over white.
    let p = pipeline().process(&fixture("alpha.avif")).unwrap();
    assert_eq!((p.format, p.width, p.height), (SourceFormat::Avif, 40, 40));
    let img = pixels(variant(&p, "large"));
    assert_colour(&img, 5, 20, [0, 200, 0]);
    assert_colour(&img, 34, 20, [255, 255, 255]);
    // 10-bit limited range, and a grid of four tiles: the quadrants.
    for (name, (w, h)) in [("ten-bit.avif", (64, 48)), ("grid.avif", (160, 128))] {
        let p = pipeline().process(&fixture(name)).unwrap();
        assert_eq!((p.width, p.height), (w, h), "{name}");
        let img = pixels(variant(&p, "large"));
        let (qx, qy) = (w / 4, h / 4);
        assert_colour(&img, qx, qy, [220, 30, 30]);
        assert_colour(&img, w - qx, qy, [30, 190, 30]);
        assert_colour(&img, qx, h - qy, [30, 30, 220]);
        assert_colour(&img, w - qx, h - qy, [230, 220, 40]);
    }
    // Monochrome: a ramp of x * 4.
    let p = pipeline().process(&fixture("grey.avif")).unwrap();
    let img = pixels(variant(&p, "large"));
    assert_colour(&img, 8, 20, [32, 32, 32]);
    assert_colour(&img, 40, 20, [160, 160, 160]);
    // Display P3 told by coding points: converted like a P3 profile (see the JPEG case).
    let p = pipeline().process(&fixture("p3-nclx.avif")).unwrap();
    assert_eq!(p.colour, Colour::Converted);
    let img = pixels(variant(&p, "large"));
    assert_colour(&img, 32, 24, [215, 93, 31]);
}

#[cfg(feature = "avif")]
#[test]
fn damaged_avif_files_are_refused_or_decoded_never_a_decoder_panic() {
    // Every other byte of each AVIF (one with alpha, a grid, a 10-bit one), in turn, set to
    // another value (0, 255 or one bit flipped, by turns), and every fifth cut: the container
    // parser and rav1d see boxes, lengths, item tables and AV1 headers that lie. A panic would
    // be caught by `decode` and worded as below: none may happen. Decoding only (the variants
    // are the same code for any pixels); the fuzz target goes further.
    let caught = "the decoder failed on this data";
    let specs = pipeline().config().variants.specs().to_vec();
    let scratch = scratch::Scratch::default();
    let limits = pipeline().limits();
    let mut cases = 0;
    for name in ["alpha.avif", "grid.avif", "ten-bit.avif"] {
        let bytes = fixture(name);
        let cuts = (0..bytes.len()).step_by(5).map(|cut| bytes[..cut].to_vec());
        let changed = (0..bytes.len()).step_by(2).map(|at| {
            let mut damaged = bytes.clone();
            damaged[at] = [0x00, 0xFF, bytes[at] ^ 0x10][at / 2 % 3];
            damaged
        });
        for damaged in cuts.chain(changed) {
            cases += 1;
            if let Err(e) = decode::decode(&damaged, &limits, &specs, false, &scratch) {
                assert!(!e.to_string().contains(caught), "{name}: {e}");
                assert!(
                    matches!(
                        e.kind(),
                        "corrupt_image" | "unsupported_format" | "too_many_pixels"
                    ),
                    "{name}: {e}"
                );
            }
        }
    }
    assert!(cases > 1_000, "{cases}");
}

#[test]
fn heic_is_refused_with_what_to_send_instead() {
    let heic = b"\0\0\0\x18ftypheic\0\0\0\0mif1heic\0\0\0\x08meta";
    let err = pipeline().process(heic).unwrap_err();
    assert_eq!(err.kind(), "unsupported_format");
    assert!(err.to_string().contains("send the photo as JPEG"), "{err}");
    assert_eq!(pipeline().inspect(heic).unwrap_err(), err);
}

#[test]
fn a_small_source_is_never_upscaled() {
    let p = pipeline().process(&fixture("small.png")).unwrap();
    assert_eq!((p.width, p.height), (120, 80));
    for name in ["large", "medium"] {
        let v = variant(&p, name);
        assert_eq!((v.width, v.height), (120, 80), "{name}");
    }
    // Cover: the largest centre square, 80x80 from x=20, not a 200x200 upscale.
    let thumb = variant(&p, "thumb");
    assert_eq!((thumb.width, thumb.height), (80, 80));
    let img = pixels(thumb);
    let red_at = |x: u32| i32::from(img.get_pixel(x, 40).0[0]);
    // The fixture's red channel is x * 255 / 119: 43 at x=20, 212 at x=99.
    assert!((red_at(0) - 43).abs() <= 8, "{}", red_at(0));
    assert!((red_at(79) - 212).abs() <= 8, "{}", red_at(79));
}

#[test]
fn a_photo_gets_every_variant_in_order() {
    let photo = fixture("photo.jpg");
    let info = pipeline().inspect(&photo).unwrap();
    assert_eq!(
        info,
        SourceInfo {
            format: SourceFormat::Jpeg,
            width: 1500,
            height: 1000
        }
    );
    let p = pipeline().process(&photo).unwrap();
    assert_eq!(
        (p.format, p.width, p.height),
        (SourceFormat::Jpeg, 1500, 1000)
    );
    let names: Vec<_> = p.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["large", "medium", "thumb"]);
    let dims = |n| (variant(&p, n).width, variant(&p, n).height);
    assert_eq!(dims("large"), (1280, 853));
    assert_eq!(dims("medium"), (640, 427));
    assert_eq!(dims("thumb"), (200, 200));
    for v in &p.variants {
        pixels(v);
        assert!(v.bytes.len() < photo.len(), "{v:?}");
    }
}

#[test]
fn the_watermark_changes_only_the_configured_variants() {
    let photo = fixture("photo.jpg");
    let plain = pipeline().process(&photo).unwrap();
    let thumb = VariantName::parse("thumb").unwrap();
    let wm = Watermark::from_png(
        &fixture("watermark.png"),
        WatermarkPosition::BottomRight,
        1.0,
        vec![thumb],
    )
    .unwrap();
    assert_eq!(wm.dimensions(), (64, 32));
    let marked = Pipeline::new(PipelineConfig {
        watermark: Some(wm),
        ..PipelineConfig::default()
    })
    .process(&photo)
    .unwrap();
    // With a watermark the photo goes through RGB rather than YCbCr planes (with libjpeg-turbo):
    // the same pictures, up to rounding.
    for name in ["large", "medium"] {
        let diff = mean_difference(
            &pixels(variant(&plain, name)),
            &pixels(variant(&marked, name)),
        );
        assert!(diff < 1.5, "{name}: mean difference {diff:.2}");
    }
    assert_ne!(variant(&plain, "thumb"), variant(&marked, "thumb"));
    let (before, after) = (
        pixels(variant(&plain, "thumb")),
        pixels(variant(&marked, "thumb")),
    );
    // The 64x32 logo is scaled to 50x25 (a quarter of 200) at a 4-pixel margin: its magenta
    // box is in the bottom-right corner; the top-left corner is untouched.
    assert_colour(&after, 190, 185, [220, 0, 160]);
    let diff = |x, y| {
        let (a, b): (&Rgb<u8>, &Rgb<u8>) = (before.get_pixel(x, y), after.get_pixel(x, y));
        a.0.iter()
            .zip(b.0)
            .map(|(&p, q)| p.abs_diff(q))
            .max()
            .unwrap_or(0)
    };
    assert!(diff(190, 185) > 40);
    assert!(diff(20, 20) <= 2);
}

#[test]
fn a_half_opaque_watermark_blends() {
    let small = fixture("small.png");
    let wm = |opacity| {
        Watermark::from_png(
            &fixture("watermark.png"),
            WatermarkPosition::TopLeft,
            opacity,
            vec![VariantName::parse("large").unwrap()],
        )
        .unwrap()
    };
    let run = |opacity| {
        let p = Pipeline::new(PipelineConfig {
            watermark: Some(wm(opacity)),
            ..PipelineConfig::default()
        })
        .process(&small)
        .unwrap();
        pixels(variant(&p, "large"))
    };
    let (none, half, full) = (run(0.0), run(0.5), run(1.0));
    // The 120x80 image: the logo is scaled to 30x15 at a 2-pixel margin; (16, 5) is inside
    // its magenta box, above the white bar. Half opacity lands between the photo and the logo.
    // Red: about 34 in the photo there, 220 in the logo.
    let r = |img: &RgbImage| i32::from(img.get_pixel(16, 5).0[0]);
    assert!(r(&none) < 60, "{}", r(&none));
    assert!(r(&full) > 190, "{}", r(&full));
    assert!(
        (r(&half) - (r(&none) + r(&full)) / 2).abs() <= 15,
        "{}",
        r(&half)
    );
}

/// Encodes an in-memory image of `w`x`h` as PNG.
fn png_of(w: u32, h: u32) -> Vec<u8> {
    let img = RgbImage::from_fn(w, h, |x, y| Rgb([(x % 256) as u8, (y % 256) as u8, 99]));
    let mut out = Vec::new();
    img.write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
        .unwrap();
    out
}

#[test]
fn odd_sizes_never_panic_and_stay_inside_their_boxes() {
    let set = VariantSet::from_str(
        "large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200,\
         strip=cover:300x7,dot=fit:1x1,tall=cover:1x50",
    )
    .unwrap();
    let p = Pipeline::new(PipelineConfig {
        variants: set.clone(),
        ..PipelineConfig::default()
    });
    for (w, h) in [
        (1, 1),
        (1, 5000),
        (5000, 1),
        (3, 2),
        (2, 3),
        (1281, 1),
        (1, 1281),
        (199, 201),
        (201, 199),
        (641, 639),
        (1280, 1281),
        (7, 300),
        (2, 2),
    ] {
        let out = p.process(&png_of(w, h)).unwrap();
        assert_eq!((out.width, out.height), (w, h));
        for (v, spec) in out.variants.iter().zip(set.specs()) {
            assert_eq!(v.name, spec.name);
            let what = format!("{w}x{h} -> {spec}: {}x{}", v.width, v.height);
            assert!(v.width >= 1 && v.height >= 1, "{what}");
            assert!(v.width <= spec.width && v.height <= spec.height, "{what}");
            assert!(v.width <= w && v.height <= h, "{what}");
            if spec.mode == FitMode::Cover && w >= spec.width && h >= spec.height {
                assert_eq!((v.width, v.height), (spec.width, spec.height), "{what}");
            }
            pixels(v);
        }
    }
}

#[test]
fn jpeg_quality_is_clamped_and_used() {
    let photo = fixture("photo.jpg");
    let size = |q| {
        let p = Pipeline::new(PipelineConfig {
            jpeg_quality: q,
            ..PipelineConfig::default()
        });
        (
            p.config().jpeg_quality,
            variant(&p.process(&photo).unwrap(), "medium").bytes.len(),
        )
    };
    let (q0, low) = size(0);
    let (q100, high) = size(200);
    assert_eq!((q0, q100), (1, 100));
    assert!(low < high);
}

/// Mean absolute difference of two same-sized images, per sample.
fn mean_difference(a: &RgbImage, b: &RgbImage) -> f64 {
    assert_eq!(a.dimensions(), b.dimensions());
    let sum: f64 = a
        .as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(&x, &y)| f64::from(x.abs_diff(y)))
        .sum();
    sum / a.as_raw().len() as f64
}

/// The variants of `bytes` made through RGB (as with a watermark), decoded.
#[cfg(feature = "turbojpeg")]
fn through_rgb(bytes: &[u8]) -> Vec<RgbImage> {
    let pipeline = pipeline();
    let specs = pipeline.config().variants.specs();
    let scratch = scratch::Scratch::default();
    let decoded = decode::decode(bytes, &pipeline.limits(), specs, false, &scratch).unwrap();
    let decode::Pixels::Rgb(image) = &decoded.pixels else {
        panic!("not RGB");
    };
    resize::render_all(image, (decoded.width, decoded.height), specs, &scratch)
        .unwrap()
        .iter()
        .map(|v| {
            let jpeg =
                encode::encode_jpeg(v, PipelineConfig::DEFAULT_JPEG_QUALITY, &scratch).unwrap();
            image::load_from_memory(&jpeg).unwrap().into_rgb8()
        })
        .collect()
}

#[cfg(feature = "turbojpeg")]
#[test]
fn a_ycbcr_jpeg_stays_planar_and_matches_the_rgb_path() {
    for name in ["photo.jpg", "rotated-exif6.jpg"] {
        let bytes = fixture(name);
        let specs = pipeline().config().variants.specs().to_vec();
        let scratch = scratch::Scratch::default();
        let decoded = decode::decode(&bytes, &pipeline().limits(), &specs, true, &scratch).unwrap();
        assert!(matches!(decoded.pixels, decode::Pixels::Yuv(_)), "{name}");
        let p = pipeline().process(&bytes).unwrap();
        for (v, rgb) in p.variants.iter().zip(through_rgb(&bytes)) {
            let planar = pixels(v);
            let diff = mean_difference(&planar, &rgb);
            assert!(diff < 1.5, "{name} {}: mean difference {diff:.2}", v.name);
        }
    }
}

/// A 64x48 JPEG at `subsamp`: red left half, blue right half, a white top-left 16x16 square.
#[cfg(feature = "turbojpeg")]
fn halves(subsamp: turbojpeg::Subsamp) -> Vec<u8> {
    let img = RgbImage::from_fn(64, 48, |x, y| match (x, y) {
        (0..16, 0..16) => Rgb([255, 255, 255]),
        (0..32, _) => Rgb([220, 20, 20]),
        _ => Rgb([20, 20, 220]),
    });
    let mut c = turbojpeg::Compressor::new().unwrap();
    c.set_quality(95).unwrap();
    c.set_subsamp(subsamp).unwrap();
    c.compress_to_vec(turbojpeg::Image {
        pixels: img.as_raw().as_slice(),
        width: 64,
        pitch: 64 * 3,
        height: 48,
        format: turbojpeg::PixelFormat::RGB,
    })
    .unwrap()
}

#[cfg(feature = "turbojpeg")]
#[test]
fn every_chroma_subsampling_gives_the_same_variants() {
    use turbojpeg::Subsamp;
    let config = PipelineConfig {
        variants: VariantSet::from_str("large=fit:40x40,odd=fit:21x21,thumb=cover:9x9").unwrap(),
        ..PipelineConfig::default()
    };
    for subsamp in [
        Subsamp::None,
        Subsamp::Sub2x1,
        Subsamp::Sub2x2,
        Subsamp::Sub1x2,
    ] {
        let p = Pipeline::new(config.clone())
            .process(&halves(subsamp))
            .unwrap();
        let dims: Vec<_> = p.variants.iter().map(|v| (v.width, v.height)).collect();
        assert_eq!(dims, [(40, 30), (21, 16), (9, 9)], "{subsamp:?}");
        let large = pixels(&p.variants[0]);
        assert_colour(&large, 3, 3, [255, 255, 255]);
        assert_colour(&large, 8, 25, [220, 20, 20]);
        assert_colour(&large, 36, 25, [20, 20, 220]);
        // Away from the edges, where Lanczos rings.
        let odd = pixels(&p.variants[1]);
        assert_colour(&odd, 5, 13, [220, 20, 20]);
        assert_colour(&odd, 16, 13, [20, 20, 220]);
        // Cover: the centre 48x48 square, red then blue.
        // (At 9x9, every pixel is near an edge: only which colour it is.)
        let thumb = pixels(&p.variants[2]);
        let [r, _, b] = thumb.get_pixel(1, 7).0;
        assert!(r > 180 && b < 60, "{subsamp:?}: {r}, {b}");
        let [r, _, b] = thumb.get_pixel(7, 7).0;
        assert!(r < 60 && b > 180, "{subsamp:?}: {r}, {b}");
    }
}

#[cfg(feature = "turbojpeg")]
#[test]
fn a_watermark_on_any_variant_keeps_the_photo_in_rgb() {
    // Covered end to end by the watermark tests; here the choice itself.
    let bytes = fixture("photo.jpg");
    let specs = pipeline().config().variants.specs().to_vec();
    let scratch = scratch::Scratch::default();
    let rgb = decode::decode(&bytes, &pipeline().limits(), &specs, false, &scratch).unwrap();
    assert!(matches!(rgb.pixels, decode::Pixels::Rgb(_)));
    // Grey JPEGs have no chroma planes: RGB too.
    let grey = image::GrayImage::from_fn(32, 32, |x, _| image::Luma([x as u8 * 8]));
    let mut jpeg = Vec::new();
    grey.write_to(&mut Cursor::new(&mut jpeg), ImageFormat::Jpeg)
        .unwrap();
    let decoded = decode::decode(&jpeg, &pipeline().limits(), &specs, true, &scratch).unwrap();
    assert!(matches!(decoded.pixels, decode::Pixels::Rgb(_)));
}

#[cfg(feature = "libwebp")]
#[test]
fn libwebp_decodes_like_the_pure_rust_decoder() {
    for name in ["photo.webp", "alpha.webp"] {
        let bytes = fixture(name);
        let ours = webp::decode(&bytes, |rgba| {
            image::DynamicImage::ImageRgba8(rgba.clone()).into_rgb8()
        })
        .unwrap();
        let theirs = image::load_from_memory_with_format(&bytes, ImageFormat::WebP)
            .unwrap()
            .into_rgb8();
        let diff = mean_difference(&ours, &theirs);
        assert!(diff < 1.0, "{name}: mean difference {diff:.2}");
    }
    assert!(webp::decode(b"RIFF\x10\0\0\0WEBPVP8 garbage", |_| RgbImage::new(1, 1)).is_none());
    let bytes = fixture("photo.webp");
    assert!(webp::decode(&bytes[..bytes.len() / 2], |_| RgbImage::new(1, 1)).is_none());
}
