//! Which IP addresses downloads may connect to: its guard against SSRF.
//!
//! A crawl request is partner input, so its URLs may name imgest's own network, loopback, or a cloud
//! metadata service (which hands out credentials). The downloader checks the URL's host if
//! it is an IP literal ([`check_host_literal`]), otherwise every address the name resolves
//! to ([`check_ip`]), and connects only to an address it checked.
//! The rules are listed on [`check_ip`].

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Why an address is not globally reachable unicast (and so, by default, forbidden).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// `0.0.0.0/8` ("this network"), `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918: `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`.
    Private,
    /// Carrier-grade NAT: `100.64.0.0/10`.
    SharedCgnat,
    /// `fc00::/7`.
    UniqueLocal,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// Cloud instance metadata services: `169.254.169.254` (AWS, GCP, Azure and most
    /// others), `fd00:ec2::254` (AWS over IPv6), `100.100.100.200` (Alibaba),
    /// `192.0.0.192` (Oracle).
    CloudMetadata,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15`, `2001:2::/48`.
    Benchmarking,
    /// IETF protocol assignments: `192.0.0.0/24`, `2001::/23` (but Teredo and benchmarking).
    ProtocolAssignments,
    /// Deprecated site-local `fec0::/10`.
    SiteLocal,
    /// Teredo tunnels, `2001::/32`.
    Teredo,
    /// NAT64 local-use prefix `64:ff9b:1::/48`, translated by a local network's own NAT64.
    Nat64LocalUse,
    /// `240.0.0.0/4` (but broadcast), the deprecated 6to4 relay anycast `192.88.99.0/24`,
    /// discard-only `100::/64`, and all IPv6 outside `2000::/3` not named above.
    Reserved,
}

impl AddressClass {
    /// A stable machine-readable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::SharedCgnat => "shared_cgnat",
            Self::UniqueLocal => "unique_local",
            Self::LinkLocal => "link_local",
            Self::CloudMetadata => "cloud_metadata",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::ProtocolAssignments => "protocol_assignments",
            Self::SiteLocal => "site_local",
            Self::Teredo => "teredo",
            Self::Nat64LocalUse => "nat64_local_use",
            Self::Reserved => "reserved",
        }
    }

    /// Whether `allow_private` lifts this class: only loopback and the private networks.
    pub fn allowed_with_private(self) -> bool {
        matches!(
            self,
            Self::Loopback | Self::Private | Self::SharedCgnat | Self::UniqueLocal
        )
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A download would connect to an address it must not reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{ip} is a {class} address, which downloads may not connect to")]
pub struct ForbiddenAddress {
    /// The address as given (for an IPv6 address embedding IPv4, the IPv6 one).
    pub ip: IpAddr,
    /// The class that forbids it (for an embedded IPv4 address, that address's class).
    pub class: AddressClass,
}

impl ForbiddenAddress {
    /// A stable machine-readable name (the API puts it in error bodies).
    pub fn kind(&self) -> &'static str {
        "forbidden_address"
    }
}

/// The class of a not globally reachable address; `None` for a public unicast address.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Whether a download may connect to `ip`.
///
/// Only globally reachable unicast addresses are allowed. `allow_private` (for tests and
/// local runs, whose fixture servers listen on loopback) lifts exactly four classes:
/// [`Loopback`](AddressClass::Loopback), [`Private`](AddressClass::Private) (RFC 1918),
/// [`SharedCgnat`](AddressClass::SharedCgnat) and [`UniqueLocal`](AddressClass::UniqueLocal).
/// Everything else stays forbidden in both modes: above all link-local and cloud metadata
/// (169.254.169.254, AWS's `fd00:ec2::254` and Alibaba's `100.100.100.200`, which sit inside
/// the unique-local and CGNAT ranges `allow_private` lifts), then unspecified, multicast,
/// broadcast, documentation, benchmarking, protocol-assignment and reserved ranges.
///
/// IPv6 addresses that embed an IPv4 address are judged by it: IPv4-mapped `::ffff:a.b.c.d`,
/// IPv4-compatible `::a.b.c.d` (deprecated; all of `::/96` but `::` and `::1`), NAT64
/// `64:ff9b::a.b.c.d` and 6to4 `2002:AABB:CCDD::/48`. Teredo (`2001::/32`, whose embedded
/// server and client addresses can point anywhere) and NAT64 local-use (`64:ff9b:1::/48`)
/// are forbidden outright, as is all IPv6 outside global unicast `2000::/3`.
pub fn check_ip(ip: IpAddr, allow_private: bool) -> Result<(), ForbiddenAddress> {
    match classify(ip) {
        None => Ok(()),
        Some(class) if allow_private && class.allowed_with_private() => Ok(()),
        Some(class) => Err(ForbiddenAddress { ip, class }),
    }
}

/// Checks a URL's host if it is an IP literal and returns that address, or `None` for a
/// domain name, whose resolved addresses the downloader must each pass to [`check_ip`].
pub fn check_host_literal(
    url: &Url,
    allow_private: bool,
) -> Result<Option<IpAddr>, ForbiddenAddress> {
    let ip = match url.host() {
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        // http(s) hosts that are IPv4 literals always parse as such; this catches hosts of
        // other schemes, which `url` leaves opaque.
        Some(Host::Domain(domain)) => match domain.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => return Ok(None),
        },
        None => return Ok(None),
    };
    check_ip(ip, allow_private).map(|()| Some(ip))
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    use AddressClass::*;
    let class = match ip.octets() {
        [0, ..] => Unspecified,
        [255, 255, 255, 255] => Broadcast,
        [127, ..] => Loopback,
        [169, 254, 169, 254] | [100, 100, 100, 200] | [192, 0, 0, 192] => CloudMetadata,
        [169, 254, ..] => LinkLocal,
        [10, ..] | [172, 16..=31, ..] | [192, 168, ..] => Private,
        [100, 64..=127, ..] => SharedCgnat,
        [192, 0, 0, _] => ProtocolAssignments,
        [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => Documentation,
        [198, 18 | 19, ..] => Benchmarking,
        [192, 88, 99, _] => Reserved,
        [224..=239, ..] => Multicast,
        [240..=255, ..] => Reserved,
        _ => return None,
    };
    Some(class)
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    use AddressClass::*;
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    let s = ip.segments();
    let class = match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => Unspecified,
        [0, 0, 0, 0, 0, 0, 0, 1] => Loopback,
        [0x64, 0xff9b, 1, ..] => Nat64LocalUse,
        [0x100, 0, 0, 0, ..] => Reserved,
        [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254] => CloudMetadata,
        [s0, ..] if s0 & 0xfe00 == 0xfc00 => UniqueLocal,
        [s0, ..] if s0 & 0xffc0 == 0xfe80 => LinkLocal,
        [s0, ..] if s0 & 0xffc0 == 0xfec0 => SiteLocal,
        [s0, ..] if s0 & 0xff00 == 0xff00 => Multicast,
        [s0, ..] if s0 & 0xe000 != 0x2000 => Reserved,
        [0x2001, 0, ..] => Teredo,
        [0x2001, 2, 0, ..] => Benchmarking,
        [0x2001, 0xdb8, ..] => Documentation,
        [0x2001, s1, ..] if s1 < 0x200 => ProtocolAssignments,
        [0x3fff, s1, ..] if s1 < 0x1000 => Documentation,
        _ => return None,
    };
    Some(class)
}

/// The IPv4 address an IPv6 address stands for, if it is one of the forms that embed one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let v4 = |hi: u16, lo: u16| Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)));
    match ip.segments() {
        // `::` and `::1` are IPv6's own unspecified and loopback addresses.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        // IPv4-mapped `::ffff:0:0/96` and IPv4-compatible `::/96`.
        [0, 0, 0, 0, 0, 0xffff | 0, hi, lo] => v4(hi, lo),
        // NAT64 well-known prefix `64:ff9b::/96`.
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => v4(hi, lo),
        // 6to4 `2002::/16`: the IPv4 address is bits 16..48.
        [0x2002, hi, lo, ..] => v4(hi, lo),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::AddressClass::*;
    use super::*;

    /// Where an address may be connected to.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Allowed {
        Always,
        WithPrivate,
        Never,
    }
    use Allowed::*;

    const CASES: &[(&str, Option<AddressClass>, Allowed)] = &[
        // IPv4, public.
        ("8.8.8.8", None, Always),
        ("1.1.1.1", None, Always),
        ("93.184.216.34", None, Always),
        ("172.15.255.255", None, Always),
        ("172.32.0.1", None, Always),
        ("100.63.255.255", None, Always),
        ("100.128.0.1", None, Always),
        ("198.20.0.1", None, Always),
        ("223.255.255.255", None, Always),
        ("192.0.3.1", None, Always),
        // IPv4, lifted by allow_private.
        ("127.0.0.1", Some(Loopback), WithPrivate),
        ("127.1.2.3", Some(Loopback), WithPrivate),
        ("10.0.0.1", Some(Private), WithPrivate),
        ("10.255.255.255", Some(Private), WithPrivate),
        ("172.16.0.1", Some(Private), WithPrivate),
        ("172.31.255.254", Some(Private), WithPrivate),
        ("192.168.1.1", Some(Private), WithPrivate),
        ("100.64.0.1", Some(SharedCgnat), WithPrivate),
        ("100.127.255.254", Some(SharedCgnat), WithPrivate),
        // IPv4, never.
        ("0.0.0.0", Some(Unspecified), Never),
        ("0.1.2.3", Some(Unspecified), Never),
        ("169.254.169.254", Some(CloudMetadata), Never),
        ("100.100.100.200", Some(CloudMetadata), Never),
        ("192.0.0.192", Some(CloudMetadata), Never),
        ("169.254.0.1", Some(LinkLocal), Never),
        ("169.254.170.2", Some(LinkLocal), Never),
        ("192.0.0.1", Some(ProtocolAssignments), Never),
        ("192.0.2.1", Some(Documentation), Never),
        ("198.51.100.7", Some(Documentation), Never),
        ("203.0.113.9", Some(Documentation), Never),
        ("198.18.0.1", Some(Benchmarking), Never),
        ("198.19.255.255", Some(Benchmarking), Never),
        ("192.88.99.1", Some(Reserved), Never),
        ("224.0.0.1", Some(Multicast), Never),
        ("239.255.255.250", Some(Multicast), Never),
        ("240.0.0.1", Some(Reserved), Never),
        ("255.255.255.254", Some(Reserved), Never),
        ("255.255.255.255", Some(Broadcast), Never),
        // IPv6, public.
        ("2606:4700:4700::1111", None, Always),
        ("2001:4860:4860::8888", None, Always),
        ("2a00:1450:4001::1", None, Always),
        ("2001:200::1", None, Always),
        ("3fff:1000::1", None, Always),
        // IPv6, lifted by allow_private.
        ("::1", Some(Loopback), WithPrivate),
        ("fd00::1", Some(UniqueLocal), WithPrivate),
        ("fc00::1", Some(UniqueLocal), WithPrivate),
        // IPv6, never.
        ("::", Some(Unspecified), Never),
        ("fe80::1", Some(LinkLocal), Never),
        ("febf:ffff::1", Some(LinkLocal), Never),
        ("fd00:ec2::254", Some(CloudMetadata), Never),
        ("fec0::1", Some(SiteLocal), Never),
        ("ff02::1", Some(Multicast), Never),
        ("ff05::1:3", Some(Multicast), Never),
        ("100::1", Some(Reserved), Never),
        ("4000::1", Some(Reserved), Never),
        ("5f00::1", Some(Reserved), Never),
        ("::ffff:0:7f00:1", Some(Reserved), Never),
        ("2001::1", Some(Teredo), Never),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some(Teredo), Never),
        ("2001:2::1", Some(Benchmarking), Never),
        ("2001:db8::1", Some(Documentation), Never),
        ("3fff::1", Some(Documentation), Never),
        ("2001:10::1", Some(ProtocolAssignments), Never),
        ("64:ff9b:1::1", Some(Nat64LocalUse), Never),
        // IPv6 embedding IPv4: judged by the IPv4 address.
        ("::ffff:127.0.0.1", Some(Loopback), WithPrivate),
        ("::ffff:10.1.2.3", Some(Private), WithPrivate),
        ("::ffff:169.254.169.254", Some(CloudMetadata), Never),
        ("::ffff:0.0.0.0", Some(Unspecified), Never),
        ("::ffff:8.8.8.8", None, Always),
        ("::127.0.0.1", Some(Loopback), WithPrivate),
        ("::2", Some(Unspecified), Never),
        ("::8.8.8.8", None, Always),
        ("64:ff9b::7f00:1", Some(Loopback), WithPrivate),
        ("64:ff9b::a9fe:a9fe", Some(CloudMetadata), Never),
        ("64:ff9b::808:808", None, Always),
        ("2002:7f00:1::", Some(Loopback), WithPrivate),
        ("2002:a9fe:a9fe::1", Some(CloudMetadata), Never),
        ("2002:c0a8:101:5::1", Some(Private), WithPrivate),
        ("2002:808:808::1", None, Always),
    ];

    #[test]
    fn every_address_class_is_allowed_exactly_as_documented_in_both_modes() {
        for &(raw, class, allowed) in CASES {
            let ip: IpAddr = raw.parse().unwrap();
            assert_eq!(classify(ip), class, "class of {raw}");
            let by_default = check_ip(ip, false);
            let with_private = check_ip(ip, true);
            match allowed {
                Always => {
                    assert_eq!(by_default, Ok(()), "{raw} by default");
                    assert_eq!(with_private, Ok(()), "{raw} with private");
                }
                WithPrivate => {
                    let forbidden = ForbiddenAddress {
                        ip,
                        class: class.unwrap(),
                    };
                    assert_eq!(by_default, Err(forbidden), "{raw} by default");
                    assert_eq!(with_private, Ok(()), "{raw} with private");
                }
                Never => {
                    let forbidden = ForbiddenAddress {
                        ip,
                        class: class.unwrap(),
                    };
                    assert_eq!(by_default, Err(forbidden), "{raw} by default");
                    assert_eq!(with_private, Err(forbidden), "{raw} with private");
                }
            }
        }
    }

    #[test]
    fn allow_private_lifts_only_loopback_and_the_private_networks() {
        let lifted: Vec<_> = [
            Unspecified,
            Loopback,
            Private,
            SharedCgnat,
            UniqueLocal,
            LinkLocal,
            CloudMetadata,
            Multicast,
            Broadcast,
            Documentation,
            Benchmarking,
            ProtocolAssignments,
            SiteLocal,
            Teredo,
            Nat64LocalUse,
            Reserved,
        ]
        .into_iter()
        .filter(|c| c.allowed_with_private())
        .collect();
        assert_eq!(lifted, [Loopback, Private, SharedCgnat, UniqueLocal]);
    }

    fn literal(raw: &str, allow_private: bool) -> Result<Option<IpAddr>, ForbiddenAddress> {
        check_host_literal(&Url::parse(raw).unwrap(), allow_private)
    }

    #[test]
    fn loopback_url_literals_in_any_notation_are_allowed_only_with_private() {
        let loopback_v4: IpAddr = "127.0.0.1".parse().unwrap();
        let loopback_mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        for (raw, ip) in [
            ("http://0x7f000001/", loopback_v4),
            ("http://127.1/", loopback_v4),
            ("http://2130706433/a.jpg", loopback_v4),
            ("http://[::ffff:7f00:1]/", loopback_mapped),
        ] {
            let e = literal(raw, false).unwrap_err();
            assert_eq!((e.ip, e.class), (ip, Loopback), "{raw}");
            assert_eq!(literal(raw, true), Ok(Some(ip)), "{raw}");
        }
    }

    #[test]
    fn metadata_url_literals_are_forbidden_in_both_modes() {
        for raw in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[fd00:ec2::254]/",
            "http://[::ffff:169.254.169.254]/",
            "http://0xa9fea9fe/",
        ] {
            for allow_private in [false, true] {
                let e = literal(raw, allow_private).unwrap_err();
                assert_eq!(e.class, CloudMetadata, "{raw}");
            }
        }
    }

    #[test]
    fn public_literals_are_returned_and_domains_left_to_resolution() {
        assert_eq!(
            literal("https://8.8.8.8/a.jpg", false),
            Ok(Some("8.8.8.8".parse().unwrap()))
        );
        assert_eq!(
            literal("https://[2606:4700:4700::1111]/", false),
            Ok(Some("2606:4700:4700::1111".parse().unwrap()))
        );
        assert_eq!(literal("https://img.example.com/a.jpg", false), Ok(None));
        assert_eq!(literal("http://localhost/", false), Ok(None));
        // Hosts of other schemes are opaque to `url`, but still checked if they are IPs.
        assert_eq!(
            literal("foo://127.0.0.1/", false).map_err(|e| e.class),
            Err(Loopback)
        );
    }

    #[test]
    fn a_forbidden_address_names_the_ip_and_class() {
        let e = check_ip("::ffff:169.254.169.254".parse().unwrap(), true).unwrap_err();
        assert_eq!(e.kind(), "forbidden_address");
        assert_eq!(
            e.to_string(),
            "::ffff:169.254.169.254 is a cloud_metadata address, which downloads may not \
             connect to"
        );
    }
}
