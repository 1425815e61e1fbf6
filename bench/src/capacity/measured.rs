//! What the capacity model takes from measurements: the cost benchmark's profile (per stage:
//! invocations, CPU and modeled time, bills, DynamoDB requests by operation and item class)
//! and the contention benchmark's (per shared item: write requests per successful update at
//! 64 writers). Every accessor names the stage and figure it reads, for the traces.

use anyhow::{Context, Result};
use imgest_flows::gc::GC_BATCH;

use super::scenario::{Latency, LatencyClass};
use crate::contention::{ContentionProfile, ContentionTarget};
use crate::cost::profile::{KeyProfile, Profile, StageProfile};
use crate::cost::proxy::is_write_op as is_write;

/// Both profiles.
pub struct Measured {
    pub cost: Profile,
    pub contention: ContentionProfile,
}

/// Lambda gives a full vCPU at this much memory, and CPU in proportion below it.
pub const FULL_VCPU_MB: f64 = 1769.0;

/// What one item holds an instance: CPU and waiting on requests, seconds.
#[derive(Debug, Clone)]
pub struct StageTime {
    /// Its CPU at the function's share of a vCPU.
    pub cpu_s: f64,
    pub wait_s: f64,
    /// The function's share of a vCPU.
    pub vcpu: f64,
    /// Whether its CPU is a photo's decode, chained to its own requests ([`Self::total`]).
    pub decode: bool,
    pub source: String,
}

impl StageTime {
    /// The longer of its CPU at the function's share and its CPU on a whole core plus its
    /// waits: Lambda's share is a quota per scheduling period, and a thread waiting on a
    /// request uses none of it, so below a whole vCPU the waits hide behind the throttling
    /// (up to the point where the CPU no longer fills the quota).
    ///
    /// Not all of a photo's decode's waits hide: its requests come before it (the body) and
    /// after it (its files, its record), and the decode pool's threads spend the quota the
    /// thread that handles the answers shares, so an answer that arrives while the pool is
    /// throttled waits out the period. Its time lies between that bound and the sum of its CPU
    /// at the function's share and its waits ([`decode_span`]).
    pub fn total(&self) -> f64 {
        if self.decode {
            decode_span(self.cpu_s, self.cpu_s * self.vcpu, self.wait_s)
        } else {
            self.cpu_s.max(self.cpu_s * self.vcpu + self.wait_s)
        }
    }

    pub fn figure(&self) -> Figure {
        Figure {
            value: self.total(),
            source: self.source.clone(),
        }
    }
}

/// How long decoding takes with its requests, seconds: `throttled_s` of CPU at the function's
/// share (`core_s` on a whole core) and `waits_s` on requests chained to it. Between two
/// bounds, the waits hidden behind the throttling (`max(throttled, core + waits)`) and none
/// hidden (`throttled + waits`), measured nearer one or the other from run to run (the
/// validation's process and fetch rows, at two loads of the emulator): their geometric mean,
/// within `√(sum ÷ max)` of either (25 % while the sum is at most 1.56 times the max).
pub fn decode_span(throttled_s: f64, core_s: f64, waits_s: f64) -> f64 {
    let hidden = throttled_s.max(core_s + waits_s);
    let summed = throttled_s + waits_s;
    (hidden * summed).sqrt()
}

/// What GC's records cost ([`Measured::per_record`]).
#[derive(Debug, Clone)]
pub struct GcRecord {
    pub record: StageTime,
    /// Listing one round's records, seconds: its requests' waits, and their CPU on a core.
    pub listing_s: f64,
    pub listing_cpu_s: f64,
    /// Records per round in the measurement.
    pub records_per_round: f64,
}

/// What the sweep's pages cost ([`Measured::sweep_costs`]).
#[derive(Debug, Clone)]
pub struct SweepCosts {
    /// CPU per request, on a whole core.
    pub cpu_ms_per_request: f64,
    /// In the measurement: files a LIST returned, and the lookups, checkpoints and other reads
    /// per LIST.
    pub files_per_list: f64,
    pub batch_gets_per_list: f64,
    pub saves_per_list: f64,
    pub reads_per_list: f64,
    pub source: String,
}

