//! What a simulated host answers on one path: [`Answer`], and how each one is rendered.

use std::io;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::{StreamExt, stream};

/// The `Last-Modified` every [`Answer::Photo`] sends (and the `If-Modified-Since` it honours).
pub const PHOTO_LAST_MODIFIED: &str = "Wed, 21 Oct 2015 07:28:00 GMT";

/// One path's behaviour. Plain data: the per-path request counter that
/// [`FailTimes`](Answer::FailTimes) and [`Switch`](Answer::Switch) read is kept by the host, not in the answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// 200 with the Content-Type of the bytes' signature (`application/octet-stream` if none),
    /// `Content-Length`, `ETag` (the quoted MD5 hex) and [`PHOTO_LAST_MODIFIED`]; a matching
    /// `If-None-Match`, or else an `If-Modified-Since` equal to [`PHOTO_LAST_MODIFIED`], gets
    /// 304.
    Photo(Bytes),
    /// The bytes (a real photo) declared as `text/html; charset=utf-8`.
    WrongContentType(Bytes),
    /// 200 with this body and Content-Type: HTML pages, text, anything not a photo.
    Body { bytes: Bytes, content_type: String },
    /// The bytes sent chunked, without `Content-Length`.
    NoContentLength(Bytes),
    /// Waits, then answers as the inner answer (nothing is sent during the wait).
    Delay(Duration, Box<Answer>),
    /// Waits until the test opens the gate, then answers as the inner answer: a host as slow as
    /// a test needs, without a guess at how long that is.
    Held(Gate, Box<Answer>),
    /// Headers (with the full `Content-Length`) at once, then `chunk` bytes after each
    /// `per_chunk` wait: a host that drips.
    Drip {
        bytes: Bytes,
        chunk: usize,
        per_chunk: Duration,
    },
    /// This status with an empty body, and `Retry-After` (sent as given: seconds or an HTTP
    /// date) if any.
    Status {
        code: u16,
        retry_after: Option<String>,
    },
    /// The path's first `times` requests get `status`, the later ones the inner answer.
    FailTimes {
        times: u64,
        status: u16,
        then: Box<Answer>,
    },
    /// The path's first `times` requests get `first`, the later ones `then`: a photo
    /// replaced at its URL.
    Switch {
        times: u64,
        first: Box<Answer>,
        then: Box<Answer>,
    },
    /// A redirect; `location` is sent as given (relative, absolute, another host, an IP...).
    Redirect { status: u16, location: String },
    /// Declares the full `Content-Length`, sends the headers and the first `after` bytes, then
    /// (50 ms later) breaks the connection.
    Reset { bytes: Bytes, after: usize },
    /// The inner answer's response with these headers added (or replaced), e.g. a
    /// `Content-MD5` that may or may not be the body's.
    Headers {
        headers: Vec<(String, String)>,
        then: Box<Answer>,
    },
}

impl Answer {
    pub fn photo(bytes: impl Into<Bytes>) -> Self {
        Self::Photo(bytes.into())
    }

    pub fn status(code: u16) -> Self {
        Self::Status {
            code,
            retry_after: None,
        }
    }

    /// `code` with a `Retry-After` header, e.g. `Answer::retry_after(429, "7")`.
    pub fn retry_after(code: u16, value: impl Into<String>) -> Self {
        Self::Status {
            code,
            retry_after: Some(value.into()),
        }
    }

    /// A 302 to `location`.
    pub fn redirect(location: impl Into<String>) -> Self {
        Self::Redirect {
            status: 302,
            location: location.into(),
        }
    }

    pub fn body(bytes: impl Into<Bytes>, content_type: impl Into<String>) -> Self {
        Self::Body {
            bytes: bytes.into(),
            content_type: content_type.into(),
        }
    }

    pub fn delay(wait: Duration, then: Answer) -> Self {
        Self::Delay(wait, Box::new(then))
    }

    /// `then`, once `gate` is open.
    pub fn held(gate: &Gate, then: Answer) -> Self {
        Self::Held(gate.clone(), Box::new(then))
    }

    /// One byte after each `per_byte` wait.
    pub fn drip(bytes: impl Into<Bytes>, per_byte: Duration) -> Self {
        Self::Drip {
            bytes: bytes.into(),
            chunk: 1,
            per_chunk: per_byte,
        }
    }

    /// `then`'s response with `headers` added.
    pub fn with_headers<N: Into<String>, V: Into<String>>(
        headers: impl IntoIterator<Item = (N, V)>,
        then: Answer,
    ) -> Self {
        Self::Headers {
            headers: headers
                .into_iter()
                .map(|(n, v)| (n.into(), v.into()))
                .collect(),
            then: Box::new(then),
        }
    }

    pub fn switch_after(times: u64, first: Answer, then: Answer) -> Self {
        Self::Switch {
            times,
            first: Box::new(first),
            then: Box::new(then),
        }
    }

    pub fn fail_times(times: u64, status: u16, then: Answer) -> Self {
        Self::FailTimes {
            times,
            status,
            then: Box::new(then),
        }
    }
}

