//! The Runtime API's routes (version 2018-06-01), served on 127.0.0.1 for one function.
//!
//! Lambda runs one invocation at a time per execution environment: the runtime long-polls
//! `GET /runtime/invocation/next`, gets an event with its request id and deadline in headers,
//! and posts the result to `/runtime/invocation/{id}/response` or `/error`. A runtime that
//! fails before its first poll posts to `/runtime/init/error`. Payloads are bounded as Lambda
//! bounds them (6 MB): a larger response settles its invocation as
//! `Function.ResponseSizeTooLarge`.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// Lambda's limit on a synchronous invocation's event and on its response.
pub const MAX_PAYLOAD: usize = 6 * 1024 * 1024;

const REQUEST_ID: HeaderName = HeaderName::from_static("lambda-runtime-aws-request-id");
const DEADLINE_MS: HeaderName = HeaderName::from_static("lambda-runtime-deadline-ms");
const FUNCTION_ARN: HeaderName = HeaderName::from_static("lambda-runtime-invoked-function-arn");
const TRACE_ID: HeaderName = HeaderName::from_static("lambda-runtime-trace-id");
const ERROR_TYPE: HeaderName = HeaderName::from_static("lambda-runtime-function-error-type");

/// How an invocation ended, as the function reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `POST /runtime/invocation/{id}/response`: the function's answer.
    Response(Bytes),
    /// `POST /runtime/invocation/{id}/error` (or a response over [`MAX_PAYLOAD`]): the
    /// `Lambda-Runtime-Function-Error-Type` header and the error document.
    Error { error_type: String, body: Bytes },
}

/// Why [`RuntimeApi::invoke`] has no [`Outcome`].
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("the event is {0} bytes, over Lambda's {MAX_PAYLOAD}")]
    EventTooLarge(usize),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error(
        "the runtime reported an init error ({error_type}): {}",
        String::from_utf8_lossy(body)
    )]
    InitError { error_type: String, body: Bytes },
}

/// One function's Runtime API on 127.0.0.1; stops serving when dropped.
#[derive(Debug)]
pub struct RuntimeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    queue: mpsc::UnboundedSender<Pending>,
    init_error: watch::Receiver<Option<(String, Bytes)>>,
    server: JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    function_arn: String,
    next: tokio::sync::Mutex<mpsc::UnboundedReceiver<Pending>>,
    in_flight: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    init_error: watch::Sender<Option<(String, Bytes)>>,
    first_poll: OnceLock<Instant>,
}

/// An event waiting for the runtime's next poll.
#[derive(Debug)]
struct Pending {
    id: String,
    event: Bytes,
    deadline: SystemTime,
    answer: oneshot::Sender<Outcome>,
}

