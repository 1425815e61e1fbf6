//! Simulated partner photo hosts: real HTTP/1.1 servers on 127.0.0.1 that tests, the demo and
//! the crawl benchmark point the downloader at.
//!
//! A [`PartnerHost`] serves a map of paths to [`Answer`]s, what each path answers (a photo, a delay, a drip, a status,
//! a redirect, a reset...) and counts what it served: [`requests`](PartnerHost::requests),
//! per-path [`hits`](PartnerHost::hits) and the [`request_times`](PartnerHost::request_times)
//! a benchmark checks rate-limit windows against. A host-wide
//! [`latency`](HostBuilder::latency) makes fast, medium and slow hosts from the same answers,
//! and [`max_requests_per_second`](HostBuilder::max_requests_per_second) makes one that
//! answers 429 when pushed. Handlers never panic: an answer the HTTP types refuse is a 500.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use imgest_hosts::{PartnerHost, Answer};
//! let host = PartnerHost::builder()
//!     .serve("/a.jpg", Answer::photo(std::fs::read("a.jpg")?))
//!     .serve("/gone.jpg", Answer::status(410))
//!     .latency(std::time::Duration::from_millis(50))
//!     .start()
//!     .await?;
//! let url = host.url("/a.jpg"); // "http://127.0.0.1:PORT/a.jpg"
//! # Ok(()) }
//! ```
//!
//! Answers are looked up by path and query exactly (`/a.jpg?w=1`), then by path alone; an
//! unknown path is a 404. Dropping the host stops it accepting connections.

mod answer;
#[cfg(feature = "hostile")]
pub mod hostile;

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Uri, header};
use axum::response::Response;
use tokio::task::JoinHandle;

pub use self::answer::{Answer, Gate, PHOTO_LAST_MODIFIED, etag_of, redirect_chain};

/// How a host is configured before it starts; see [`PartnerHost::builder`].
#[derive(Debug, Clone, Default)]
pub struct HostBuilder {
    answers: HashMap<String, Answer>,
    latency: Duration,
    max_rps: Option<u32>,
}

impl HostBuilder {
    /// Serves `answer` at `path` (e.g. `/photos/1.jpg`, or with a query: `/p?id=1`).
    pub fn serve(mut self, path: impl Into<String>, answer: Answer) -> Self {
        self.answers.insert(path.into(), answer);
        self
    }

    /// Serves each `(path, answer)`.
    pub fn serve_all<P: Into<String>>(
        mut self,
        answers: impl IntoIterator<Item = (P, Answer)>,
    ) -> Self {
        self.answers.extend(
            answers
                .into_iter()
                .map(|(path, answer)| (path.into(), answer)),
        );
        self
    }

    /// Every request waits this long before it is answered (before any headers).
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Requests beyond `limit` within the last second get an immediate 429 with
    /// `Retry-After: 1` (they are still counted and timestamped).
    pub fn max_requests_per_second(mut self, limit: u32) -> Self {
        self.max_rps = Some(limit);
        self
    }

    /// Binds 127.0.0.1 on a free port and starts serving on the current tokio runtime.
    pub async fn start(self) -> io::Result<PartnerHost> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let hits = self
            .answers
            .keys()
            .map(|path| (path.clone(), AtomicU64::new(0)))
            .collect();
        let state = Arc::new(HostState {
            answers: self.answers,
            hits,
            latency: self.latency,
            max_rps: self.max_rps,
            requests: AtomicU64::new(0),
            answering: AtomicU64::new(0),
            most_answering: AtomicU64::new(0),
            times: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(state.clone());
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(%addr, error = %e, "simulated partner host stopped");
            }
        });
        Ok(PartnerHost {
            addr,
            state,
            server,
        })
    }
}

/// A running simulated host on 127.0.0.1; stops accepting connections when dropped.
#[derive(Debug)]
pub struct PartnerHost {
    addr: SocketAddr,
    state: Arc<HostState>,
    server: JoinHandle<()>,
}

