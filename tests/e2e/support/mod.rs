//! `TestApp`: the local runner (router, embedded store, pipeline, crawler) on 127.0.0.1:0 with a
//! temp data directory and a clock the test moves.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod as_seen;
pub mod crawl;
pub mod iam;
pub mod identity;
pub mod webhooks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use imgest_core::ports::ManualClock;
use imgest_crawl::{Crawler, Processing};
use imgest_flows::Service;
use imgest_flows::gc::GcReport;
use imgest_flows::sweep::SweepReport;
use imgest_http as api;
use imgest_http::auth::Authenticator;
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_settings::Settings;
use serde_json::Value;

/// The `SenderId` of the intake events the tests make: [`TestApp::crawler`] lets it act for
/// any client unless the test lists its own senders (`IMGEST_INTAKE_SENDERS`).
pub const TEST_SENDER: &str = "AIDATESTSENDER";

/// The `SenderId` the emulator gives every message sent with the tests' shared key: what the
/// app's own sends carry, so [`TestApp::crawler`] counts it among the stack's roles
/// (`IMGEST_STACK_ROLES`) unless the test lists them.
pub const STACK_SENDER: &str = "AIDAIT2UOQQY3AUEKVGXU";

/// The `SenderId` of the sample events in `events/` (AWS's documentation's): the stack's
/// role wherever a test feeds them to a handler.
pub const SAMPLE_EVENT_SENDER: &str = "AIDAJHIPRHEMV73VRJEBU";

/// Who the tests' queues take messages from (what [`TestApp::crawler`] sets by default): the
/// app's own sends and the sample events are the stack's, [`TEST_SENDER`] sends crawls.
pub fn stack_senders() -> imgest_settings::QueueSenders {
    imgest_settings::QueueSenders::parse(
        &format!("{TEST_SENDER}=*"),
        "",
        &format!("{STACK_SENDER},{SAMPLE_EVENT_SENDER}"),
    )
    .unwrap()
}

pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub service: Arc<Service>,
    pub clock: Arc<ManualClock>,
    /// The settings the app was started with.
    pub settings: Settings,
    runner: LocalRunner,
    /// Whether its runner works the erasures under way (kept across a restart).
    erasures: bool,
    pub data_dir: tempfile::TempDir,
    /// On the AWS adapters: the bucket and the table the app uses.
    pub aws: Option<(String, String)>,
}

/// A response's status and JSON body.
pub async fn reply(response: reqwest::Response) -> Reply {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    let json = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    Reply { status, json }
}

/// Base64 of `bytes`: URL-safe without padding (JWTs) or standard with padding (events).
pub fn base64(bytes: &[u8], url_safe: bool) -> String {
    let alphabet: &[u8; 64] = if url_safe {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else if !url_safe {
                out.push('=');
            }
        }
    }
    out
}

/// What a [`TestApp::call`] sends.
pub enum Body {
    None,
    Json(Value),
    /// Raw bytes with a content type.
    Bytes(Vec<u8>, &'static str),
}

/// A response's status and JSON body (`Value::Null` when the body is empty).
pub struct Reply {
    pub status: u16,
    pub json: Value,
}

impl Reply {
    pub fn kind(&self) -> &str {
        self.json["error"]["kind"].as_str().unwrap_or("")
    }

    /// An offer's photos (`{"photos": [{"image_id": …}, …]}`): the image ids in order.
    pub fn photo_ids(&self) -> Vec<String> {
        self.json["photos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["image_id"].as_str().unwrap().to_owned())
            .collect()
    }
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixture_path(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading fixture {}: {e}", path.display()))
}

pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

pub fn sample(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading sample {}: {e}", path.display()))
}

/// A fresh bucket and table on the emulator, with their clients.
pub struct AwsStorage {
    pub s3: aws_sdk_s3::Client,
    pub bucket: String,
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub table: String,
}

impl AwsStorage {
    pub async fn create(config: &aws_config::SdkConfig) -> Self {
        let bucket = imgest_testing::aws::unique_name("imgest-files");
        let table = imgest_testing::aws::unique_name("imgest-records");
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(config)
                .force_path_style(true)
                .build(),
        );
        s3.create_bucket().bucket(&bucket).send().await.unwrap();
        let dynamodb = aws_sdk_dynamodb::Client::new(config);
        imgest_aws::dynamodb::create_table(&dynamodb, &table)
            .await
            .unwrap();
        Self {
            s3,
            bucket,
            dynamodb,
            table,
        }
    }
}

impl TestApp {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// Starts with `IMGEST_*` settings overridden by `vars`, on the embedded backend.
    pub async fn start_with(vars: &[(&str, &str)]) -> Self {
        Self::start_on(vars, None).await
    }

