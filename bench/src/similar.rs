//! `imgest-bench similar --dir DIR`: near-duplicate detection measured on the photos
//! bench/similar.py made (bench/similar.sh runs both).
//!
//! The originals and the distractors are stored through the flows on the embedded default
//! (a fresh data directory, `IMGEST_SIMILAR=index`, the default variant set: the signature is
//! made as production makes it). Each query (a transformed original) is processed by the
//! pipeline and looked up through the index as `GET /v1/images/{id}/similar` looks up
//! (every image in scope). Printed:
//!
//! - per transform: the share of queries whose lookup finds their original (recall), the same
//!   share with every hash compared to every hash and every point to every point (no index:
//!   what the probes lose), PDQ alone (the whole photo's hash against the original's, no
//!   mirror, no trimmed part), and the share found by points only (a crop);
//! - false positives: matches of a query other than its original, and every (query,
//!   distractor) and (original, original) pair within the distance, per pair compared;
//! - reads per lookup (index buckets and point keys, entries read), the signature's cost
//!   beside the whole pipeline's and a lookup's points' cost, and the index's entries per image
//!   and bytes per million images.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use futures_util::{StreamExt, TryStreamExt, stream};
use imgest_core::domain::{
    ImageId, MATCH_DISTANCE, MIN_AGREEING, QueryPoints, Signal, Signature, agreeing,
};
use imgest_core::imaging::Imaging;
use imgest_flows::similar::{Scope, lookup_reads};
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_pipeline::{Pipeline, PipelineConfig};
use imgest_settings::Settings;

use crate::data_dir::TempDir;
use crate::init_logs;

fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .collect();
    out.sort();
    Ok(out)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether any hash `query` probes with is within the distance of any `stored` indexes, or
