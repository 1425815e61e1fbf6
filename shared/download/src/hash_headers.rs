//! Hosts trusted to name a body's MD5 in a response header (`IMGEST_HASH_HEADERS`): the
//! standard `Content-MD5` (base64 of the digest) or a header such as an object store's ETag
//! (the digest in hex, quoted or not). A response that names an image imgest already has is
//! settled from its headers and its body is never read: a re-hosted or re-named photo costs a
//! request, not a download. Only hosts listed are believed: a header is a claim, and a wrong
//! claim would link another photo. Such a hit is the one dedup hit not checked against the
//! stored image's SHA-256 (there is no body to hash): list only hosts whose headers you trust
//! as you would their photos.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use reqwest::header::{HeaderMap, HeaderName};

use imgest_core::domain::ImageId;

/// Per host (exact, lowercase), the header that carries the body's MD5.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HashHeaders {
    by_host: HashMap<String, HeaderName>,
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
            let header = HeaderName::from_bytes(header.trim().to_ascii_lowercase().as_bytes())
                .map_err(|_| format!("{:?} is not a header name", header.trim()))?;
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
    pub fn announced(&self, host: &str, headers: &HeaderMap) -> Option<ImageId> {
        let name = self.by_host.get(&host.to_ascii_lowercase())?;
        let value = headers.get(name)?.to_str().ok()?.trim();
        if name.as_str() == "content-md5" {
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

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    const MD5_HEX: &str = "9e107d9d372bb6826bd81d3542a419d6";
    const MD5_BASE64: &str = "nhB9nTcrtoJr2B01QqQZ1g==";

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn content_md5_and_hex_etags_name_the_image_of_trusted_hosts_only() {
        let trusted = HashHeaders::parse("img.example=Content-MD5, cdn.example=etag").unwrap();
        let id = ImageId::parse(MD5_HEX).unwrap();
        let md5 = headers("content-md5", MD5_BASE64);
        assert_eq!(trusted.announced("IMG.example", &md5), Some(id.clone()));
        let etag = headers("etag", &format!("\"{}\"", MD5_HEX.to_uppercase()));
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
                trusted.announced(host, &headers(name, value)),
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