    /// Starts on the AWS adapters (a fresh bucket and table on the emulator), or `None` when no
    /// emulator is configured and AWS tests are not required (see `testing::aws`).
    pub async fn start_aws(test: &str, vars: &[(&str, &str)]) -> Option<Self> {
        Self::start_aws_running(test, vars, true).await
    }

    /// [`start_aws`](Self::start_aws) for a test that runs the erasure function's bootstrap:
    /// the app leaves the erasures under way to it (its own worker would race the function's
    /// run for the same filed erasures).
    pub async fn start_aws_beside_functions(test: &str, vars: &[(&str, &str)]) -> Option<Self> {
        Self::start_aws_running(test, vars, false).await
    }

    async fn start_aws_running(test: &str, vars: &[(&str, &str)], erasures: bool) -> Option<Self> {
        let config = imgest_testing::aws::sdk_config(test).await?;
        let storage = AwsStorage::create(&config).await;
        let aws = Some((storage.bucket, storage.table));
        Some(Self::start_running(vars, aws, erasures).await)
    }

    /// Starts on the AWS adapters over the bucket and table of another app (`aws`).
    pub async fn start_aws_in(vars: &[(&str, &str)], aws: (String, String)) -> Self {
        Self::start_on(vars, Some(aws)).await
    }

    async fn start_on(vars: &[(&str, &str)], aws: Option<(String, String)>) -> Self {
        Self::start_running(vars, aws, true).await
    }

    /// Starts the app's runner; `erasures`: whether it works the erasures under way.
    async fn start_running(
        vars: &[(&str, &str)],
        aws: Option<(String, String)>,
        erasures: bool,
    ) -> Self {
        imgest_download::install_default_provider();
        let data_dir = tempfile::tempdir().unwrap();
        let mut map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.insert(
            "IMGEST_DATA_DIR".into(),
            data_dir.path().display().to_string(),
        );
        // Tests move a manual clock through seconds-long windows.
        map.entry("IMGEST_UNSAFE_SHORT_WINDOWS".into())
            .or_insert_with(|| "1".into());
        if let Some((bucket, table)) = aws.clone() {
            map.insert("IMGEST_BACKEND".into(), "aws".into());
            map.insert("IMGEST_BUCKET".into(), bucket);
            map.insert("IMGEST_TABLE".into(), table);
            map.insert("IMGEST_S3_FORCE_PATH_STYLE".into(), "true".into());
        }
        let settings = Settings::from_map(&map).unwrap();
        let clock = Arc::new(ManualClock::starting_now());
        Self::launch(settings, clock, data_dir, aws, erasures).await
    }

    /// A runner on `settings` (its storage in `data_dir`, or on AWS), moved by `clock`.
    async fn launch(
        settings: Settings,
        clock: Arc<ManualClock>,
        data_dir: tempfile::TempDir,
        aws: Option<(String, String)>,
        erasures: bool,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        // The runner serves files through the blob store on every backend, so tests can
        // fetch them.
        let options = RunnerOptions {
            clock: clock.clone(),
            gc_every: None,
            backfill: false,
            erasures,
        };
        let runner = LocalRunner::start(&settings, Some(listener), options)
            .await
            .unwrap();
        Self {
            base: runner.base_url().to_owned(),
            client: reqwest::Client::new(),
            service: Arc::clone(runner.service()),
            clock,
            settings,
            runner,
            erasures,
            data_dir,
            aws,
        }
    }