/// A measured figure and where it came from.
#[derive(Debug, Clone)]
pub struct Figure {
    pub value: f64,
    pub source: String,
}

impl Measured {
    pub fn load(cost: &str, contention: &str) -> Result<Self> {
        Ok(Self {
            cost: serde_json::from_str(cost).context("the cost profile does not parse")?,
            contention: serde_json::from_str(contention)
                .context("the contention profile does not parse")?,
        })
    }

    pub fn stage(&self, name: &str) -> Result<&StageProfile> {
        self.cost.stages.get(name).with_context(|| {
            format!("the profile has no stage {name:?}: measure again with bench/capacity.sh")
        })
    }

    /// Photos per scenario of the cost benchmark.
    pub fn photos(&self) -> f64 {
        self.cost.photos as f64
    }

    /// Photos per offer in the cost benchmark's offers.
    pub fn photos_per_offer(&self) -> f64 {
        self.cost.photos as f64 / (self.cost.offers.max(1)) as f64
    }

    /// The scenario's latency of one request, as the profile names it (`dynamodb.GetItem`,
    /// `s3.PUT`, …); `None` for what Lambda's event source mapping does outside the function
    /// (receiving and deleting its batch).
    pub fn request_ms(op: &str, l: &Latency) -> Option<f64> {
        LatencyClass::of(op).map(|class| l.of(class))
    }

    /// A stage's requests at the scenario's latencies, ms, one after another, except an item's
    /// single S3 `PUT`s and `DELETE`s: they go out together (a photo's files are written side
    /// by side, a record's deleted side by side), one round per item of the stage's `items`.
    fn requests_ms(s: &StageProfile, latency: &Latency, items: f64) -> f64 {
        let mut total = 0.0;
        for (op, count) in &s.requests {
            let Some(ms) = Self::request_ms(op, latency) else {
                continue;
            };
            let count = match op.as_str() {
                "s3.PUT" | "s3.DELETE" => (*count as f64).min(items),
                _ => *count as f64,
            };
            total += count * ms;
        }
        total
    }

    /// The mean latency of a stage's requests at the scenario's latencies, ms (each kind by
    /// its count).
    fn mean_request_ms(s: &StageProfile, latency: &Latency) -> f64 {
        let (mut total, mut n) = (0.0, 0.0);
        for (op, count) in &s.requests {
            if let Some(ms) = Self::request_ms(op, latency) {
                total += *count as f64 * ms;
                n += *count as f64;
            }
        }
        if n > 0.0 { total / n } else { 0.0 }
    }

    /// The CPU and request time one item of `stage` holds a function's instance, computed
    /// from what was counted rather than from the measurement's own modeled time: its CPU
    /// (measured on a whole core) over the function's share of a vCPU (`memory_mb ÷ 1,769`, at
    /// most one: one item's work runs on one thread), plus its requests at the scenario's
    /// latencies, an invocation's items sharing its requests' latency as they run side by side
    /// (as the cost benchmark models them). `scale` multiplies both (an offer of more photos
    /// than were measured).
    pub fn stage_time(
        &self,
        stage: &str,
        memory_mb: f64,
        latency: &Latency,
        scale: f64,
    ) -> Result<StageTime> {
        self.item_time(stage, memory_mb, latency, scale, false)
    }

    /// [`stage_time`](Self::stage_time) of a stage whose items decode photos: their waits
    /// only partly hidden behind their CPU ([`StageTime::total`]).
    pub fn decode_time(
        &self,
        stage: &str,
        memory_mb: f64,
        latency: &Latency,
        scale: f64,
    ) -> Result<StageTime> {
        self.item_time(stage, memory_mb, latency, scale, true)
    }

