//! A partner's webhook endpoint on 127.0.0.1 for the tests: answers each POST with the next
//! reply of its script and keeps what it got, to be checked with the Standard Webhooks
//! project's own library (not imgest's signer).

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;
use standardwebhooks::Webhook;

/// What the receiver answers a request.
#[derive(Debug, Clone, Copy)]
pub enum Reply {
    Status(u16),
    /// No answer for longer than any test's webhook timeout, then 200.
    Hang,
}

/// A request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    pub fn id(&self) -> &str {
        self.headers["webhook-id"].to_str().unwrap()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// Whether `secret` verifies it, by the specification's library.
    pub fn verifies_with(&self, secret: &str) -> bool {
        Webhook::new(secret)
            .unwrap()
            .verify(&self.body, &self.headers)
            .is_ok()
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    received: Vec<Received>,
}

/// The endpoint: each request answered with the next reply of its script (204 once the script
/// is spent).
#[derive(Clone)]
pub struct Receiver {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
}

impl Receiver {
    pub async fn start(replies: &[Reply]) -> Self {
        let script = Arc::new(Mutex::new(Script {
            replies: replies.iter().copied().collect(),
            received: Vec::new(),
        }));
        let app = axum::Router::new()
            .route("/hooks", axum::routing::post(receive))
            .with_state(Arc::clone(&script));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, script }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hooks", self.addr)
    }

    pub fn received(&self) -> Vec<Received> {
        self.script.lock().unwrap().received.clone()
    }

    /// Waits (real time: deliveries may run on other tasks or processes) until it got `n`
    /// requests.
    pub async fn until_got(&self, n: usize) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the receiver got {} of {n} deliveries",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn receive(
    State(script): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let reply = {
        let mut script = script.lock().unwrap();
        script.received.push(Received { headers, body });
        script.replies.pop_front()
    };
    match reply {
        None => StatusCode::NO_CONTENT,
        Some(Reply::Status(code)) => StatusCode::from_u16(code).unwrap(),
        Some(Reply::Hang) => {
            tokio::time::sleep(Duration::from_secs(20)).await;
            StatusCode::OK
        }
    }
}
