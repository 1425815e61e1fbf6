//! The memory budget under a burst: distinct large photos (JPEG baseline and progressive,
//! PNG 8- and 16-bit with alpha, 20 to 49 MP) uploaded all at once to a running `imgest
//! serve`. Prints how each was answered and how long the burst took; `bench/burst.sh` starts
//! the server with `IMGEST_MEMORY_BUDGET` and reads its peak RSS.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Context;
use imgest_hosts::hostile;

/// The `i`th photo of the burst: its kind, and its bytes.
fn photo(i: usize) -> (&'static str, Vec<u8>) {
    // Distinct sizes, so no two photos share their bytes (no deduplication).
    let step = i as u32 * 16;
    match i % 4 {
        0 => ("jpeg", hostile::jpeg(5200 + step, 4000, false, None)),
        1 => (
            "progressive jpeg",
            hostile::jpeg(4800 + step, 4200, true, None),
        ),
        2 => (
            "png 8-bit rgba",
            hostile::png(7000 - step / 4, 7000, true, false),
        ),
        _ => (
            "png 16-bit rgba",
            hostile::png(6000 + step / 4, 6000, true, true),
        ),
    }
}

pub async fn run(url: &str, count: usize) -> anyhow::Result<()> {
    imgest_download::install_default_provider();
    let photos: Vec<_> = (0..count).map(photo).collect();
    let megapixels =
        |b: &[u8]| image_size(b).map_or(0.0, |(w, h)| f64::from(w) * f64::from(h) / 1e6);
    for (kind, bytes) in photos.iter().take(4) {
        eprintln!(
            "{kind}: {:.1} MP, {:.1} MB",
            megapixels(bytes),
            bytes.len() as f64 / 1e6
        );
    }
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(600))
        .build()
        .context("building the HTTP client")?;
    let started = Instant::now();
    let uploads = photos.into_iter().map(|(kind, bytes)| {
        let client = client.clone();
        let url = format!("{url}/v1/images");
        async move {
            let answer = client
                .post(url)
                .header("content-type", "application/octet-stream")
                .body(bytes)
                .send()
                .await;
            (
                kind,
                answer
                    .map(|r| r.status().as_u16())
                    .map_err(|e| e.to_string()),
            )
        }
    });
    let answers = futures_util::future::join_all(uploads).await;
    let elapsed = started.elapsed();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (kind, answer) in &answers {
        let key = match answer {
            Ok(status) => format!("{status} {kind}"),
            Err(e) => format!("failed {kind}: {e}"),
        };
        *counts.entry(key).or_default() += 1;
    }
    let dropped = answers
        .iter()
        .filter(|(_, a)| !matches!(a, Ok(200 | 201 | 422 | 429 | 503)))
        .count();
    println!(
        "{}",
        serde_json::json!({
            "uploads": count,
            "seconds": elapsed.as_secs_f64(),
            "answers": counts,
            "unexpected": dropped,
        })
    );
    Ok(())
}

/// Width and height from a JPEG's frame or a PNG's header.
fn image_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.starts_with(b"\x89PNG") {
        let w = u32::from_be_bytes(bytes.get(16..20)?.try_into().ok()?);
        let h = u32::from_be_bytes(bytes.get(20..24)?.try_into().ok()?);
        return Some((w, h));
    }
    let sof = bytes
        .windows(2)
        .position(|m| m[0] == 0xFF && matches!(m[1], 0xC0 | 0xC2))?;
    let h = u16::from_be_bytes(bytes.get(sof + 5..sof + 7)?.try_into().ok()?);
    let w = u16::from_be_bytes(bytes.get(sof + 7..sof + 9)?.try_into().ok()?);
    Some((u32::from(w), u32::from(h)))
}
