//! Foundations for the feed downloader (partners send feeds of photo URLs; imgest fetches them).
//!
//! Not wired into any flow yet; these are the pieces the downloader will be built on:
//!
//! - [`NormalizedUrl`]: a feed URL parsed once at the edge and normalised, so that two URLs
//!   of the same photo have the same [`key`](NormalizedUrl::key) (the dedup key) and
//!   [`UrlHash`]; [`fetch_url`](NormalizedUrl::fetch_url) is what the downloader requests.
//! - [`check_ip`] and [`check_host_literal`]: which addresses a download may connect to, so a
//!   feed cannot point imgest at its own network, loopback or a cloud metadata service (SSRF).
//!   The downloader checks the URL's host literal, then every address a domain resolves to,
//!   and connects only to an address it checked (never resolving a second time).

mod address_guard;
mod url;

pub use self::address_guard::{
    AddressClass, ForbiddenAddress, check_host_literal, check_ip, classify,
};
pub use self::url::{NormalizationRules, NormalizedUrl, UrlError, UrlHash};