/// What a [`Answer::Held`] waits for: closed when made, open for good once
/// [`open`](Gate::open)ed.
#[derive(Debug, Clone)]
pub struct Gate(std::sync::Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Self(std::sync::Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl Gate {
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets every request held at it, now and later, through.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    pub(crate) async fn passed(&self) {
        let mut open = self.0.subscribe();
        // The sender lives in `self`, so the wait ends only when the gate opens.
        let _ = open.wait_for(|open| *open).await;
    }
}

/// `hops` redirects: `{prefix}/0` → `{prefix}/1` → … → `{prefix}/{hops-1}` → `target`, as
/// answers to add to a host (`target` is sent as is, so it may be a path or a full URL).
pub fn redirect_chain(prefix: &str, hops: usize, target: &str) -> Vec<(String, Answer)> {
    (0..hops)
        .map(|i| {
            let location = if i + 1 == hops {
                target.to_owned()
            } else {
                format!("{prefix}/{}", i + 1)
            };
            (format!("{prefix}/{i}"), Answer::redirect(location))
        })
        .collect()
}

/// Unwraps delays, gates and counted failures down to the answer that is rendered, adding up
/// the waits and gathering the gates. `hit` is how many earlier requests this path has had.
pub(crate) fn settle(mut answer: &Answer, hit: u64) -> (Duration, Vec<Gate>, Answer) {
    let mut wait = Duration::ZERO;
    let mut gates = Vec::new();
    loop {
        match answer {
            Answer::Delay(d, inner) => {
                wait = wait.saturating_add(*d);
                answer = inner;
            }
            Answer::Held(gate, inner) => {
                gates.push(gate.clone());
                answer = inner;
            }
            Answer::FailTimes {
                times,
                status,
                then,
            } => {
                if hit < *times {
                    return (wait, gates, Answer::status(*status));
                }
                answer = then;
            }
            Answer::Switch { times, first, then } => {
                answer = if hit < *times { first } else { then };
            }
            // The headers go on whatever the inner answer settles to.
            Answer::Headers { headers, then } => {
                let (more, held, inner) = settle(then, hit);
                gates.extend(held);
                let headers = headers.clone();
                let then = Box::new(inner);
                return (
                    wait.saturating_add(more),
                    gates,
                    Answer::Headers { headers, then },
                );
            }
            other => return (wait, gates, other.clone()),
        }
    }
}

/// Renders a settled answer (never `Delay`, `Held`, `FailTimes` or `Switch`; those render as
/// 500).
pub(crate) fn render(answer: Answer, request: &HeaderMap) -> Response {
    match answer {
        Answer::Photo(bytes) => photo(bytes, request),
        Answer::WrongContentType(bytes) => respond(
            200,
            &[(header::CONTENT_TYPE, "text/html; charset=utf-8".into())],
            Body::from(bytes),
        ),
        Answer::Body {
            bytes,
            content_type,
        } => respond(
            200,
            &[(header::CONTENT_TYPE, content_type)],
            Body::from(bytes),
        ),
        Answer::NoContentLength(bytes) => {
            let content_type = image_type(&bytes).to_owned();
            let once = stream::iter([Ok::<_, io::Error>(bytes)]);
            respond(
                200,
                &[(header::CONTENT_TYPE, content_type)],
                Body::from_stream(once),
            )
        }
        Answer::Drip {
            bytes,
            chunk,
            per_chunk,
        } => drip(bytes, chunk, per_chunk),
        Answer::Status { code, retry_after } => {
            let headers: Vec<_> = retry_after
                .into_iter()
                .map(|v| (header::RETRY_AFTER, v))
                .collect();
            respond(code, &headers, Body::empty())
        }
        Answer::Redirect { status, location } => {
            respond(status, &[(header::LOCATION, location)], Body::empty())
        }
        Answer::Reset { bytes, after } => {
            let sent = bytes.slice(..after.min(bytes.len()));
            // The pause lets the server flush the headers and the first bytes; without it
            // they go down with the connection and the client sees no response at all.
            let broken = async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "simulated connection reset",
                ))
            };
            let parts = stream::iter([Ok(sent)]).chain(stream::once(broken));
            respond(
                200,
                &[
                    (header::CONTENT_TYPE, image_type(&bytes).to_owned()),
                    (header::CONTENT_LENGTH, bytes.len().to_string()),
                ],
                Body::from_stream(parts),
            )
        }
        Answer::Headers { headers, then } => {
            let mut response = render(*then, request);
            for (name, value) in headers {
                if let (Ok(name), Ok(value)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(&value),
                ) {
                    response.headers_mut().insert(name, value);
                }
            }
            response
        }
        Answer::Delay(..) | Answer::Held(..) | Answer::FailTimes { .. } | Answer::Switch { .. } => {
            respond(
                500,
                &[],
                Body::from("imgest-hosts: unsettled answer (a bug in the host)"),
            )
        }
    }
}