/// their inner parts' hashes are, or their points agree (the lookup's checks, without the
/// index).
fn near(query: &Signature, points: &QueryPoints, stored: &Signature) -> bool {
    if agreeing(points, stored.points()).points >= MIN_AGREEING {
        return true;
    }
    let inner = query
        .inner
        .zip(stored.inner)
        .is_some_and(|(a, b)| a.distance(&b) <= MATCH_DISTANCE);
    inner
        || query.probes().any(|(_, probe, _)| {
            stored
                .indexed()
                .any(|(_, hash)| probe.distance(&hash) <= MATCH_DISTANCE)
        })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

struct Stored {
    id: ImageId,
    signature: Option<Signature>,
}

/// A query's lookup points, found as a lookup finds them: in its signature's variant file.
fn lookup_points(
    pipeline: &Pipeline,
    processed: &imgest_core::imaging::Processed,
) -> Option<QueryPoints> {
    let mut sizes = processed.variants.iter().map(|v| (v.width, v.height));
    let i = pipeline.signature_source(&mut sizes, (processed.width, processed.height))?;
    pipeline.query_points(&processed.variants.get(i)?.bytes)
}

pub async fn run(dir: PathBuf) -> Result<()> {
    init_logs("warn");
    let data = TempDir::new("similar", "run")?;
    let vars = HashMap::from([
        ("IMGEST_DATA_DIR".to_owned(), data.0.display().to_string()),
        ("IMGEST_SIMILAR".to_owned(), "index".to_owned()),
    ]);
    let settings = Settings::from_map(&vars)?;
    let runner = LocalRunner::start(&settings, None, RunnerOptions::default())
        .await
        .context("starting the runner")?;
    let service = Arc::clone(runner.service());
    let pipeline = Arc::new(Pipeline::new(PipelineConfig::default()));

    let store = |paths: Vec<PathBuf>| {
        let service = Arc::clone(&service);
        async move {
            stream::iter(paths)
                .map(|path| {
                    let service = Arc::clone(&service);
                    async move {
                        let bytes = std::fs::read(&path)?;
                        let outcome = service.upload_bytes(bytes.into()).await?;
                        let signature = outcome.record.signature().cloned();
                        Ok::<_, anyhow::Error>((
                            stem(&path),
                            Stored {
                                id: outcome.record.id,
                                signature,
                            },
                        ))
                    }
                })
                .buffered(4)
                .try_collect::<Vec<_>>()
                .await
        }
    };
    let started = Instant::now();
    let originals: BTreeMap<String, Stored> = store(files(&dir.join("originals"))?)
        .await?
        .into_iter()
        .collect();
    let distractors: Vec<Stored> = store(files(&dir.join("distractors"))?)
        .await?
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    let stored_s = started.elapsed().as_secs_f64();
    let images = originals.len() + distractors.len();
    ensure!(
        !originals.is_empty(),
        "no originals under {}",
        dir.display()
    );
    let unsigned = originals
        .values()
        .chain(&distractors)
        .filter(|s| s.signature.is_none())
        .count();
    let flat = originals
        .values()
        .chain(&distractors)
        .filter(|s| s.signature.as_ref().is_some_and(|s| !s.is_matchable()))
        .count();
    let trimmed = originals
        .values()
        .chain(&distractors)
        .filter(|s| s.signature.as_ref().is_some_and(|s| s.trimmed.is_some()))
        .count();
    let flat_originals = originals
        .values()
        .filter(|o| o.signature.as_ref().is_none_or(|s| !s.is_matchable()))
        .count();
    let trimmed_originals = originals
        .values()
        .filter(|o| o.signature.as_ref().is_some_and(|s| s.trimmed.is_some()))
        .count();
    println!(
        "stored {} originals and {} distractors in {stored_s:.0} s ({unsigned} without a \
         signature, {flat} too flat to index ({flat_originals} originals), {trimmed} with a \
         trimmed part ({trimmed_originals} originals))\n",
        originals.len(),
        distractors.len()
    );
    println!(
        "Queries of the {} originals with a hash worth indexing (quality at least 50):\n",
        originals.len() - flat_originals
    );

    let mut transforms: Vec<PathBuf> = std::fs::read_dir(dir.join("queries"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    transforms.sort();
    println!(
        "| transform | queries | recall (lookup) | recall (every hash and point, no index) | \
         PDQ alone | found by points only | other images matched |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut buckets = Vec::new();
    let mut entries = Vec::new();
    let mut query_signatures = Vec::new();
    let mut wrong_matches = 0usize;
    for transform in &transforms {
        let name = stem(transform);
        let (mut n, mut found, mut brute, mut pdq, mut cropped, mut others) = (0, 0, 0, 0, 0, 0);
        for path in files(transform)? {
            let Some(original) = originals.get(&stem(&path)) else {
                continue;
            };
            let Some(stored) = original.signature.as_ref().filter(|s| s.is_matchable()) else {
                continue;
            };
            let bytes = std::fs::read(&path)?;
            let processed = pipeline.process(&bytes)?;
            let points = lookup_points(&pipeline, &processed).context("a query without points")?;
            let signature = processed.signature.context("a query without a signature")?;
            n += 1;
            let result = service
                .similar_to(&signature, Some(&points), None, &Scope::All)
                .await
                .context("looking up")?;
            buckets.push(result.buckets_read as f64);
            entries.push(result.entries_read as f64);
            let hit = result.matches.iter().find(|m| m.image_id == original.id);
            found += usize::from(hit.is_some());
            cropped += usize::from(hit.is_some_and(|m| m.signal == Signal::Cropped));
            let wrong = result
                .matches
                .iter()
                .filter(|m| m.image_id != original.id)
                .count();
            others += wrong;
            wrong_matches += wrong;
            brute += usize::from(signature.is_searchable() && near(&signature, &points, stored));
            pdq += usize::from(signature.whole.hash.distance(&stored.whole.hash) <= MATCH_DISTANCE);
            query_signatures.push((signature, points));
        }
        let share = |k: usize| 100.0 * k as f64 / n.max(1) as f64;
        println!(
            "| {name} | {n} | {:.0} % | {:.0} % | {:.0} % | {:.0} % | {others} |",
            share(found),
            share(brute),
            share(pdq),
            share(cropped)
        );
    }

    // Every (query, distractor) pair and every pair of originals, compared hash by hash.
    let distractor_signatures: Vec<&Signature> = distractors
        .iter()
        .filter_map(|d| d.signature.as_ref().filter(|s| s.is_matchable()))
        .collect();
    let mut pairs = 0u64;
    let mut false_pairs = 0u64;
    for (q, points) in query_signatures.iter().filter(|(s, _)| s.is_searchable()) {
        for d in &distractor_signatures {
            pairs += 1;
            false_pairs += u64::from(near(q, points, d));
        }
    }
    // Each original looked up (its points from its stored variant) against every other.
    let mut original_points: Vec<(&Signature, QueryPoints)> = Vec::new();
    for (name, o) in &originals {
        let Some(signature) = o.signature.as_ref() else {
            continue;
        };
        let path = dir.join("originals").join(format!("{name}.jpg"));
        let processed = pipeline.process(&std::fs::read(&path)?)?;
        if let Some(points) = lookup_points(&pipeline, &processed) {
            original_points.push((signature, points));
        }
    }
    let (mut original_pairs, mut original_false) = (0u64, 0u64);
    for (i, (a, points)) in original_points.iter().enumerate() {
        for (j, (b, _)) in original_points.iter().enumerate() {
            if i != j {
                original_pairs += 1;
                original_false += u64::from(near(a, points, b));
            }
        }
    }
    println!(
        "\nfalse positives: {wrong_matches} images other than the original among {} lookups' \
         matches; {false_pairs} of {pairs} (query, distractor) pairs within {MATCH_DISTANCE} \
         bits or with {MIN_AGREEING} points agreeing ({:.2} per 10,000); {original_false} of \
         {original_pairs} (original, other original) pairs",
        query_signatures.len(),
        10_000.0 * false_pairs as f64 / pairs.max(1) as f64
    );
    println!(
        "reads per lookup: median {:.0} buckets (at most {} for a photo \
         with a trimmed part), {:.0} entries read (median; the index holds {images} images)",
        median(buckets),
        query_signatures
            .iter()
            .map(|(s, _)| lookup_reads(s))
            .max()
            .unwrap_or(0),
        median(entries)
    );

    // The signature's cost beside the pipeline's, on the originals.
    let mut sign_ms = Vec::new();
    let mut points_ms = Vec::new();
    let mut process_ms = Vec::new();
    for path in files(&dir.join("originals"))?.iter().take(40) {
        let bytes = std::fs::read(path)?;
        let t = Instant::now();
        let processed = pipeline.process(&bytes)?;
        process_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let Some(medium) = processed
            .variants
            .iter()
            .find(|v| v.name.as_str() == "medium")
        else {
            continue;
        };
        let pixels = image::load_from_memory(&medium.bytes)?.to_rgb8();
        let t = Instant::now();
        for _ in 0..5 {
            std::hint::black_box(imgest_pipeline::signature_of(&pixels));
        }
        sign_ms.push(t.elapsed().as_secs_f64() * 1e3 / 5.0);
        let t = Instant::now();
        for _ in 0..5 {
            std::hint::black_box(imgest_pipeline::query_points_of(&pixels));
        }
        points_ms.push(t.elapsed().as_secs_f64() * 1e3 / 5.0);
    }
    let (sign, process) = (median(sign_ms), median(process_ms));
    println!(
        "signature: {sign:.2} ms a photo (median, from its 640-pixel variant, its points \
         included), {:.1} % of the pipeline's {process:.0} ms; a lookup's points (at {} \
         scales, from the decoded variant): {:.2} ms",
        100.0 * sign / process,
        imgest_core::domain::QUERY_SCALES.len(),
        median(points_ms)
    );
    // The busiest bucket: the share of the images filed under it (a partition's share of the
    // index's writes).
    let mut filed: HashMap<imgest_core::domain::Bucket, usize> = HashMap::new();
    for s in originals
        .values()
        .chain(&distractors)
        .filter_map(|s| s.signature.as_ref().filter(|s| s.is_matchable()))
    {
        for (_, hash) in s.indexed() {
            for bucket in imgest_core::domain::Bucket::of(&hash) {
                *filed.entry(bucket).or_default() += 1;
            }
        }
    }
    let busiest = filed.values().copied().max().unwrap_or(0);
    println!(
        "buckets: {} of {} used; the busiest holds {busiest} entries ({:.2} % of the images)",
        filed.len(),
        16 * 65_536,
        100.0 * busiest as f64 / images.max(1) as f64
    );
    // The points' keys: how many an image files, and the busiest key's share.
    let mut keys: HashMap<u32, usize> = HashMap::new();
    let mut filed_points = 0usize;
    for s in originals
        .values()
        .chain(&distractors)
        .filter_map(|s| s.signature.as_ref().filter(|s| s.is_matchable()))
    {
        for p in s.points() {
            *keys.entry(p.key()).or_default() += 1;
            filed_points += 1;
        }
    }
    let busiest_key = keys.values().copied().max().unwrap_or(0);
    let indexed = images - flat;
    println!(
        "point keys: {} of {} used; the busiest holds {busiest_key} entries ({:.2} % of the \
         images); {:.1} points filed an image",
        keys.len(),
        1u64 << 24,
        100.0 * busiest_key as f64 / images.max(1) as f64,
        filed_points as f64 / indexed.max(1) as f64
    );
    let hashes_per_image = 16.0 * (1.0 + trimmed as f64 / images.max(1) as f64);
    let points_per_image = filed_points as f64 / indexed.max(1) as f64;
    // A DynamoDB entry: pk `rec#similar#{5 hex}` (19 bytes with its name), sk `m#{id}[.t]`
    // (38), body (68; 64 more in the whole photo's entries, its inner part's hash), expires_at
    // and ttl (about 30), and the 100 bytes DynamoDB bills per item stored. A point's: pk
    // `rec#similar#p{6 hex}` (21), sk `m#{id}.p{n}` (40), body (26), expiry (30), 100.
    let hash_bytes = 19.0 + 38.0 + 68.0 + 64.0 * 16.0 / hashes_per_image + 30.0 + 100.0;
    let point_bytes = 21.0 + 40.0 + 26.0 + 30.0 + 100.0;
    println!(
        "index: {:.1} entries an image ({hashes_per_image:.1} of hashes, {points_per_image:.1} \
         of points); on DynamoDB about {:.1} GB per million images ({hash_bytes:.0} bytes a \
         hash's entry, {point_bytes:.0} a point's, billed storage)",
        hashes_per_image + points_per_image,
        (hashes_per_image * hash_bytes + points_per_image * point_bytes) * 1e6 / 1e9
    );
    runner.stop().await;
    Ok(())
}
