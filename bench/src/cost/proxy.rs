//! A counting proxy in front of the AWS emulator: every request the functions make passes
//! through it and is billed to the stage running at the time, the way AWS would bill it
//! (DynamoDB in capacity units from item sizes, SQS and S3 per request by price class). The
//! emulator answers; the proxy only watches, and may add a fixed latency to every request (as
//! a network would: concurrent requests overlap).
//!
//! Per DynamoDB request it also records which partition keys it touched and how it ended
//! (written, condition failed, transaction conflict, too large), by operation and item class
//! ([`KeyStats`]): the capacity model multiplies per-entity request counts by rates, and the
//! contention benchmark counts the requests one hot key took.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, Response, StatusCode};
use serde_json::{Value, json};

use super::capacity::{item_size, read_units, write_units};
use super::refusals::{Admission, Refusals, Target};

/// What one stage cost, in billable units.
#[derive(Debug, Clone, Default)]
pub struct StageCounts {
    /// Requests by service and operation (`dynamodb.PutItem`, `s3.PUT`, ...).
    pub requests: BTreeMap<String, u64>,
    pub write_units: f64,
    /// Write units by the kind of record written (the key's prefix: `image`, `url`, ...).
    pub write_units_by_record: BTreeMap<String, f64>,
    pub read_units: f64,
    /// Read units of single-item reads (`GetItem`) by the kind of record read.
    pub read_units_by_record: BTreeMap<String, f64>,
    pub sqs_requests: u64,
    /// S3 PUT, COPY, POST and LIST requests.
    pub s3_put_class: u64,
    /// S3 GET and HEAD requests.
    pub s3_get_class: u64,
    /// The Lambda side, recorded by the driver.
    pub invocations: u64,
    pub items: u64,
    /// Items that failed (retryable) and were delivered again.
    pub retried: u64,
    pub runs: Vec<Run>,
    pub peak_rss_mb: f64,
    /// DynamoDB requests by (operation, item class), with what they did to which keys.
    pub keys: BTreeMap<(String, String), KeyStats>,
    /// Requests per partition key within the invocation running now (cleared by
    /// [`Tally::invocation`], which folds their maximum into `keys`).
    pub(super) in_invocation: HashMap<(String, String), HashMap<String, u64>>,
}

/// What the DynamoDB requests of one operation on one class of item did (a class is the key's
/// prefix: `image`, `rec url`, `ratelimit`, `wait`, `ctr host`, ...).
#[derive(Debug, Clone, Default)]
pub struct KeyStats {
    pub requests: u64,
    /// Items written (each item of a batch or transaction counts).
    pub writes: u64,
    pub wcu: f64,
    pub rcu: f64,
    /// Writes refused by their condition (alone, or as a transaction's cancellation reason).
    pub condition_failed: u64,
    /// Transactions cancelled by a concurrent one on the same item.
    pub tx_conflict: u64,
    /// Writes refused for the item's size.
    pub too_large: u64,
    pub throttled: u64,
    /// The largest item of the class written (bytes, as DynamoDB bills them; 0 when the proxy
    /// does not read sizes).
    pub largest_item_bytes: u64,
    /// Requests by partition key, over the whole stage.
    pub by_key: BTreeMap<String, u64>,
    /// The largest number of requests one key got within one invocation, summed over the
    /// stage's invocations (÷ invocations: what one invocation does to its hottest key).
    pub max_key_per_invocation_sum: f64,
}

impl KeyStats {
    /// The mean over invocations of the most requests one key got in one.
    pub fn max_key_per_invocation(&self, invocations: u64) -> f64 {
        if invocations == 0 {
            0.0
        } else {
            self.max_key_per_invocation_sum / invocations as f64
        }
    }
}

/// Whether a DynamoDB operation writes.
pub fn is_write_op(op: &str) -> bool {
    matches!(
        op,
        "PutItem" | "UpdateItem" | "DeleteItem" | "TransactWriteItems" | "BatchWriteItem"
    )
}

/// One Lambda invocation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Run {
    pub cpu_ms: f64,
    /// As measured here, against the emulator (slower than AWS, and slowed further by the
    /// proxy's own reads).
    pub measured_ms: f64,
    /// What it would take on AWS: its CPU time, plus the AWS latency of its requests shared
    /// by the items that ran concurrently, plus any wait outside AWS (a download).
    pub modeled_ms: f64,
    /// How long at least one of its requests was outstanding (the union of their waits).
    pub busy_ms: f64,
    /// Its requests, and their waits summed (ms).
    pub requests: u64,
    pub waited_ms: f64,
}

