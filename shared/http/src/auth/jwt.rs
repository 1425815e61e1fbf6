//! [`JwtVerifier`]: bearer tokens checked by the local runner against the public keys of a
//! JWKS file (`IMGEST_JWKS_FILE`), its issuer (`IMGEST_JWT_ISSUER`) and audience
//! (`IMGEST_JWT_AUDIENCE`).
//!
//! Only RS256 and ES256 are accepted, each only with a key of its own family: never `none`,
//! never an HMAC "signed" with a public key. `exp`, `iss`, `aud` and `sub` are required; `nbf`
//! is checked when present. The file is read again at most once a second and its keys replaced
//! when it changed (key rotation needs no restart); a changed file that does not parse keeps
//! the keys already loaded, and says so in the log.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;
use tracing::error;

use super::{AuthError, Claims};

/// Tokens longer than this are refused before any parsing.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;
/// How often the file's metadata is looked at for a change.
const RECHECK: Duration = Duration::from_secs(1);
/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;

/// Why the verifier cannot start (a start-up error: the setting is named).
#[derive(Debug, thiserror::Error)]
pub enum JwtSetupError {
    #[error("IMGEST_JWKS_FILE={path}: {reason}")]
    Jwks { path: PathBuf, reason: String },
}

/// The keys loaded from the file, and the file's bytes they came from.
struct Loaded {
    keys: JwkSet,
    text: String,
    checked_at: Instant,
}

pub struct JwtVerifier {
    path: PathBuf,
    issuer: String,
    audience: String,
    loaded: RwLock<Loaded>,
}

/// The registered claims a token must carry, besides those `Validation` checks itself.
#[derive(Debug, Deserialize)]
struct TokenClaims {
    sub: Option<String>,
    scope: Option<String>,
    /// [`CLIENT_CLAIM`](super::CLIENT_CLAIM); an identity provider's own `client_id` is not
    /// read.
    #[serde(rename = "imgest_client_id")]
    client: Option<String>,
}

impl JwtVerifier {
    /// Loads the JWKS file; a missing, unreadable or empty key set is an error.
    pub fn open(
        path: impl Into<PathBuf>,
        issuer: impl Into<String>,
        audience: impl Into<String>,
    ) -> Result<Self, JwtSetupError> {
        let path = path.into();
        let (keys, text) = read_jwks(&path).map_err(|reason| JwtSetupError::Jwks {
            path: path.clone(),
            reason,
        })?;
        Ok(Self {
            path,
            issuer: issuer.into(),
            audience: audience.into(),
            loaded: RwLock::new(Loaded {
                keys,
                text,
                checked_at: Instant::now(),
            }),
        })
    }

    /// Checks a token and returns its claims.
    pub fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        let bad = |why: &str| AuthError::Unauthenticated(format!("invalid token: {why}"));
        if token.len() > MAX_TOKEN_LEN {
            return Err(bad("too long"));
        }
        let header = decode_header(token).map_err(|_| bad("not a JWT"))?;
        let alg = header.alg;
        if !matches!(alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(bad(&format!(
                "algorithm {alg:?} is not accepted (RS256, ES256)"
            )));
        }
        self.reload_if_changed();
        let key = {
            let loaded = self
                .loaded
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let jwk = pick_key(&loaded.keys, header.kid.as_deref(), alg)
                .ok_or_else(|| bad("no key of the key set matches its kid and algorithm"))?;
            DecodingKey::from_jwk(jwk).map_err(|_| bad("its key cannot be used"))?
        };
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        let data = decode::<TokenClaims>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as E;
            bad(match e.kind() {
                E::ExpiredSignature => "expired",
                E::ImmatureSignature => "not valid yet (nbf)",
                E::InvalidIssuer => "wrong issuer",
                E::InvalidAudience => "wrong audience",
                E::InvalidSignature => "bad signature",
                E::MissingRequiredClaim(_) => "a required claim (exp, iss, aud, sub) is missing",
                E::InvalidAlgorithm => "its algorithm does not match its key",
                _ => "malformed",
            })
        })?;
        Ok(Claims {
            sub: data.claims.sub,
            scope: data.claims.scope,
            client_id: data.claims.client,
        })
    }

    /// Re-reads the file if it changed since it was last looked at (at most once a second).
    fn reload_if_changed(&self) {
        {
            let loaded = self
                .loaded
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if loaded.checked_at.elapsed() < RECHECK {
                return;
            }
        }
        let mut loaded = self
            .loaded
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if loaded.checked_at.elapsed() < RECHECK {
            return;
        }
        loaded.checked_at = Instant::now();
        // A key set is a few kilobytes: reading it once a second costs nothing, and compares
        // what matters (a rename or a same-size rewrite changes no length or may keep a time).
        if std::fs::read_to_string(&self.path).is_ok_and(|text| text == loaded.text) {
            return;
        }
        match read_jwks(&self.path) {
            Ok((keys, text)) => {
                loaded.keys = keys;
                loaded.text = text;
            }
            Err(reason) => {
                // Keep the keys in use: a half-written or broken file must not lock every
                // caller out. The operator sees this at once.
                error!(path = %self.path.display(), %reason, "IMGEST_JWKS_FILE changed but cannot be used; keeping the keys loaded before");
            }
        }
    }
}

/// The key a token's header names: by `kid` when it has one, else the only key of its
/// algorithm's family. A key with an `alg` of its own must say the same algorithm.
fn pick_key<'a>(keys: &'a JwkSet, kid: Option<&str>, alg: Algorithm) -> Option<&'a Jwk> {
    let fits = |jwk: &&Jwk| {
        let family = match (&jwk.algorithm, alg) {
            (AlgorithmParameters::RSA(_), Algorithm::RS256) => true,
            (AlgorithmParameters::EllipticCurve(ec), Algorithm::ES256) => {
                ec.curve == EllipticCurve::P256
            }
            _ => false,
        };
        let declared = jwk
            .common
            .key_algorithm
            .is_none_or(|a| a.to_string() == format!("{alg:?}"));
        family && declared
    };
    match kid {
        Some(kid) => keys
            .keys
            .iter()
            .filter(|k| k.common.key_id.as_deref() == Some(kid))
            .find(fits),
        None => {
            let mut candidates = keys.keys.iter().filter(fits);
            let only = candidates.next()?;
            candidates.next().is_none().then_some(only)
        }
    }
}

/// Reads and parses a JWKS file; a set without one usable RS256 or ES256 key is refused.
fn read_jwks(path: &Path) -> Result<(JwkSet, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let keys: JwkSet =
        serde_json::from_str(&text).map_err(|e| format!("not a JWKS (JSON Web Key Set): {e}"))?;
    let usable = keys.keys.iter().any(|k| {
        matches!(k.algorithm, AlgorithmParameters::RSA(_))
            || matches!(&k.algorithm, AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256)
    });
    if !usable {
        return Err("it holds no RSA or P-256 key (RS256 and ES256 are accepted)".into());
    }
    Ok((keys, text))
}
