//! What the crawl's settings name for downloads, as values: which ports and, per client, which
//! hosts they may reach ([`AllowedPorts`], [`HostAllowlist`]), when a host's circuit opens
//! ([`CircuitRules`]) and which hosts are trusted to name a body's MD5 ([`HashHeaders`]). The
//! downloader applies them; the settings parse them without linking it.
//!
//! Where downloads may go, besides the address guard: which ports ([`AllowedPorts`],
//! `IMGEST_FETCH_PORTS`) and, per client, which hosts ([`HostAllowlist`],
//! `IMGEST_CLIENT_HOSTS`). Both are checked on the first URL and on every redirect hop, before
//! anything connects.
//!
//! Hosts trusted to name a body's MD5 in a response header (`IMGEST_HASH_HEADERS`): the
//! standard `Content-MD5` (base64 of the digest) or a header such as an object store's ETag
//! (the digest in hex, quoted or not). A response that names an image imgest already has is
//! settled from its headers and its body is never read: a re-hosted or re-named photo costs a
//! request, not a download. Only hosts listed are believed: a header is a claim, and a wrong
//! claim would link another photo. Such a hit is the one dedup hit not checked against the
//! stored image's SHA-256 (there is no body to hash): list only hosts whose headers you trust
//! as you would their photos.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::domain::ImageId;

/// The ports downloads may connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedPorts {
    /// Any port (local test hosts listen on random ones).
    Any,
    /// Only these (80 and 443 by default).
    Only(Vec<u16>),
}

impl Default for AllowedPorts {
    fn default() -> Self {
        Self::Only(vec![80, 443])
    }
}

impl AllowedPorts {
    /// `any`, or a comma-separated list of ports.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.trim() == "any" {
            return Ok(Self::Any);
        }
        let ports = s
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("{:?} is not a port", p.trim()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::Only(ports))
    }

    pub fn allows(&self, port: u16) -> bool {
        match self {
            Self::Any => true,
            Self::Only(ports) => ports.contains(&port),
        }
    }
}

impl fmt::Display for AllowedPorts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Any => f.write_str("any"),
            Self::Only(ports) => {
                let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                f.write_str(&list.join(","))
            }
        }
    }
}

/// The hosts one client's downloads may reach: exact names (`img.acme.example`) and wildcards
/// for subdomains (`*.acme-cdn.example` matches `a.acme-cdn.example` and `a.b.acme-cdn.example`,
/// not `acme-cdn.example` itself). Names compare lowercase; IP literals only exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAllowlist {
    patterns: Vec<String>,
}

impl HostAllowlist {
    /// A comma-separated list of names and `*.`-wildcards.
    pub fn parse(s: &str) -> Result<Self, String> {
        let patterns = s
            .split(',')
            .map(|p| p.trim().to_ascii_lowercase())
            .map(|p| {
                let name = p.strip_prefix("*.").unwrap_or(&p);
                let valid = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
                    && !name.split('.').any(str::is_empty);
                if valid {
                    Ok(p)
                } else {
                    Err(format!("{p:?} is not a host name or *.domain"))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if patterns.is_empty() {
            return Err("an empty host list".into());
        }
        Ok(Self { patterns })
    }

    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.patterns.iter().any(|p| match p.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => *p == host,
        })
    }
}

impl fmt::Display for HostAllowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.patterns.join(","))
    }
}

/// When a host's circuit opens, and for how long (`IMGEST_CIRCUIT_*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CircuitRules {
    /// Recent requests (decayed over `window`) needed before the circuit may open.
    pub min_requests: u32,
    /// The share of recent requests that failed, in percent, that opens it.
    pub failure_percent: u32,
    /// Requests and failures count half after this long.
    pub window: Duration,
    /// How long an open circuit waits before a probe; doubled by each failed probe.
    pub cool_down: Duration,
}

impl Default for CircuitRules {
    fn default() -> Self {
        Self {
            min_requests: 20,
            failure_percent: 50,
            window: Duration::from_secs(60),
            cool_down: Duration::from_secs(30),
        }
    }
}

/// Per host (exact, lowercase), the header that carries the body's MD5.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HashHeaders {
    by_host: HashMap<String, String>,
}

