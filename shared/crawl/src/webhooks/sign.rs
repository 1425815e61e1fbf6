//! Standard Webhooks signatures: secrets (`whsec_` and the key in base64), and the
//! `webhook-signature` header, `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under
//! each secret in use, space-separated (several while a secret rotates: a receiver accepts any
//! one it knows).

use aws_lc_rs::hmac;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use imgest_core::domain::random::secure_bytes;

/// What every secret starts with (as the specification's libraries write them).
const PREFIX: &str = "whsec_";
/// A new secret's key: 32 random bytes.
const NEW_KEY_BYTES: usize = 32;
/// The key lengths a given secret may have (the specification asks for 24 to 64 bytes).
const KEY_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// A secret's key, parsed from its `whsec_…` form.
#[derive(Clone)]
pub struct SigningKey(hmac::Key);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never printed.
        f.write_str("SigningKey(…)")
    }
}

/// Why a secret was refused (its value is never quoted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a webhook secret is `whsec_` and 24 to 64 bytes in base64 (the secret given is not quoted)"
)]
pub struct BadSecret;

impl SigningKey {
    pub fn parse(secret: &str) -> Result<Self, BadSecret> {
        let encoded = secret.strip_prefix(PREFIX).unwrap_or(secret);
        let key = STANDARD.decode(encoded).map_err(|_| BadSecret)?;
        if !KEY_BYTES.contains(&key.len()) {
            return Err(BadSecret);
        }
        Ok(Self(hmac::Key::new(hmac::HMAC_SHA256, &key)))
    }

    /// `v1,` and the signature of `id.timestamp.body`.
    fn sign(&self, id: &str, timestamp: i64, body: &str) -> String {
        let mut context = hmac::Context::with_key(&self.0);
        context.update(id.as_bytes());
        context.update(b".");
        context.update(timestamp.to_string().as_bytes());
        context.update(b".");
        context.update(body.as_bytes());
        format!("v1,{}", STANDARD.encode(context.sign().as_ref()))
    }
}

/// A new secret, from the system's CSPRNG.
pub fn new_secret() -> String {
    format!(
        "{PREFIX}{}",
        STANDARD.encode(secure_bytes::<NEW_KEY_BYTES>())
    )
}

/// The `webhook-signature` header: one signature per key, space-separated.
pub fn signature_header<'a>(
    keys: impl IntoIterator<Item = &'a SigningKey>,
    id: &str,
    timestamp: i64,
    body: &str,
) -> String {
    keys.into_iter()
        .map(|k| k.sign(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example in the Standard Webhooks specification itself.
    #[test]
    fn signs_the_specifications_example() {
        let key = SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            signature_header(
                [&key],
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                r#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn secrets_are_new_each_time_and_parse_back() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.starts_with(PREFIX));
        SigningKey::parse(&a).unwrap();
    }

    #[test]
    fn short_long_and_malformed_secrets_are_refused() {
        for bad in [
            "",
            "whsec_",
            "whsec_c2hvcnQ=",
            "whsec_not base64!",
            &format!("whsec_{}", STANDARD.encode([7u8; 65])),
        ] {
            assert_eq!(SigningKey::parse(bad).unwrap_err(), BadSecret, "{bad}");
        }
    }

    #[test]
    fn one_signature_per_key_in_use() {
        let (a, b) = (
            SigningKey::parse(&new_secret()).unwrap(),
            SigningKey::parse(&new_secret()).unwrap(),
        );
        let header = signature_header([&a, &b], "id", 1, "{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.starts_with("v1,")));
        assert_ne!(parts[0], parts[1]);
    }
}
