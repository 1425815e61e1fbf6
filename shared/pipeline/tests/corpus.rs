//! A public corpus of odd files through the pipeline: every file of Pillow's own test images
//! (infra/corpus.sh fetches them and renders a reference of each with Pillow), processed as an
//! upload would be, and each accepted file's variant compared with the reference: the same
//! picture (mean CIE76 ΔE of at most [`BOUND`]), or a documented reason in `corpus/pillow.tsv`
//! (refused, and why; a different picture, and why; no reference to compare with). A file of
//! a format imgest does not take (TIFF, BMP, PSD, ...) needs no line: its refusal is the
//! expected answer. A line whose file now fares otherwise fails too, so the list stays true.
//!
//! Part of `infra/test.sh`, which downloads the corpus from PyPI once (`infra/corpus.sh` sets
//! `IMGEST_CORPUS_DIR`) and sets `IMGEST_TEST_CORPUS=1`, so a missing corpus is a failure there.
//! By hand: `source infra/corpus.sh && corpus_install && cargo test -p imgest-pipeline --test
//! corpus`; without `IMGEST_CORPUS_DIR`, the test says so and passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use image::RgbImage;
use imgest_core::domain::VariantSet;
use imgest_pipeline::{Pipeline, PipelineConfig};

/// The largest mean ΔE (CIE76) of the same picture, both images averaged over 2x2 blocks first
/// (the resolution 4:2:0 JPEG keeps colour at: dithered and one-pixel patterns lose their
/// colours to it, not to decoding): what JPEG at quality 95 and a different resampler leave.
const BOUND: f64 = 2.0;

/// What happened to one file.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Same,
    Differs(f64),
    NoReference,
    Refused(&'static str),
}

impl Outcome {
    /// The word the expectations file uses for it.
    fn word(&self) -> String {
        match self {
            Self::Same => "same".into(),
            Self::Differs(_) => "differs".into(),
            Self::NoReference => "no-reference".into(),
            Self::Refused(kind) => format!("refused:{kind}"),
        }
    }
}

fn corpus_dir() -> Option<PathBuf> {
    match std::env::var_os("IMGEST_CORPUS_DIR") {
        Some(dir) => Some(PathBuf::from(dir)),
        None if std::env::var_os("IMGEST_TEST_CORPUS").is_some() => {
            panic!("IMGEST_TEST_CORPUS is set but IMGEST_CORPUS_DIR is not (infra/corpus.sh)")
        }
        None => {
            eprintln!(
                "corpus test skipped: IMGEST_CORPUS_DIR is not set (infra/corpus.sh sets it)"
            );
            None
        }
    }
}

/// Every file under `dir`, as paths relative to it, in order.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// `file<TAB>outcome<TAB>why` lines (`#` comments and blank lines skipped).
fn expectations() -> BTreeMap<String, (String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus/pillow.tsv");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut parts = l.splitn(3, '\t');
            let (file, outcome, why) = (parts.next(), parts.next(), parts.next());
            let why = why.filter(|w| !w.trim().is_empty());
            let (file, outcome, why) = match (file, outcome, why) {
                (Some(f), Some(o), Some(w)) => (f, o, w),
                _ => panic!("pillow.tsv: {l:?} is not file, outcome and why, tab-separated"),
            };
            (file.to_owned(), (outcome.to_owned(), why.to_owned()))
        })
        .collect()
}

/// CIELAB (D65) of an sRGB pixel.
fn lab([r, g, b]: [u8; 3]) -> [f64; 3] {
    let lin = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let (r, g, b) = (lin(r), lin(g), lin(b));
    let x = (0.412_456_4 * r + 0.357_576_1 * g + 0.180_437_5 * b) / 0.950_47;
    let y = 0.212_672_9 * r + 0.715_152_2 * g + 0.072_175 * b;
    let z = (0.019_333_9 * r + 0.119_192 * g + 0.950_304_1 * b) / 1.088_83;
    let f = |t: f64| {
        if t > (6.0f64 / 29.0).powi(3) {
            t.cbrt()
        } else {
            t / (3.0 * (6.0f64 / 29.0).powi(2)) + 4.0 / 29.0
        }
    };
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// `image` averaged over blocks of 2x2 pixels (the last row or column alone when odd).
fn halved(image: &RgbImage) -> RgbImage {
    let (w, h) = image.dimensions();
    RgbImage::from_fn(w.div_ceil(2), h.div_ceil(2), |x, y| {
        let mut sum = [0u32; 3];
        let mut n = 0;
        for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            if let Some(p) = image.get_pixel_checked(2 * x + dx, 2 * y + dy) {
                sum.iter_mut()
                    .zip(p.0)
                    .for_each(|(s, v)| *s += u32::from(v));
                n += 1;
            }
        }
        image::Rgb(sum.map(|s| ((s + n / 2) / n) as u8))
    })
}