impl HashHeaders {
    /// `host=header,…`, e.g. `img.example=content-md5,cdn.example=etag`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut by_host = HashMap::new();
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (host, header) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not host=header"))?;
            let host = host.trim().to_ascii_lowercase();
            if host.is_empty() || host.contains(['/', ':', '*']) {
                return Err(format!("{host:?} is not a host name"));
            }
            let header = header.trim().to_ascii_lowercase();
            if !is_header_name(&header) {
                return Err(format!("{header:?} is not a header name"));
            }
            if by_host.insert(host.clone(), header).is_some() {
                return Err(format!("{host} is listed twice"));
            }
        }
        Ok(Self { by_host })
    }

    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty()
    }

    /// The image a response from `host` says its body is, if `host` is trusted to say so and
    /// its header holds a well-formed MD5 (a weak ETag is not one).
    /// `header` looks up a response header by its (lowercase) name.
    pub fn announced<'h>(
        &self,
        host: &str,
        header: impl Fn(&str) -> Option<&'h str>,
    ) -> Option<ImageId> {
        let name = self.by_host.get(&host.to_ascii_lowercase())?;
        let value = header(name)?.trim();
        if name == "content-md5" {
            let digest: [u8; 16] = STANDARD.decode(value).ok()?.try_into().ok()?;
            return Some(ImageId::from_md5(digest));
        }
        if value.starts_with("W/") {
            return None;
        }
        let hex = value.trim_matches('"').to_ascii_lowercase();
        ImageId::parse(&hex).ok()
    }
}

/// An HTTP field name (RFC 9110's `token`).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod egress_tests {

    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn ports_are_80_and_443_unless_listed_or_any() {
        let default = AllowedPorts::default();
        assert!(default.allows(80) && default.allows(443) && !default.allows(8080));
        assert!(AllowedPorts::parse("any").unwrap().allows(8080));
        let listed = AllowedPorts::parse("443, 8443").unwrap();
        assert!(listed.allows(8443) && !listed.allows(80));
        assert!(AllowedPorts::parse("80,http").is_err());
        assert!(AllowedPorts::parse("0").is_err());
    }

    #[test]
    fn hosts_match_exactly_or_as_subdomains_of_a_wildcard() {
        let list = HostAllowlist::parse("img.acme.example, *.acme-cdn.example").unwrap();
        for allowed in [
            "img.acme.example",
            "IMG.Acme.Example",
            "img.acme.example.",
            "a.acme-cdn.example",
            "a.b.acme-cdn.example",
        ] {
            assert!(list.allows(allowed), "{allowed}");
        }
        for refused in [
            "acme-cdn.example",
            "evilacme-cdn.example",
            "x.img.acme.example",
            "img.acme.example.evil.example",
            "127.0.0.1",
        ] {
            assert!(!list.allows(refused), "{refused}");
        }
        assert!(HostAllowlist::parse("").is_err());
        assert!(HostAllowlist::parse("a..b").is_err());
        assert!(HostAllowlist::parse("*.").is_err());
        assert!(HostAllowlist::parse("a b").is_err());
    }
}

#[cfg(test)]
mod hash_header_tests {
    use super::*;

    const MD5_HEX: &str = "9e107d9d372bb6826bd81d3542a419d6";
    const MD5_BASE64: &str = "nhB9nTcrtoJr2B01QqQZ1g==";

    /// A response with one header.
    fn headers<'h>(name: &'static str, value: &'h str) -> impl Fn(&str) -> Option<&'h str> {
        move |asked| (asked == name).then_some(value)
    }

    #[test]
    fn content_md5_and_hex_etags_name_the_image_of_trusted_hosts_only() {
        let trusted = HashHeaders::parse("img.example=Content-MD5, cdn.example=etag").unwrap();
        let id = ImageId::parse(MD5_HEX).unwrap();
        let md5 = headers("content-md5", MD5_BASE64);
        assert_eq!(trusted.announced("IMG.example", &md5), Some(id.clone()));
        let quoted = format!("\"{}\"", MD5_HEX.to_uppercase());
        let etag = headers("etag", &quoted);
        assert_eq!(trusted.announced("cdn.example", &etag), Some(id));
        assert_eq!(
            trusted.announced("other.example", &md5),
            None,
            "not trusted"
        );
        assert_eq!(
            trusted.announced("img.example", &etag),
            None,
            "not its header"
        );
    }

    #[test]
    fn malformed_and_weak_values_name_nothing() {
        let trusted = HashHeaders::parse("a.example=content-md5,b.example=etag").unwrap();
        for (host, name, value) in [
            ("a.example", "content-md5", "bm90IDE2IGJ5dGVz"),
            ("a.example", "content-md5", "%%%"),
            ("b.example", "etag", &format!("W/\"{MD5_HEX}\"")),
            ("b.example", "etag", "\"abc-2\""),
            (
                "b.example",
                "etag",
                "\"d41d8cd98f00b204e9800998ecf8427e-3\"",
            ),
        ] {
            assert_eq!(
                trusted.announced(host, headers(name, value)),
                None,
                "{value}"
            );
        }
    }

    #[test]
    fn bad_specs_are_refused() {
        for spec in [
            "img.example",
            "=etag",
            "a.example=bad header",
            "a=etag,a=etag",
            "*.a=etag",
        ] {
            assert!(HashHeaders::parse(spec).is_err(), "{spec}");
        }
        assert!(HashHeaders::parse("").unwrap().is_empty());
    }
}
