//! Which URLs a download may request: the first one and every redirect hop pass the same
//! check (scheme, no credentials, an allowed port, a host on the client's allowlist if it has
//! one, an IP-literal host the guard allows); names are checked later, when they resolve.

use reqwest::header::{HeaderMap, LOCATION};
use url::Url;

use super::DownloadError;
use crate::{AllowedPorts, FetchErrorKind, HostAllowlist, check_host_literal};

/// What a URL is checked against.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rules<'a> {
    pub allow_private: bool,
    pub ports: &'a AllowedPorts,
    /// The client's hosts, if it is limited to some.
    pub hosts: Option<&'a HostAllowlist>,
}

/// Refuses a URL the downloader must not request. IP literals in any notation the URL parser
/// accepts (`2130706433`, `0x7f.1`, `[::ffff:127.0.0.1]`) are parsed to addresses by then, so
/// the guard sees the address the client would connect to.
pub(super) fn check(url: &Url, rules: Rules<'_>) -> Result<(), DownloadError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(DownloadError::new(
            FetchErrorKind::InvalidUrl,
            format!(
                "only http and https can be downloaded, not {:?}",
                url.scheme()
            ),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Not quoted: the URL carries a secret.
        return Err(DownloadError::new(
            FetchErrorKind::InvalidUrl,
            "URLs with credentials (user:password@) are not downloaded",
        ));
    }
    let Some(host) = url.host_str() else {
        return Err(DownloadError::new(
            FetchErrorKind::InvalidUrl,
            format!("no host in {url}"),
        ));
    };
    // Every http(s) URL has a port, explicit or its scheme's.
    let port = url.port_or_known_default().unwrap_or(0);
    if !rules.ports.allows(port) {
        return Err(DownloadError::new(
            FetchErrorKind::ForbiddenAddress,
            format!("port {port} is not one downloads may use ({})", rules.ports),
        ));
    }
    if let Some(hosts) = rules.hosts
        && !hosts.allows(host)
    {
        return Err(DownloadError::new(
            FetchErrorKind::ForbiddenHost,
            format!("{host} is not one of this client's hosts ({hosts})"),
        ));
    }
    check_host_literal(url, rules.allow_private)
        .map(|_| ())
        .map_err(DownloadError::forbidden_address)
}

/// Where a redirect response points: its `Location`, relative ones resolved against the URL
/// that answered, then [checked](check) like the first URL.
pub(super) fn redirect(
    from: &Url,
    status: u16,
    headers: &HeaderMap,
    rules: Rules<'_>,
) -> Result<Url, DownloadError> {
    let location = headers.get(LOCATION).ok_or_else(|| {
        DownloadError::status(status, None)
            .with_message(format!("HTTP {status} redirect without a Location"))
    })?;
    // Location is ASCII by the spec, but some servers send raw UTF-8 paths; `Url` escapes them.
    let location = std::str::from_utf8(location.as_bytes()).map_err(|_| {
        DownloadError::status(status, None).with_message(format!(
            "HTTP {status} redirect to a Location that is not UTF-8"
        ))
    })?;
    let to = from.join(location.trim()).map_err(|e| {
        DownloadError::new(
            FetchErrorKind::InvalidUrl,
            format!("HTTP {status} redirect to an invalid URL: {e}"),
        )
    })?;
    check(&to, rules)?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn location(to: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(LOCATION, HeaderValue::from_str(to).unwrap());
        h
    }

    fn hop(to: &str, allow_private: bool) -> Result<Url, DownloadError> {
        let from = Url::parse("https://img.example.com/a/b.jpg?x=1").unwrap();
        let rules = Rules {
            allow_private,
            ports: &AllowedPorts::Any,
            hosts: None,
        };
        redirect(&from, 302, &location(to), rules)
    }

    #[test]
    fn ports_and_hosts_outside_the_rules_are_refused_before_any_connection() {
        let from = Url::parse("https://img.acme.example/a.jpg").unwrap();
        let hosts = HostAllowlist::parse("img.acme.example,*.acme-cdn.example").unwrap();
        let rules = Rules {
            allow_private: false,
            ports: &AllowedPorts::default(),
            hosts: Some(&hosts),
        };
        assert!(check(&from, rules).is_ok());
        assert!(
            redirect(
                &from,
                302,
                &location("https://x.acme-cdn.example/b.jpg"),
                rules
            )
            .is_ok()
        );
        for (to, kind) in [
            (
                "https://img.acme.example:8443/a.jpg",
                FetchErrorKind::ForbiddenAddress,
            ),
            (
                "http://img.acme.example:22/",
                FetchErrorKind::ForbiddenAddress,
            ),
            (
                "https://img.other.example/a.jpg",
                FetchErrorKind::ForbiddenHost,
            ),
            (
                "https://acme-cdn.example/a.jpg",
                FetchErrorKind::ForbiddenHost,
            ),
        ] {
            let url = Url::parse(to).unwrap();
            assert_eq!(check(&url, rules).unwrap_err().kind, kind, "{to}");
            assert_eq!(
                redirect(&from, 302, &location(to), rules).unwrap_err().kind,
                kind,
                "redirect to {to}"
            );
        }
    }

    #[test]
    fn relative_locations_resolve_against_the_current_url() {
        assert_eq!(
            hop("c.jpg", false).unwrap().as_str(),
            "https://img.example.com/a/c.jpg"
        );
        assert_eq!(
            hop("/d.jpg", false).unwrap().as_str(),
            "https://img.example.com/d.jpg"
        );
        assert_eq!(
            hop("//cdn.example.net/e.jpg", false).unwrap().as_str(),
            "https://cdn.example.net/e.jpg"
        );
        assert_eq!(
            hop("http://cdn.example.net/f.jpg", false).unwrap().as_str(),
            "http://cdn.example.net/f.jpg"
        );
    }

    #[test]
    fn redirects_to_forbidden_literals_are_refused_in_any_notation() {
        for to in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://10.0.0.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://0.0.0.0:8080/",
        ] {
            assert_eq!(
                hop(to, false).unwrap_err().kind,
                FetchErrorKind::ForbiddenAddress,
                "{to}"
            );
        }
        // allow_private lifts loopback but never the metadata service or 0.0.0.0.
        assert!(hop("http://0x7f.1/", true).is_ok());
        for to in ["http://169.254.169.254/", "http://0.0.0.0/"] {
            assert_eq!(
                hop(to, true).unwrap_err().kind,
                FetchErrorKind::ForbiddenAddress,
                "{to}"
            );
        }
    }

    #[test]
    fn odd_redirects_are_refused_without_quoting_credentials() {
        let e = hop("http://user:secret@cdn.example.net/x.jpg", false).unwrap_err();
        assert_eq!(e.kind, FetchErrorKind::InvalidUrl);
        assert!(!e.to_string().contains("secret"), "{e}");
        assert_eq!(
            hop("ftp://cdn.example.net/x.jpg", false).unwrap_err().kind,
            FetchErrorKind::InvalidUrl
        );
        assert_eq!(
            hop("file:///etc/passwd", false).unwrap_err().kind,
            FetchErrorKind::InvalidUrl
        );
        let from = Url::parse("https://img.example.com/").unwrap();
        let rules = Rules {
            allow_private: false,
            ports: &AllowedPorts::Any,
            hosts: None,
        };
        let missing = redirect(&from, 301, &HeaderMap::new(), rules).unwrap_err();
        assert_eq!(
            (missing.kind, missing.http_status),
            (FetchErrorKind::HttpError, Some(301))
        );
    }
}
