//! One POST of a signed webhook to a partner's endpoint, under the guard downloads run under:
//! the endpoint and every address its name resolves to pass the address guard, no proxy, no
//! redirect followed (a partner's endpoint that moved says so by an answer the delivery
//! reports), and a whole-request deadline. The body of the answer is never read past its
//! first bytes: only its status counts.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderValue};
use url::Url;

use super::{DownloadError, DownloaderSetupError, guarded_client, resolver, target};
use crate::AllowedPorts;

/// How a [`Poster`] connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostConfig {
    /// Lifts the guard for loopback and private networks (`IMGEST_ALLOW_PRIVATE_NETWORKS`;
    /// tests and local runs). Plain `http` is accepted only then.
    pub allow_private: bool,
    /// The ports endpoints may use (`IMGEST_FETCH_PORTS`: the same as downloads').
    pub ports: AllowedPorts,
    pub user_agent: String,
}

/// What an endpoint answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostAnswer {
    pub status: u16,
}

/// Posts JSON bodies to partners' endpoints.
#[derive(Debug, Clone)]
pub struct Poster {
    client: reqwest::Client,
    config: Arc<PostConfig>,
}

impl Poster {
    pub fn new(config: PostConfig) -> Result<Self, DownloaderSetupError> {
        let client = guarded_client(config.allow_private, &config.user_agent)?
            .build()
            .map_err(DownloaderSetupError::Client)?;
        Ok(Self {
            client,
            config: Arc::new(config),
        })
    }

    /// Whether `url` may be posted to: `https` (or `http` where private networks are allowed),
    /// no credentials, an allowed port, and an IP-literal host the guard allows (a name is
    /// checked as it resolves, at each post).
    pub fn check(&self, url: &Url) -> Result<(), DownloadError> {
        if url.scheme() != "https" && !(self.config.allow_private && url.scheme() == "http") {
            return Err(DownloadError::new(
                crate::FetchErrorKind::InvalidUrl,
                format!("endpoints must use https, not {:?}", url.scheme()),
            ));
        }
        target::check(
            url,
            target::Rules {
                allow_private: self.config.allow_private,
                ports: &self.config.ports,
                hosts: None,
            },
        )
    }

    /// [`check`](Self::check), and every address the URL's name resolves to now allowed by the
    /// guard (stricter than a post, which connects to the allowed ones: an endpoint is
    /// registered only if none of its addresses is forbidden), within `deadline`.
    pub async fn check_resolved(&self, url: &Url, deadline: Duration) -> Result<(), DownloadError> {
        self.check(url)?;
        let Some(host) = url.domain() else {
            // An address literal: `check` judged it.
            return Ok(());
        };
        let found = resolver::lookup(host, deadline).await?;
        resolver::all_allowed(&found, self.config.allow_private).map_err(|forbidden| {
            let message = format!("{host} resolves to a forbidden address: {forbidden}");
            DownloadError::forbidden_address(forbidden).with_message(message)
        })
    }

    /// POSTs `body` (JSON) to `url` with `headers`, within `deadline` (connect, send and the
    /// answer's headers). Any status is an answer; a refused address, a failed connection or
    /// the deadline is an error.
    pub async fn post(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        body: String,
        deadline: Duration,
    ) -> Result<PostAnswer, DownloadError> {
        self.check(url)?;
        let mut request = self
            .client
            .post(url.clone())
            .timeout(deadline)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        let response = request.send().await.map_err(DownloadError::from_reqwest)?;
        Ok(PostAnswer {
            status: response.status().as_u16(),
        })
    }
}
