//! Photo URL identity: [`NormalizedUrl`] (a photo URL's dedup key) and [`UrlHash`] (its MD5).
//!
//! Partners list the same photo under URLs that differ in ways that do not change the photo.
//! Normalisation removes those differences, so all of them get one [`key`](NormalizedUrl::key)
//! and one [`UrlHash`], while different paths or parameter values stay different: a wrong
//! merge would attach another photo to an offer, a missed merge only costs a download.
//! The rules are listed on [`NormalizedUrl`].

use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};
use url::{Host, Position, Url, form_urlencoded};

/// Why a photo URL (or a url hash) was not accepted; all of them are the partner's input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("URL is {len} bytes, the limit is {max}: {input:?}")]
    TooLong {
        len: usize,
        max: usize,
        input: String,
    },
    #[error("not a valid URL ({reason}): {input:?}")]
    Parse {
        reason: url::ParseError,
        input: String,
    },
    #[error("only http and https URLs can be downloaded, got scheme {scheme:?}: {input:?}")]
    Scheme { scheme: String, input: String },
    #[error("URL has no host: {0:?}")]
    NoHost(String),
    /// The quoted URL has its credentials removed: error messages end up in logs.
    #[error("URLs with credentials (user:password@) are not accepted: {0:?}")]
    Credentials(String),
    /// `a..b`, `.a`, `a..`: no DNS name has an empty label, and only one trailing dot is
    /// dropped, so such a host would normalise differently each time.
    #[error("URL host has an empty label: {0:?}")]
    EmptyLabel(String),
    #[error("host rewrite {from:?} -> {to:?} does not give a valid host")]
    HostRewrite { from: String, to: String },
    #[error("url hash must be 32 lowercase hex characters (the MD5 of a URL key), got {0:?}")]
    Hash(String),
}

impl UrlError {
    /// A stable machine-readable name (the API puts it in error bodies).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TooLong { .. }
            | Self::Parse { .. }
            | Self::Scheme { .. }
            | Self::NoHost(_)
            | Self::Credentials(_)
            | Self::EmptyLabel(_)
            | Self::HostRewrite { .. }
            | Self::Hash(_) => "invalid_url",
        }
    }
}

/// Configured additions to the built-in normalisation; the default adds nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NormalizationRules {
    /// Query parameters to remove besides the built-in tracking ones: exact (decoded) names,
    /// compared ASCII case-insensitively.
    pub extra_tracking_params: Vec<String>,
    /// `(from, to)`: a URL whose host is exactly `from` (compared after lowercasing and
    /// dropping a trailing dot) gets the host `to`, e.g. the mirrors of a CDN
    /// (`img2.cdn.example` → `img.cdn.example`). The first match applies, once.
    pub host_rewrites: Vec<(String, String)>,
}

/// Query parameters that only say where a click came from, never which photo.
const TRACKING_PARAMS: [&str; 4] = ["fbclid", "gclid", "yclid", "_openstat"];

/// A photo URL of a crawl request, parsed and normalised.
///
/// The rules, in order:
///
/// - Parsing is WHATWG's (the `url` crate): the host is lowercased, IDN hosts become punycode,
///   IPv4 literals in any notation (`0x7f.1`, `2130706433`) become dotted quads, dot segments
///   in the path are resolved. Only `http` and `https`, with a host, no credentials
///   (`user:pass@` leaks a secret and is an SSRF trick), at most [`MAX_LEN`](Self::MAX_LEN)
///   bytes before and after normalisation.
/// - Scheme: the key has none (`//host/path?query`), so `http` and `https` URLs of a photo
///   share it; the [`fetch_url`](Self::fetch_url) keeps the partner's scheme.
/// - Port: only the default port of the URL's own scheme is dropped (`https://h:443/` is
///   `https://h/` is `http://h/`), but `http://h:443/` keeps its port and its own key: plain
///   HTTP on 443 is a different server from TLS on 443.
/// - Host: one trailing dot is dropped (`example.com.` is `example.com`), then the first
///   [host rewrite](NormalizationRules::host_rewrites) whose `from` is the host applies. A
///   host with an empty label (`a..b`, `.a`, `a..`) is refused.
/// - The fragment is dropped (it never reaches the server).
/// - Query: tracking parameters are removed (`utm_*`, `fbclid`, `gclid`, `yclid`,
///   `_openstat` and [configured ones](NormalizationRules::extra_tracking_params), names
///   compared ASCII case-insensitively), the rest are sorted by name, then value, and
///   re-encoded as canonical `application/x-www-form-urlencoded` (`%20` and `+` are both
///   `+`, `%7e` is `%7E`); an empty query leaves no `?`. Names and values are decoded to
///   bytes, not text, so distinct non-UTF-8 escapes (`%FE`, `%FF`) stay distinct, and a bare
///   name (`?v2`) stays bare rather than gaining an `=`.
/// - The path is kept as parsed: never lowercased, its escapes left as they are.
///
/// The fetch URL is normalised the same way, scheme aside: the downloader requests exactly
/// the URL whose key it recorded. A CDN that signs the query string exactly as sent would
/// reject the reordered one; such a partner would need the fetch URL to keep its query.
///
/// Two values are equal when their keys are: they name the same photo, even when one would
/// be fetched over `http` and the other over `https`.
#[derive(Debug, Clone)]
pub struct NormalizedUrl {
    fetch: Url,
    key: String,
}

