//! The Lambda functions' metrics as CloudWatch reads them: embedded-metric-format lines, one per
//! label set, written by a flush after the stages ran. Its own test binary: the exporter is the
//! process's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use imgest_core::telemetry::metrics::{MetricsLevel, STAGE_SECONDS, STAGE_TOTAL};
use imgest_lambda::cloudwatch;
use imgest_settings::Settings;
use serde_json::Value;

#[test]
fn a_flush_writes_each_stages_counts_and_timings_as_embedded_metric_format_lines() {
    let level = cloudwatch::install_at(MetricsLevel::Timings).unwrap();
    assert_eq!(level, MetricsLevel::Timings);

    let pipeline = imgest_pipeline::configure::from_settings(&Settings::defaults(), None).unwrap();
    let photo =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/storm.jpg"))
            .unwrap();
    pipeline.process(&photo).unwrap();
    assert!(pipeline.process(b"not a photo at all").is_err());

    let mut out = Vec::new();
    assert!(cloudwatch::flush_to(&mut out).unwrap());
    let lines: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let line = |stage: &str, outcome: &str| {
        lines
            .iter()
            .find(|l| l["stage"] == stage && l["outcome"] == outcome)
            .unwrap_or_else(|| panic!("no {stage}/{outcome} line in {lines:?}"))
    };
    let decode = line("decode", "ok");
    let declared = &decode["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(declared["Namespace"], "imgest");
    assert_eq!(
        declared["Dimensions"][0],
        serde_json::json!(["stage", "outcome"])
    );
    let names: Vec<&str> = declared["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&STAGE_TOTAL) && names.contains(&STAGE_SECONDS),
        "{names:?}"
    );
    assert_eq!(decode[STAGE_TOTAL], 1);
    assert!(decode[STAGE_SECONDS][0].as_f64().unwrap() > 0.0, "{decode}");
    assert_eq!(line("encode", "ok")[STAGE_TOTAL], 3);
    // The bytes that are not a photo fail at decoding.
    assert_eq!(line("decode", "error")[STAGE_TOTAL], 1);

    // A flush takes what it wrote: the next one has nothing to say.
    let mut again = Vec::new();
    cloudwatch::flush_to(&mut again).unwrap();
    assert!(again.is_empty(), "{}", String::from_utf8_lossy(&again));
}
