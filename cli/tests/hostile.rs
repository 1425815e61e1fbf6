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
            .env("IMGEST_LOG", "warn")
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
    for case in hostile::corpus() {
        let name = case.name;
        assert!(
            case.bytes.len() < 20_000_000,
            "{name}: {} bytes",
            case.bytes.len()
        );
        let (got, text) = server.request("POST", "/v1/images", &case.bytes);
        match case.refused {
            None => assert_eq!(got, 201, "{name}: {text}"),
            Some(kind) => {
                assert_eq!(got, 422, "{name}: {text}");
                assert!(text.contains(kind), "{name}: {text}");
            }
        }
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
