//! `IMGEST_PUBLIC_URL`: the base of the file URLs the API returns, and a name an open local
//! runner answers to (its `Host` guard accepts the URL's authority). Checked at start: an
//! `http` or `https` URL with a host and nothing a base must not carry (credentials, a query,
//! a fragment), since every file URL the API hands out starts with it.

use url::{Host, Url};

use super::SettingsError;
use super::parse::Vars;

const VAR: &str = "IMGEST_PUBLIC_URL";

/// The URL as set, without a trailing `/`, or `None` when unset.
pub(super) fn parse(vars: &Vars<'_>) -> Result<Option<String>, SettingsError> {
    let Some(value) = vars.get(VAR) else {
        return Ok(None);
    };
    let bad = |why: &str| {
        vars.bad(
            VAR,
            format!("{why} (expected e.g. https://cdn.example.com)"),
        )
    };
    let url = Url::parse(value).map_err(|e| bad(&format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("not an http or https URL"));
    }
    if url.host().is_none() {
        return Err(bad("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("a URL with credentials"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("a base URL takes no query or fragment"));
    }
    Ok(Some(value.trim_end_matches('/').to_owned()))
}

/// Whether `url` (a URL [`parse`] accepted) names this machine only: `localhost` (or a name
/// under `.localhost`), or a loopback address.
pub(super) fn is_loopback(url: &str) -> bool {
    match Url::parse(url).ok().as_ref().and_then(Url::host) {
        Some(Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}