    /// The same app started again: its runner stopped, and a new one on the same storage,
    /// settings and clock (what a restart of the process keeps).
    pub async fn restart(self) -> Self {
        let Self {
            clock,
            settings,
            runner,
            erasures,
            data_dir,
            aws,
            ..
        } = self;
        runner.stop().await;
        Self::launch(settings, clock, data_dir, aws, erasures).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// `method path` with `Authorization: Bearer token` (none without a token) and `body`
    /// (JSON when it is a JSON value, else raw bytes).
    pub async fn call(&self, method: &str, path: &str, token: Option<&str>, body: Body) -> Reply {
        Self::reply(self.call_raw(method, path, token, body).await).await
    }

    /// [`call`](Self::call), answering the whole response (headers included).
    pub async fn call_raw(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Body,
    ) -> reqwest::Response {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.client.request(method, self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request = match body {
            Body::None => request,
            Body::Json(v) => request.json(&v),
            Body::Bytes(b, content_type) => request.header("content-type", content_type).body(b),
        };
        request.send().await.unwrap()
    }

    async fn reply(response: reqwest::Response) -> Reply {
        reply(response).await
    }

    /// The API router as the API function serves it (`Edge::Lambda`, claims from API
    /// Gateway's request context) over this app's service, with file URLs on a CDN.
    pub fn api_function(&self) -> axum::Router {
        let crawler = Arc::new(self.crawler(Processing::Handoff, &[]));
        api::router(
            api::ApiState::new(
                self.service.clone(),
                crawler,
                "https://cdn.example.com",
                Authenticator::Gateway {
                    audience: crate::support::identity::AUDIENCE.into(),
                },
            ),
            api::Edge::Lambda,
        )
    }

    /// `POST /v1/images` with a raw body.
    pub async fn upload(&self, bytes: &[u8]) -> Reply {
        let r = self
            .client
            .post(self.url("/v1/images"))
            .body(bytes.to_vec())
            .send()
            .await
            .unwrap();
        Self::reply(r).await
    }

    /// `POST /v1/images` with a raw body and a Content-Type.
    pub async fn upload_as(&self, bytes: &[u8], content_type: &str) -> Reply {
        let r = self
            .client
            .post(self.url("/v1/images"))
            .header("content-type", content_type)
            .body(bytes.to_vec())
            .send()
            .await
            .unwrap();
        Self::reply(r).await
    }

    /// A presigned upload URL's PUT, as a browser sends it: with the content type it was
    /// signed for.
    pub async fn put_upload(&self, url: &str, body: Vec<u8>) -> reqwest::Response {
        self.client
            .put(url)
            .header("content-type", "application/octet-stream")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// Uploads and returns the image id, asserting success.
    pub async fn upload_ok(&self, bytes: &[u8]) -> String {
        let r = self.upload(bytes).await;
        assert!(
            r.status == 201 || r.status == 200,
            "upload failed: {} {}",
            r.status,
            r.json
        );
        r.json["image_id"].as_str().unwrap().to_owned()
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Reply {
        Self::reply(
            self.client
                .post(self.url(path))
                .json(body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn get(&self, path: &str) -> Reply {
        Self::reply(self.client.get(self.url(path)).send().await.unwrap()).await
    }

    pub async fn get_bytes(&self, url: &str) -> (u16, Vec<u8>) {
        let r = self.client.get(url).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.bytes().await.unwrap().to_vec())
    }

    pub async fn delete(&self, path: &str) -> Reply {
        Self::reply(self.client.delete(self.url(path)).send().await.unwrap()).await
    }

    /// `PUT /v1/offers/{offer}/photos`.
    pub async fn link(&self, offer: &str, image_ids: &[&str]) -> Reply {
        let body = serde_json::json!({ "image_ids": image_ids });
        let r = self
            .client
            .put(self.url(&format!("/v1/offers/{offer}/photos")))
            .json(&body)
            .send()
            .await
            .unwrap();
        Self::reply(r).await
    }

    pub async fn photos(&self, offer: &str) -> Reply {
        self.get(&format!("/v1/offers/{offer}/photos")).await
    }

    /// A crawler over this app's service, with the crawl settings of `vars` (and private
    /// networks allowed: partner hosts in tests are on 127.0.0.1; [`TEST_SENDER`] may send
    /// crawls for any client unless `vars` list the intake's senders; the app's own sends and
    /// the sample events are the stack's unless `vars` list its roles).
    pub fn crawler(&self, processing: Processing, vars: &[(&str, &str)]) -> Crawler {
        let mut map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.entry("IMGEST_ALLOW_PRIVATE_NETWORKS".into())
            .or_insert_with(|| "true".into());
        map.entry("IMGEST_FETCH_PORTS".into())
            .or_insert_with(|| "any".into());
        map.entry("IMGEST_INTAKE_SENDERS".into())
            .or_insert_with(|| format!("{TEST_SENDER}=*"));
        map.entry("IMGEST_STACK_ROLES".into())
            .or_insert_with(|| format!("{STACK_SENDER},{SAMPLE_EVENT_SENDER}"));
        let settings = Settings::from_map(&map).unwrap().crawl;
        Crawler::new(self.service.clone(), settings, processing)
    }

    /// A service over this app's storage whose pipeline makes `variants` instead (what a
    /// redeploy with another IMGEST_VARIANTS runs).
    pub fn service_with_variants(&self, variants: &str) -> Arc<Service> {
        let mut config = self.pipeline_config();
        config.variants = variants.parse().unwrap();
        Arc::new(self.service_over(self.service.ports().clone(), config))
    }

    /// The configuration of the pipeline this app runs (made of its settings).
    pub fn pipeline_config(&self) -> imgest_pipeline::PipelineConfig {
        imgest_pipeline::configure::from_settings(&self.settings, None)
            .unwrap()
            .config()
            .clone()
    }

    /// A service over `ports` with this app's policy and a pipeline of `config`.
    pub fn service_over(
        &self,
        ports: imgest_core::Ports,
        config: imgest_pipeline::PipelineConfig,
    ) -> Service {
        Service::new(ports, self.service.policy().clone())
            .with_imaging(Arc::new(imgest_pipeline::Pipeline::new(config)))
    }

    pub fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }

    pub async fn gc(&self) -> GcReport {
        self.service.gc().await.unwrap()
    }

    pub async fn sweep(&self) -> SweepReport {
        self.service.sweep(false).await.unwrap()
    }

    /// Every stored file's key (through the blob store, so it works on every backend).
    pub async fn files(&self) -> Vec<String> {
        let blobs = &self.service.ports().blobs;
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let page = blobs.list("", cursor.as_ref(), 1000).await.unwrap();
            out.extend(page.blobs.iter().map(|b| b.key.to_string()));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        out.sort();
        out
    }

    /// Writes an original that no record owns (what the sweep deletes once past its grace);
    /// returns its image id.
    pub async fn put_stray_original(&self) -> imgest_core::domain::ImageId {
        self.put_stray_original_of(b"never recorded").await
    }

    /// [`put_stray_original`](Self::put_stray_original) under the id of `content`.
    pub async fn put_stray_original_of(&self, content: &[u8]) -> imgest_core::domain::ImageId {
        use imgest_core::domain::{BlobKey, Generation, ImageId};
        let id = ImageId::of_bytes(content);
        let key = BlobKey::original(&id, &Generation::parse("00000002").unwrap());
        let bytes = bytes::Bytes::from_static(b"y");
        let blobs = &self.service.ports().blobs;
        blobs
            .put(&key, bytes, "application/octet-stream")
            .await
            .unwrap();
        id
    }

    /// The files of one image id.
    pub async fn files_of(&self, image_id: &str) -> Vec<String> {
        self.files()
            .await
            .into_iter()
            .filter(|f| f.contains(image_id))
            .collect()
    }
}

/// The sweep of the shards of `ids` only (each once), as a whole sweep would find them: what
/// a test of a few images asks of the sweep, without listing the 256 shards of an S3 bucket.
pub async fn sweep_shards_of(service: &Service, ids: &[&str], dry_run: bool) -> SweepReport {
    let shards: std::collections::BTreeSet<&str> = ids.iter().map(|id| &id[..2]).collect();
    let mut report = SweepReport::default();
    let options = imgest_flows::sweep::SweepOptions {
        dry_run,
        go_on: false,
    };
    for shard in shards {
        service
            .sweep_shard(shard, options, &mut report)
            .await
            .unwrap();
    }
    report
}
