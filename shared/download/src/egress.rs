//! Where downloads may go, besides the address guard: which ports ([`AllowedPorts`],
//! `IMGEST_FETCH_PORTS`) and, per client, which hosts ([`HostAllowlist`],
//! `IMGEST_CLIENT_HOSTS`). Both are checked on the first URL and on every redirect hop, before
//! anything connects.

use std::fmt;

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

#[cfg(test)]
mod tests {
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