/// Typical in-region latency of one request (ms), for the modeled duration: the emulator's
/// own latency says nothing about AWS's.
pub fn aws_latency_ms(request: &str) -> f64 {
    match request {
        "dynamodb.TransactWriteItems" | "dynamodb.TransactGetItems" => 15.0,
        "dynamodb.BatchGetItem" | "dynamodb.BatchWriteItem" | "dynamodb.Query" => 8.0,
        r if r.starts_with("dynamodb.") => 5.0,
        r if r.starts_with("sqs.") => 10.0,
        "s3.PUT" | "s3.POST" | "s3.DeleteObjects" => 25.0,
        r if r.starts_with("s3.") => 15.0,
        _ => 20.0,
    }
}

/// The counts of every stage, and which stage requests are billed to now.
#[derive(Default)]
pub struct Tally {
    inner: Mutex<TallyInner>,
}

#[derive(Default)]
struct TallyInner {
    stage: String,
    /// The modeled AWS latency of every request so far (ms).
    latency_ms: f64,
    /// The largest item written, by kind of record (bytes, as DynamoDB bills them).
    largest_items: BTreeMap<String, u64>,
    stages: BTreeMap<String, StageCounts>,
    /// Requests outstanding now, since when one has been, and how long one was before: the
    /// clock of [`Tally::busy`].
    outstanding: u32,
    busy_since: Option<std::time::Instant>,
    busy: Duration,
    /// Every request's wait so far (ms) and how many there were.
    waited_ms: f64,
    requests: u64,
    /// Per stage and request name, how long the functions waited for their answers (ms,
    /// summed) and how many there were: the latencies a validation gives the model. Per stage,
    /// because the emulator's waits depend on what else runs: a quiet stage must not be charged
    /// the queueing of a busy one.
    observed: BTreeMap<(String, String), (f64, u64)>,
}

impl Tally {
    /// Bills what follows to `stage`.
    pub fn enter(&self, stage: &str) {
        self.with(|t| {
            t.stage = stage.to_owned();
            t.stages.entry(stage.to_owned()).or_default();
        });
    }

    pub fn largest_items(&self) -> BTreeMap<String, u64> {
        self.with(|t| t.largest_items.clone())
    }

    /// The stage requests are billed to now.
    pub fn current_stage_name(&self) -> String {
        self.with(|t| t.stage.clone())
    }

    /// The counts of the stage requests are billed to now.
    pub fn current_stage(&self) -> StageCounts {
        self.with(|t| t.stages.get(&t.stage).cloned().unwrap_or_default())
    }

    pub fn stage(&self, name: &str) -> StageCounts {
        self.with(|t| t.stages.get(name).cloned().unwrap_or_default())
    }

    /// Records one Lambda invocation of the current stage.
    pub fn invocation(&self, items: usize, run: Run) {
        self.current(|s| {
            s.invocations += 1;
            s.items += items as u64;
            s.runs.push(run);
            for (class, keys) in std::mem::take(&mut s.in_invocation) {
                let hottest = keys.values().copied().max().unwrap_or(0);
                s.keys.entry(class).or_default().max_key_per_invocation_sum += hottest as f64;
            }
        });
    }

    /// Every stage's counts, by name.
    pub fn stages(&self) -> BTreeMap<String, StageCounts> {
        self.with(|t| t.stages.clone())
    }

    /// The modeled AWS latency of every request so far (ms).
    pub fn latency_ms(&self) -> f64 {
        self.with(|t| t.latency_ms)
    }

    fn dynamodb(&self, op: &str, touched: &[Touched], units: (f64, f64)) {
        self.with(|t| {
            let stage = t.stage.clone();
            let counts = t.stages.entry(stage).or_default();
            for (i, item) in touched.iter().enumerate() {
                let class = (op.to_owned(), item.class.clone());
                let k = counts.keys.entry(class.clone()).or_default();
                // The request is counted once, on its first item's class.
                if i == 0 {
                    k.requests += 1;
                    k.wcu += units.0;
                    k.rcu += units.1;
                }
                if item.write {
                    k.writes += 1;
                    k.largest_item_bytes = k.largest_item_bytes.max(item.bytes);
                }
                match item.outcome {
                    Outcome::Ok => {}
                    Outcome::ConditionFailed => k.condition_failed += 1,
                    Outcome::TxConflict => k.tx_conflict += 1,
                    Outcome::TooLarge => k.too_large += 1,
                    Outcome::Throttled => k.throttled += 1,
                }
                *k.by_key.entry(item.pk.clone()).or_default() += 1;
                *counts
                    .in_invocation
                    .entry(class)
                    .or_default()
                    .entry(item.pk.clone())
                    .or_default() += 1;
            }
        });
    }