    fn item_time(
        &self,
        stage: &str,
        memory_mb: f64,
        latency: &Latency,
        scale: f64,
        decode: bool,
    ) -> Result<StageTime> {
        let s = self.stage(stage)?;
        let invocations = (s.invocations.max(1)) as f64;
        let per_inv = (s.items as f64 / invocations).max(1e-9);
        let vcpu = (memory_mb / FULL_VCPU_MB).min(1.0);
        let cpu_s = scale * s.cpu_ms_per_invocation / per_inv / vcpu / 1000.0;
        let request_ms = Self::requests_ms(s, latency, s.items.max(1) as f64);
        let rounds = s.request_rounds_per_invocation;
        let (wait_s, requests) = if rounds > 0.0 {
            // The invocation's chain, as deep as measured, at the mean latency of its mix of
            // requests, shared by its items.
            let (chain_s, chain) = self.invocation_waits_s(stage, latency)?;
            (scale * chain_s / per_inv, format!("{chain} ÷ items/inv"))
        } else {
            // Not measured: a request chain per invocation (its items' requests overlap, each
            // item's one after another), shared by its items.
            (
                scale * request_ms / invocations / per_inv / per_inv / 1000.0,
                format!(
                    "{} ms/inv ÷ items/inv² (scenario latencies; an item's files in one round)",
                    super::model::fmt(request_ms / invocations)
                ),
            )
        };
        let formula = if decode {
            "√(max(CPU ÷ vCPU, CPU + requests) × (CPU ÷ vCPU + requests)) (a decode's)"
        } else {
            "max(CPU ÷ vCPU, CPU + requests)"
        };
        Ok(StageTime {
            cpu_s,
            wait_s,
            vcpu,
            decode,
            source: format!(
                "{stage}: {formula} per item: CPU {} ms/inv ÷ {} items/inv, vCPU {}; requests {requests}{}",
                super::model::fmt(s.cpu_ms_per_invocation),
                super::model::fmt(per_inv),
                super::model::fmt(vcpu),
                if (scale - 1.0).abs() > 1e-9 {
                    format!(", × {}", super::model::fmt(scale))
                } else {
                    String::new()
                }
            ),
        })
    }

    /// An invocation's waits on its requests, seconds: its measured depth (rounds of requests
    /// one after another) at the mean latency of its mix at `latency`, and the trace.
    pub fn invocation_waits_s(&self, stage: &str, latency: &Latency) -> Result<(f64, String)> {
        let s = self.stage(stage)?;
        let ms = Self::mean_request_ms(s, latency);
        Ok((
            s.request_rounds_per_invocation * ms / 1000.0,
            format!(
                "{} rounds/inv × {} ms [{stage}: measured depth, the mix's mean latency]",
                super::model::fmt(s.request_rounds_per_invocation),
                super::model::fmt(ms)
            ),
        ))
    }

