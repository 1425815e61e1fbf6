//! One download of one photo URL, done safely: [`Downloader::download`].
//!
//! - **Whole-request deadline**: connect, headers, every redirect hop and the body share one
//!   deadline, so a server that drips a byte a second is cut when it passes (`timeout`).
//! - **Address guard** ([`check_ip`](crate::check_ip)): IP-literal hosts are checked
//!   before any request, names inside the client's own resolver (`resolver`), which hands the
//!   client only checked addresses, so it connects to exactly what was checked, resolving
//!   once. Both apply to the first URL and to every redirect hop. No proxy is used: a proxy
//!   would resolve names itself, past the guard.
//! - **Redirects** are followed here, not by the client, so each hop is checked (`target`:
//!   scheme, credentials, [`DownloadConfig::ports`], the client's [`HostAllowlist`], the address
//!   guard); at most [`DownloadConfig::max_redirects`].
//! - **Body** (`body`): refused by `Content-Length` before reading, cut as soon as it passes
//!   the limit, refused after its first bytes unless they are a JPEG/PNG/WebP/GIF signature,
//!   hashed (MD5, the [`ImageId`]) as it streams.
//! - **Memory** ([`Downloader::download_unless_known`] with a [`BodyHold`]): the body is held
//!   in the process's memory budget as it arrives; a download that finds no room within its
//!   deadline ends [`DownloadError::is_no_room`], which blames nobody.
//! - **Conditional requests** (`headers`): a [`Validator`] from an earlier download is sent
//!   as `If-None-Match` / `If-Modified-Since`; a 304 is [`Downloaded::NotModified`].
//! - **Dedup before the body** ([`Downloader::download_unless_known`]): a trusted host's response
//!   that names (by [`HashHeaders`]) an image imgest has is [`Downloaded::Known`]; its body is
//!   never read.
//! - **TLS** (`tls`): rustls on the aws-lc-rs provider the AWS SDK already builds.
//!
//! Errors are [`DownloadError`]s carrying a stable [`FetchErrorKind`]; the caller decides what a
//! kind means for the crawl ([`FetchErrorKind::class`]).

mod body;
mod error;
mod headers;
mod post;
mod resolver;
mod target;
mod tls;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use reqwest::header::{ACCEPT, HeaderMap, HeaderValue};
use url::Url;

pub use self::error::DownloadError;
pub use self::headers::Validator;
pub use self::post::{PostAnswer, PostConfig, Poster};
pub use self::tls::{TlsSetupError, install_default_provider};
use crate::{AllowedPorts, FetchErrorKind, HashHeaders, HostAllowlist};
use imgest_core::budget::BodyHold;
use imgest_core::domain::{ImageId, SourceFormat};

/// How downloads behave; one per [`Downloader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadConfig {
    /// Lifts the guard for loopback and private networks (`IMGEST_ALLOW_PRIVATE_NETWORKS`;
    /// tests and local runs). Link-local, metadata and the rest stay forbidden.
    pub allow_private: bool,
    /// The largest body accepted, in bytes (`IMGEST_MAX_BODY`).
    pub max_body: u64,
    /// Redirects followed per download; one more is `too_many_redirects`.
    pub max_redirects: usize,
    pub user_agent: String,
    /// The ports downloads may connect to (`IMGEST_FETCH_PORTS`).
    pub ports: AllowedPorts,
}

impl Default for DownloadConfig {
    fn default() -> Self {
        Self {
            allow_private: false,
            max_body: 20_000_000,
            max_redirects: 5,
            user_agent: concat!("imgest/", env!("CARGO_PKG_VERSION"), " (photo ingest)").into(),
            ports: AllowedPorts::default(),
        }
    }
}

