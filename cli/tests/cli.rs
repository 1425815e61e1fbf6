//! The `imgest` binary as an operator runs it: a fresh data directory, real files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use imgest_core::ports::ManualClock;
use imgest_local::app;
use imgest_settings::{Backend, Settings};

fn imgest(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_imgest"));
    cmd.current_dir(dir)
        .args(args)
        .env("IMGEST_DATA_DIR", dir.join("data"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Uploads sample photos into the data directory `data` as if an hour ago, with `orphan_ttl`
/// if given.
fn upload_samples(data: &Path, orphan_ttl: Option<Duration>, names: &[&str]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut settings = Settings::defaults();
        settings.backend = Backend::Embedded {
            data_dir: data.to_path_buf(),
        };
        if let Some(ttl) = orphan_ttl {
            settings.orphan_ttl = ttl;
        }
        let clock = Arc::new(ManualClock::starting_now());
        clock.advance_back(Duration::from_secs(3600));
        let service = app::service(&settings, "http://127.0.0.1:8080", clock)
            .await
            .unwrap();
        for name in names {
            let bytes = std::fs::read(samples().join(name)).unwrap();
            service.upload_bytes(bytes.into()).await.unwrap();
        }
    });
}

fn samples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples")
}

#[test]
fn the_demo_tours_the_main_job_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let out = imgest(dir.path(), &["demo"], &[]);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("deduplicated=true"), "{text}");
    assert!(text.contains("gc: 4 images deleted"), "{text}");
    assert!(dir.path().join("imgest-demo/imgest.sqlite3").exists());
    // A second run replaces its own earlier tour.
    assert!(imgest(dir.path(), &["demo"], &[]).status.success());
}

#[test]
fn the_demo_refuses_to_wipe_a_directory_it_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("precious")).unwrap();
    std::fs::write(dir.path().join("precious/keep.txt"), "mine").unwrap();
    let out = imgest(dir.path(), &["demo", "--data-dir", "precious"], &[]);
    assert!(!out.status.success());
    assert!(dir.path().join("precious/keep.txt").exists());
}

