//! API errors: a status and a stable `error.kind` for every failure. A 5xx answer says only its
//! kind and the request id; what went wrong goes to the log (see `router`).

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tracing::error;
use utoipa::ToSchema;
use utoipa::openapi::schema::{ObjectBuilder, Type};

use crate::auth::AuthError;
use imgest_core::imaging::PipelineError;
use imgest_flows::FlowError;

/// Every `error.kind` the API answers with, by status. The API guide's error table
/// (`docs/api.md`) lists exactly these (a test compares them), and [`ApiError::new`] refuses,
/// in debug builds, a kind that is not here.
pub const KINDS: &[(u16, &[&str])] = &[
    (
        400,
        &[
            "empty_body",
            "invalid_image_id",
            "invalid_offer_id",
            "invalid_upload_id",
            "invalid_client_id",
            "invalid_id",
            "invalid_body",
            "invalid_request",
            "invalid_multipart",
            "missing_file",
            "body_read_error",
            "size_mismatch",
            "invalid_query",
        ],
    ),
    (401, &["unauthenticated"]),
    (403, &["forbidden"]),
    (
        404,
        &[
            "image_not_found",
            "offer_not_found",
            "upload_not_found",
            "not_uploaded",
            "crawl_not_found",
            "file_not_found",
            "route_not_found",
            "metrics_off",
            "webhook_not_found",
        ],
    ),
    (405, &["method_not_allowed"]),
    (409, &["upload_already_received", "hash_collision"]),
    (410, &["upload_expired", "erased", "cursor_expired"]),
    (413, &["too_large"]),
    (415, &["unsupported_format"]),
    (421, &["misdirected_request"]),
    (
        422,
        &[
            "corrupt_image",
            "too_many_pixels",
            "unknown_image",
            "duplicate_image",
            "too_many_photos",
            "invalid_endpoint",
            "forbidden_endpoint",
            "invalid_secret",
        ],
    ),
    (429, &["too_many_requests"]),
    (500, &["internal"]),
    (
        503,
        &["still_processing", "storage_unavailable", "conflict"],
    ),
];

/// The message of every 401 answer.
pub const UNAUTHENTICATED: &str = "a valid bearer token is required (Authorization: Bearer …)";

/// Whether `kind` is one of [`KINDS`] under `status`.
fn is_documented(status: StatusCode, kind: &str) -> bool {
    KINDS
        .iter()
        .any(|(s, kinds)| *s == status.as_u16() && kinds.contains(&kind))
}

/// The body of every error answer: `{"error": {"kind", "message", "request_id"?}}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"error": {"kind": "invalid_offer_id", "message": "offer id must be 1 to 128 characters of [A-Za-z0-9._:-], got \"a b\""}}))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable and machine-readable: branch on this (each operation lists the kinds it answers).
    #[schema(schema_with = kind_schema)]
    pub kind: &'static str,
    /// For people; may change. A 5xx answer's says only that the request failed, and its id.
    pub message: String,
    /// On 5xx answers only: the request's id (also in `X-Request-Id`), under which the server
    /// logged what went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ErrorBody {
    pub fn new(kind: &'static str, message: String, request_id: Option<String>) -> Self {
        Self {
            error: ErrorDetail {
                kind,
                message,
                request_id,
            },
        }
    }
}

/// `error.kind`'s schema: one of [`KINDS`].
fn kind_schema() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(
            KINDS.iter().flat_map(|(_, kinds)| kinds.iter().copied()),
        ))
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
    /// When to try again (429 and 503 answers say so in `Retry-After`).
    pub retry_after: Option<Duration>,
}

/// The kind of an error answer, kept on the response for the request's middleware (which logs
/// it, and replaces a 5xx body with one that says only the kind and the request id).
#[derive(Debug, Clone, Copy)]
pub(super) struct AnsweredKind(pub &'static str);

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        debug_assert!(
            is_documented(status, kind),
            "{status} {kind} is not in api::error::KINDS (nor in docs/api.md's table)"
        );
        let retry_after = (status == StatusCode::SERVICE_UNAVAILABLE
            || status == StatusCode::TOO_MANY_REQUESTS)
            .then_some(Duration::from_secs(1));
        Self {
            status,
            kind,
            message: message.into(),
            retry_after,
        }
    }

    pub fn bad_request(kind: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, kind, message)
    }

    pub fn too_large(size: Option<u64>, limit: u64) -> Self {
        let message = match size {
            Some(size) => format!("the body is {size} bytes, more than the limit of {limit}"),
            None => format!("the body is more than the limit of {limit} bytes"),
        };
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            // One answer for every reason a credential is refused: which check failed would
            // tell a prober what to change. The reason is logged, under the request's id.
            AuthError::Unauthenticated(reason) => {
                tracing::info!(reason, "request not authenticated");
                Self::new(StatusCode::UNAUTHORIZED, "unauthenticated", UNAUTHENTICATED)
            }
            AuthError::Forbidden(m) => Self::new(StatusCode::FORBIDDEN, "forbidden", m),
        }
    }
}

