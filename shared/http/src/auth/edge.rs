//! Identity at the API's edge: the middleware that turns a `/v1` request's credential into a
//! [`Caller`] (or a 401), and the extractors a route names to say who may call it
//! ([`Uploader`], [`Partner`]: a 403 for a caller without the scope). The decisions themselves
//! are [`Caller`]'s, the same for the local runner and the API function.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::{
    AuthError, Authenticator, Caller, Observer, Operator, Partner, Uploader, Viewer, gateway,
};
use crate::{ApiError, ApiState, openapi, scrape};

/// Authenticates every `/v1` request but the OpenAPI document's (the health check, the
/// document and the public files are open) and puts its [`Caller`] in the request's
/// extensions. A token is only ever read from the `Authorization` header, never from the
/// query string.
pub(crate) async fn authenticate(
    State(state): State<ApiState>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    // Exactly the document's path: anything else under /v1 stays closed. The metrics are
    // closed too.
    if !(path.starts_with("/v1/") || path == scrape::PATH) || path == openapi::PATH {
        return next.run(request).await;
    }
    let claims = match &state.auth {
        Authenticator::Open => None,
        Authenticator::Jwt(verifier) => {
            Some(bearer(&request).and_then(|token| verifier.verify(token)))
        }
        Authenticator::Gateway { audience } => {
            Some(gateway::claims(request.extensions(), audience))
        }
    };
    let caller = match claims {
        None => Ok(Caller::open()),
        Some(Ok(claims)) => {
            // Who called, for the request's log lines (the access log): never the token.
            let span = tracing::Span::current();
            span.record("sub", claims.sub.as_deref().unwrap_or_default());
            span.record("client", claims.client_id.as_deref().unwrap_or_default());
            Caller::from_claims(&claims)
        }
        Some(Err(e)) => Err(e),
    };
    match caller {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Lets a request through to its route's handler only if its caller holds one of the route's
/// `scopes` (403 `forbidden` otherwise; open mode holds them all).
pub(crate) async fn require_scopes(
    State(scopes): State<&'static [&'static str]>,
    request: Request,
    next: Next,
) -> Response {
    let allowed = request
        .extensions()
        .get::<Caller>()
        .ok_or_else(|| AuthError::Unauthenticated("this route needs a credential".into()))
        .and_then(|caller| caller.holds_any(scopes));
    match allowed {
        Ok(()) => next.run(request).await,
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer(request: &Request) -> Result<&str, AuthError> {
    let missing = || AuthError::Unauthenticated("no bearer token (Authorization: Bearer …)".into());
    let value = request
        .headers()
        .get(AUTHORIZATION)
        .ok_or_else(missing)?
        .to_str()
        .map_err(|_| missing())?;
    let (scheme, token) = value.split_once(' ').ok_or_else(missing)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(missing());
    }
    Ok(token.trim())
}

/// The caller the middleware authenticated; a route outside `/v1` has none, and a route
/// that asks for one there is refused (closed by default).
fn caller(parts: &Parts) -> Result<&Caller, ApiError> {
    parts.extensions.get::<Caller>().ok_or_else(|| {
        ApiError::from(AuthError::Unauthenticated(
            "this route needs a credential".into(),
        ))
    })
}

impl FromRequestParts<ApiState> for Uploader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, ApiError> {
        Ok(caller(parts)?.uploader()?)
    }
}

impl FromRequestParts<ApiState> for Partner {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, ApiError> {
        Ok(caller(parts)?.partner()?)
    }
}

impl FromRequestParts<ApiState> for Observer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, ApiError> {
        Ok(caller(parts)?.observer()?)
    }
}

impl FromRequestParts<ApiState> for Viewer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, ApiError> {
        Ok(caller(parts)?.viewer()?)
    }
}

impl FromRequestParts<ApiState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, ApiError> {
        Ok(caller(parts)?.operator()?)
    }
}
