//! The HTTP client's DNS resolver: resolves once and hands back only addresses the guard
//! allows, so the client connects exactly to an address that was checked.
//!
//! Checking a name's addresses and then letting the client resolve it again would leave a
//! window for DNS rebinding (a short TTL answering a public address to the check and
//! 169.254.169.254 to the connect). Here the check sits inside the one resolution.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::DownloadError;
use crate::{FetchErrorKind, ForbiddenAddress, check_ip};

/// Resolves with the system resolver (`getaddrinfo` on tokio's blocking pool) and keeps only
/// the addresses [`check_ip`] allows.
#[derive(Debug, Clone, Copy)]
pub(super) struct GuardedResolver {
    pub allow_private: bool,
}

/// The name did not resolve (or resolved to nothing). Recognised again in the client's
/// error chain to report [`Dns`](crate::FetchErrorKind::Dns).
#[derive(Debug, thiserror::Error)]
#[error("{host} did not resolve: {source}")]
pub(crate) struct DnsFailure {
    host: String,
    source: io::Error,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = resolve(&host).await?;
            let allowed = allowed(&found, allow_private)?;
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// `host`'s addresses (port 0: a client puts the URL's port in), at least one.
async fn resolve(host: &str) -> Result<Vec<SocketAddr>, DnsFailure> {
    let failure = |source| DnsFailure {
        host: host.to_owned(),
        source,
    };
    let found: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(failure)?
        .collect();
    if found.is_empty() {
        return Err(failure(io::Error::new(
            io::ErrorKind::NotFound,
            "no addresses",
        )));
    }
    Ok(found)
}

/// [`resolve`] within `deadline`, its failure a download error of kind `dns`.
pub(super) async fn lookup(
    host: &str,
    deadline: Duration,
) -> Result<Vec<SocketAddr>, DownloadError> {
    match tokio::time::timeout(deadline, resolve(host)).await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(failure)) => Err(DownloadError::new(FetchErrorKind::Dns, failure.to_string())),
        Err(_) => Err(DownloadError::new(
            FetchErrorKind::Dns,
            format!("{host} did not resolve within {} s", deadline.as_secs()),
        )),
    }
}

/// Every address of `found` allowed, or the first refusal.
pub(super) fn all_allowed(
    found: &[SocketAddr],
    allow_private: bool,
) -> Result<(), ForbiddenAddress> {
    found
        .iter()
        .try_for_each(|addr| check_ip(addr.ip(), allow_private))
}

/// The allowed addresses among `found`, in order; if there are none, the first refusal.
fn allowed(found: &[SocketAddr], allow_private: bool) -> Result<Vec<SocketAddr>, ForbiddenAddress> {
    let mut allowed = Vec::with_capacity(found.len());
    let mut refused = None;
    for addr in found {
        match check_ip(addr.ip(), allow_private) {
            Ok(()) => allowed.push(*addr),
            Err(forbidden) => {
                refused.get_or_insert(forbidden);
            }
        }
    }
    match refused {
        Some(forbidden) if allowed.is_empty() => Err(forbidden),
        _ => Ok(allowed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn only_allowed_addresses_are_kept_in_order() {
        let found = addrs(&["10.0.0.1:0", "8.8.8.8:0", "[::1]:0", "1.1.1.1:0"]);
        assert_eq!(
            allowed(&found, false).unwrap(),
            addrs(&["8.8.8.8:0", "1.1.1.1:0"])
        );
        assert_eq!(allowed(&found, true).unwrap(), found);
    }

    #[test]
    fn a_name_with_only_forbidden_addresses_is_refused_with_the_first() {
        let found = addrs(&["169.254.169.254:0", "0.0.0.0:0"]);
        for allow_private in [false, true] {
            let refused = allowed(&found, allow_private).unwrap_err();
            assert_eq!(refused.ip.to_string(), "169.254.169.254");
        }
    }
}