impl RuntimeApi {
    /// Serves the Runtime API of a function named `function_name` on a free port of
    /// 127.0.0.1, on the current tokio runtime.
    pub async fn start(function_name: &str) -> io::Result<Self> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (queue, next) = mpsc::unbounded_channel();
        let (init_tx, init_error) = watch::channel(None);
        let shared = Arc::new(Shared {
            function_arn: format!("arn:aws:lambda:us-east-1:123456789012:function:{function_name}"),
            next: tokio::sync::Mutex::new(next),
            in_flight: Mutex::new(HashMap::new()),
            init_error: init_tx,
            first_poll: OnceLock::new(),
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next_event))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(invocation_response),
            )
            .route(
                "/2018-06-01/runtime/invocation/{id}/error",
                post(invocation_error),
            )
            .route("/2018-06-01/runtime/init/error", post(report_init_error))
            // Bodies are read with Lambda's own limit in the handlers, so an oversized
            // response settles its invocation instead of leaving it waiting.
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(%addr, error = %e, "runtime API emulator stopped");
            }
        });
        Ok(Self {
            addr,
            shared,
            queue,
            init_error,
            server,
        })
    }

    /// `127.0.0.1:PORT`: the value of `AWS_LAMBDA_RUNTIME_API` for the function.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// When the runtime first asked for an event (the end of its init phase).
    pub fn first_poll(&self) -> Option<Instant> {
        self.shared.first_poll.get().copied()
    }

    /// What the runtime reported at `init/error`, if it did.
    pub fn init_error(&self) -> Option<(String, Bytes)> {
        self.init_error.borrow().clone()
    }

    /// Hands `event` to the runtime's next poll and waits up to `timeout` (also the deadline
    /// the runtime is told) for its answer.
    pub async fn invoke(&self, event: Bytes, timeout: Duration) -> Result<Outcome, InvokeError> {
        if event.len() > MAX_PAYLOAD {
            return Err(InvokeError::EventTooLarge(event.len()));
        }
        static SEQUENCE: AtomicU64 = AtomicU64::new(1);
        let id = format!(
            "00000000-0000-4000-8000-{:012x}",
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        );
        let (answer, answered) = oneshot::channel();
        let pending = Pending {
            id,
            event,
            deadline: SystemTime::now() + timeout,
            answer,
        };
        // The receiver lives in `shared`, which outlives this call: sending cannot fail.
        let _ = self.queue.send(pending);
        let mut init_error = self.init_error.clone();
        let reported = async move {
            // Waits for an init error; never resolves when there is none.
            match init_error.wait_for(Option::is_some).await {
                Ok(reported) => reported.clone(),
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            outcome = answered => match outcome {
                Ok(outcome) => Ok(outcome),
                // The sender is dropped only with the server's state: no answer is coming.
                Err(_) => Err(InvokeError::Timeout(timeout)),
            },
            Some((error_type, body)) = reported => Err(InvokeError::InitError { error_type, body }),
            () = tokio::time::sleep(timeout) => Err(InvokeError::Timeout(timeout)),
        }
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Shared {
    fn settle(&self, id: &str, outcome: Outcome) -> StatusCode {
        let answer = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        match answer {
            Some(answer) => {
                // The caller may have timed out meanwhile; the answer is dropped then.
                let _ = answer.send(outcome);
                StatusCode::ACCEPTED
            }
            // Lambda answers an unknown or already settled request id with 400.
            None => StatusCode::BAD_REQUEST,
        }
    }
}

async fn next_event(State(shared): State<Arc<Shared>>) -> Response {
    shared.first_poll.get_or_init(Instant::now);
    let mut next = shared.next.lock().await;
    let pending = loop {
        match next.recv().await {
            // An invocation whose caller gave up is not handed out.
            Some(pending) if pending.answer.is_closed() => continue,
            Some(pending) => break pending,
            None => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    };
    drop(next);
    let deadline_ms = pending
        .deadline
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let trace = format!("Root=1-00000000-{};Sampled=0", &pending.id[24..]);
    shared
        .in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(pending.id.clone(), pending.answer);
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (REQUEST_ID, pending.id),
            (DEADLINE_MS, deadline_ms.to_string()),
            (FUNCTION_ARN, shared.function_arn.clone()),
            (TRACE_ID, trace),
        ],
        pending.event,
    )
        .into_response()
}

async fn invocation_response(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Body,
) -> StatusCode {
    match axum::body::to_bytes(body, MAX_PAYLOAD).await {
        Ok(bytes) => shared.settle(&id, Outcome::Response(bytes)),
        Err(_) => {
            let outcome = Outcome::Error {
                error_type: "Function.ResponseSizeTooLarge".into(),
                body: Bytes::from_static(b"{\"errorMessage\":\"response over 6 MB\"}"),
            };
            shared.settle(&id, outcome);
            StatusCode::PAYLOAD_TOO_LARGE
        }
    }
}

async fn invocation_error(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> StatusCode {
    let Ok(body) = axum::body::to_bytes(body, MAX_PAYLOAD).await else {
        return StatusCode::PAYLOAD_TOO_LARGE;
    };
    let outcome = Outcome::Error {
        error_type: error_type(&headers),
        body,
    };
    shared.settle(&id, outcome)
}

async fn report_init_error(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> StatusCode {
    let Ok(body) = axum::body::to_bytes(body, MAX_PAYLOAD).await else {
        return StatusCode::PAYLOAD_TOO_LARGE;
    };
    shared
        .init_error
        .send_replace(Some((error_type(&headers), body)));
    StatusCode::ACCEPTED
}

/// The `Lambda-Runtime-Function-Error-Type` header; Lambda reports `Unhandled` without one.
fn error_type(headers: &HeaderMap) -> String {
    headers
        .get(ERROR_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("Unhandled")
        .to_owned()
}