impl From<FlowError> for ApiError {
    fn from(e: FlowError) -> Self {
        let status = match &e {
            FlowError::EmptyBody | FlowError::InvalidId(_) => StatusCode::BAD_REQUEST,
            FlowError::Image(PipelineError::TooLarge { .. }) => StatusCode::PAYLOAD_TOO_LARGE,
            FlowError::Image(PipelineError::UnsupportedFormat(_)) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            FlowError::Image(PipelineError::Watermark(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            FlowError::Image(_) => StatusCode::UNPROCESSABLE_ENTITY,
            FlowError::ImageNotFound(_)
            | FlowError::OfferNotFound(_)
            | FlowError::UploadNotFound(_)
            | FlowError::NotUploaded(_) => StatusCode::NOT_FOUND,
            FlowError::UploadExpired(_) | FlowError::Erased(_) => StatusCode::GONE,
            FlowError::UploadAlreadyReceived(_) | FlowError::HashCollision(_) => {
                StatusCode::CONFLICT
            }
            FlowError::SizeMismatch { .. } => StatusCode::BAD_REQUEST,
            FlowError::UnknownImage(_)
            | FlowError::DuplicateImage(_)
            | FlowError::TooManyPhotos { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            FlowError::Overloaded | FlowError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            FlowError::StillProcessing { .. } => StatusCode::SERVICE_UNAVAILABLE,
            FlowError::Forbidden(_) => StatusCode::FORBIDDEN,
            FlowError::Store(s) if s.is_retryable() => StatusCode::SERVICE_UNAVAILABLE,
            // Operator flows' refusals: no route leads to them.
            FlowError::VariantDropUnconfirmed(_)
            | FlowError::VariantSetUnconfirmed(_)
            | FlowError::SweepStopped(_)
            | FlowError::BodyGone(_)
            | FlowError::Store(_)
            | FlowError::NoPipeline
            | FlowError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status.is_server_error() {
            error!(kind = e.kind(), error = %e, "request failed");
        }
        // Internal failures are one kind to callers: which part failed is for the log.
        let kind = if status == StatusCode::INTERNAL_SERVER_ERROR {
            "internal"
        } else {
            e.kind()
        };
        let mut api = Self::new(status, kind, e.to_string());
        if let FlowError::RateLimited { retry_after }
        | FlowError::StillProcessing { retry_after, .. } = e
        {
            api.retry_after = Some(retry_after);
        }
        api
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(ErrorBody::new(self.kind, self.message, None));
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        if let Some(wait) = self.retry_after {
            // Whole seconds, rounded up, at least one.
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"imgest\""),
            );
        }
        response.extensions_mut().insert(AnsweredKind(self.kind));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use imgest_core::domain::{IdError, ImageId, OfferId, UploadId};
    use imgest_core::ports::StoreError;

    /// One error of every kind the flows can return.
    fn every_flow_error() -> Vec<FlowError> {
        let image = ImageId::of_bytes(b"x");
        let offer = OfferId::parse("o1").unwrap_or_else(|e| panic!("{e}"));
        let upload = UploadId::random();
        let store = |e| FlowError::Store(e);
        let mut all = vec![
            FlowError::EmptyBody,
            FlowError::ImageNotFound(image.clone()),
            FlowError::OfferNotFound(offer),
            FlowError::UnknownImage(image.clone()),
            FlowError::DuplicateImage(image.clone()),
            FlowError::TooManyPhotos { count: 2, limit: 1 },
            FlowError::Overloaded,
            FlowError::RateLimited {
                retry_after: std::time::Duration::from_secs(3),
            },
            FlowError::StillProcessing {
                id: image,
                retry_after: std::time::Duration::from_secs(2),
            },
            FlowError::UploadNotFound(upload.clone()),
            FlowError::UploadExpired(upload.clone()),
            FlowError::UploadAlreadyReceived(upload),
            FlowError::NotUploaded(ImageId::of_bytes(b"x")),
            FlowError::Erased(ImageId::of_bytes(b"x")),
            FlowError::SizeMismatch {
                declared: 1,
                received: 2,
            },
            FlowError::NoPipeline,
            FlowError::Internal("x".into()),
            FlowError::Forbidden("x".into()),
            FlowError::VariantDropUnconfirmed(vec![
                imgest_core::domain::VariantName::parse("large").unwrap(),
            ]),
            FlowError::VariantSetUnconfirmed("x".into()),
            FlowError::SweepStopped("x".into()),
            FlowError::BodyGone("x".into()),
            FlowError::HashCollision(ImageId::of_bytes(b"x")),
            store(StoreError::NotFound("x".into())),
            store(StoreError::Conflict("x".into())),
            store(StoreError::Unavailable {
                message: "x".into(),
                source: None,
            }),
            store(StoreError::Backend {
                message: "x".into(),
                source: None,
            }),
        ];
        for id in [
            IdError::ImageId("x".into()),
            IdError::OfferId("x".into()),
            IdError::ClientId("x".into()),
            IdError::Generation("x".into()),
            IdError::UploadId("x".into()),
        ] {
            all.push(FlowError::InvalidId(id));
        }
        for e in [
            PipelineError::TooLarge { size: 2, limit: 1 },
            PipelineError::TooManyPixels {
                width: 1,
                height: 1,
                limit: 0,
            },
            PipelineError::OverBudget {
                width: 1,
                height: 1,
                needed: 2,
                budget: 1,
            },
            PipelineError::UnsupportedFormat("x".into()),
            PipelineError::CorruptImage("x".into()),
            PipelineError::Watermark("x".into()),
        ] {
            all.push(FlowError::Image(e));
        }
        // A new variant must get a sample above: this match stops compiling until it has.
        for e in &all {
            match e {
                FlowError::EmptyBody
                | FlowError::InvalidId(_)
                | FlowError::Image(_)
                | FlowError::ImageNotFound(_)
                | FlowError::OfferNotFound(_)
                | FlowError::UnknownImage(_)
                | FlowError::DuplicateImage(_)
                | FlowError::TooManyPhotos { .. }
                | FlowError::Overloaded
                | FlowError::RateLimited { .. }
                | FlowError::StillProcessing { .. }
                | FlowError::UploadNotFound(_)
                | FlowError::NotUploaded(_)
                | FlowError::Erased(_)
                | FlowError::UploadExpired(_)
                | FlowError::UploadAlreadyReceived(_)
                | FlowError::SizeMismatch { .. }
                | FlowError::Forbidden(_)
                | FlowError::VariantDropUnconfirmed(_)
                | FlowError::VariantSetUnconfirmed(_)
                | FlowError::SweepStopped(_)
                | FlowError::BodyGone(_)
                | FlowError::HashCollision(_)
                | FlowError::Store(_)
                | FlowError::NoPipeline
                | FlowError::Internal(_) => {}
            }
        }
        all
    }

    #[test]
    fn every_flow_error_answers_with_a_documented_kind() {
        for e in every_flow_error() {
            let api = ApiError::from(e);
            assert!(
                is_documented(api.status, api.kind),
                "{} {} is not in KINDS",
                api.status,
                api.kind
            );
        }
        for e in [
            AuthError::Unauthenticated("x".into()),
            AuthError::Forbidden("x".into()),
        ] {
            let api = ApiError::from(e);
            assert!(is_documented(api.status, api.kind), "{}", api.kind);
        }
    }

    #[test]
    fn answers_say_when_to_retry_and_how_to_authenticate() {
        let limited = ApiError::from(FlowError::RateLimited {
            retry_after: std::time::Duration::from_millis(2500),
        })
        .into_response();
        assert_eq!(limited.status(), 429);
        assert_eq!(limited.headers()[header::RETRY_AFTER], "3");
        let refused = ApiError::from(AuthError::Unauthenticated("no token".into())).into_response();
        assert_eq!(refused.status(), 401);
        assert!(
            refused.headers()[header::WWW_AUTHENTICATE]
                .to_str()
                .unwrap_or_default()
                .starts_with("Bearer")
        );
        let internal = ApiError::from(FlowError::Store(StoreError::Backend {
            message: "the table is gone".into(),
            source: None,
        }));
        assert_eq!((internal.status.as_u16(), internal.kind), (500, "internal"));
    }

    /// The API guide's error table (`| status | kinds |` in `docs/api.md`), as (status, kinds)
    /// rows.
    fn readme_table() -> Vec<(u16, Vec<String>)> {
        let readme = include_str!("../../../docs/api.md");
        let start = readme
            .find("| status | kinds |")
            .unwrap_or_else(|| panic!("docs/api.md has no error table"));
        readme[start..]
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let status = cells[1].parse().unwrap_or_else(|e| panic!("{line}: {e}"));
                // Kinds are the snake_case words in backticks (not `Retry-After`).
                let kinds = cells[2]
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .filter(|k| k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
                    .map(str::to_owned)
                    .collect();
                (status, kinds)
            })
            .collect()
    }

    #[test]
    fn the_readme_lists_exactly_the_kinds_the_api_answers_with() {
        let documented: Vec<(u16, Vec<String>)> = KINDS
            .iter()
            .map(|(status, kinds)| (*status, kinds.iter().map(|k| (*k).to_owned()).collect()))
            .collect();
        assert_eq!(readme_table(), documented);
    }
}
