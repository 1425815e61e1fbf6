//! Hostile photos against `imgest serve` in its own process, so its peak memory can be read:
//! each gets its documented answer, the server keeps serving, and its peak RSS stays within
//! `IMGEST_MEMORY_BUDGET`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use imgest_hosts::hostile;

const BUDGET_MB: u64 = 512;

struct Server {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(budget_mb: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_imgest"))
            .current_dir(dir.path())
            .arg("serve")
            .env("IMGEST_DATA_DIR", dir.path().join("data"))
            .env("IMGEST_LISTEN", "127.0.0.1:0")
            .env("IMGEST_MEMORY_BUDGET", format!("{budget_mb}MiB"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("http://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .trim_end_matches('/')
            .to_owned();
        Self {
            child,
            addr,
            _dir: dir,
        }
    }

    /// The status and body of one request (a generous timeout: a hang fails the test).
    fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        // The server may answer (413, 422) before it has read everything.
        let _ = s.write_all(body);
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).unwrap();
        let text = String::from_utf8_lossy(&answer).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status in {text:?}"));
        (status, text)
    }

    /// The most resident memory the server has had, in MiB.
    fn peak_rss_mb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kb / 1024
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn hostile_photos_get_their_answers_within_the_memory_budget() {
    let server = Server::start(BUDGET_MB);
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "scan bomb, 1 MB",
            hostile::scan_bomb(1_000_000),
            422,
            "corrupt_image",
        ),
        (
            "scan bomb, at the body limit",
            hostile::scan_bomb(19_999_000),
            422,
            "corrupt_image",
        ),
        (
            "192 valid scans",
            hostile::jpeg(512, 512, true, Some(64)),
            422,
            "corrupt_image",
        ),
        (
            "49 MP declared, 1 kB sent",
            hostile::declared_huge_jpeg(7000, 7000),
            422,
            "corrupt_image",
        ),
        (
            "49 MP 16-bit RGBA PNG",
            hostile::png(7000, 7000, true, true),
            201,
            "",
        ),
        (
            "49 MP 8-bit RGBA PNG",
            hostile::png(7000, 7000, true, false),
            201,
            "",
        ),
        (
            "1 GiB zTXt chunk",
            hostile::inflating_png(1 << 30, false),
            201,
            "",
        ),
        (
            "1 GiB iCCP chunk",
            hostile::inflating_png(1 << 30, true),
            201,
            "",
        ),
        (
            "3000-frame GIF",
            hostile::many_frame_gif(200, 200, 3000),
            201,
            "",
        ),
        (
            "268 MP WebP canvas",
            hostile::huge_canvas_webp(),
            422,
            "too_many_pixels",
        ),
    ];
    for (name, body, status, kind) in &cases {
        assert!(body.len() < 20_000_000, "{name}: {} bytes", body.len());
        let (got, text) = server.request("POST", "/v1/images", body);
        assert_eq!(got, *status, "{name}: {text}");
        assert!(text.contains(kind), "{name}: {text}");
    }
    let (health, _) = server.request("GET", "/healthz", b"");
    assert_eq!(health, 200);
    let peak = server.peak_rss_mb();
    assert!(
        peak <= BUDGET_MB,
        "peak RSS {peak} MiB over the {BUDGET_MB} MiB budget"
    );
}

#[test]
fn a_photo_that_can_never_fit_the_budget_is_refused_with_the_budget_named() {
    // 160 MiB leaves 72 MiB for decoding: less than a 49 MP PNG needs.
    let server = Server::start(160);
    let big = hostile::png(7000, 7000, true, false);
    let (status, text) = server.request("POST", "/v1/images", &big);
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("too_many_pixels"), "{text}");
    assert!(text.contains("IMGEST_MEMORY_BUDGET"), "{text}");
    let (ok, text) = server.request("POST", "/v1/images", &hostile::jpeg(640, 480, false, None));
    assert_eq!(ok, 201, "{text}");
}