#[test]
fn process_prints_a_line_per_file_and_writes_variants() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let dune = samples().join("dune.jpg");
    let out = imgest(
        dir.path(),
        &[
            "process",
            "--out",
            out_dir.to_str().unwrap(),
            dune.to_str().unwrap(),
        ],
        &[],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("large=1280x800"), "{text}");
    assert!(text.contains(" ms"), "{text}");
    for v in ["large", "medium", "thumb"] {
        assert!(out_dir.join(format!("dune.{v}.jpg")).exists());
    }
    let bad = dir.path().join("bad.jpg");
    std::fs::write(&bad, b"not an image").unwrap();
    let out = imgest(dir.path(), &["process", bad.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(stdout(&out).contains("unsupported_format"));

    // For scripts: one JSON object per file, failures included, and the exit status.
    let args = [
        "process",
        "--json",
        dune.to_str().unwrap(),
        bad.to_str().unwrap(),
    ];
    let out = imgest(dir.path(), &args, &[]);
    assert!(!out.status.success());
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{}", stdout(&out));
    assert_eq!(lines[0]["variants"]["large"]["width"], 1280);
    assert_eq!(lines[0]["format"], "jpeg");
    assert_eq!(lines[1]["error"]["kind"], "unsupported_format");
}

#[test]
fn a_bad_setting_names_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    let out = imgest(dir.path(), &["gc"], &[("IMGEST_ORPHAN_TTL", "fortnight")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("IMGEST_ORPHAN_TTL"));
}

#[test]
fn restore_finds_a_live_image_and_says_the_embedded_store_keeps_no_deleted_files() {
    let dir = tempfile::tempdir().unwrap();
    upload_samples(&dir.path().join("data"), None, &["storm.jpg"]);
    let photo = std::fs::read(samples().join("storm.jpg")).unwrap();
    let live = imgest_core::domain::ImageId::of_bytes(&photo).to_string();
    let out = imgest(dir.path(), &["restore", &live, "--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout(&out).trim(), r#"{"outcome":"live"}"#);
    let gone = imgest_core::domain::ImageId::of_bytes(b"collected long ago").to_string();
    let out = imgest(dir.path(), &["restore", &gone], &[]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("keeps no deleted files"), "{said}");
    let out = imgest(dir.path(), &["restore", "not-an-id"], &[]);
    assert!(!out.status.success());
}

#[test]
fn gc_and_sweep_collect_expired_orphans_from_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    // Uploaded an hour ago with a 2 s TTL: expired by now on the real clock.
    upload_samples(
        &dir.path().join("data"),
        Some(Duration::from_secs(2)),
        &["storm.jpg"],
    );
    let out = imgest(dir.path(), &["sweep", "--dry-run"], &[]);
    assert!(
        stdout(&out).contains("4 files scanned, 0 garbage"),
        "{}",
        stdout(&out)
    );
    let out = imgest(dir.path(), &["gc"], &[]);
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("1 images deleted (4 files)"),
        "{}",
        stdout(&out)
    );
    let out = imgest(dir.path(), &["sweep"], &[]);
    assert!(stdout(&out).contains("0 files scanned"), "{}", stdout(&out));
}

#[test]
fn crawl_crawls_a_file_of_requests_and_results_prints_one_line_per_offer() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let photo = std::fs::read(samples().join("dune.jpg")).unwrap();
    let host = runtime
        .block_on(imgest_hosts::PartnerHost::start([
            ("/a.jpg", imgest_hosts::Answer::photo(photo)),
            ("/gone.jpg", imgest_hosts::Answer::status(404)),
        ]))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let requests = dir.path().join("offers.jsonl");
    let line = |offer: &str, urls: &[String]| {
        serde_json::json!({"client_id": "acme", "offer_id": offer, "urls": urls}).to_string()
    };
    std::fs::write(
        &requests,
        [
            line("o1", &[host.url("/a.jpg"), host.url("/gone.jpg")]),
            "not json".to_owned(),
            line("o2", &[host.url("/a.jpg")]),
        ]
        .join("\n"),
    )
    .unwrap();
    let env = [
        ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true"),
        ("IMGEST_FETCH_PORTS", "any"),
    ];

    let out = imgest(dir.path(), &["crawl", "offers.jsonl"], &env);
    let text = stdout(&out);
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{errors}");
    assert!(
        errors.contains("offers.jsonl:2: not a crawl request"),
        "{errors}"
    );
    assert!(
        text.contains("2 offers") && text.contains("2 photos ok, 1 failed (not_found: 1)"),
        "{text}"
    );
    assert_eq!(
        host.hits("/a.jpg"),
        1,
        "one download for the URL of both offers"
    );

    // Stats count the offers' latest crawls: the failure by its kind and under its host.
    let out = imgest(dir.path(), &["stats", "--json"], &[]);
    assert!(out.status.success());
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let partner = host.addr().to_string();
    assert_eq!(
        (
            stats["crawled_offers"].clone(),
            stats["crawled_photos"].clone()
        ),
        (2.into(), 3.into()),
        "{stats}"
    );
    assert_eq!(
        stats["crawl_failures_by_kind"],
        serde_json::json!({"not_found": 1}),
        "{stats}"
    );
    assert_eq!(
        stats["top_failing_hosts"],
        serde_json::json!([{"host": partner, "failed": 1, "photos": 3}]),
        "{stats}"
    );
    assert_eq!(stats["unreadable_crawl_records"], 0, "{stats}");
    let text = stdout(&imgest(dir.path(), &["stats"], &[]));
    assert!(
        text.contains("crawl failures of kind not_found: 1"),
        "{text}"
    );
    assert!(
        text.contains(&format!("failing host {partner}: 1 of 3 photos failed")),
        "{text}"
    );

    let out = imgest(dir.path(), &["results"], &[]);
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().any(|r| r["offer_id"] == "o1"));
    // Printed results are removed.
    assert!(stdout(&imgest(dir.path(), &["results"], &[])).is_empty());

    // Crawled again, for scripts: the summary as JSON, and nothing downloaded again.
    let out = imgest(dir.path(), &["crawl", "--json", "offers.jsonl"], &env);
    assert!(out.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["offers"], 2);
    assert_eq!(summary["refused_lines"], 1);
    assert_eq!(summary["photos_ok"], 2, "{summary}");
    assert_eq!(summary["photos_failed"]["not_found"], 1, "{summary}");
    assert_eq!(summary["downloads"], 0, "{summary}");
    assert_eq!(host.hits("/a.jpg"), 1);
}

