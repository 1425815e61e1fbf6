//! The measured profile the capacity model reads (`imgest-bench cost --profile-out FILE`):
//! per stage, what its invocations did (items, CPU and modeled time, memory), what it was
//! billed, and its DynamoDB requests by operation and item class, with the most requests one
//! key got in one invocation. `imgest-bench capacity` multiplies these by the scenario's rates.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::bill::bill;
use super::proxy::{StageCounts, Tally};
use super::report::sizing;

/// The whole profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// What was measured: the commit, and the benchmark's command line.
    pub source: String,
    /// Photos per scenario (each stage's per-photo figures divide by it).
    pub photos: u64,
    pub offers: u64,
    /// How long the partner host took to answer each download (part of every fetch
    /// invocation's modeled time).
    pub host_latency_ms: f64,
    /// GC-index buckets a whole GC run listed (every profile before the layout of 64 + 16
    /// listed 16).
    #[serde(default = "gc_listed_buckets_before")]
    pub gc_listed_buckets: f64,
    pub stages: BTreeMap<String, StageProfile>,
}

fn gc_listed_buckets_before() -> f64 {
    16.0
}

/// One stage of the cost benchmark.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageProfile {
    pub invocations: u64,
    pub items: u64,
    pub memory_mb: u32,
    pub cpu_ms_per_invocation: f64,
    pub modeled_ms_per_invocation: f64,
    /// How many requests deep an invocation's chain was: the time a request was outstanding
    /// over a request's mean wait (requests side by side count once). 0: not measured (a
    /// profile from before it was), and the requests are taken one after another per item.
    #[serde(default)]
    pub request_rounds_per_invocation: f64,
    pub write_units: f64,
    pub read_units: f64,
    pub sqs_requests: u64,
    pub s3_put_class: u64,
    pub s3_get_class: u64,
    /// The stage's bill in dollars (not per photo), by service.
    pub dollars: Dollars,
    /// Requests by service and operation.
    pub requests: BTreeMap<String, u64>,
    pub keys: Vec<KeyProfile>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dollars {
    pub lambda: f64,
    pub dynamodb: f64,
    pub sqs: f64,
    pub s3_puts: f64,
    pub s3_gets: f64,
}

/// The DynamoDB requests of one operation on one class of item.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyProfile {
    pub op: String,
    pub class: String,
    pub requests: u64,
    pub writes: u64,
    pub wcu: f64,
    pub rcu: f64,
    pub condition_failed: u64,
    pub tx_conflict: u64,
    pub too_large: u64,
    pub largest_item_bytes: u64,
    pub distinct_keys: u64,
    pub max_key_per_invocation: f64,
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0_u32), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / f64::from(n) }
}

/// An invocation's request rounds over a stage's runs: their busy time over a request's mean
/// wait, per invocation.
fn rounds(runs: &[super::proxy::Run]) -> f64 {
    let busy: f64 = runs.iter().map(|r| r.busy_ms).sum();
    let requests: u64 = runs.iter().map(|r| r.requests).sum();
    let waited: f64 = runs.iter().map(|r| r.waited_ms).sum();
    if runs.is_empty() || requests == 0 || waited <= 0.0 {
        return 0.0;
    }
    busy / (waited / requests as f64) / runs.len() as f64
}

fn stage_profile(name: &str, c: &StageCounts) -> StageProfile {
    // The stage's function: the part after "scenario: ".
    let function = name.split_once(": ").map_or(name, |(_, f)| f);
    let b = bill(c, sizing(function));
    StageProfile {
        invocations: c.invocations,
        items: c.items,
        memory_mb: b.memory_mb,
        cpu_ms_per_invocation: mean(c.runs.iter().map(|r| r.cpu_ms)),
        modeled_ms_per_invocation: mean(c.runs.iter().map(|r| r.modeled_ms)),
        request_rounds_per_invocation: rounds(&c.runs),
        write_units: c.write_units,
        read_units: c.read_units,
        sqs_requests: c.sqs_requests,
        s3_put_class: c.s3_put_class,
        s3_get_class: c.s3_get_class,
        dollars: Dollars {
            lambda: b.lambda,
            dynamodb: b.dynamodb,
            sqs: b.sqs,
            s3_puts: b.s3_puts,
            s3_gets: b.s3_gets,
        },
        requests: c.requests.clone(),
        keys: c
            .keys
            .iter()
            .map(|((op, class), k)| KeyProfile {
                op: op.clone(),
                class: class.clone(),
                requests: k.requests,
                writes: k.writes,
                wcu: k.wcu,
                rcu: k.rcu,
                condition_failed: k.condition_failed,
                tx_conflict: k.tx_conflict,
                too_large: k.too_large,
                largest_item_bytes: k.largest_item_bytes,
                distinct_keys: k.by_key.len() as u64,
                max_key_per_invocation: k.max_key_per_invocation(c.invocations),
            })
            .collect(),
    }
}

/// The profile of everything `tally` counted.
pub fn profile(
    tally: &Tally,
    source: String,
    photos: usize,
    offers: usize,
    host_latency_ms: f64,
) -> Profile {
    Profile {
        source,
        photos: photos as u64,
        offers: offers as u64,
        host_latency_ms,
        gc_listed_buckets: imgest_aws::dynamodb::GC_LISTED_BUCKETS as f64,
        stages: tally
            .stages()
            .iter()
            .map(|(name, c)| (name.clone(), stage_profile(name, c)))
            .collect(),
    }
}
