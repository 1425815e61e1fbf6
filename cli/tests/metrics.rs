//! `imgest serve`'s metrics as a scraper sees them: `/metrics` at each `IMGEST_METRICS` level,
//! and closed to every token but an `imgest:metrics` one. Each test runs its own runner (the
//! metrics are the process's).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use std::time::Duration;

use imgest_http::auth::{LocalIssuer, TokenSpec};
use reqwest::StatusCode;

/// A running `imgest serve` on a free loopback port, killed when dropped.
struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_imgest"));
    cmd.current_dir(dir)
        .args(args)
        .env("IMGEST_DATA_DIR", dir.join("data"))
        .env("IMGEST_LISTEN", "127.0.0.1:0")
        .env_remove("IMGEST_METRICS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Starts the runner and waits for the line that says where it serves.
fn serve(dir: &Path, env: &[(&str, &str)]) -> Served {
    let mut child = command(dir, &["serve"], env)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .strip_prefix("imgest serving on ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    Served { child, base }
}

fn photo() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/storm.jpg")).unwrap()
}

fn client() -> reqwest::Client {
    imgest_download::install_default_provider();
    reqwest::Client::new()
}

async fn upload(served: &Served, token: Option<&str>) {
    let mut request = client()
        .post(format!("{}/v1/images", served.base))
        .body(photo());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
}

async fn scrape(served: &Served, token: Option<&str>) -> (StatusCode, String) {
    let mut request = client().get(format!("{}/metrics", served.base));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

/// The value of the sample `series` (name and labels, exactly as rendered), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[tokio::test]
async fn timings_count_and_time_every_stage_of_an_upload_and_a_dedup_hit_decodes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path(), &[("IMGEST_METRICS", "timings")]);
    upload(&served, None).await;
    upload(&served, None).await;
    let (status, text) = scrape(&served, None).await;
    assert_eq!(status, StatusCode::OK);
    // The second upload is the same bytes: no second decode.
    let decoded = r#"imgest_stage_total{stage="decode",outcome="ok"}"#;
    assert_eq!(sample(&text, decoded), Some(1.0), "{text}");
    // Three variants by default: three resizes in one stage run, three encodes.
    let encoded = r#"imgest_stage_total{stage="encode",outcome="ok"}"#;
    assert_eq!(sample(&text, encoded), Some(3.0), "{text}");
    for stage in ["resize", "store"] {
        let series = format!(r#"imgest_stage_total{{stage="{stage}",outcome="ok"}}"#);
        assert_eq!(sample(&text, &series), Some(1.0), "{stage}: {text}");
    }
    let timed = r#"imgest_stage_seconds_count{stage="decode",outcome="ok"}"#;
    assert_eq!(sample(&text, timed), Some(1.0), "{text}");
    let sum = r#"imgest_stage_seconds_sum{stage="decode",outcome="ok"}"#;
    assert!(sample(&text, sum).is_some_and(|s| s > 0.0), "{text}");
    assert!(text.contains("imgest_stage_seconds_bucket{"), "{text}");
}

#[tokio::test]
async fn counts_count_without_timing_and_off_serves_no_metrics() {
    let dir = tempfile::tempdir().unwrap();
    {
        let served = serve(dir.path(), &[]);
        upload(&served, None).await;
        let (status, text) = scrape(&served, None).await;
        assert_eq!(status, StatusCode::OK);
        let decoded = r#"imgest_stage_total{stage="decode",outcome="ok"}"#;
        assert_eq!(sample(&text, decoded), Some(1.0), "{text}");
        assert!(!text.contains("imgest_stage_seconds"), "{text}");
        // The flows' event counters are the same facade's, exported beside the stages.
        assert_eq!(
            sample(&text, "imgest_uploads_new_total"),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, "imgest_pipeline_runs_total"),
            Some(1.0),
            "{text}"
        );
    }
    let served = serve(dir.path(), &[("IMGEST_METRICS", "off")]);
    upload(&served, None).await;
    let (status, body) = scrape(&served, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("metrics_off"), "{body}");
}

#[test]
fn a_level_that_is_not_one_stops_the_runner_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = command(dir.path(), &["serve"], &[("IMGEST_METRICS", "verbose")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(
        errors.contains("IMGEST_METRICS must be off, counts or timings"),
        "{errors}"
    );
}

#[tokio::test]
async fn with_tokens_on_only_an_imgest_metrics_token_may_scrape() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    let jwks = jwks.to_str().unwrap();
    let auth = [
        ("IMGEST_JWKS_FILE", jwks),
        ("IMGEST_JWT_ISSUER", "imgest-test"),
        ("IMGEST_JWT_AUDIENCE", "imgest"),
    ];
    let issuer = LocalIssuer::es256("imgest-test", "imgest").unwrap();
    issuer.write_jwks(Path::new(jwks)).unwrap();
    let token = |scope: &str| {
        issuer
            .token(&TokenSpec {
                sub: "someone",
                scope,
                client_id: None,
                valid_for: Duration::from_secs(3600),
            })
            .unwrap()
    };
    let seller = token("imgest:upload imgest:offers");
    let scraper = token("imgest:metrics");
    let served = serve(dir.path(), &auth);
    upload(&served, Some(&seller)).await;

    assert_eq!(scrape(&served, None).await.0, StatusCode::UNAUTHORIZED);
    let (status, body) = scrape(&served, Some(&seller)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("imgest:metrics"), "{body}");
    let (status, text) = scrape(&served, Some(&scraper)).await;
    assert_eq!(status, StatusCode::OK);
    let decoded = r#"imgest_stage_total{stage="decode",outcome="ok"}"#;
    assert_eq!(sample(&text, decoded), Some(1.0), "{text}");
    // The scraper's token opens nothing else.
    let response = client()
        .post(format!("{}/v1/images", served.base))
        .bearer_auth(&scraper)
        .body(photo())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}
