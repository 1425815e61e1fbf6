//! The HTTP client's DNS resolver: resolves once and hands back only addresses the guard
//! allows, so the client connects exactly to an address that was checked.
//!
//! Checking a name's addresses and then letting the client resolve it again would leave a
//! window for DNS rebinding (a short TTL answering a public address to the check and
//! 169.254.169.254 to the connect). Here the check sits inside the one resolution.

use std::io;
use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::{ForbiddenAddress, check_ip};

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
            // Port 0: the client puts the URL's port in.
            let looked_up = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map(Iterator::collect::<Vec<SocketAddr>>);
            let found = match looked_up {
                Ok(found) => found,
                Err(source) => return Err(DnsFailure { host, source }.into()),
            };
            if found.is_empty() {
                let source = io::Error::new(io::ErrorKind::NotFound, "no addresses");
                return Err(DnsFailure { host, source }.into());
            }
            let allowed = allowed(&found, allow_private)?;
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
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
