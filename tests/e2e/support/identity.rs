//! Tokens for the end-to-end tests: an issuer with a fresh key whose JWKS file the runner
//! reads (`IMGEST_JWKS_FILE`), and the callers of the route matrix.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::time::Duration;

use imgest_http::auth::{LocalIssuer, TokenSpec};
use serde_json::json;

pub const ISSUER: &str = "https://id.marketplace.example/";
pub const AUDIENCE: &str = "imgest";

/// An identity provider for one test: its key's JWKS lives in its own directory.
pub struct Identity {
    pub issuer: LocalIssuer,
    dir: tempfile::TempDir,
}

impl Identity {
    pub fn new() -> Self {
        let issuer = LocalIssuer::es256(ISSUER, AUDIENCE).unwrap();
        let dir = tempfile::tempdir().unwrap();
        issuer.write_jwks(&dir.path().join("jwks.json")).unwrap();
        Self { issuer, dir }
    }

    pub fn jwks_file(&self) -> String {
        self.dir.path().join("jwks.json").display().to_string()
    }

    /// The runner's settings that make it check this issuer's tokens.
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        vec![
            ("IMGEST_JWKS_FILE", self.jwks_file()),
            ("IMGEST_JWT_ISSUER", ISSUER.to_owned()),
            ("IMGEST_JWT_AUDIENCE", AUDIENCE.to_owned()),
        ]
    }

    pub fn token(&self, sub: &str, scope: &str, client: Option<&str>) -> String {
        self.issuer
            .token(&TokenSpec {
                sub,
                scope,
                client_id: client,
                valid_for: Duration::from_secs(600),
            })
            .unwrap()
    }

    pub fn seller(&self, sub: &str) -> String {
        self.token(sub, "imgest:upload", None)
    }

    pub fn partner(&self, sub: &str, client: &str) -> String {
        self.token(sub, "imgest:offers", Some(client))
    }

    /// Claims as given, signed with the issuer's key.
    pub fn signed(&self, claims: serde_json::Value) -> String {
        self.issuer.sign(&claims).unwrap()
    }

    /// The usual claims of a seller, at `now` seconds since the epoch.
    pub fn claims(&self, now: u64) -> serde_json::Value {
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "s1", "scope": "imgest:upload",
               "iat": now, "nbf": now, "exp": now + 600})
    }
}
