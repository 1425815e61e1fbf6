//! A counting proxy in front of the AWS emulator: every request the functions make passes
//! through it and is billed to the stage running at the time, the way AWS would bill it
//! (DynamoDB in capacity units from item sizes, SQS and S3 per request by price class, Step
//! Functions per state transition). The emulator answers; the proxy only watches.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, Response, StatusCode};
use serde_json::{Value, json};

use super::capacity::{item_size, read_units, write_units};

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
    pub sfn_transitions: u64,
    /// The Lambda side, recorded by the driver.
    pub invocations: u64,
    pub items: u64,
    /// Items that failed (retryable) and were delivered again.
    pub retried: u64,
    pub runs: Vec<Run>,
    pub peak_rss_mb: f64,
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

    pub fn stage(&self, name: &str) -> StageCounts {
        self.with(|t| t.stages.get(name).cloned().unwrap_or_default())
    }

    /// Records one Lambda invocation of the current stage.
    pub fn invocation(&self, items: usize, run: Run) {
        self.current(|s| {
            s.invocations += 1;
            s.items += items as u64;
            s.runs.push(run);
        });
    }

    /// The modeled AWS latency of every request so far (ms).
    pub fn latency_ms(&self) -> f64 {
        self.with(|t| t.latency_ms)
    }

    fn request(&self, name: String, bill: impl FnOnce(&mut StageCounts)) {
        self.with(|t| {
            t.latency_ms += aws_latency_ms(&name);
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

struct Proxy {
    upstream: String,
    client: reqwest::Client,
    tally: Arc<Tally>,
}

/// Starts the proxy on 127.0.0.1 in front of `upstream`; returns its URL.
pub async fn start(upstream: &str, tally: Arc<Tally>) -> anyhow::Result<String> {
    let proxy = Arc::new(Proxy {
        upstream: upstream.trim_end_matches('/').to_owned(),
        client: reqwest::Client::builder()
            .build()
            .context("building the proxy's HTTP client")?,
        tally,
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

impl Proxy {
    async fn forward(&self, request: Request) -> anyhow::Result<Response<Body>> {
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
            before.push(self.item_of(&parts.headers, w).await);
        }

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
        let answer_body = answer.bytes().await?;

        if let Some(op) = dynamodb_op {
            let mut units = 0.0;
            let mut by_kind = BTreeMap::<String, f64>::new();
            for (w, before) in writes.iter().zip(before) {
                let after = match &w.put {
                    Some(item) => Some(item.clone()),
                    None => self.item_of(&parts.headers, w).await,
                };
                let size = |i: &Option<Value>| i.as_ref().map_or(0, item_size);
                let u = write_units(size(&before), size(&after))
                    * if w.transactional { 2.0 } else { 1.0 };
                let index = index_write_units(before.as_ref(), after.as_ref());
                units += u + index;
                *by_kind.entry(record_kind(&w.key)).or_default() += u;
                let largest = size(&before).max(size(&after));
                self.tally.with(|t| {
                    let biggest = t.largest_items.entry(record_kind(&w.key)).or_default();
                    *biggest = (*biggest).max(largest);
                });
                if index > 0.0 {
                    *by_kind.entry("gc-index".into()).or_default() += index;
                }
            }
            let response_json: Value = serde_json::from_slice(&answer_body).unwrap_or(Value::Null);
            let reads = read_capacity(&op, &request_json, &response_json);
            let read_kind = (op == "GetItem").then(|| record_kind(&request_json["Key"]));
            self.tally.request(format!("dynamodb.{op}"), |s| {
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
            self.tally.request(name, |s| {
                if !empty_receive {
                    s.sqs_requests += 1;
                }
            });
        } else if let Some(op) = target.strip_prefix("AWSStepFunctions.") {
            self.tally.request(format!("sfn.{op}"), |s| {
                if op == "StartExecution" {
                    // infra/statemachine/delayed-send.asl.json: Wait, then Send (which is one
                    // more SQS request).
                    s.sfn_transitions += 2;
                    s.sqs_requests += 1;
                }
            });
        } else {
            let (name, class) = s3_class(parts.method.as_str(), path);
            self.tally.request(format!("s3.{name}"), |s| match class {
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
        // Versioned records: `rec#{kind}#{key}`.
        (Some("rec"), Some(kind)) => format!("rec {kind}"),
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
    use serde_json::json;

    use super::*;

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
