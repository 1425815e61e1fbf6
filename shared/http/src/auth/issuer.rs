//! [`LocalIssuer`]: a fresh signing key, its JWKS and the tokens it signs, for the demo (which
//! shows the identity model without an identity provider) and the tests. In production the
//! marketplace's identity provider signs tokens; imgest only checks them.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

use imgest_core::domain::random::secure_hex;

#[derive(Debug, thiserror::Error)]
pub enum IssuerError {
    #[error("cannot generate a signing key")]
    KeyGeneration,
    #[error("cannot sign a token: {0}")]
    Signing(#[from] jsonwebtoken::errors::Error),
    #[error("cannot write the JWKS file: {0}")]
    Write(#[from] std::io::Error),
}

/// What a minted token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec<'a> {
    pub sub: &'a str,
    /// Space-separated scopes.
    pub scope: &'a str,
    /// The partner's client (the [`CLIENT_CLAIM`](super::CLIENT_CLAIM) claim).
    pub client_id: Option<&'a str>,
    pub valid_for: Duration,
}

pub struct LocalIssuer {
    issuer: String,
    audience: String,
    alg: Algorithm,
    kid: String,
    key: EncodingKey,
    jwk: Jwk,
}

impl LocalIssuer {
    /// An issuer with a fresh P-256 key (ES256).
    pub fn es256(issuer: &str, audience: &str) -> Result<Self, IssuerError> {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
            .map_err(|_| IssuerError::KeyGeneration)?;
        let pkcs8 = pair.to_pkcs8v1().map_err(|_| IssuerError::KeyGeneration)?;
        Self::new(
            issuer,
            audience,
            Algorithm::ES256,
            EncodingKey::from_ec_der(pkcs8.as_ref()),
        )
    }

    /// An issuer with a fresh 2048-bit RSA key (RS256).
    pub fn rs256(issuer: &str, audience: &str) -> Result<Self, IssuerError> {
        let pair =
            RsaKeyPair::generate(KeySize::Rsa2048).map_err(|_| IssuerError::KeyGeneration)?;
        let pkcs8 = pair.as_der().map_err(|_| IssuerError::KeyGeneration)?;
        // The signer wants the PKCS #1 key that PKCS #8 wraps.
        let pkcs1 = pkcs1_of_pkcs8(pkcs8.as_ref()).ok_or(IssuerError::KeyGeneration)?;
        Self::new(
            issuer,
            audience,
            Algorithm::RS256,
            EncodingKey::from_rsa_der(pkcs1),
        )
    }

    fn new(
        issuer: &str,
        audience: &str,
        alg: Algorithm,
        key: EncodingKey,
    ) -> Result<Self, IssuerError> {
        let kid = secure_hex::<8>();
        let mut jwk = Jwk::from_encoding_key(&key, alg)?;
        jwk.common.key_id = Some(kid.clone());
        Ok(Self {
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            alg,
            kid,
            key,
            jwk,
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The public key as a JSON Web Key Set.
    pub fn jwks(&self) -> Value {
        json!({ "keys": [self.jwk] })
    }

    /// Writes [`jwks`](Self::jwks) to `path` (what `IMGEST_JWKS_FILE` names).
    pub fn write_jwks(&self, path: &Path) -> Result<(), IssuerError> {
        std::fs::write(path, self.jwks().to_string())?;
        Ok(())
    }

    /// A token with the issuer's `iss` and `aud`, valid from now for `spec.valid_for`.
    pub fn token(&self, spec: &TokenSpec<'_>) -> Result<String, IssuerError> {
        let now = unix_now();
        let mut claims = json!({
            "iss": self.issuer,
            "aud": self.audience,
            "sub": spec.sub,
            "scope": spec.scope,
            "iat": now,
            "nbf": now,
            "exp": now + spec.valid_for.as_secs(),
        });
        if let Some(client) = spec.client_id {
            claims[super::CLIENT_CLAIM] = Value::from(client);
        }
        self.sign(&claims)
    }

    /// A token with exactly these claims (tests: expired, other issuers, missing claims).
    pub fn sign(&self, claims: &Value) -> Result<String, IssuerError> {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        Ok(encode(&header, claims, &self.key)?)
    }
}

/// Seconds since the epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The `privateKey` OCTET STRING of a PKCS #8 `PrivateKeyInfo` (RFC 5208):
/// `SEQUENCE { INTEGER version, SEQUENCE algorithm, OCTET STRING privateKey, ... }`.
fn pkcs1_of_pkcs8(der: &[u8]) -> Option<&[u8]> {
    let (tag, info, _) = der_element(der)?;
    if tag != 0x30 {
        return None;
    }
    let (version, _, rest) = der_element(info)?;
    let (algorithm, _, rest) = der_element(rest)?;
    let (key_tag, key, _) = der_element(rest)?;
    (version == 0x02 && algorithm == 0x30 && key_tag == 0x04).then_some(key)
}

/// One DER element: its tag, its contents, and what follows it.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, rest) = rest.split_at(count);
        let len = bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b));
        (len, rest)
    };
    (rest.len() >= len).then(|| {
        let (content, after) = rest.split_at(len);
        (tag, content, after)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::JwtVerifier;
    use super::*;

    #[test]
    fn tokens_of_either_algorithm_verify_against_the_written_jwks() {
        let dir = tempfile::tempdir().unwrap();
        for issuer in [
            LocalIssuer::es256("https://id.example", "imgest").unwrap(),
            LocalIssuer::rs256("https://id.example", "imgest").unwrap(),
        ] {
            let path = dir.path().join("jwks.json");
            issuer.write_jwks(&path).unwrap();
            let verifier = JwtVerifier::open(&path, issuer.issuer(), issuer.audience()).unwrap();
            let token = issuer
                .token(&TokenSpec {
                    sub: "seller-1",
                    scope: "imgest:upload",
                    client_id: None,
                    valid_for: Duration::from_secs(300),
                })
                .unwrap();
            let claims = verifier.verify(&token).unwrap();
            assert_eq!(claims.sub.as_deref(), Some("seller-1"));
            assert_eq!(claims.scope.as_deref(), Some("imgest:upload"));
        }
    }

    #[test]
    fn der_lengths_of_every_form_are_read() {
        assert_eq!(
            der_element(&[0x04, 0x01, 0xaa, 0xbb]),
            Some((0x04, &[0xaa][..], &[0xbb][..]))
        );
        let long = [0x04, 0x81, 0x02, 0x01, 0x02];
        assert_eq!(der_element(&long), Some((0x04, &[1, 2][..], &[][..])));
        assert_eq!(der_element(&[0x04, 0x05, 0x01]), None, "short input");
        assert_eq!(der_element(&[0x04, 0x80]), None, "indefinite length");
    }
}