impl PartnerHost {
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// A host serving `answers`, with no latency and no rate limit.
    pub async fn start<P: Into<String>>(
        answers: impl IntoIterator<Item = (P, Answer)>,
    ) -> io::Result<Self> {
        Self::builder().serve_all(answers).start().await
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The URL of `path` on this host; `path` starts with `/`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests received, all paths (unknown ones and rate-limited ones included).
    pub fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::Relaxed)
    }

    /// Requests received for a configured path (0 for a path the host does not serve).
    pub fn hits(&self, path: &str) -> u64 {
        self.state
            .hits
            .get(path)
            .map_or(0, |n| n.load(Ordering::Relaxed))
    }

    /// The most requests this host was answering at once (from their arrival to their
    /// response's headers): how many downloads a client had started side by side, as the host
    /// saw them.
    pub fn most_at_once(&self) -> u64 {
        self.state.most_answering.load(Ordering::Relaxed)
    }

    /// When each request arrived, in arrival order.
    pub fn request_times(&self) -> Vec<Instant> {
        self.state
            .times
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for PartnerHost {
    fn drop(&mut self) {
        // Closes the listener; connections already open finish their current response.
        self.server.abort();
    }
}

#[derive(Debug)]
struct HostState {
    answers: HashMap<String, Answer>,
    hits: HashMap<String, AtomicU64>,
    latency: Duration,
    max_rps: Option<u32>,
    requests: AtomicU64,
    answering: AtomicU64,
    most_answering: AtomicU64,
    times: Mutex<Vec<Instant>>,
}

/// One request being answered, counted in [`HostState::answering`] while it lives.
struct Answering<'a>(&'a HostState);

impl<'a> Answering<'a> {
    fn new(state: &'a HostState) -> Self {
        let now = state.answering.fetch_add(1, Ordering::SeqCst) + 1;
        state.most_answering.fetch_max(now, Ordering::SeqCst);
        Self(state)
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.0.answering.fetch_sub(1, Ordering::SeqCst);
    }
}

impl HostState {
    /// Records the request; `true` if it is over the per-second limit.
    fn arrive(&self) -> bool {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut times = self.times.lock().unwrap_or_else(PoisonError::into_inner);
        times.push(now);
        let Some(limit) = self.max_rps else {
            return false;
        };
        let in_window = times
            .iter()
            .rev()
            .take_while(|t| now.duration_since(**t) < Duration::from_secs(1))
            .count();
        in_window > usize::try_from(limit).unwrap_or(usize::MAX)
    }

    /// The answer for a request and how many requests its path had before this one.
    fn lookup(&self, uri: &Uri) -> Option<(&Answer, u64)> {
        let exact = uri.path_and_query().map(|pq| pq.as_str());
        let key = exact
            .filter(|pq| self.answers.contains_key(*pq))
            .unwrap_or_else(|| uri.path());
        let answer = self.answers.get(key)?;
        let hit = self
            .hits
            .get(key)
            .map_or(0, |n| n.fetch_add(1, Ordering::Relaxed));
        Some((answer, hit))
    }
}

async fn handle(State(state): State<Arc<HostState>>, uri: Uri, headers: HeaderMap) -> Response {
    let _answering = Answering::new(&state);
    if state.arrive() {
        return answer::respond(429, &[(header::RETRY_AFTER, "1".to_owned())], Body::empty());
    }
    let settled = state
        .lookup(&uri)
        .map(|(answer, hit)| answer::settle(answer, hit));
    tokio::time::sleep(state.latency).await;
    match settled {
        Some((wait, gates, answer)) => {
            tokio::time::sleep(wait).await;
            for gate in gates {
                gate.passed().await;
            }
            answer::render(answer, &headers)
        }
        None => answer::respond(404, &[], Body::from("no such path on this host")),
    }
}