impl NormalizedUrl {
    /// The longest URL accepted, in bytes, both as sent and once normalised.
    pub const MAX_LEN: usize = 2048;

    pub fn parse(raw: &str, rules: &NormalizationRules) -> Result<Self, UrlError> {
        if raw.len() > Self::MAX_LEN {
            return Err(UrlError::TooLong {
                len: raw.len(),
                max: Self::MAX_LEN,
                input: truncate(raw),
            });
        }
        let mut url = Url::parse(raw).map_err(|reason| UrlError::Parse {
            reason,
            input: truncate(raw),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(UrlError::Scheme {
                scheme: truncate(url.scheme()),
                input: shown(&url),
            });
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlError::Credentials(shown(&url)));
        }
        if let Some(host) = normalised_host(&url, rules)? {
            url.set_host(Some(&host))
                .map_err(|reason| UrlError::Parse {
                    reason,
                    input: shown(&url),
                })?;
        }
        url.set_fragment(None);
        let query = url
            .query()
            .map(|q| normalised_query(q, rules))
            .filter(|q| !q.is_empty());
        url.set_query(query.as_deref());

        if url.as_str().len() > Self::MAX_LEN {
            return Err(UrlError::TooLong {
                len: url.as_str().len(),
                max: Self::MAX_LEN,
                input: shown(&url),
            });
        }
        // http(s) URLs always serialise as `scheme://host[:port]/path[?query]`, and this one
        // has neither credentials nor a fragment.
        let key = format!("//{}", &url[Position::BeforeHost..Position::AfterQuery]);
        Ok(Self { fetch: url, key })
    }

    /// The URL to download: the partner's scheme, normalised otherwise.
    pub fn fetch_url(&self) -> &Url {
        &self.fetch
    }

    /// The dedup key: the normalised URL without its scheme, e.g. `//host/path?query`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The MD5 of [`key`](Self::key).
    pub fn hash(&self) -> UrlHash {
        UrlHash::of_key(&self.key)
    }
}

impl PartialEq for NormalizedUrl {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for NormalizedUrl {}

impl Hash for NormalizedUrl {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

impl fmt::Display for NormalizedUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.fetch.as_str())
    }
}