/// The mean CIE76 ΔE of two images (the reference resized to `ours`' size first), both
/// [`halved`].
fn mean_delta_e(ours: &RgbImage, reference: &RgbImage) -> f64 {
    let reference = if reference.dimensions() == ours.dimensions() {
        reference.clone()
    } else {
        image::imageops::resize(
            reference,
            ours.width(),
            ours.height(),
            image::imageops::FilterType::Lanczos3,
        )
    };
    let (ours, reference) = (halved(ours), halved(&reference));
    let sum: f64 = ours
        .pixels()
        .zip(reference.pixels())
        .map(|(a, b)| {
            let (a, b) = (lab(a.0), lab(b.0));
            ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
        })
        .sum();
    sum / f64::from(ours.width() * ours.height()).max(1.0)
}

#[test]
fn every_file_of_the_public_corpus_is_the_same_picture_or_documented() {
    let Some(dir) = corpus_dir() else {
        return;
    };
    let pipeline = Pipeline::new(PipelineConfig {
        variants: VariantSet::from_str("large=fit:1280x1280").unwrap(),
        jpeg_quality: 95,
        ..PipelineConfig::default()
    });
    let expected = expectations();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut listed_seen = 0;
    let images = dir.join("images");
    let all = files(&images);
    assert!(
        all.len() > 500,
        "only {} files under {}",
        all.len(),
        images.display()
    );
    for rel in &all {
        let name = rel.to_string_lossy().into_owned();
        let bytes = std::fs::read(images.join(rel)).unwrap();
        let ours_format = pipeline.check_format(bytes.len(), &bytes[..bytes.len().min(32)]);
        let outcome = match pipeline.process(&bytes) {
            Err(e) => Outcome::Refused(e.kind()),
            Ok(processed) => {
                let variant = &processed.variants[0];
                let ours = image::load_from_memory(&variant.bytes).unwrap().into_rgb8();
                let reference = dir.join("reference").join(format!("{name}.png"));
                match image::open(&reference) {
                    Ok(reference) => {
                        let reference = reference.into_rgb8();
                        let (rw, rh) = reference.dimensions();
                        let size = (processed.width, processed.height);
                        let turned = size != (rw, rh) && size == (rh, rw);
                        if turned {
                            Outcome::Differs(f64::INFINITY)
                        } else {
                            let de = mean_delta_e(&ours, &reference);
                            if de <= BOUND {
                                Outcome::Same
                            } else {
                                Outcome::Differs(de)
                            }
                        }
                    }
                    Err(_) => Outcome::NoReference,
                }
            }
        };
        let listed = expected.get(&name);
        listed_seen += usize::from(listed.is_some());
        let fine = match (&outcome, listed) {
            (Outcome::Same, None) => true,
            // Not a format imgest takes: its refusal is the answer.
            (Outcome::Refused("unsupported_format"), None) => ours_format.is_err(),
            (outcome, Some((word, _))) => *word == outcome.word(),
            _ => false,
        };
        let key = match (&outcome, ours_format.is_err()) {
            (Outcome::Refused(_), true) => "refused: not a format imgest takes".to_owned(),
            (outcome, _) => outcome.word(),
        };
        *counts.entry(key).or_default() += 1;
        if !fine {
            let listed = listed.map_or("nothing".into(), |(w, _)| w.clone());
            failures.push(format!("{name}: {outcome:?}, listed as {listed}"));
        }
    }
    let missing: Vec<&String> = expected
        .keys()
        .filter(|f| !all.iter().any(|a| a.to_string_lossy() == f.as_str()))
        .collect();
    eprintln!("corpus: {} files: {counts:?}", all.len());
    assert!(
        missing.is_empty(),
        "pillow.tsv lists files not in the corpus: {missing:?}"
    );
    assert_eq!(listed_seen, expected.len());
    assert!(
        failures.is_empty(),
        "{} files fare otherwise than expected:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