/// Why a [`Downloader`] could not be built (bad configuration, at start-up).
#[derive(Debug, thiserror::Error)]
pub enum DownloaderSetupError {
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    #[error("cannot build the HTTP client for downloads: {0}")]
    Client(#[source] reqwest::Error),
}

/// A download that gave a result.
#[derive(Debug, Clone)]
pub enum Downloaded {
    /// The photo, checked and hashed.
    Body(Download),
    /// The server says the photo is unchanged since the [`Validator`] that was sent.
    NotModified {
        final_url: Url,
        /// The validators the 304 carried (servers may refresh them).
        validator: Validator,
        elapsed: Duration,
    },
    /// A trusted host named the body's MD5 in a header, and it is a known image: the body
    /// was not read.
    Known {
        image_id: ImageId,
        final_url: Url,
        validator: Validator,
        elapsed: Duration,
    },
}

/// Whether an image is known (asked before a body named by a trusted header is read).
#[async_trait::async_trait]
pub trait KnownImages: Send + Sync {
    async fn is_known(&self, id: &ImageId) -> bool;
}

/// What makes a download skip a body it already has: the hosts trusted to name it, and who
/// knows the images.
#[derive(Clone, Copy)]
pub struct BodyDedup<'a> {
    pub trusted: &'a HashHeaders,
    pub known: &'a dyn KnownImages,
}

impl Downloaded {
    /// The whole download's duration, redirects included.
    pub fn elapsed(&self) -> Duration {
        match self {
            Self::Body(download) => download.elapsed,
            Self::NotModified { elapsed, .. } | Self::Known { elapsed, .. } => *elapsed,
        }
    }

    fn set_elapsed(&mut self, value: Duration) {
        match self {
            Self::Body(download) => download.elapsed = value,
            Self::NotModified { elapsed, .. } | Self::Known { elapsed, .. } => *elapsed = value,
        }
    }
}

/// A downloaded photo body whose first bytes are an image signature (not yet decoded).
#[derive(Debug, Clone)]
pub struct Download {
    pub bytes: Bytes,
    /// The MD5 of `bytes`, computed as they arrived.
    pub image_id: ImageId,
    /// From the signature, whatever the `Content-Type` said.
    pub format: SourceFormat,
    /// The URL that answered, after redirects.
    pub final_url: Url,
    /// The response's `ETag` / `Last-Modified`, for the next download of the same URL.
    pub validator: Validator,
    pub elapsed: Duration,
}

/// Downloads photos; one per process (it holds the connection pool). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Downloader {
    client: reqwest::Client,
    config: Arc<DownloadConfig>,
}

/// An HTTP client under the address guard, as downloads and webhook posts both use it: names
/// resolved by the guarded resolver, no proxy (it would resolve past the guard), no redirect
/// followed by the client (each hop is the caller's to check), rustls on aws-lc-rs.
fn guarded_client(
    allow_private: bool,
    user_agent: &str,
) -> Result<reqwest::ClientBuilder, DownloaderSetupError> {
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(resolver::GuardedResolver { allow_private }))
        .use_preconfigured_tls(tls::client_config()?)
        .user_agent(user_agent))
}

impl Downloader {
    pub fn new(config: DownloadConfig) -> Result<Self, DownloaderSetupError> {
        let mut defaults = HeaderMap::new();
        // Asking for the formats imgest reads keeps content-negotiating CDNs from answering
        // AVIF or JPEG XL.
        defaults.insert(
            ACCEPT,
            HeaderValue::from_static("image/webp,image/jpeg,image/png,image/gif;q=0.9,*/*;q=0.5"),
        );
        let client = guarded_client(config.allow_private, &config.user_agent)?
            .default_headers(defaults)
            .build()
            .map_err(DownloaderSetupError::Client)?;
        Ok(Self {
            client,
            config: Arc::new(config),
        })
    }

    pub fn config(&self) -> &DownloadConfig {
        &self.config
    }

    /// Downloads `url` within `deadline` (the whole request: connect, headers, every redirect
    /// hop, the body). With a non-empty `validator` the request is conditional. With `hosts`,
    /// the URL and every redirect must name one of them (the client's allowlist).
    pub async fn download(
        &self,
        url: &Url,
        deadline: Duration,
        validator: Option<&Validator>,
        hosts: Option<&HostAllowlist>,
    ) -> Result<Downloaded, DownloadError> {
        self.download_unless_known(url, deadline, validator, hosts, None, None)
            .await
    }