/// The host the URL should have, if it is not the one it has: a domain's trailing dot
/// dropped, then the first matching rewrite applied.
fn normalised_host(url: &Url, rules: &NormalizationRules) -> Result<Option<String>, UrlError> {
    let host = match url.host() {
        Some(Host::Domain(domain)) => domain,
        Some(Host::Ipv4(_) | Host::Ipv6(_)) => return Ok(None),
        None => return Err(UrlError::NoHost(shown(url))),
    };
    let trimmed = host.strip_suffix('.').filter(|h| !h.is_empty());
    let host = trimmed.unwrap_or(host);
    if host.split('.').any(str::is_empty) {
        return Err(UrlError::EmptyLabel(shown(url)));
    }
    let rewrite = rules
        .host_rewrites
        .iter()
        .find(|(from, _)| host.eq_ignore_ascii_case(from.strip_suffix('.').unwrap_or(from)));
    match rewrite {
        Some((from, to)) => {
            // `set_host` would quietly cut a port or path off `to`; such a rule is a mistake.
            let bracketed = to.starts_with('[') && to.ends_with(']');
            let stray = to.contains(['/', '?', '#', '@', '\\']) || (to.contains(':') && !bracketed);
            // The target is a host like any other: one trailing dot dropped, so that the URL
            // it makes normalises to itself again.
            let target = to.strip_suffix('.').filter(|h| !h.is_empty()).unwrap_or(to);
            // Check the rewrite on a copy so the error can name the rule, not the URL.
            let mut probe = url.clone();
            match probe.set_host(Some(target)) {
                Ok(()) if !stray && probe.host_str().is_some_and(|h| !h.is_empty()) => {
                    Ok(Some(target.to_owned()))
                }
                _ => Err(UrlError::HostRewrite {
                    from: truncate(from),
                    to: truncate(to),
                }),
            }
        }
        None => Ok(trimmed.map(str::to_owned)),
    }
}

/// The query without tracking parameters, sorted and canonically encoded ("" if none remain).
fn normalised_query(query: &str, rules: &NormalizationRules) -> String {
    let mut params: Vec<(Vec<u8>, Option<Vec<u8>>)> = query
        .split('&')
        .filter(|param| !param.is_empty())
        .map(|param| match param.split_once('=') {
            Some((name, value)) => (form_decode(name), Some(form_decode(value))),
            None => (form_decode(param), None),
        })
        .filter(|(name, _)| !is_tracking(name, rules))
        .collect();
    // Stable, and a bare name sorts before the same name with a value.
    params.sort();

    let mut out = String::with_capacity(query.len());
    for (name, value) in &params {
        if !out.is_empty() {
            out.push('&');
        }
        out.extend(form_urlencoded::byte_serialize(name));
        if let Some(value) = value {
            out.push('=');
            out.extend(form_urlencoded::byte_serialize(value));
        }
    }
    out
}

fn is_tracking(name: &[u8], rules: &NormalizationRules) -> bool {
    name.get(..4)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"utm_"))
        || TRACKING_PARAMS
            .iter()
            .any(|param| name.eq_ignore_ascii_case(param.as_bytes()))
        || rules
            .extra_tracking_params
            .iter()
            .any(|param| name.eq_ignore_ascii_case(param.as_bytes()))
}

/// Decodes one form-urlencoded name or value to bytes: `+` is a space, `%XX` a byte, and a
/// `%` not followed by two hex digits stays itself (as `form_urlencoded::parse` does, minus
/// its lossy UTF-8 step).
fn form_decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = bytes.get(i).and_then(|&h| hex_value(h));
                let lo = bytes.get(i + 1).and_then(|&l| hex_value(l));
                match (hi, lo) {
                    (Some(hi), Some(lo)) => {
                        out.push((hi << 4) | lo);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            _ => out.push(b),
        }
    }
    out
}

