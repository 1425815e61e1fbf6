//! Who is calling and what they may do. Every `/v1` route is called with
//! `Authorization: Bearer <JWT>`; the service trusts what the token says, never the body.
//!
//! - [`Authenticator`]: where a request's claims come from: checked here against a JWKS file
//!   (the local runner, [`JwtVerifier`]), read from the request context after API Gateway's
//!   JWT authorizer checked them (the API function, [`gateway`]), or nobody (open mode).
//! - [`Caller`]: the claims that matter (subject, scopes, client) and the four decisions the
//!   routes make, the same locally and on AWS: [`Caller::uploader`], [`Caller::partner`],
//!   [`Caller::observer`] and [`Caller::operator`].
//! - `edge`: the router's middleware that turns a request's credential into a [`Caller`], and
//!   the extractors a route names to say who may call it.
//! - [`LocalIssuer`]: a signing key and its JWKS, to mint tokens (the demo, tests).
//!
//! Scopes: `imgest:upload` (sellers' browsers: upload photos, read images and their own
//! uploads) and `imgest:offers` (partners' and the marketplace's backends, with an `imgest_client_id`
//! claim: that client's offers and crawls, and everything `imgest:upload` may do); the
//! operator's `imgest:metrics` (the local runner's metrics) and `imgest:operator` (browsing every
//! client's images), each of which opens nothing else.

mod caller;
mod edge;
pub mod gateway;
mod issuer;
mod jwt;

use std::net::SocketAddr;
use std::sync::Arc;

use imgest_settings::AuthSettings;

pub use self::caller::{Caller, Observer, Operator, Partner, Uploader, Viewer};
pub(crate) use self::edge::{authenticate, require_scopes};
pub use self::issuer::{IssuerError, LocalIssuer, TokenSpec, unix_now};
pub use self::jwt::{JwtSetupError, JwtVerifier};

/// The scope of sellers' browsers.
pub const UPLOAD_SCOPE: &str = "imgest:upload";
/// The scope of partners' and the marketplace's backends.
pub const OFFERS_SCOPE: &str = "imgest:offers";
/// The scope of the operator's metrics scraper (the local runner's `/metrics`).
pub const METRICS_SCOPE: &str = "imgest:metrics";
/// The scope of the operator's own browser: every client's images (the local runner's
/// `GET /v1/operator/images`, the page's "Images" view).
pub const OPERATOR_SCOPE: &str = "imgest:operator";

/// The claim naming a partner's client. A claim of imgest's own, read only with
/// `imgest:offers`: an identity provider's own `client_id` (which a Cognito access token
/// carries for every app client, a seller's browser's included) confers nothing.
pub const CLIENT_CLAIM: &str = "imgest_client_id";

/// Why a request may not go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credential, or one that is not valid (401, with `WWW-Authenticate: Bearer`).
    #[error("{0}")]
    Unauthenticated(String),
    /// A valid credential that does not allow this (403).
    #[error("{0}")]
    Forbidden(String),
}

/// Where callers' claims come from.
#[derive(Clone)]
pub enum Authenticator {
    /// Nobody is checked: every caller may do everything, offers share one namespace
    /// (a runner on loopback without `IMGEST_JWKS_FILE`, or `IMGEST_AUTH=off`).
    Open,
    /// Bearer tokens checked here, against the keys of a JWKS file.
    Jwt(Arc<JwtVerifier>),
    /// Claims API Gateway's JWT authorizer already checked, from the request context (the
    /// API function); a request without them, or whose `aud` does not name `audience`, is
    /// refused (API Gateway also accepts a token without `aud` whose `client_id` is the
    /// audience).
    Gateway { audience: Arc<str> },
}

/// Why the API cannot start with the identity settings it was given.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    #[error(
        "the API would be open to anyone on {0}: set IMGEST_JWKS_FILE (with IMGEST_JWT_ISSUER and IMGEST_JWT_AUDIENCE), or IMGEST_AUTH=off to run it open on purpose"
    )]
    OpenOnNetwork(SocketAddr),
    #[error(
        "IMGEST_AUTH=gateway is for the API function behind API Gateway's JWT authorizer; the local runner checks tokens itself (IMGEST_JWKS_FILE)"
    )]
    GatewayLocally,
    #[error(
        "the API function needs IMGEST_AUTH=gateway (API Gateway's JWT authorizer checks tokens; the template sets it), or IMGEST_JWKS_FILE; it never runs open"
    )]
    OpenOnLambda,
    #[error(transparent)]
    Jwt(#[from] JwtSetupError),
}