    /// What a GC job's records cost, at the scenario's latencies: a record's own CPU (on
    /// `memory_mb`'s share of a vCPU) and its request chain (its conditional delete, then its
    /// files' single `DELETE`s in one round: the S3 adapter sends them together); and the
    /// listing of each round of [`GC_BATCH`] records: the GC index's `Query`s, one per bucket
    /// of the buckets side by side, and the `BatchGetItem`s of the candidates' records. The
    /// stage's rounds: one per run (the one that found fewer than a full batch), and one per
    /// full batch. A whole job that lists `buckets` (the measured one listed the profile's)
    /// makes that many `Query`s a round, as many in a row; a job that is one of `parts` side
    /// by side lists its share of them: a `parts`-th of their CPU.
    pub fn per_record(
        &self,
        stage: &str,
        memory_mb: f64,
        latency: &Latency,
        buckets: f64,
        parts: f64,
    ) -> Result<GcRecord> {
        let s = self.stage(stage)?;
        let items = (s.items.max(1)) as f64;
        let vcpu = (memory_mb / FULL_VCPU_MB).min(1.0);
        let listing_ops = ["dynamodb.Query", "dynamodb.BatchGetItem"];
        let mut record = s.clone();
        record
            .requests
            .retain(|op, _| !listing_ops.contains(&op.as_str()));
        let request_ms = Self::requests_ms(&record, latency, items);
        // A run lists rounds until one is not full: one per run, and one per full batch.
        let rounds = (s.invocations.max(1)) as f64 + (items / GC_BATCH as f64).floor();
        let count = |op: &str| s.requests.get(op).copied().unwrap_or(0) as f64;
        let measured_buckets = self.cost.gc_listed_buckets.max(1.0);
        let listing_ms = count("dynamodb.Query") / measured_buckets
            * latency.of(LatencyClass::DynamodbBatch)
            + count("dynamodb.BatchGetItem") * latency.of(LatencyClass::DynamodbBatch);
        // GC's CPU is its requests' (signing, sending, parsing): shared out per request, so
        // that a round's listing costs its own whatever the records it finds.
        let requests = |r: &StageProfile| -> f64 {
            r.requests
                .iter()
                .filter(|(op, _)| LatencyClass::of(op).is_some())
                .map(|(_, n)| *n as f64)
                .sum()
        };
        let cpu_ms = s.cpu_ms_per_invocation * s.invocations as f64;
        let per_request = cpu_ms / requests(s).max(1.0);
        let record_cpu_ms = requests(&record) * per_request / items;
        let queries = count("dynamodb.Query");
        let listing_cpu_ms = (requests(s) - requests(&record) - queries
            + queries * buckets / measured_buckets / parts.max(1.0))
            * per_request
            / rounds;
        Ok(GcRecord {
            record: StageTime {
                cpu_s: record_cpu_ms / vcpu / 1000.0,
                wait_s: request_ms / items / 1000.0,
                vcpu,
                decode: false,
                source: format!(
                    "{stage}: CPU {} ms per request; a record {} ms of CPU and {} ms of requests in a chain (its single DELETEs in one round); a round's listing {} ms of CPU and {} ms of requests [Queries ÷ {} buckets, BatchGets], {} rounds",
                    super::model::fmt(per_request),
                    super::model::fmt(record_cpu_ms),
                    super::model::fmt(request_ms / items),
                    super::model::fmt(listing_cpu_ms),
                    super::model::fmt(listing_ms / rounds),
                    super::model::fmt(measured_buckets),
                    super::model::fmt(rounds)
                ),
            },
            listing_s: listing_ms / rounds / 1000.0,
            listing_cpu_s: listing_cpu_ms / 1000.0,
            records_per_round: items / rounds,
        })
    }

    /// What the sweep's pages cost, from `stage` (a sweep over every shard): per LIST of the
    /// measurement, the files it returned, its records' `BatchGetItem`s, the checkpoints
    /// written and the other reads (a shard's confirmed sizes); and the CPU per request (its
    /// CPU is the requests' own: signing, sending, parsing; judging a file is microseconds).
    pub fn sweep_costs(&self, stage: &str) -> Result<SweepCosts> {
        let s = self.stage(stage)?;
        let files = (s.items.max(1)) as f64;
        let count = |op: &str| s.requests.get(op).copied().unwrap_or(0) as f64;
        let lists = count("s3.LIST").max(1.0);
        let saves = count("dynamodb.UpdateItem") + count("dynamodb.PutItem");
        let reads = count("dynamodb.GetItem");
        let requests: f64 = s
            .requests
            .iter()
            .filter(|(op, _)| LatencyClass::of(op).is_some())
            .map(|(_, n)| *n as f64)
            .sum();
        let cpu_ms = s.cpu_ms_per_invocation * s.invocations as f64;
        Ok(SweepCosts {
            cpu_ms_per_request: cpu_ms / requests.max(1.0),
            files_per_list: files / lists,
            batch_gets_per_list: count("dynamodb.BatchGetItem") / lists,
            saves_per_list: saves / lists,
            reads_per_list: reads / lists,
            source: format!(
                "{stage}: {} files in {} LISTs, {} BatchGetItems, {} checkpoints, {} reads; CPU {} ms per request",
                super::model::fmt(files),
                super::model::fmt(lists),
                super::model::fmt(count("dynamodb.BatchGetItem")),
                super::model::fmt(saves),
                super::model::fmt(reads),
                super::model::fmt(cpu_ms / requests.max(1.0))
            ),
        })
    }