fn hex_value(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Lowercase hex MD5 of a [`NormalizedUrl::key`]: the same photo URL always gets the same hash.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UrlHash(String);

impl UrlHash {
    pub fn parse(s: &str) -> Result<Self, UrlError> {
        let ok = s.len() == 32
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(UrlError::Hash(truncate(s)))
        }
    }

    fn of_key(key: &str) -> Self {
        use md5::{Digest, Md5};
        Self(hex::encode(Md5::digest(key.as_bytes())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for UrlHash {
    type Error = UrlError;
    fn try_from(s: String) -> Result<Self, UrlError> {
        Self::parse(&s)
    }
}

impl From<UrlHash> for String {
    fn from(v: UrlHash) -> String {
        v.0
    }
}

impl fmt::Display for UrlHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a URL a partner sent may be stored and shown back (crawl records, results): never with
/// credentials (`user:pass@`, parsed or not), at most [`NormalizedUrl::MAX_LEN`] bytes.
pub fn redacted(raw: &str) -> String {
    let clean = match Url::parse(raw) {
        Ok(url) if !url.username().is_empty() || url.password().is_some() => {
            let mut clean = url.clone();
            if clean.set_username("").is_ok() && clean.set_password(None).is_ok() {
                clean.to_string()
            } else {
                without_userinfo(raw)
            }
        }
        _ => without_userinfo(raw),
    };
    let mut end = clean.len().min(NormalizedUrl::MAX_LEN);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    clean[..end].to_owned()
}

/// How a URL appears in logs: [`redacted`], and without its query string or fragment, which
/// may carry signatures or tokens.
pub fn loggable(raw: &str) -> String {
    let mut clean = redacted(raw);
    if let Some(end) = clean.find(['?', '#']) {
        clean.truncate(end);
    }
    clean
}

/// `raw` with anything that looks like userinfo (`…@` in the authority) cut out, for text that
/// does not parse as a URL.
///
/// The authority is taken where a URL parser could see one, generously: after the first `:`
/// (the scheme's) and any mix of slashes, backslashes, tabs and newlines (`http:u:p@h`,
/// `http:/\\u:p@h` and `ht\ttp:/\n/u:p@h` all have credentials for WHATWG), up to the next `/`,
/// `?` or `#` (not at a backslash, which ends it only for special schemes). A later `://`, in
/// the path or the query, is not where the authority starts. What follows a cut can make a new
/// authority (`x:/a@/b@c` becomes `x://b@c`), so cuts go on until none is left.
fn without_userinfo(raw: &str) -> String {
    let mut text = raw.to_owned();
    // Each cut removes an `@`: this ends.
    while let Some(cut) = cut_userinfo(&text) {
        text = cut;
    }
    text
}

/// `raw` without its first userinfo-like part (see [`without_userinfo`]), if it has one.
fn cut_userinfo(raw: &str) -> Option<String> {
    let Some(colon) = raw.find(':') else {
        // No scheme: an `@` anywhere may still be a secret's end.
        return raw.rfind('@').map(|at| format!("…{}", &raw[at + 1..]));
    };
    let after_scheme = &raw[colon + 1..];
    let rest = after_scheme.trim_start_matches(['/', '\\', '\t', '\n', '\r']);
    let authority_start = raw.len() - rest.len();
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    Some(format!("{}{}", &raw[..authority_start], &rest[at + 1..]))
}

/// A parsed URL as error messages may quote it: truncated, and never with its credentials.
fn shown(url: &Url) -> String {
    if url.username().is_empty() && url.password().is_none() {
        return truncate(url.as_str());
    }
    let mut clean = url.clone();
    if clean.set_username("").is_ok() && clean.set_password(None).is_ok() {
        truncate(clean.as_str())
    } else {
        "<a URL with credentials>".to_owned()
    }
}

/// Error messages quote the bad input, but never more than a screenful of it, and never what
/// looks like credentials.
fn truncate(s: &str) -> String {
    without_userinfo(s).chars().take(140).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_download_address_normalises_to_its_own_key_again() {
        // A fetch task's hash is checked by normalising its URL again: the fetch URL must be a
        // fixed point of the normalisation, rewrites and stripped parameters included.
        let rules = NormalizationRules {
            extra_tracking_params: vec!["sid".into()],
            host_rewrites: vec![
                ("img2.cdn.example".into(), "IMG.cdn.example.".into()),
                ("mirror.example".into(), "[::1]".into()),
            ],
        };
        for raw in [
            "https://img2.cdn.example/a.jpg?b=2&a=1&utm_source=x&sid=9",
            "http://IMG2.CDN.EXAMPLE.:80/x/../a%7e.jpg?v2#frag",
            "https://mirror.example:8443/p.jpg?%FE=%FF&+=%20",
            "http://h:443/a.jpg",
            "https://xn--bcher-kva.example/a.jpg?q=caf%C3%A9",
            "http://0x7f.1/a.jpg",
        ] {
            let url = NormalizedUrl::parse(raw, &rules).unwrap();
            let again = NormalizedUrl::parse(url.fetch_url().as_str(), &rules).unwrap();
            assert_eq!(again.key(), url.key(), "{raw}");
            assert_eq!(again.hash(), url.hash(), "{raw}");
        }
    }

    #[test]
    fn logged_urls_carry_no_credentials_query_or_fragment() {
        assert_eq!(
            loggable("https://user:secret@img.example/a.jpg?sig=abc&exp=1#frag"),
            "https://img.example/a.jpg"
        );
        assert_eq!(
            loggable("https://img.example/a.jpg#x"),
            "https://img.example/a.jpg"
        );
        assert_eq!(
            loggable("https://img.example/a.jpg"),
            "https://img.example/a.jpg"
        );
        let shown = loggable("not a url?token=secret");
        assert!(!shown.contains("secret"), "{shown}");
    }

    #[test]
    fn stored_urls_carry_no_credentials_and_have_a_length_cap() {
        assert_eq!(
            redacted("https://user:secret@img.example/a.jpg?x=1"),
            "https://img.example/a.jpg?x=1"
        );
        for raw in [
            "http://user:secret@[not a url/a.jpg",
            "https://user:secret@img.example:99999/a.jpg",
            "user:secret@img.example/a.jpg",
        ] {
            let shown = redacted(raw);
            assert!(!shown.contains("secret"), "{raw} -> {shown}");
            let error = NormalizedUrl::parse(raw, &NormalizationRules::default())
                .unwrap_err()
                .to_string();
            assert!(!error.contains("secret"), "{raw} -> {error}");
        }
        assert_eq!(
            redacted("https://img.example/a@b.jpg"),
            "https://img.example/a@b.jpg"
        );
        let long = format!("https://img.example/{}", "é".repeat(3000));
        let shown = redacted(&long);
        assert!(shown.len() <= NormalizedUrl::MAX_LEN && shown.starts_with("https://img.example/"));
    }

    #[test]
    fn credentials_are_cut_where_a_url_parser_would_read_them_even_when_it_fails() {
        // Found by fuzzing (fuzz/fuzz_targets/url.rs): `http:s3cr3t@://` does not parse, and
        // the authority was looked for after its `://`, past the credentials.
        for raw in [
            "http:s3cr3t@://",
            "http:/s3cr3t@\0\0\0p://[0:0:0:0:0:F\u{1}\0\0\0\0\0\0\u{8}8:1p:/\0\0\0\0\0\0\0\u{15}\0\0\0\u{15}lexaa",
            "http:\\\\user:s3cr3t@img.example:99999/a://b",
            "http:/\\user:s3cr3t@img.example:99999/a.jpg",
            "ht\ttp:/\n/user:s3cr3t@img.example:99999/a.jpg",
            "foo://x\\user:s3cr3t@[::1/",
        ] {
            let shown = redacted(raw);
            assert!(!shown.contains("s3cr3t"), "{raw:?} -> {shown:?}");
            let error = NormalizedUrl::parse(raw, &NormalizationRules::default())
                .unwrap_err()
                .to_string();
            assert!(!error.contains("s3cr3t"), "{raw:?} -> {error}");
        }
        // Credentials in a URL over the length cap, whose error quotes the raw text.
        let long = format!("http:\\\\user:s3cr3t@img.example/{}://b", "a".repeat(3000));
        let error = NormalizedUrl::parse(&long, &NormalizationRules::default()).unwrap_err();
        assert!(matches!(error, UrlError::TooLong { .. }), "{error:?}");
        assert!(!error.to_string().contains("s3cr3t"), "{error}");
        // A cut that makes a new authority: `hh.example4:/` + `/br2@…`.
        let shown = redacted("hh.example4:/%FFs3cr3t@/br2@%h.example/a.jhpt");
        assert_eq!(shown, "hh.example4://%h.example/a.jhpt");
        // What is not in an authority stays.
        assert_eq!(
            redacted("https://img.example:99999/a@b.jpg?x=a://b@c"),
            "https://img.example:99999/a@b.jpg?x=a://b@c"
        );
    }

    fn key(raw: &str) -> String {
        key_with(raw, &NormalizationRules::default())
    }

    fn key_with(raw: &str, rules: &NormalizationRules) -> String {
        match NormalizedUrl::parse(raw, rules) {
            Ok(url) => url.key().to_owned(),
            Err(e) => panic!("{raw:?} should parse: {e}"),
        }
    }

    fn error(raw: &str) -> UrlError {
        match NormalizedUrl::parse(raw, &NormalizationRules::default()) {
            Ok(url) => panic!("{raw:?} should be rejected, got {url}"),
            Err(e) => e,
        }
    }

    #[test]
    fn http_and_https_share_the_key_but_keep_their_scheme_for_fetching() {
        let rules = NormalizationRules::default();
        let http = NormalizedUrl::parse("http://img.example.com/a.jpg", &rules).unwrap();
        let https = NormalizedUrl::parse("https://img.example.com/a.jpg", &rules).unwrap();
        assert_eq!(http.key(), "//img.example.com/a.jpg");
        assert_eq!(http.key(), https.key());
        assert_eq!(http.hash(), https.hash());
        assert_eq!(http, https);
        assert_eq!(http.fetch_url().as_str(), "http://img.example.com/a.jpg");
        assert_eq!(https.fetch_url().as_str(), "https://img.example.com/a.jpg");
    }

    #[test]
    fn host_case_does_not_change_the_key() {
        assert_eq!(
            key("HTTP://IMG.Example.COM/a.jpg"),
            "//img.example.com/a.jpg"
        );
    }

    #[test]
    fn only_the_default_port_of_the_urls_own_scheme_is_dropped() {
        assert_eq!(key("http://h.example:80/a"), "//h.example/a");
        assert_eq!(key("https://h.example:443/a"), "//h.example/a");
        assert_eq!(key("http://h.example:443/a"), "//h.example:443/a");
        assert_eq!(key("https://h.example:80/a"), "//h.example:80/a");
        assert_eq!(key("http://h.example:8080/a"), "//h.example:8080/a");
    }

    #[test]
    fn fragments_are_dropped() {
        let url = NormalizedUrl::parse("https://h.example/a.jpg?x=1#top", &Default::default());
        let url = url.unwrap();
        assert_eq!(url.key(), "//h.example/a.jpg?x=1");
        assert_eq!(url.fetch_url().as_str(), "https://h.example/a.jpg?x=1");
        assert_eq!(key("https://h.example/a.jpg#"), "//h.example/a.jpg");
    }

    #[test]
    fn tracking_parameters_are_removed_in_any_case() {
        let rules = NormalizationRules {
            extra_tracking_params: vec!["Ref".to_owned()],
            ..Default::default()
        };
        let raw = "https://h.example/a.jpg?utm_source=x&UTM_Medium=y&utm_=z&fbclid=1&GCLID=2\
                   &yclid=3&_openstat=4&ref=5&id=7&utmost=8&referrer=9";
        assert_eq!(
            key_with(raw, &rules),
            "//h.example/a.jpg?id=7&referrer=9&utmost=8"
        );
        assert_eq!(
            key("https://h.example/a.jpg?ref=5"),
            "//h.example/a.jpg?ref=5"
        );
    }

    #[test]
    fn query_parameters_are_sorted_by_name_then_value() {
        assert_eq!(
            key("http://h.example/a?b=2&a=2&b=1&a=1"),
            "//h.example/a?a=1&a=2&b=1&b=2"
        );
        assert_eq!(
            key("http://h.example/a?b=1&a=2"),
            key("http://h.example/a?a=2&b=1")
        );
    }

    #[test]
    fn an_empty_query_leaves_no_question_mark() {
        assert_eq!(key("http://h.example/a?"), "//h.example/a");
        assert_eq!(key("http://h.example/a?&&"), "//h.example/a");
        assert_eq!(key("http://h.example/a?utm_source=feed"), "//h.example/a");
    }

    #[test]
    fn parameters_are_encoded_canonically_without_losing_bytes() {
        assert_eq!(key("http://h.example/a?q=b%20c"), "//h.example/a?q=b+c");
        assert_eq!(key("http://h.example/a?q=b+c"), "//h.example/a?q=b+c");
        assert_eq!(
            key("http://h.example/a?q=%7e"),
            key("http://h.example/a?q=~")
        );
        assert_eq!(key("http://h.example/a?q=a%2Bb"), "//h.example/a?q=a%2Bb");
        assert_eq!(key("http://h.example/a?q=%FF"), "//h.example/a?q=%FF");
        assert_ne!(
            key("http://h.example/a?q=%FF"),
            key("http://h.example/a?q=%FE")
        );
        assert_eq!(key("http://h.example/a?q=100%"), "//h.example/a?q=100%25");
        assert_eq!(
            key("http://h.example/a?q=фото"),
            "//h.example/a?q=%D1%84%D0%BE%D1%82%D0%BE"
        );
    }

    #[test]
    fn a_bare_parameter_name_gains_no_equals_sign() {
        assert_eq!(key("http://h.example/a.jpg?v2"), "//h.example/a.jpg?v2");
        assert_eq!(key("http://h.example/a.jpg?b=&a"), "//h.example/a.jpg?a&b=");
    }

    #[test]
    fn different_paths_or_values_have_different_keys() {
        assert_ne!(key("http://h.example/a.jpg"), key("http://h.example/b.jpg"));
        assert_ne!(key("http://h.example/A.jpg"), key("http://h.example/a.jpg"));
        assert_ne!(
            key("http://h.example/a?id=1"),
            key("http://h.example/a?id=2")
        );
        assert_ne!(
            key("http://h.example/a?id=1"),
            key("http://h.example/a?ID=1")
        );
        assert_ne!(key("http://h.example/a"), key("http://g.example/a"));
        assert_eq!(
            key("http://h.example/x/../a/./b.jpg"),
            "//h.example/a/b.jpg"
        );
    }

    #[test]
    fn ipv4_literals_in_any_notation_become_dotted_quads() {
        for raw in [
            "http://0x7f.1/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://127.0.0.1./",
        ] {
            assert_eq!(key(raw), "//127.0.0.1/", "{raw}");
        }
        assert_eq!(key("http://[0:0:0:0:0:FFFF:7F00:1]/"), "//[::ffff:7f00:1]/");
    }

    #[test]
    fn credentials_are_rejected_without_being_quoted() {
        for raw in [
            "http://alice:hunter2@h.example/a.jpg",
            "https://alice@h.example/a.jpg",
            "https://:hunter2@h.example/a.jpg",
        ] {
            let e = error(raw);
            assert!(matches!(e, UrlError::Credentials(_)), "{raw}: {e:?}");
            assert_eq!(e.kind(), "invalid_url");
            let message = e.to_string();
            assert!(!message.contains("hunter2"), "{message}");
            assert!(!message.contains("alice"), "{message}");
            assert!(message.contains("h.example/a.jpg"), "{message}");
        }
    }

    #[test]
    fn only_http_and_https_are_accepted() {
        for raw in [
            "ftp://h.example/a.jpg",
            "file:///etc/passwd",
            "data:image/png;base64,AAAA",
            "javascript:alert(1)",
            "gopher://h.example/",
            "ws://h.example/",
        ] {
            let e = error(raw);
            assert!(matches!(e, UrlError::Scheme { .. }), "{raw}: {e:?}");
            assert_eq!(e.kind(), "invalid_url");
        }
    }

    #[test]
    fn malformed_urls_are_invalid() {
        for raw in [
            "",
            "img.example.com/a.jpg",
            "http://",
            "http://[::1/",
            "http://a b/",
        ] {
            let e = error(raw);
            assert!(matches!(e, UrlError::Parse { .. }), "{raw}: {e:?}");
            assert_eq!(e.kind(), "invalid_url");
        }
    }

    #[test]
    fn idn_hosts_become_punycode() {
        assert_eq!(
            key("http://пример.рф/фото.jpg"),
            key("http://xn--e1afmkfd.xn--p1ai/фото.jpg")
        );
        assert_eq!(key("https://Bücher.example/a"), "//xn--bcher-kva.example/a");
    }

    #[test]
    fn urls_over_2048_bytes_are_rejected() {
        let long = format!("http://h.example/{}", "a".repeat(3000));
        let e = error(&long);
        assert!(matches!(e, UrlError::TooLong { len: 3017, .. }), "{e:?}");
        assert!(e.to_string().len() < 400);
        let fits = format!("http://h.example/{}", "a".repeat(2048 - 17));
        assert!(NormalizedUrl::parse(&fits, &Default::default()).is_ok());
        // Escaping can grow a URL past the limit: 1000 `é`s are 6000 bytes once escaped.
        let grows = format!("http://h.example/{}", "é".repeat(1000));
        assert!(matches!(error(&grows), UrlError::TooLong { .. }));
    }

    #[test]
    fn host_rewrites_apply_after_lowercasing() {
        let rules = NormalizationRules {
            host_rewrites: vec![
                ("img2.cdn.example".to_owned(), "img.cdn.example".to_owned()),
                ("img3.cdn.example".to_owned(), "img.cdn.example".to_owned()),
            ],
            ..Default::default()
        };
        let url = NormalizedUrl::parse("https://IMG2.cdn.example:8443/a.jpg", &rules).unwrap();
        assert_eq!(url.key(), "//img.cdn.example:8443/a.jpg");
        assert_eq!(
            url.fetch_url().as_str(),
            "https://img.cdn.example:8443/a.jpg"
        );
        assert_eq!(
            key_with("http://img3.cdn.example/a.jpg", &rules),
            key_with("http://img.cdn.example/a.jpg", &rules)
        );
        assert_eq!(
            key_with("http://x.img2.cdn.example/a.jpg", &rules),
            "//x.img2.cdn.example/a.jpg"
        );
    }

    #[test]
    fn an_invalid_host_rewrite_is_an_error_naming_the_rule() {
        let rules = NormalizationRules {
            host_rewrites: vec![("a.example".to_owned(), String::new())],
            ..Default::default()
        };
        let e = NormalizedUrl::parse("http://a.example/x", &rules).unwrap_err();
        assert!(matches!(e, UrlError::HostRewrite { .. }), "{e:?}");
        for to in ["b.example:8080", "b.example/x", "a b", "u@b.example"] {
            let rules = NormalizationRules {
                host_rewrites: vec![("a.example".to_owned(), to.to_owned())],
                ..Default::default()
            };
            let e = NormalizedUrl::parse("http://a.example/x", &rules).unwrap_err();
            assert!(matches!(e, UrlError::HostRewrite { .. }), "{to}: {e:?}");
        }
        let rules = NormalizationRules {
            host_rewrites: vec![("a.example".to_owned(), "[::1]".to_owned())],
            ..Default::default()
        };
        assert_eq!(key_with("http://a.example/x", &rules), "//[::1]/x");
    }

    #[test]
    fn a_trailing_dot_in_the_host_is_dropped() {
        assert_eq!(key("http://h.example./a"), key("http://h.example/a"));
    }

    #[test]
    fn a_host_with_an_empty_label_is_refused() {
        for raw in ["http://./a", "http://a..b/x", "http://.a/x", "http://a../x"] {
            let e = NormalizedUrl::parse(raw, &Default::default()).unwrap_err();
            assert!(matches!(e, UrlError::EmptyLabel(_)), "{raw}: {e:?}");
            assert_eq!(e.kind(), "invalid_url");
        }
    }

    #[test]
    fn the_hash_is_the_md5_of_the_key() {
        let url = NormalizedUrl::parse(
            "HTTPS://img.example.com:443/photos/1.jpg?b=2&utm_source=feed&a=1#x",
            &Default::default(),
        )
        .unwrap();
        assert_eq!(url.key(), "//img.example.com/photos/1.jpg?a=1&b=2");
        assert_eq!(url.hash().as_str(), "0ba126ab4f7ad0a8f558c4f923a37fec");
    }

    #[test]
    fn url_hashes_parse_and_round_trip_through_serde() {
        let hash = UrlHash::parse("0ba126ab4f7ad0a8f558c4f923a37fec").unwrap();
        let json = serde_json::to_string(&hash).unwrap();
        assert_eq!(json, "\"0ba126ab4f7ad0a8f558c4f923a37fec\"");
        assert_eq!(serde_json::from_str::<UrlHash>(&json).unwrap(), hash);
        assert_eq!(hash.to_string(), hash.as_str());
        for bad in [
            "",
            "0BA126AB4F7AD0A8F558C4F923A37FEC",
            "0ba126ab",
            "0ba126ab4f7ad0a8f558c4f923a37feg",
        ] {
            let e = UrlHash::parse(bad).unwrap_err();
            assert_eq!(e.kind(), "invalid_url");
        }
        assert!(serde_json::from_str::<UrlHash>("\"nope\"").is_err());
    }
}