impl Authenticator {
    pub fn is_open(&self) -> bool {
        matches!(self, Self::Open)
    }

    /// The local runner's: without settings, open only when it listens on loopback alone
    /// (`addr`: its API's address; `None` when it serves no API).
    pub fn for_runner(
        settings: &AuthSettings,
        addr: Option<SocketAddr>,
    ) -> Result<Self, AuthSetupError> {
        match settings {
            AuthSettings::Off => Ok(Self::Open),
            AuthSettings::Jwt { .. } => Self::jwt(settings),
            AuthSettings::Gateway { .. } => Err(AuthSetupError::GatewayLocally),
            AuthSettings::Unset => match addr {
                Some(addr) if !addr.ip().is_loopback() => Err(AuthSetupError::OpenOnNetwork(addr)),
                _ => Ok(Self::Open),
            },
        }
    }

    /// The API function's: API Gateway's claims, or tokens checked here; never open.
    pub fn for_lambda(settings: &AuthSettings) -> Result<Self, AuthSetupError> {
        match settings {
            AuthSettings::Gateway { audience } => Ok(Self::Gateway {
                audience: audience.as_str().into(),
            }),
            AuthSettings::Jwt { .. } => Self::jwt(settings),
            AuthSettings::Off | AuthSettings::Unset => Err(AuthSetupError::OpenOnLambda),
        }
    }

    fn jwt(settings: &AuthSettings) -> Result<Self, AuthSetupError> {
        match settings {
            AuthSettings::Jwt {
                jwks_file,
                issuer,
                audience,
            } => Ok(Self::Jwt(Arc::new(JwtVerifier::open(
                jwks_file, issuer, audience,
            )?))),
            _ => Err(AuthSetupError::OpenOnLambda),
        }
    }
}

/// The claims a decision reads, from a token or from API Gateway's context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims {
    pub sub: Option<String>,
    /// Space-separated scopes (`scope`).
    pub scope: Option<String>,
    /// The partner's client ([`CLIENT_CLAIM`]).
    pub client_id: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn gateway() -> AuthSettings {
        AuthSettings::Gateway {
            audience: "imgest".into(),
        }
    }

    #[test]
    fn the_runner_is_open_only_on_loopback_or_when_told_so() {
        let loopback: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let anywhere: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let unset = AuthSettings::Unset;
        assert!(
            Authenticator::for_runner(&unset, Some(loopback))
                .unwrap()
                .is_open()
        );
        assert!(Authenticator::for_runner(&unset, None).unwrap().is_open());
        let refused = Authenticator::for_runner(&unset, Some(anywhere))
            .err()
            .unwrap();
        assert!(
            refused.to_string().contains("IMGEST_JWKS_FILE"),
            "{refused}"
        );
        assert!(
            Authenticator::for_runner(&AuthSettings::Off, Some(anywhere))
                .unwrap()
                .is_open()
        );
        assert!(matches!(
            Authenticator::for_runner(&gateway(), Some(loopback)),
            Err(AuthSetupError::GatewayLocally)
        ));
        let missing = AuthSettings::Jwt {
            jwks_file: "/nonexistent/jwks.json".into(),
            issuer: "i".into(),
            audience: "a".into(),
        };
        assert!(matches!(
            Authenticator::for_runner(&missing, Some(loopback)),
            Err(AuthSetupError::Jwt(_))
        ));
    }

    #[test]
    fn the_api_function_needs_to_be_told_who_checks_tokens() {
        assert!(matches!(
            Authenticator::for_lambda(&gateway()),
            Ok(Authenticator::Gateway { .. })
        ));
        for open in [AuthSettings::Unset, AuthSettings::Off] {
            assert!(matches!(
                Authenticator::for_lambda(&open),
                Err(AuthSetupError::OpenOnLambda)
            ));
        }
    }
}
