//! An open local runner's guard against web pages. With no token to check (a runner on
//! loopback without `IMGEST_JWKS_FILE`), anything a browser on the machine can reach is
//! reachable from any page it shows: by DNS rebinding (a name of the page's site that resolves
//! to 127.0.0.1, so the browser sends the page's own host), or by a form the page posts
//! cross-site. So an open runner answers only requests addressed to it by its own name (`Host`:
//! its listen address, or `localhost`, `127.0.0.1`, `[::1]` on its port, or the authority of
//! `IMGEST_PUBLIC_URL`; else 421 `misdirected_request`), and refuses a request that changes
//! something when a browser says it comes from another site (`Origin` not one of its own
//! origins, or `Sec-Fetch-Site` other than `same-origin` and `none`; 403 `forbidden`). Tools
//! that send neither header (curl, the CLI, the tests) are not affected. A public URL that is
//! not loopback would let whoever reaches it (a proxy in front) past the guard: an open runner
//! does not start with one unless `IMGEST_ALLOW_OPEN_PUBLIC_URL` says so (see the runner).
//!
//! A runner that checks tokens needs neither: a page cannot make a browser send a token it
//! does not have.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{HOST, ORIGIN};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::{ApiError, ApiState};

/// The names an open runner answers to, and the origins its own pages have.
#[derive(Debug, Clone)]
pub struct LocalGuard {
    hosts: Arc<HashSet<String>>,
    origins: Arc<HashSet<String>>,
}

impl LocalGuard {
    /// For a runner listening on `listen`, whose public URL (if any) is `public_url`.
    pub fn new(listen: SocketAddr, public_url: Option<&str>) -> Self {
        let port = listen.port();
        let mut hosts: HashSet<String> = [
            listen.to_string(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ]
        .into_iter()
        .collect();
        if port == 80 {
            hosts.extend(["localhost", "127.0.0.1", "[::1]"].map(str::to_owned));
        }
        let mut origins: HashSet<String> = hosts.iter().map(|h| format!("http://{h}")).collect();
        // `scheme://authority/path...`: the settings checked it is an http(s) URL.
        if let Some((scheme, rest)) = public_url.and_then(|u| u.split_once("://")) {
            let authority = rest
                .split('/')
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if !authority.is_empty() {
                origins.insert(format!("{}://{authority}", scheme.to_ascii_lowercase()));
                hosts.insert(authority);
            }
        }
        Self {
            hosts: Arc::new(hosts),
            origins: Arc::new(origins),
        }
    }

    /// Why a request may not go on, if it may not.
    fn refuse(&self, request: &Request) -> Option<ApiError> {
        let header = |name| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_ascii_lowercase)
        };
        let host = header(HOST).unwrap_or_default();
        if !self.hosts.contains(&host) {
            return Some(ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "misdirected_request",
                "this runner answers only to its own address (Host)",
            ));
        }
        let reads = [Method::GET, Method::HEAD, Method::OPTIONS].contains(request.method());
        let foreign_origin = header(ORIGIN).is_some_and(|o| !self.origins.contains(&o));
        let foreign_site = header("sec-fetch-site".try_into().ok()?)
            .is_some_and(|site| site != "same-origin" && site != "none");
        (!reads && (foreign_origin || foreign_site)).then(|| {
            ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "a request from another site's page may not change anything here",
            )
        })
    }
}

/// The guard, on the runners that have one (open ones).
pub(crate) async fn guard(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    match state.local_guard.as_ref().and_then(|g| g.refuse(&request)) {
        Some(refusal) => refusal.into_response(),
        None => next.run(request).await,
    }
}