    /// The mean time the functions of `stage` waited for an answer to each kind of request
    /// (ms), and how many there were, by request name (`dynamodb.GetItem`, `s3.PUT`, …).
    pub fn observed_ms(&self, stage: &str) -> BTreeMap<String, (f64, u64)> {
        self.with(|t| {
            t.observed
                .iter()
                .filter(|((s, _), _)| s == stage)
                .map(|((_, name), (ms, n))| (name.clone(), (ms / (*n).max(1) as f64, *n)))
                .collect()
        })
    }

    /// A request arrived: the busy clock runs while any is outstanding.
    fn request_began(&self) {
        self.with(|t| {
            if t.outstanding == 0 {
                t.busy_since = Some(std::time::Instant::now());
            }
            t.outstanding += 1;
        });
    }

    /// A request was answered (or failed).
    fn request_ended(&self) {
        self.with(|t| {
            t.outstanding = t.outstanding.saturating_sub(1);
            if t.outstanding == 0
                && let Some(since) = t.busy_since.take()
            {
                t.busy += since.elapsed();
            }
        });
    }

    /// How long a request has been outstanding so far (ms), the requests answered so far and
    /// their waits summed (ms): an invocation's share is the difference across it.
    pub fn busy(&self) -> (f64, u64, f64) {
        self.with(|t| {
            let running = t.busy_since.map_or(Duration::ZERO, |s| s.elapsed());
            (
                (t.busy + running).as_secs_f64() * 1000.0,
                t.requests,
                t.waited_ms,
            )
        })
    }

    fn request(&self, name: String, waited: Duration, bill: impl FnOnce(&mut StageCounts)) {
        self.with(|t| {
            t.requests += 1;
            t.waited_ms += waited.as_secs_f64() * 1000.0;
            t.latency_ms += aws_latency_ms(&name);
            let observed = t
                .observed
                .entry((t.stage.clone(), name.clone()))
                .or_default();
            observed.0 += waited.as_secs_f64() * 1000.0;
            observed.1 += 1;
            let stage = t.stage.clone();
            let counts = t.stages.entry(stage).or_default();
            *counts.requests.entry(name).or_default() += 1;
            bill(counts);
        });
    }

    pub fn retried(&self) {
        self.current(|s| s.retried += 1);
    }

    pub fn peak_rss(&self, mb: f64) {
        self.current(|s| s.peak_rss_mb = s.peak_rss_mb.max(mb));
    }

    fn current(&self, f: impl FnOnce(&mut StageCounts)) {
        self.with(|t| {
            let stage = t.stage.clone();
            f(t.stages.entry(stage).or_default());
        });
    }

    fn with<R>(&self, f: impl FnOnce(&mut TallyInner) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// How the proxy forwards.
#[derive(Clone)]
pub struct ProxyOptions {
    /// Added before each request is forwarded (concurrent requests overlap: a network's
    /// latency, not a server's lock).
    pub latency: Duration,
    /// Read each written item before and after its write, to bill write units by size (the
    /// proxy's own reads, not billed; off where only request counts matter).
    pub sizes: bool,
    /// Writes a real partition would refuse, answered here instead of by the emulator.
    pub refusals: Option<Arc<Refusals>>,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            latency: Duration::ZERO,
            sizes: true,
            refusals: None,
        }
    }
}

struct Proxy {
    upstream: String,
    client: reqwest::Client,
    tally: Arc<Tally>,
    options: ProxyOptions,
}

/// Starts the proxy on 127.0.0.1 in front of `upstream`; returns its URL.
pub async fn start(upstream: &str, tally: Arc<Tally>) -> anyhow::Result<String> {
    start_with(upstream, tally, ProxyOptions::default()).await
}

/// [`start`] with options.
pub async fn start_with(
    upstream: &str,
    tally: Arc<Tally>,
    options: ProxyOptions,
) -> anyhow::Result<String> {
    let proxy = Arc::new(Proxy {
        upstream: upstream.trim_end_matches('/').to_owned(),
        client: reqwest::Client::builder()
            .build()
            .context("building the proxy's HTTP client")?,
        tally,
        options,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = axum::Router::new().fallback(forward).with_state(proxy);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("imgest-bench cost: the counting proxy stopped: {e}");
        }
    });
    Ok(url)
}