fn photo(bytes: Bytes, request: &HeaderMap) -> Response {
    let etag = etag_of(&bytes);
    let validators = [
        (header::ETAG, etag.clone()),
        (header::LAST_MODIFIED, PHOTO_LAST_MODIFIED.to_owned()),
    ];
    let not_modified = match request.get(header::IF_NONE_MATCH) {
        // RFC 9110: If-None-Match wins over If-Modified-Since; weak comparison.
        Some(value) => value.to_str().is_ok_and(|list| {
            list.split(',')
                .map(str::trim)
                .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag.as_str())
        }),
        None => request
            .get(header::IF_MODIFIED_SINCE)
            .is_some_and(|since| since.as_bytes() == PHOTO_LAST_MODIFIED.as_bytes()),
    };
    if not_modified {
        return respond(304, &validators, Body::empty());
    }
    let mut headers = validators.to_vec();
    headers.push((header::CONTENT_TYPE, image_type(&bytes).to_owned()));
    respond(200, &headers, Body::from(bytes))
}

fn drip(bytes: Bytes, chunk: usize, per_chunk: Duration) -> Response {
    let chunk = chunk.max(1);
    let content_type = image_type(&bytes).to_owned();
    let len = bytes.len().to_string();
    let chunks = stream::unfold(bytes, move |mut rest| async move {
        if rest.is_empty() {
            return None;
        }
        tokio::time::sleep(per_chunk).await;
        let next = rest.split_to(chunk.min(rest.len()));
        Some((Ok::<_, io::Error>(next), rest))
    });
    respond(
        200,
        &[
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_LENGTH, len),
        ],
        Body::from_stream(chunks),
    )
}

/// The quoted MD5 hex of the bytes: what [`Answer::Photo`] sends as `ETag`.
pub fn etag_of(bytes: &[u8]) -> String {
    use md5::{Digest, Md5};
    format!("\"{}\"", hex::encode(Md5::digest(bytes)))
}

/// The Content-Type of the image signature at the start of `bytes`.
fn image_type(bytes: &[u8]) -> &'static str {
    if bytes.starts_with(b"\xff\xd8\xff") {
        "image/jpeg"
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        "image/gif"
    } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        "image/webp"
    } else {
        "application/octet-stream"
    }
}

/// A response; a status or header the HTTP types refuse (a answer built with, say, status
/// 1000) becomes a 500 that says so, never a panic.
pub(crate) fn respond(status: u16, headers: &[(HeaderName, String)], body: Body) -> Response {
    let built = StatusCode::from_u16(status)
        .map_err(|e| e.to_string())
        .and_then(|status| {
            let mut response = Response::new(body);
            *response.status_mut() = status;
            for (name, value) in headers {
                let value = HeaderValue::from_str(value).map_err(|e| format!("{name}: {e}"))?;
                response.headers_mut().append(name.clone(), value);
            }
            Ok(response)
        });
    built.unwrap_or_else(|reason| {
        let mut response = Response::new(Body::from(format!(
            "imgest-hosts: cannot send this answer: {reason}"
        )));
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        response
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settling_adds_delays_and_counts_failures() {
        let answer = Answer::delay(
            Duration::from_millis(5),
            Answer::fail_times(
                2,
                503,
                Answer::delay(Duration::from_millis(7), Answer::status(204)),
            ),
        );
        let (wait, gates, first) = settle(&answer, 0);
        assert_eq!(wait, Duration::from_millis(5));
        assert!(gates.is_empty());
        assert!(matches!(first, Answer::Status { code: 503, .. }));
        assert!(matches!(
            settle(&answer, 1).2,
            Answer::Status { code: 503, .. }
        ));
        let (wait, _, third) = settle(&answer, 2);
        assert_eq!(wait, Duration::from_millis(12));
        assert!(matches!(third, Answer::Status { code: 204, .. }));
    }

    #[tokio::test]
    async fn a_held_route_answers_once_its_gate_opens() {
        let gate = Gate::new();
        let answer = Answer::held(&gate, Answer::status(204));
        let (_, gates, inner) = settle(&answer, 0);
        assert!(matches!(inner, Answer::Status { code: 204, .. }));
        assert_eq!(gates.len(), 1);
        let mut waiting = std::pin::pin!(gates[0].passed());
        assert!(futures_util::FutureExt::now_or_never(waiting.as_mut()).is_none());
        gate.open();
        waiting.await;
        // Open for good: a later request passes at once.
        gates[0].passed().await;
    }

    #[test]
    fn redirect_chains_end_at_the_target() {
        let chain = redirect_chain("/r", 3, "/photo.jpg");
        let hops: Vec<_> = chain
            .iter()
            .map(|(path, answer)| match answer {
                Answer::Redirect { location, .. } => (path.as_str(), location.as_str()),
                _ => ("", ""),
            })
            .collect();
        assert_eq!(
            hops,
            [("/r/0", "/r/1"), ("/r/1", "/r/2"), ("/r/2", "/photo.jpg")]
        );
    }

    #[test]
    fn bad_statuses_and_headers_become_500s() {
        assert_eq!(respond(1000, &[], Body::empty()).status(), 500);
        let bad = [(header::LOCATION, "a\nb".to_owned())];
        assert_eq!(respond(302, &bad, Body::empty()).status(), 500);
    }
}