    /// Seconds the fetch invocation that ran a popular URL's download spends per crawl
    /// waiting on it: the join stage's fetch invocation, less the partner host's answer, over
    /// the crawls that joined (the photo's own processing is counted in, a slight
    /// overestimate).
    pub fn settle_seconds_per_waiter(&self) -> Result<Figure> {
        let fetch = self.stage("join: fetch")?;
        let joins = self.stage("join: intake")?.items.max(1) as f64;
        let busy_ms = (fetch.modeled_ms_per_invocation - self.cost.host_latency_ms).max(0.0);
        Ok(Figure {
            value: busy_ms / 1000.0 / joins,
            source: format!(
                "(modeled ms/inv of join: fetch − host latency {} ms) ÷ {joins} joins",
                self.cost.host_latency_ms
            ),
        })
    }

    /// CPU milliseconds per item of `stage` (1 vCPU).
    pub fn cpu_ms_per_item(&self, stage: &str) -> Result<Figure> {
        let s = self.stage(stage)?;
        Ok(Figure {
            value: s.cpu_ms_per_invocation * s.invocations as f64 / (s.items.max(1)) as f64,
            source: format!("CPU ms/inv × inv ÷ items of {stage}"),
        })
    }

    fn keys<'a>(&'a self, stage: &str, class: &str) -> Result<Vec<&'a KeyProfile>> {
        Ok(self
            .stage(stage)?
            .keys
            .iter()
            .filter(|k| k.class == class)
            .collect())
    }

    /// Write requests one invocation of `stage` makes to its hottest key of `class`.
    pub fn writes_per_invocation(&self, stage: &str, class: &str) -> Result<Figure> {
        let value = self
            .keys(stage, class)?
            .iter()
            .filter(|k| is_write(&k.op))
            .map(|k| k.max_key_per_invocation)
            .sum();
        Ok(Figure {
            value,
            source: format!("writes/inv to one {class} key in {stage}"),
        })
    }

    /// Read units one `Query` of `class` took in `stage` (a counter series' shard).
    pub fn rcu_per_query(&self, stage: &str, class: &str) -> Result<Figure> {
        let (rcu, queries) = self
            .keys(stage, class)?
            .iter()
            .filter(|k| k.op == "Query")
            .fold((0.0, 0_u64), |(r, q), k| (r + k.rcu, q + k.requests));
        Ok(Figure {
            value: rcu / (queries.max(1)) as f64,
            source: format!("RCU per Query of {class} in {stage} ({queries} Queries)"),
        })
    }

    /// Items of `class` written in `stage`.
    fn class_writes(&self, stage: &str, class: &str) -> Result<u64> {
        Ok(self
            .keys(stage, class)?
            .iter()
            .filter(|k| is_write(&k.op))
            .map(|k| k.writes)
            .sum())
    }

    /// Write requests one invocation of `stage` makes to one series of `class`, over all its
    /// keys (a sharded counter's shards): the stage's writes to the class per invocation (the
    /// benchmark's tasks are all of one host, so each class is one series).
    pub fn series_writes_per_invocation(&self, stage: &str, class: &str) -> Result<Figure> {
        let invocations = (self.stage(stage)?.invocations.max(1)) as f64;
        Ok(Figure {
            value: self.class_writes(stage, class)? as f64 / invocations,
            source: format!("writes/inv to the {class} series in {stage}"),
        })
    }

    /// Write requests to `class` per item of `stage`.
    pub fn writes_per_item(&self, stage: &str, class: &str) -> Result<Figure> {
        let s = self.stage(stage)?;
        Ok(Figure {
            value: self.class_writes(stage, class)? as f64 / (s.items.max(1)) as f64,
            source: format!("{class} writes/item in {stage}"),
        })
    }

    /// Write units per write of `class` in `stage` (at least one).
    pub fn wcu_per_write(&self, stage: &str, class: &str) -> Result<Figure> {
        let keys = self.keys(stage, class)?;
        let (wcu, writes) = keys
            .iter()
            .filter(|k| is_write(&k.op))
            .fold((0.0, 0_u64), |(u, w), k| (u + k.wcu, w + k.writes));
        Ok(Figure {
            value: if writes == 0 {
                1.0
            } else {
                (wcu / writes as f64).max(1.0)
            },
            source: format!("WCU/write of {class} in {stage}"),
        })
    }

    /// The largest `class` item written in `stage`, bytes.
    pub fn largest_item(&self, stage: &str, class: &str) -> Result<Figure> {
        let value = self
            .keys(stage, class)?
            .iter()
            .map(|k| k.largest_item_bytes)
            .max()
            .unwrap_or(0) as f64;
        Ok(Figure {
            value,
            source: format!("largest {class} item written in {stage}"),
        })
    }

    /// Dollars per photo of a group of stages, by service, excluding Lambda (the model prices
    /// compute from concurrency) and S3 PUTs (listed on their own).
    pub fn table_and_queues_per_item(&self, stages: &[&str], per: f64) -> Result<Figure> {
        let mut dollars = 0.0;
        for name in stages {
            let s = self.stage(name)?;
            dollars += s.dollars.dynamodb + s.dollars.sqs + s.dollars.s3_gets;
        }
        Ok(Figure {
            value: dollars / per.max(1e-9),
            source: format!("DynamoDB+SQS+S3 GET $ of {} ÷ {per}", stages.join(" + ")),
        })
    }

    pub fn s3_puts_per_item(&self, stages: &[&str], per: f64) -> Result<Figure> {
        let mut dollars = 0.0;
        for name in stages {
            dollars += self.stage(name)?.dollars.s3_puts;
        }
        Ok(Figure {
            value: dollars / per.max(1e-9),
            source: format!("S3 PUT $ of {} ÷ {per}", stages.join(" + ")),
        })
    }

    /// Write and read units per item of a group of stages.
    pub fn units_per_item(&self, stages: &[&str], per: f64) -> Result<(Figure, Figure)> {
        let (mut w, mut r) = (0.0, 0.0);
        for name in stages {
            let s = self.stage(name)?;
            w += s.write_units;
            r += s.read_units;
        }
        let source = |what: &str| format!("{what} of {} ÷ {per}", stages.join(" + "));
        Ok((
            Figure {
                value: w / per.max(1e-9),
                source: source("WCU"),
            },
            Figure {
                value: r / per.max(1e-9),
                source: source("RCU"),
            },
        ))
    }

    /// The contention benchmark's verdict on a shared item: write requests per successful
    /// update at its writers; more than 1.05 (or anything lost) means it is still written by
    /// read-then-conditional-write, and its round trip caps its commits.
    pub fn contention(&self, target: &str) -> Result<(&ContentionTarget, bool, String)> {
        let t = self.contention.targets.get(target).with_context(|| {
            format!(
                "the contention profile has no target {target:?}: measure again with bench/capacity.sh"
            )
        })?;
        let rmw = t.write_requests_per_update > 1.05 || t.lost != 0 || t.updates == 0;
        let source = format!(
            "contention {target}: {:.2} write requests/update at {} writers, {} lost",
            t.write_requests_per_update, self.contention.writers, t.lost
        );
        Ok((t, rmw, source))
    }
}