/// Headers that describe one hop, not the request: never forwarded.
const HOP_HEADERS: [&str; 4] = ["host", "content-length", "connection", "transfer-encoding"];

async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response<Body> {
    match proxy.forward(request).await {
        Ok(response) => response,
        Err(e) => Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Body::from(format!("counting proxy: {e:#}")))
            .unwrap_or_default(),
    }
}

/// Stops a request's part of the busy clock however its forwarding ends.
struct Answered<'a>(&'a Tally);

impl Drop for Answered<'_> {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

impl Proxy {
    async fn forward(&self, request: Request) -> anyhow::Result<Response<Body>> {
        let arrived = std::time::Instant::now();
        self.tally.request_began();
        let _answered = Answered(&self.tally);
        let (parts, body) = request.into_parts();
        let body = to_bytes(body, usize::MAX).await?;
        let target = header(&parts.headers, "x-amz-target");
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let dynamodb_op = target.strip_prefix("DynamoDB_20120810.").map(str::to_owned);
        let request_json: Value = if dynamodb_op.is_some() {
            serde_json::from_slice(&body).unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        let writes = dynamodb_op
            .as_deref()
            .map(|op| written_items(op, &request_json))
            .unwrap_or_default();
        let mut before = Vec::with_capacity(writes.len());
        for w in &writes {
            before.push(if self.options.sizes {
                self.item_of(&parts.headers, w).await
            } else {
                None
            });
        }
        if !self.options.latency.is_zero() {
            tokio::time::sleep(self.options.latency).await;
        }
        let admission = match (&self.options.refusals, dynamodb_op.as_deref()) {
            (Some(refusals), Some(op)) if is_write_op(op) => {
                let targets: Vec<Target> = writes
                    .iter()
                    .map(|w| Target {
                        pk: w.key["pk"]["S"].as_str().unwrap_or("?").to_owned(),
                        key: w.key.to_string(),
                    })
                    .collect();
                refusals.admit(op, &targets)
            }
            _ => Admission::Go(None),
        };
        let (status, headers, answer_body, in_flight) = match admission {
            Admission::Refuse(answer) => {
                let mut headers = HeaderMap::new();
                headers.insert(
                    axum::http::header::CONTENT_TYPE,
                    axum::http::HeaderValue::from_static("application/x-amz-json-1.0"),
                );
                (
                    StatusCode::BAD_REQUEST,
                    headers,
                    bytes::Bytes::from(answer.to_string()),
                    None,
                )
            }
            Admission::Go(in_flight) => {
                let mut upstream = self
                    .client
                    .request(parts.method.clone(), format!("{}{path}", self.upstream))
                    .body(body);
                for (name, value) in &parts.headers {
                    if !HOP_HEADERS.contains(&name.as_str()) {
                        upstream = upstream.header(name, value);
                    }
                }
                let answer = upstream.send().await?;
                let status = answer.status();
                let headers = answer.headers().clone();
                (status, headers, answer.bytes().await?, in_flight)
            }
        };
        // A transaction's items are no longer in flight once it is answered.
        drop(in_flight);

        if let Some(op) = dynamodb_op {
            let response_json: Value = serde_json::from_slice(&answer_body).unwrap_or(Value::Null);
            let outcomes = outcomes(status.as_u16(), &response_json, writes.len().max(1));
            let mut touched: Vec<Touched> = writes
                .iter()
                .zip(&outcomes)
                .map(|(w, outcome)| Touched::new(&w.key, true, *outcome))
                .collect();
            let mut units = 0.0;
            let mut by_kind = BTreeMap::<String, f64>::new();
            for ((w, before), touched) in writes.iter().zip(before).zip(touched.iter_mut()) {
                let after = match (&w.put, self.options.sizes) {
                    (Some(item), _) => Some(item.clone()),
                    (None, true) => self.item_of(&parts.headers, w).await,
                    (None, false) => None,
                };
                let size = |i: &Option<Value>| i.as_ref().map_or(0, item_size);
                let u = write_units(size(&before), size(&after))
                    * if w.transactional { 2.0 } else { 1.0 };
                let index = index_write_units(before.as_ref(), after.as_ref());
                units += u + index;
                *by_kind.entry(record_kind(&w.key)).or_default() += u;
                let largest = size(&before).max(size(&after));
                touched.bytes = largest;
                self.tally.with(|t| {
                    let biggest = t.largest_items.entry(record_kind(&w.key)).or_default();
                    *biggest = (*biggest).max(largest);
                });
                if index > 0.0 {
                    *by_kind.entry("gc-index".into()).or_default() += index;
                }
            }
            touched.extend(
                read_keys(&op, &request_json)
                    .into_iter()
                    .map(|k| Touched::new(&k, false, outcomes[0])),
            );
            let reads = read_capacity(&op, &request_json, &response_json);
            self.tally.dynamodb(&op, &touched, (units, reads));
            let read_kind = (op == "GetItem").then(|| record_kind(&request_json["Key"]));
            self.tally
                .request(format!("dynamodb.{op}"), arrived.elapsed(), |s| {
                    s.write_units += units;
                    s.read_units += reads;
                    if let Some(kind) = read_kind {
                        *s.read_units_by_record.entry(kind).or_default() += reads;
                    }
                    for (kind, u) in by_kind {
                        *s.write_units_by_record.entry(kind).or_default() += u;
                    }
                });
        } else if let Some(op) = target.strip_prefix("AmazonSQS.") {
            let empty_receive = op == "ReceiveMessage"
                && serde_json::from_slice::<Value>(&answer_body)
                    .ok()
                    .and_then(|v| v.get("Messages").and_then(Value::as_array).map(Vec::len))
                    .unwrap_or(0)
                    == 0;
            // Lambda's pollers receive empty batches whether or not photos arrive: a fixed
            // cost per queue, not one per photo.
            let name = if empty_receive {
                "sqs.ReceiveMessage (empty, not billed per photo)".to_owned()
            } else {
                format!("sqs.{op}")
            };
            self.tally.request(name, arrived.elapsed(), |s| {
                if !empty_receive {
                    s.sqs_requests += 1;
                }
            });
        } else {
            let (name, class) = s3_class(parts.method.as_str(), path);
            self.tally
                .request(format!("s3.{name}"), arrived.elapsed(), |s| match class {
                    S3Class::Put => s.s3_put_class += 1,
                    S3Class::Get => s.s3_get_class += 1,
                    S3Class::Free => {}
                });
        }

        let mut response = Response::builder().status(status.as_u16());
        for (name, value) in &headers {
            if !HOP_HEADERS.contains(&name.as_str()) {
                response =
                    response.header(HeaderName::from_bytes(name.as_ref())?, value.as_bytes());
            }
        }
        Ok(response.body(Body::from(answer_body))?)
    }

    /// The stored item a write names, read from the emulator directly: this read is the
    /// proxy's, not the function's, and is not billed.
    async fn item_of(&self, headers: &HeaderMap, write: &Written) -> Option<Value> {
        let body = json!({"TableName": write.table, "Key": write.key, "ConsistentRead": true});
        let mut request = self
            .client
            .post(format!("{}/", self.upstream))
            .header("x-amz-target", "DynamoDB_20120810.GetItem")
            .header("content-type", "application/x-amz-json-1.0")
            .body(body.to_string());
        // The emulator takes the account and region from the signature's scope.
        if let Some(auth) = headers.get("authorization") {
            request = request.header("authorization", auth);
        }
        let value: Value = request.send().await.ok()?.json().await.ok()?;
        value.get("Item").cloned()
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// One item a DynamoDB write request touches.
struct Written {
    table: Value,
    key: Value,
    /// The whole new item, for puts.
    put: Option<Value>,
    transactional: bool,
}

/// The table's key attributes (see the DynamoDB adapter's schema).
const KEY_ATTRIBUTES: [&str; 2] = ["pk", "sk"];

fn key_of(item: &Value) -> Value {
    Value::Object(
        KEY_ATTRIBUTES
            .iter()
            .filter_map(|k| Some((k.to_string(), item.get(*k)?.clone())))
            .collect(),
    )
}

/// The garbage-collection index's key (see the DynamoDB adapter's schema; projection
/// KEYS_ONLY).
const INDEX_KEY: [&str; 2] = ["gc_bucket", "gc_at"];
/// The table's key, which every index entry projects too.
const TABLE_KEY: [&str; 2] = ["pk", "sk"];

/// Write units the index consumes when an item changes from `before` to `after`: an entry
/// put, deleted, or both when its key changes. Only keys are projected, so a change of any
/// other attribute writes nothing to the index.
fn index_write_units(before: Option<&Value>, after: Option<&Value>) -> f64 {
    fn entry(item: Option<&Value>) -> Option<&Value> {
        item.filter(|i| INDEX_KEY.iter().all(|k| i.get(*k).is_some()))
    }
    let key = |i: &Value| INDEX_KEY.map(|k| i[k].clone());
    let units = |i: &Value| {
        let projected: serde_json::Map<String, Value> = INDEX_KEY
            .iter()
            .chain(&TABLE_KEY)
            .filter_map(|k| i.get(*k).map(|v| ((*k).to_owned(), v.clone())))
            .collect();
        write_units(0, item_size(&Value::Object(projected)))
    };
    match (entry(before), entry(after)) {
        (Some(b), Some(a)) if key(b) != key(a) => units(b) + units(a),
        (Some(_), Some(_)) | (None, None) => 0.0,
        (Some(b), None) => units(b),
        (None, Some(a)) => units(a),
    }
}

/// The kind of record a key names: its partition key up to the first `#`.
fn record_kind(key: &Value) -> String {
    let pk = key["pk"]["S"].as_str().unwrap_or("?");
    let mut parts = pk.split('#');
    match (parts.next(), parts.next()) {
        // Versioned records: `rec#{kind}#{key}`; counter series: `ctr#{series kind}#{key}`.
        (Some("rec"), Some(kind)) => format!("rec {kind}"),
        (Some("ctr"), Some(kind)) => format!("ctr {kind}"),
        (Some(prefix), _) => prefix.to_owned(),
        _ => pk.to_owned(),
    }
}

fn written_items(op: &str, request: &Value) -> Vec<Written> {
    // `r` holds `Item` (a put) or `Key`; batch writes name their table outside it.
    let written = |table: &Value, r: &Value, put: bool, transactional: bool| Written {
        table: table.clone(),
        key: if put {
            key_of(&r["Item"])
        } else {
            r["Key"].clone()
        },
        put: put.then(|| r["Item"].clone()),
        transactional,
    };
    match op {
        "PutItem" => vec![written(&request["TableName"], request, true, false)],
        "UpdateItem" | "DeleteItem" => vec![written(&request["TableName"], request, false, false)],
        "TransactWriteItems" => request["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let (kind, r) = t.as_object()?.iter().next()?;
                Some(written(&r["TableName"], r, kind == "Put", true))
            })
            .collect(),
        "BatchWriteItem" => request["RequestItems"]
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(table, writes)| {
                let table = Value::String(table.clone());
                writes
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|w| {
                        let (kind, r) = w.as_object()?.iter().next()?;
                        Some(written(&table, r, kind == "PutRequest", false))
                    })
                    .collect::<Vec<_>>()
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// How a DynamoDB request ended, per item it wrote (or once, for a read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    ConditionFailed,
    TxConflict,
    TooLarge,
    Throttled,
}

/// One key a request touched.
struct Touched {
    pk: String,
    class: String,
    write: bool,
    outcome: Outcome,
    /// The item's size for a write (the larger of before and after; 0 without sizes).
    bytes: u64,
}

impl Touched {
    fn new(key: &Value, write: bool, outcome: Outcome) -> Self {
        let index = key.get("gc_bucket").is_some();
        Self {
            pk: key["pk"]["S"]
                .as_str()
                .or_else(|| key["gc_bucket"]["S"].as_str())
                .unwrap_or("?")
                .to_owned(),
            class: if index {
                "gc-index".to_owned()
            } else {
                record_kind(key)
            },
            write,
            outcome,
            bytes: 0,
        }
    }
}

/// The outcome of each of `items` items of a request, from its answer: a transaction's
/// cancellation reasons name each item's.
fn outcomes(status: u16, response: &Value, items: usize) -> Vec<Outcome> {
    if status < 400 {
        return vec![Outcome::Ok; items];
    }
    let kind = response["__type"].as_str().unwrap_or_default();
    let message = response["message"]
        .as_str()
        .or_else(|| response["Message"].as_str())
        .unwrap_or_default();
    if let Some(reasons) = response["CancellationReasons"].as_array() {
        let mut out: Vec<Outcome> = reasons
            .iter()
            .map(|r| match r["Code"].as_str().unwrap_or("None") {
                "ConditionalCheckFailed" => Outcome::ConditionFailed,
                "TransactionConflict" => Outcome::TxConflict,
                "ValidationError" => Outcome::TooLarge,
                c if c.contains("Throttl") => Outcome::Throttled,
                _ => Outcome::Ok,
            })
            .collect();
        out.resize(items, Outcome::Ok);
        return out;
    }
    let whole = if kind.ends_with("ConditionalCheckFailedException") {
        Outcome::ConditionFailed
    } else if kind.ends_with("TransactionConflictException") {
        Outcome::TxConflict
    } else if kind.ends_with("ValidationException") && message.contains("Item size") {
        Outcome::TooLarge
    } else if kind.contains("Throttl") || kind.contains("ProvisionedThroughputExceeded") {
        Outcome::Throttled
    } else {
        Outcome::Ok
    };
    vec![whole; items]
}

/// The keys a read request names: `GetItem`'s key, each key of a `BatchGetItem` or
/// `TransactGetItems`, a `Query`'s partition (`pk`, or an index's `gc_bucket`).
fn read_keys(op: &str, request: &Value) -> Vec<Value> {
    match op {
        "GetItem" => vec![request["Key"].clone()],
        "BatchGetItem" => request["RequestItems"]
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(_, r)| r["Keys"].as_array().cloned().unwrap_or_default())
            .collect(),
        "TransactGetItems" => request["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["Get"]["Key"].clone())
            .collect(),
        "Query" => query_partition(request).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// A query's partition key as a key (`{"pk": {"S": ...}}`), from `#name = :value` in its key
/// condition.
fn query_partition(request: &Value) -> Option<Value> {
    let condition = request["KeyConditionExpression"].as_str()?;
    let (left, right) = condition.split_once('=')?;
    let name = left.trim();
    let name = request["ExpressionAttributeNames"][name]
        .as_str()
        .unwrap_or(name);
    let placeholder = right.split_whitespace().next()?;
    let value = request["ExpressionAttributeValues"][placeholder].clone();
    (!value.is_null()).then(|| serde_json::json!({ name: value }))
}

/// Read units of a read request, from the items its answer holds.
fn read_capacity(op: &str, request: &Value, response: &Value) -> f64 {
    let consistent = request["ConsistentRead"].as_bool().unwrap_or(false);
    let items =
        |v: &Value| -> Vec<u64> { v.as_array().into_iter().flatten().map(item_size).collect() };
    match op {
        "GetItem" => read_units(response.get("Item").map_or(0, item_size), consistent),
        "Query" | "Scan" => read_units(items(&response["Items"]).iter().sum(), consistent),
        "BatchGetItem" => response["Responses"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(table, found)| {
                let consistent = request["RequestItems"][table]["ConsistentRead"]
                    .as_bool()
                    .unwrap_or(false);
                items(found)
                    .into_iter()
                    .map(|size| read_units(size, consistent))
                    .sum::<f64>()
            })
            .sum(),
        "TransactGetItems" => response["Responses"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| 2.0 * read_units(r.get("Item").map_or(0, item_size), true))
            .sum(),
        _ => 0.0,
    }
}

enum S3Class {
    Put,
    Get,
    Free,
}

/// S3's price classes: PUT, COPY, POST and LIST at one price, GET and the rest at another,
/// DELETE free.
fn s3_class(method: &str, path: &str) -> (&'static str, S3Class) {
    // Path style: /bucket or /bucket?list-type=2 is a listing, /bucket/key an object.
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let is_bucket = path.trim_matches('/').split('/').count() <= 1;
    match method {
        "PUT" => ("PUT", S3Class::Put),
        "POST" if query.contains("delete") => ("DeleteObjects", S3Class::Put),
        "POST" => ("POST", S3Class::Put),
        "GET" if is_bucket => ("LIST", S3Class::Put),
        "GET" => ("GET", S3Class::Get),
        "HEAD" => ("HEAD", S3Class::Get),
        "DELETE" => ("DELETE", S3Class::Free),
        _ => ("other", S3Class::Get),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn reads_name_their_keys_and_queries_their_partition() {
        let get = json!({"Key": {"pk": {"S": "rec#url#a"}, "sk": {"S": "rec"}}});
        assert_eq!(read_keys("GetItem", &get)[0]["pk"]["S"], "rec#url#a");
        let batch = json!({"RequestItems": {"t": {"Keys": [
            {"pk": {"S": "image#a"}, "sk": {"S": "image"}},
            {"pk": {"S": "image#b"}, "sk": {"S": "image"}}]}}});
        assert_eq!(read_keys("BatchGetItem", &batch).len(), 2);
        let query = json!({"KeyConditionExpression": "#k = :p AND #s BETWEEN :a AND :b",
            "ExpressionAttributeNames": {"#k": "pk", "#s": "sk"},
            "ExpressionAttributeValues": {":p": {"S": "wait#h#l#0"}, ":a": {"S": "a"}, ":b": {"S": "b"}}});
        let keys = read_keys("Query", &query);
        assert_eq!(keys.len(), 1);
        let touched = Touched::new(&keys[0], false, Outcome::Ok);
        assert_eq!(
            (touched.pk.as_str(), touched.class.as_str()),
            ("wait#h#l#0", "wait")
        );
        let index = json!({"IndexName": "gc-index", "KeyConditionExpression": "#b = :b AND #a <= :now",
            "ExpressionAttributeNames": {"#b": "gc_bucket", "#a": "gc_at"},
            "ExpressionAttributeValues": {":b": {"S": "gc#0a"}, ":now": {"N": "1"}}});
        let touched = Touched::new(&read_keys("Query", &index)[0], false, Outcome::Ok);
        assert_eq!(
            (touched.pk.as_str(), touched.class.as_str()),
            ("gc#0a", "gc-index")
        );
        let counter = json!({"pk": {"S": "ctr#host#cdn.example"}});
        assert_eq!(record_kind(&counter), "ctr host");
    }

    #[test]
    fn answers_say_how_each_written_item_ended() {
        assert_eq!(outcomes(200, &Value::Null, 2), [Outcome::Ok, Outcome::Ok]);
        let failed =
            json!({"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"});
        assert_eq!(outcomes(400, &failed, 1), [Outcome::ConditionFailed]);
        let cancelled = json!({"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "CancellationReasons": [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}, {"Code": "TransactionConflict"}]});
        assert_eq!(
            outcomes(400, &cancelled, 3),
            [Outcome::Ok, Outcome::ConditionFailed, Outcome::TxConflict]
        );
        let big = json!({"__type": "com.amazon.coral.validate#ValidationException",
            "message": "Item size has exceeded the maximum allowed size"});
        assert_eq!(outcomes(400, &big, 1), [Outcome::TooLarge]);
    }

    #[tokio::test]
    async fn every_request_waits_the_added_latency() {
        imgest_download::install_default_provider();
        // A stand-in emulator that answers at once.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(|| async { "{}" });
        tokio::spawn(async move { axum::serve(listener, app).await });
        let options = ProxyOptions {
            latency: Duration::from_millis(20),
            sizes: false,
            refusals: None,
        };
        let url = start_with(&upstream, Arc::new(Tally::default()), options)
            .await
            .unwrap();
        let client = reqwest::Client::new();
        let one = |_| {
            let (client, url) = (&client, &url);
            async move {
                let started = std::time::Instant::now();
                client
                    .get(format!("{url}/bucket/key"))
                    .send()
                    .await
                    .unwrap();
                started.elapsed()
            }
        };
        let each = futures_util::future::join_all((0..16).map(one)).await;
        assert!(
            each.iter().all(|d| *d >= Duration::from_millis(20)),
            "{each:?}"
        );
    }

    #[test]
    fn the_keys_only_index_is_written_when_an_entry_comes_goes_or_moves() {
        let claim = json!({"pk": {"S": "image#a"}, "sk": {"S": "image"}, "state": {"S": "processing"},
            "gc_bucket": {"S": "gc#a"}, "gc_at": {"N": "10"}});
        let mut ready = claim.clone();
        ready["state"] = json!({"S": "ready"});
        ready["variants"] = json!({"S": "x".repeat(3000)});
        let mut moved = ready.clone();
        moved["gc_at"] = json!({"N": "20"});
        let mut linked = ready.clone();
        if let Some(item) = linked.as_object_mut() {
            item.remove("gc_bucket");
            item.remove("gc_at");
        }
        assert_eq!(index_write_units(None, Some(&claim)), 1.0);
        assert_eq!(index_write_units(Some(&claim), Some(&ready)), 0.0);
        assert_eq!(index_write_units(Some(&ready), Some(&moved)), 2.0);
        assert_eq!(index_write_units(Some(&ready), Some(&linked)), 1.0);
        assert_eq!(index_write_units(Some(&linked), Some(&linked)), 0.0);
    }
}
