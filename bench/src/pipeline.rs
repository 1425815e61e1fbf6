//! `imgest-bench pipeline` and `imgest-bench md5`, for `bench/pipeline.sh` and `bench/dedup.sh`: they time the
//! production code on this process's thread and print JSON lines for the scripts to compare
//! (the scripts pin the process to one core and run the other tools beside it).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use imgest_core::domain::{ContentHash, ImageId};
use imgest_core::telemetry::metrics;
use imgest_pipeline::Processed;
use imgest_settings::Settings;

use serde_json::{Value, json};

/// `pipeline`: for each file, `rounds` timed runs (after one untimed warm-up run) of what
/// a new upload costs in CPU: MD5 of the bytes, the whole pipeline, then the SHA-256 its
/// record keeps (`ms`); each round also times the same without the SHA-256, in turn with it
/// (`ms_without_sha256`), so the two are compared on the same machine state; and the
/// placeholder alone, made of the variant the pipeline makes it of, 100 times a round
/// (`placeholder_ms_median`, per placeholder). One JSON line a file.
pub fn pipeline(rounds: usize, out: Option<PathBuf>, files: Vec<PathBuf>) -> Result<()> {
    imgest_core::telemetry::init("warn");
    // The stages record at IMGEST_METRICS's level, into the local runner's exporter, so that
    // bench/metrics.sh can compare the levels on the same binary.
    imgest_local::prometheus::install()?;
    let settings = Settings::from_env()?;
    let pipeline = imgest_pipeline::configure::from_settings(&settings, None)?;
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for file in &files {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let run = |strong: bool| -> Result<(ImageId, Processed, Option<ContentHash>)> {
            let id = ImageId::of_bytes(&bytes);
            let processed = pipeline
                .process(&bytes)
                .with_context(|| format!("processing {}", file.display()))?;
            let sha256 = strong.then(|| ContentHash::of_bytes(&bytes));
            Ok((id, processed, sha256))
        };
        let (_, processed, _) = run(true)?;
        let mut ms = Vec::with_capacity(rounds);
        let mut ms_without = Vec::with_capacity(rounds);
        for _ in 0..rounds.max(1) {
            for (strong, into) in [(false, &mut ms_without), (true, &mut ms)] {
                let started = Instant::now();
                std::hint::black_box(run(strong)?);
                into.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
        let placeholder_ms = placeholder_ms(&processed, rounds)?;
        if let Some(dir) = &out {
            write_variants(dir, file, &processed)?;
        }
        let variants: serde_json::Map<String, Value> = processed
            .variants
            .iter()
            .map(|v| {
                let facts = json!({"width": v.width, "height": v.height, "bytes": v.bytes.len(), "format": v.format.as_str()});
                (v.name.to_string(), facts)
            })
            .collect();
        let line = json!({
            "file": file.display().to_string(),
            "bytes": bytes.len(),
            "format": processed.format.as_str(),
            "width": processed.width,
            "height": processed.height,
            "ms": ms,
            "ms_median": median(&mut ms),
            "ms_without_sha256_median": median(&mut ms_without),
            "placeholder_ms_median": placeholder_ms,
            "variants": variants,
            "peak_rss_kb": peak_rss_kb(),
            "metrics": metrics::current().as_str(),
        });
        println!("{line}");
    }
    Ok(())
}

/// The median time of one placeholder made of the variant `processed`'s was made of (the
/// smallest of the photo's shape, as the JPEG decodes): 100 in a row per round, to see
/// microseconds through the clock.
fn placeholder_ms(processed: &Processed, rounds: usize) -> Result<f64> {
    let sizes = processed.variants.iter().map(|v| (v.width, v.height));
    let source = imgest_pipeline::placeholder_source(sizes, (processed.width, processed.height))
        .and_then(|i| processed.variants.get(i))
        .context("no variant to make a placeholder of")?;
    let pixels = image::load_from_memory(&source.bytes)
        .context("decoding the placeholder's variant")?
        .to_rgb8();
    const IN_A_ROW: u32 = 100;
    let mut ms = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let started = Instant::now();
        for _ in 0..IN_A_ROW {
            std::hint::black_box(imgest_pipeline::placeholder_of(std::hint::black_box(
                &pixels,
            )));
        }
        ms.push(started.elapsed().as_secs_f64() * 1000.0 / f64::from(IN_A_ROW));
    }
    Ok(median(&mut ms))
}

/// `icc`: moxcms' own encoding of a well-known RGB profile, written to `out`.
pub fn icc(name: &str, out: &Path) -> Result<()> {
    let profile = match name {
        "display-p3" => moxcms::ColorProfile::new_display_p3(),
        "adobe-rgb" => moxcms::ColorProfile::new_adobe_rgb(),
        other => anyhow::bail!("unknown profile {other}"),
    };
    let bytes = profile
        .encode()
        .map_err(|e| anyhow::anyhow!("encoding {name}: {e}"))?;
    std::fs::write(out, bytes).with_context(|| format!("writing {}", out.display()))
}

/// `md5`: single-core MB/s of what a dedup hit hashes, on an in-memory buffer: MD5 alone (the
/// image id, hashed while the body streams in), SHA-256 alone, and both one after the other (a
/// hit checks the SHA-256 of the body it read; with its one record write, that is a hit's
/// ceiling); `ratio` is the last over MD5 alone. `sha_ni` says whether the CPU has the SHA
/// extensions (SHA-256 is about half as fast without them).
pub fn md5(mb: usize, rounds: usize) -> Result<()> {
    // Not all zeros: any content hashes at the same speed, but say so plainly.
    let buf: Vec<u8> = (0..mb.max(1) << 20)
        .map(|i| (i * 131 % 251) as u8)
        .collect();
    // The three in turn within each round, so a machine whose speed drifts (other work
    // beside it) slows each alike; `ratio` is the median of the rounds' own ratios.
    let md5 = |b: &[u8]| {
        std::hint::black_box(ImageId::of_bytes(b));
    };
    let sha = |b: &[u8]| {
        std::hint::black_box(ContentHash::of_bytes(b));
    };
    let rate = |hash: &dyn Fn(&[u8])| {
        let started = Instant::now();
        hash(std::hint::black_box(&buf));
        buf.len() as f64 / 1e6 / started.elapsed().as_secs_f64()
    };
    let (mut md5_mb_s, mut sha256_mb_s, mut both_mb_s, mut ratios) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds.max(1) {
        let alone = rate(&md5);
        sha256_mb_s.push(rate(&sha));
        let both = rate(&|b| {
            md5(b);
            sha(b);
        });
        ratios.push(both / alone);
        md5_mb_s.push(alone);
        both_mb_s.push(both);
    }
    let (md5, sha256, both, ratio) = (
        median(&mut md5_mb_s),
        median(&mut sha256_mb_s),
        median(&mut both_mb_s),
        median(&mut ratios),
    );
    let sha_ni = std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| {
            c.split_whitespace()
                .any(|flag| flag == "sha_ni" || flag == "sha2")
        })
        .unwrap_or(false);
    println!(
        "{}",
        json!({"md5_mb_s_median": md5, "sha256_mb_s_median": sha256,
               "md5_then_sha256_mb_s_median": both, "ratio": ratio,
               "sha_ni": sha_ni, "buffer_mb": mb, "rounds": rounds.max(1)})
    );
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn write_variants(dir: &Path, file: &Path, processed: &Processed) -> Result<()> {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    processed
        .write_variants(dir, &stem)
        .map_err(|(path, e)| anyhow::anyhow!("writing {}: {e}", path.display()))
}

/// This process's peak resident set (Linux `VmHWM`), in KiB; `None` elsewhere.
fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