#[test]
fn serve_refuses_an_open_api_off_loopback_unless_told_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = imgest(dir.path(), &["serve"], &[("IMGEST_LISTEN", "0.0.0.0:0")]);
    assert!(!out.status.success());
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(errors.contains("IMGEST_JWKS_FILE"), "{errors}");
    assert!(errors.contains("IMGEST_AUTH=off"), "{errors}");

    // Told so, it serves (and says it is open); stopped once it said it serves.
    let mut child = Command::new(env!("CARGO_BIN_EXE_imgest"))
        .current_dir(dir.path())
        .arg("serve")
        .env("IMGEST_DATA_DIR", dir.path().join("data"))
        .env("IMGEST_LISTEN", "0.0.0.0:0")
        .env("IMGEST_AUTH", "off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(line.contains("imgest serving on"), "{line}");
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(logs.contains("the API is open"), "{logs}");
}

#[test]
fn backfill_audit_and_queue_work_on_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    upload_samples(&dir.path().join("data"), None, &["storm.jpg", "dune.jpg"]);
    let bigger = [(
        "IMGEST_VARIANTS",
        "large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200,tiny=fit:32x32",
    )];
    let out = imgest(dir.path(), &["backfill", "status"], &bigger);
    assert!(
        stdout(&out).contains("no backfill has been started"),
        "{}",
        stdout(&out)
    );
    let out = imgest(dir.path(), &["backfill", "status", "--json"], &bigger);
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status["run"].is_null(), "{status}");
    // A backfill runs only under a confirmed variant set.
    let out = imgest(dir.path(), &["backfill", "start"], &bigger);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("imgest variants confirm"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = imgest(dir.path(), &["variants", "confirm"], &bigger);
    assert!(
        stdout(&out).contains("the configured set is the confirmed one"),
        "{}",
        stdout(&out)
    );
    let out = imgest(dir.path(), &["variants", "status", "--json"], &[]);
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["dropped"], serde_json::json!(["tiny"]), "{status}");
    let out = imgest(dir.path(), &["backfill", "start"], &bigger);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout(&out).contains("backfill done: 2 of 2 queued done, 0 pending, 0 failed"),
        "{}",
        stdout(&out)
    );
    let out = imgest(dir.path(), &["backfill", "status", "--json"], &bigger);
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (status["done"].as_u64(), status["finished"].as_bool()),
        (Some(2), Some(true)),
        "{status}"
    );
    // Under the old configuration, resuming is refused with the reason.
    let out = imgest(dir.path(), &["backfill", "resume"], &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("start a new one"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = imgest(dir.path(), &["audit"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout(&out).contains("2 images checked: 0 with missing files"),
        "{}",
        stdout(&out)
    );

    let out = imgest(dir.path(), &["queue", "--json"], &[]);
    assert!(out.status.success());
    let overview: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let backfill = overview["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "backfill")
        .unwrap();
    assert_eq!(backfill["priority"], "backfill");
    assert_eq!(backfill["ready"], 0);
    let out = imgest(dir.path(), &["queue"], &[]);
    assert!(stdout(&out).contains("fetch-0"), "{}", stdout(&out));

    let out = imgest(dir.path(), &["audit", "--dry-run", "--json"], &[]);
    assert!(out.status.success());
    let audit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(audit["images_checked"], 2, "{audit}");
    let out = imgest(dir.path(), &["gc", "--json"], &[]);
    let gc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(gc["images_deleted"], 0, "{gc}");
    let out = imgest(dir.path(), &["sweep", "--dry-run", "--json"], &[]);
    let sweep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sweep["files_deleted"], 0, "{sweep}");

    let out = imgest(dir.path(), &["stats", "--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (stats["images"].clone(), stats["orphans"].clone()),
        (2.into(), 2.into()),
        "{stats}"
    );
    assert!(stats["original_files"].as_u64().unwrap() >= 2, "{stats}");
    assert!(stats["variant_bytes"].as_u64().unwrap() > 0, "{stats}");
    assert_eq!(stats["queues"]["backfill"]["dead"], 0, "{stats}");
    let out = imgest(dir.path(), &["stats"], &[]);
    assert!(
        stdout(&out).contains("images: 2 live (2 orphans"),
        "{}",
        stdout(&out)
    );

    // No dead letters: the listing says so per queue, a redrive moves nothing, and an unknown
    // queue is refused with the known ones named.
    let out = imgest(dir.path(), &["dlq", "list", "--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let letters: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(letters["process"], serde_json::json!([]));
    let out = imgest(dir.path(), &["dlq", "redrive", "--queue", "process"], &[]);
    assert!(
        stdout(&out).contains("process: 0 dead letter(s) moved back"),
        "{}",
        stdout(&out)
    );
    let out = imgest(dir.path(), &["dlq", "redrive", "--queue", "nope"], &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the queues are: fetch-0"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