    /// [`download`](Self::download), but a response whose trusted hash header names a known image
    /// is [`Downloaded::Known`], its body unread. The check is part of the deadline.
    ///
    /// With `memory`, the body is held in it as it arrives (see the module's documentation); a
    /// deadline that passes while the hold waits for room is [`DownloadError::is_no_room`],
    /// not a timeout of the host's.
    pub async fn download_unless_known(
        &self,
        url: &Url,
        deadline: Duration,
        validator: Option<&Validator>,
        hosts: Option<&HostAllowlist>,
        dedup: Option<BodyDedup<'_>>,
        mut memory: Option<&mut BodyHold>,
    ) -> Result<Downloaded, DownloadError> {
        let started = Instant::now();
        let outcome = tokio::time::timeout(
            deadline,
            self.follow(url, validator, hosts, dedup, memory.as_deref_mut()),
        )
        .await;
        let elapsed = started.elapsed();
        match outcome {
            Ok(Ok(mut fetched)) => {
                fetched.set_elapsed(elapsed);
                Ok(fetched)
            }
            Ok(Err(mut error)) => {
                error.elapsed = elapsed;
                Err(error)
            }
            Err(_) => {
                let mut error = if memory.is_some_and(|m| m.was_waiting()) {
                    DownloadError::no_room(format!(
                        "no memory for the body in this process within {deadline:?}"
                    ))
                } else {
                    DownloadError::new(
                        FetchErrorKind::Timeout,
                        format!("no complete response within {deadline:?}"),
                    )
                };
                error.elapsed = elapsed;
                Err(error)
            }
        }
    }

    /// Requests `url`, following redirects by hand so that every hop is checked.
    async fn follow(
        &self,
        url: &Url,
        validator: Option<&Validator>,
        hosts: Option<&HostAllowlist>,
        dedup: Option<BodyDedup<'_>>,
        memory: Option<&mut BodyHold>,
    ) -> Result<Downloaded, DownloadError> {
        let rules = target::Rules {
            allow_private: self.config.allow_private,
            ports: &self.config.ports,
            hosts,
        };
        let conditional = validator
            .filter(|v| !v.is_empty())
            .map(Validator::conditional_headers);
        let mut current = url.clone();
        let mut redirects = 0;
        loop {
            target::check(&current, rules)?;
            let mut request = self.client.get(current.clone());
            if let Some(headers) = &conditional {
                request = request.headers(headers.clone());
            }
            let response = request.send().await.map_err(DownloadError::from_reqwest)?;
            let status = response.status().as_u16();
            match status {
                301 | 302 | 303 | 307 | 308 => {
                    if redirects >= self.config.max_redirects {
                        return Err(DownloadError::new(
                            FetchErrorKind::TooManyRedirects,
                            format!("more than {} redirects", self.config.max_redirects),
                        ));
                    }
                    redirects += 1;
                    current = target::redirect(&current, status, response.headers(), rules)?;
                }
                304 if conditional.is_some() => {
                    return Ok(Downloaded::NotModified {
                        validator: Validator::from_headers(response.headers()),
                        final_url: current,
                        elapsed: Duration::ZERO,
                    });
                }
                200..=299 => {
                    let validator = Validator::from_headers(response.headers());
                    if let Some(image_id) = announced_known(dedup, &current, &response).await {
                        // Dropping the response closes its connection without reading on.
                        return Ok(Downloaded::Known {
                            image_id,
                            final_url: current,
                            validator,
                            elapsed: Duration::ZERO,
                        });
                    }
                    let body = body::read(response, self.config.max_body, memory).await?;
                    return Ok(Downloaded::Body(Download {
                        bytes: body.bytes,
                        image_id: body.image_id,
                        format: body.format,
                        final_url: current,
                        validator,
                        elapsed: Duration::ZERO,
                    }));
                }
                _ => {
                    let retry_after = headers::retry_after(response.headers(), SystemTime::now());
                    return Err(DownloadError::status(status, retry_after));
                }
            }
        }
    }
}

/// The image a trusted host's response names in its hash header, if it is known.
async fn announced_known(
    dedup: Option<BodyDedup<'_>>,
    url: &Url,
    response: &reqwest::Response,
) -> Option<ImageId> {
    let dedup = dedup?;
    let id = dedup.trusted.announced(url.host_str()?, |name| {
        response.headers().get(name)?.to_str().ok()
    })?;
    dedup.known.is_known(&id).await.then_some(id)
}
