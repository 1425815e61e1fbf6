//! The downloader's TLS configuration: rustls over aws-lc-rs with the system's root
//! certificates.
//!
//! The AWS SDK already builds rustls with aws-lc-rs and reads the system roots, so the
//! downloader reuses both instead of reqwest's default provider (ring, a second crypto
//! library to compile). The provider is passed explicitly rather than installed as the process
//! default, so nothing else in the process changes behaviour.

use std::sync::Arc;

use rustls::ClientConfig;

/// Why no TLS configuration could be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot configure TLS for downloads: {0}")]
pub struct TlsSetupError(#[source] rustls::Error);

pub(super) fn client_config() -> Result<ClientConfig, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::warn!(%error, "a system root certificate store could not be read");
    }
    let (added, ignored) = roots.add_parsable_certificates(native.certs);
    if added == 0 {
        // Plain-http downloads still work; every https one will fail with `connection`.
        tracing::warn!(
            ignored,
            "no system root certificates: https downloads will fail"
        );
    }
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsSetupError)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// Makes aws-lc-rs the process's default rustls provider. The workspace builds reqwest with
/// rustls but without a built-in provider (see above), so any other reqwest client in the
/// process (the demo's, the tests') needs a default before it is built; idempotent.
pub fn install_default_provider() {
    // Err means a default is already installed, which is all this asks for.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
