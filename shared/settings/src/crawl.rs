//! The crawl flows' settings (`IMGEST_URL_TTL`, `IMGEST_FETCH_*`, `IMGEST_RETRY_*`,
//! `IMGEST_CLIENT_RPM*`, …), parsed with the rest of [`Settings`](super::Settings).

use std::collections::HashMap;
use std::time::Duration;

use super::SettingsError;
use super::parse::Vars;
use super::senders::{QueueSenders, SendersList};
use imgest_core::domain::{ClientId, NormalizationRules};
use imgest_core::download_rules::{AllowedPorts, CircuitRules, HashHeaders, HostAllowlist};

#[derive(Debug, Clone, PartialEq)]
pub struct CrawlSettings {
    /// `IMGEST_URL_TTL` (7d): a URL downloaded successfully within this is not downloaded again.
    pub url_ttl: Duration,
    /// `IMGEST_REVALIDATION_DELAY` (15m, at most 1d): an offer re-sent unchanged after the URL
    /// window is answered from its crawl record at once, and its URLs downloaded again (with
    /// conditional requests) half this long to this long later, behind new photos.
    pub revalidation_delay: Duration,
    /// `IMGEST_FETCH_TIERS` (`1s,5s,30s`): whole-request deadlines, one lane each.
    pub tiers: Vec<Duration>,
    /// `IMGEST_FETCH_WORKERS` (`32,16,8`): concurrent downloads per tier in the local runner.
    pub workers: Vec<usize>,
    /// `IMGEST_FETCH_TIER`: the tier a fetch function serves (AWS; one function per tier).
    pub fetch_tier: usize,
    /// `IMGEST_RETRY_BASE` (1s) and `IMGEST_RETRY_CAP` (1h): exponential backoff, full jitter.
    pub retry_base: Duration,
    pub retry_cap: Duration,
    /// `IMGEST_MAX_ATTEMPTS` (5): downloads of a URL per crawl for transient failures.
    pub max_attempts: u32,
    /// `IMGEST_RECHECK_BASE` (1h): a URL that failed permanently is downloaded again only
    /// after 1×, 2×, 4×… this (capped at 24 h).
    pub recheck_base: Duration,
    /// `IMGEST_TRANSIENT_RECHECK_BASE` (10m): a URL whose downloads kept failing transiently
    /// (through every retry, or past the last tier) is downloaded again only after 1×, 2×,
    /// 4×… this (capped at 24 h), so re-sent feeds do not retry it at once.
    pub transient_recheck_base: Duration,
    /// `IMGEST_CIRCUIT_MIN_REQUESTS` (20), `IMGEST_CIRCUIT_FAILURE_PERCENT` (50),
    /// `IMGEST_CIRCUIT_WINDOW` (60s), `IMGEST_CIRCUIT_COOL_DOWN` (30s): a host whose recent
    /// requests (at least the minimum, counted over a decaying window) failed at least that
    /// share gets no downloads (`host_unavailable`) until a probe after the cool-down succeeds.
    pub circuit: CircuitRules,
    /// `IMGEST_HASH_HEADERS` (`host=content-md5,…`): hosts trusted to send the body's MD5 in a
    /// header; a response naming a known image is not downloaded.
    pub hash_headers: HashHeaders,
    /// `IMGEST_CLIENT_RPM` (600) and `IMGEST_CLIENT_RPM_OVERRIDES` (`client=rpm,…`).
    pub client_rpm: u32,
    pub client_rpm_overrides: HashMap<ClientId, u32>,
    /// `IMGEST_RATE_WINDOW` (60s): the window the per-client limit counts in.
    pub rate_window: Duration,
    /// `IMGEST_FETCH_RESERVE` (1MiB, or `IMGEST_MAX_BODY` if less): body memory a download holds in the process's budget
    /// before its request leaves; grown to the declared length once the headers come (or as
    /// an undeclared body arrives). A batch's downloads start only while their first holds fit.
    pub fetch_reserve: u64,
    /// `IMGEST_DOMAIN_CONCURRENCY` (16): downloads at once per domain, to start with; halved
    /// on 429, grown by one per success up to 4× this.
    pub domain_concurrency: usize,
    /// `IMGEST_WEBHOOK_TIMEOUT` (10s, at most 60s): how long a webhook's endpoint has to answer
    /// a delivery (connect, send and its answer's headers); a timeout is retried like a 5xx.
    pub webhook_timeout: Duration,
    /// `IMGEST_WEBHOOK_CONCURRENCY` (4): deliveries at once per endpoint and process, so an
    /// endpoint that is slow to answer holds at most this many of a process's deliveries.
    pub webhook_concurrency: usize,
    /// `IMGEST_ALLOW_PRIVATE_NETWORKS` (false): lets downloads reach loopback and private
    /// networks (tests, local hosts); link-local and metadata addresses stay forbidden.
    pub allow_private_networks: bool,
    /// `IMGEST_STRIP_PARAMS` (`a,b`) and `IMGEST_HOST_REWRITES` (`from=to,…`).
    pub normalization: NormalizationRules,
    /// `IMGEST_USER_AGENT`.
    pub user_agent: String,
    /// `IMGEST_TIER_ROUTING` (true): start downloads in the tier a host's statistics predict;
    /// false starts every download in the first tier (the naive design, for comparison).
    pub tier_routing: bool,
    /// `IMGEST_FETCH_PORTS` (`80,443`): the ports downloads may connect to, or `any`.
    pub fetch_ports: AllowedPorts,
    /// `IMGEST_CLIENT_HOSTS` (`acme=img.acme.example,*.acme-cdn.example;…`): the hosts a
    /// client's downloads may reach; a client not listed may reach any public host.
    pub client_hosts: HashMap<ClientId, HostAllowlist>,
    /// `IMGEST_INTAKE_SENDERS` (`SENDER_ID=client,…;SENDER_ID=*`), `IMGEST_STACK_ROLES`
    /// (`ID,…`) and `IMGEST_REDRIVERS` (`ID,…`): whose crawl requests the intake queue takes,
    /// for which clients (none by default); whose messages the internal queues take (the
    /// stack's roles; none by default); and whose redrives keep a message's original sender.
    pub senders: QueueSenders,
}

impl CrawlSettings {
    pub fn rpm_for(&self, client: &ClientId) -> u32 {
        self.client_rpm_overrides
            .get(client)
            .copied()
            .unwrap_or(self.client_rpm)
    }

    /// The hosts `client`'s downloads are limited to, if it is.
    pub fn hosts_of(&self, client: &ClientId) -> Option<&HostAllowlist> {
        self.client_hosts.get(client)
    }

    pub fn last_tier(&self) -> usize {
        self.tiers.len().saturating_sub(1)
    }

    /// The crawl settings; `max_body` (`IMGEST_MAX_BODY`) bounds the fetch reserve.
    pub(super) fn parse(vars: &Vars<'_>, max_body: u64) -> Result<Self, SettingsError> {
        let tiers = match vars.list("IMGEST_FETCH_TIERS") {
            None => vec![
                Duration::from_secs(1),
                Duration::from_secs(5),
                Duration::from_secs(30),
            ],
            Some(items) => items
                .map(|t| humantime::parse_duration(t).ok().filter(|d| !d.is_zero()))
                .collect::<Option<Vec<_>>>()
                .filter(|t| !t.is_empty() && t.len() <= 8 && t.windows(2).all(|w| w[0] < w[1]))
                .ok_or_else(|| {
                    vars.bad(
                        "IMGEST_FETCH_TIERS",
                        "expected 1 to 8 increasing durations, e.g. 1s,5s,30s",
                    )
                })?,
        };
        let workers = match vars.list("IMGEST_FETCH_WORKERS") {
            None => [32, 16, 8, 8, 8, 8, 8, 8][..tiers.len()].to_vec(),
            Some(items) => items
                .map(|w| w.parse::<usize>().ok().filter(|n| (1..=1024).contains(n)))
                .collect::<Option<Vec<_>>>()
                .filter(|w| w.len() == tiers.len())
                .ok_or_else(|| {
                    vars.bad(
                        "IMGEST_FETCH_WORKERS",
                        "expected one count (1 to 1024) per IMGEST_FETCH_TIERS entry",
                    )
                })?,
        };
        let fetch_tier = match vars.get("IMGEST_FETCH_TIER") {
            None => 0,
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|t| *t < tiers.len())
                .ok_or_else(|| {
                    vars.bad(
                        "IMGEST_FETCH_TIER",
                        "expected a tier index (0 for the first of IMGEST_FETCH_TIERS)",
                    )
                })?,
        };
        let var = "IMGEST_CLIENT_RPM_OVERRIDES";
        let mut client_rpm_overrides = HashMap::new();
        for pair in vars.pairs(var).unwrap_or_default() {
            let (client, rpm) = pair
                .and_then(|(client, rpm)| {
                    let client = ClientId::parse(client).ok()?;
                    let rpm = rpm.parse::<u32>().ok().filter(|n| *n >= 1)?;
                    Some((client, rpm))
                })
                .ok_or_else(|| {
                    vars.bad(var, "expected client=rpm pairs, e.g. acme=1200,tiny=60")
                })?;
            client_rpm_overrides.insert(client, rpm);
        }
        let var = "IMGEST_HOST_REWRITES";
        let host_rewrites = vars
            .pairs(var)
            .unwrap_or_default()
            .into_iter()
            .map(|pair| pair.map(|(from, to)| (from.to_owned(), to.to_owned())))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                vars.bad(
                    var,
                    "expected from=to host pairs, e.g. img2.cdn.example=img.cdn.example",
                )
            })?;
        // A rewrite applies once, so a URL's download address normalises to its own key again
        // (a fetch task's hash is checked that way): a rule whose target is rewritten itself
        // would make that address another URL.
        let same_host = |a: &str, b: &str| {
            a.strip_suffix('.')
                .unwrap_or(a)
                .eq_ignore_ascii_case(b.strip_suffix('.').unwrap_or(b))
        };
        if let Some((from, to)) = host_rewrites
            .iter()
            .find(|(_, to)| host_rewrites.iter().any(|(from, _)| same_host(from, to)))
        {
            return Err(vars.bad(
                var,
                format!("{from}={to}: {to} is rewritten too (rewrites apply once): rewrite {from} straight to the last host"),
            ));
        }
        let fetch_ports = match vars.get("IMGEST_FETCH_PORTS") {
            None => AllowedPorts::default(),
            Some(v) => AllowedPorts::parse(v).map_err(|e| {
                vars.bad(
                    "IMGEST_FETCH_PORTS",
                    format!("{e} (expected a list of ports, e.g. 80,443, or any)"),
                )
            })?,
        };
        let var = "IMGEST_CLIENT_HOSTS";
        let mut client_hosts = HashMap::new();
        for entry in vars
            .get(var)
            .unwrap_or_default()
            .split(';')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let expected = "expected client=host,*.domain;client=… e.g. acme=img.acme.example,*.acme-cdn.example";
            let (client, hosts) = entry
                .split_once('=')
                .ok_or_else(|| vars.bad(var, format!("{entry:?}: {expected}")))?;
            let client = ClientId::parse(client.trim())
                .map_err(|e| vars.bad(var, format!("{e}; {expected}")))?;
            let hosts = HostAllowlist::parse(hosts)
                .map_err(|e| vars.bad(var, format!("{client}: {e}; {expected}")))?;
            if client_hosts.insert(client.clone(), hosts).is_some() {
                return Err(vars.bad(var, format!("{client} is listed twice")));
            }
        }
        // IMGEST_INTAKE_REDRIVERS is the variable's name before redrives of every queue kept
        // their senders: still read, the two lists joined.
        let redrivers = [
            vars.get("IMGEST_REDRIVERS").unwrap_or_default(),
            vars.get("IMGEST_INTAKE_REDRIVERS").unwrap_or_default(),
        ]
        .join(",");
        let senders = QueueSenders::parse(
            vars.get("IMGEST_INTAKE_SENDERS").unwrap_or_default(),
            &redrivers,
            vars.get("IMGEST_STACK_ROLES").unwrap_or_default(),
        )
        .map_err(|(list, e)| {
            let var = match list {
                SendersList::Intake => "IMGEST_INTAKE_SENDERS",
                SendersList::Redrivers if vars.get("IMGEST_REDRIVERS").is_some() => {
                    "IMGEST_REDRIVERS"
                }
                SendersList::Redrivers => "IMGEST_INTAKE_REDRIVERS",
                SendersList::StackRoles => "IMGEST_STACK_ROLES",
            };
            vars.bad(var, e)
        })?;
        let hash_headers = match vars.get("IMGEST_HASH_HEADERS") {
            None => HashHeaders::default(),
            Some(v) => HashHeaders::parse(v).map_err(|e| {
                vars.bad(
                    "IMGEST_HASH_HEADERS",
                    format!("{e} (expected host=header pairs, e.g. img.example=content-md5,cdn.example=etag)"),
                )
            })?,
        };
        let circuit = CircuitRules {
            min_requests: vars.number("IMGEST_CIRCUIT_MIN_REQUESTS", 20, 1, 1_000_000)?,
            failure_percent: vars.number("IMGEST_CIRCUIT_FAILURE_PERCENT", 50, 1, 100)?,
            window: vars.positive_duration("IMGEST_CIRCUIT_WINDOW", Duration::from_secs(60))?,
            cool_down: vars
                .positive_duration("IMGEST_CIRCUIT_COOL_DOWN", Duration::from_secs(30))?,
        };
        let retry_base = vars.positive_duration("IMGEST_RETRY_BASE", Duration::from_secs(1))?;
        let retry_cap = vars.positive_duration("IMGEST_RETRY_CAP", Duration::from_secs(3600))?;
        if retry_cap < retry_base {
            return Err(vars.bad(
                "IMGEST_RETRY_CAP",
                "must not be less than IMGEST_RETRY_BASE",
            ));
        }
        let revalidation_delay =
            vars.positive_duration("IMGEST_REVALIDATION_DELAY", Duration::from_secs(900))?;
        if revalidation_delay > Duration::from_secs(86_400) {
            return Err(vars.bad("IMGEST_REVALIDATION_DELAY", "at most 1d"));
        }
        Ok(Self {
            url_ttl: vars.positive_duration("IMGEST_URL_TTL", Duration::from_secs(7 * 86_400))?,
            revalidation_delay,
            workers,
            fetch_tier,
            retry_base,
            retry_cap,
            max_attempts: vars.number("IMGEST_MAX_ATTEMPTS", 5, 1, 100)?,
            recheck_base: vars
                .positive_duration("IMGEST_RECHECK_BASE", Duration::from_secs(3600))?,
            transient_recheck_base: vars
                .positive_duration("IMGEST_TRANSIENT_RECHECK_BASE", Duration::from_secs(600))?,
            circuit,
            hash_headers,
            client_rpm: vars.number("IMGEST_CLIENT_RPM", 600, 1, 1_000_000)?,
            fetch_reserve: fetch_reserve(vars, max_body)?,
            client_rpm_overrides,
            rate_window: vars.positive_duration("IMGEST_RATE_WINDOW", Duration::from_secs(60))?,
            domain_concurrency: vars.number("IMGEST_DOMAIN_CONCURRENCY", 16, 1, 4096)?,
            webhook_timeout: webhook_timeout(vars)?,
            webhook_concurrency: vars.number("IMGEST_WEBHOOK_CONCURRENCY", 4, 1, 256)?,
            allow_private_networks: vars.flag("IMGEST_ALLOW_PRIVATE_NETWORKS", false)?,
            normalization: NormalizationRules {
                extra_tracking_params: vars
                    .list("IMGEST_STRIP_PARAMS")
                    .map(|items| items.filter(|p| !p.is_empty()).map(str::to_owned).collect())
                    .unwrap_or_default(),
                host_rewrites,
            },
            user_agent: vars
                .get("IMGEST_USER_AGENT")
                .unwrap_or(concat!("imgest/", env!("CARGO_PKG_VERSION")))
                .to_owned(),
            tiers,
            tier_routing: vars.flag("IMGEST_TIER_ROUTING", true)?,
            fetch_ports,
            client_hosts,
            senders,
        })
    }
}

/// `IMGEST_WEBHOOK_TIMEOUT`: 10 s by default, at most a minute (a delivery holds its slot
/// of the endpoint that long).
fn webhook_timeout(vars: &Vars<'_>) -> Result<Duration, SettingsError> {
    const VAR: &str = "IMGEST_WEBHOOK_TIMEOUT";
    let timeout = vars.positive_duration(VAR, Duration::from_secs(10))?;
    if timeout > Duration::from_secs(60) {
        return Err(vars.bad(VAR, "must be at most 60s"));
    }
    Ok(timeout)
}

/// `IMGEST_FETCH_RESERVE`: a mebibyte, or the largest body if that is less; a reserve set
/// larger than any body could be is refused.
fn fetch_reserve(vars: &Vars<'_>, max_body: u64) -> Result<u64, SettingsError> {
    const VAR: &str = "IMGEST_FETCH_RESERVE";
    if vars.get(VAR).is_none() {
        return Ok((1 << 20).min(max_body));
    }
    let reserve = vars.size(VAR, 1 << 20)?;
    if reserve > max_body {
        return Err(vars.bad(
            VAR,
            format!("must not be more than IMGEST_MAX_BODY ({max_body} bytes)"),
        ));
    }
    Ok(reserve)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<CrawlSettings, SettingsError> {
        let map = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        CrawlSettings::parse(&Vars::new(&map), 20_000_000)
    }

    #[test]
    fn defaults_follow_the_issue() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.url_ttl, Duration::from_secs(7 * 86_400));
        assert_eq!(s.revalidation_delay, Duration::from_secs(900));
        assert_eq!(
            s.tiers,
            [1, 5, 30].map(Duration::from_secs).to_vec(),
            "1s, 5s, 30s"
        );
        assert_eq!(s.workers, vec![32, 16, 8]);
        assert_eq!(s.max_attempts, 5);
        assert_eq!(s.client_rpm, 600);
        assert_eq!(s.rate_window, Duration::from_secs(60));
        assert!(!s.allow_private_networks);
        assert_eq!(s.fetch_ports, AllowedPorts::Only(vec![80, 443]));
        assert!(s.client_hosts.is_empty());
        assert_eq!(s.transient_recheck_base, Duration::from_secs(600));
        assert_eq!(
            s.circuit,
            CircuitRules {
                min_requests: 20,
                failure_percent: 50,
                window: Duration::from_secs(60),
                cool_down: Duration::from_secs(30),
            }
        );
        // No host is trusted to name a body's hash: a header naming a known image is ignored.
        assert!(s.hash_headers.is_empty());
        let headers = |name: &str| match name {
            "content-md5" => Some("nhB9nTcrtoJr2B01QqQZ1g=="),
            "etag" => Some("\"9e107d9d372bb6826bd81d3542a419d6\""),
            _ => None,
        };
        for host in ["img.example", "127.0.0.1", "localhost"] {
            assert_eq!(s.hash_headers.announced(host, headers), None, "{host}");
        }
    }

    #[test]
    fn ports_and_client_hosts_parse() {
        let s = parse(&[
            ("IMGEST_FETCH_PORTS", "any"),
            (
                "IMGEST_CLIENT_HOSTS",
                "acme=img.acme.example,*.acme-cdn.example; tiny=photos.tiny.example;",
            ),
        ])
        .unwrap();
        assert_eq!(s.fetch_ports, AllowedPorts::Any);
        let acme = s.hosts_of(&ClientId::parse("acme").unwrap()).unwrap();
        assert!(acme.allows("x.acme-cdn.example") && !acme.allows("photos.tiny.example"));
        assert!(s.hosts_of(&ClientId::parse("other").unwrap()).is_none());
    }

    #[test]
    fn overrides_and_rules_parse() {
        let s = parse(&[
            ("IMGEST_FETCH_TIERS", "50ms, 200ms"),
            ("IMGEST_FETCH_WORKERS", "4,2"),
            ("IMGEST_CLIENT_RPM_OVERRIDES", "acme=1200, tiny=60"),
            ("IMGEST_HOST_REWRITES", "img2.cdn.example=img.cdn.example"),
            ("IMGEST_STRIP_PARAMS", "sid,ref"),
            ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true"),
        ])
        .unwrap();
        assert_eq!(
            s.tiers,
            vec![Duration::from_millis(50), Duration::from_millis(200)]
        );
        assert_eq!(s.workers, vec![4, 2]);
        assert_eq!(s.rpm_for(&ClientId::parse("acme").unwrap()), 1200);
        assert_eq!(s.rpm_for(&ClientId::parse("other").unwrap()), 600);
        assert_eq!(s.normalization.extra_tracking_params, vec!["sid", "ref"]);
        assert_eq!(s.normalization.host_rewrites.len(), 1);
        assert!(s.allow_private_networks);
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (var, value) in [
            ("IMGEST_FETCH_TIERS", "5s,1s"),
            ("IMGEST_FETCH_TIERS", "fast"),
            ("IMGEST_FETCH_WORKERS", "1,2"),
            ("IMGEST_FETCH_TIER", "3"),
            ("IMGEST_CLIENT_RPM", "0"),
            ("IMGEST_CLIENT_RPM_OVERRIDES", "acme"),
            ("IMGEST_HOST_REWRITES", "a.example"),
            (
                "IMGEST_HOST_REWRITES",
                "a.example=b.example,B.example.=c.example",
            ),
            ("IMGEST_STACK_ROLES", "AROA/x"),
            ("IMGEST_REDRIVERS", "not an id"),
            ("IMGEST_INTAKE_REDRIVERS", "not an id"),
            ("IMGEST_ALLOW_PRIVATE_NETWORKS", "yes"),
            ("IMGEST_URL_TTL", "0s"),
            ("IMGEST_REVALIDATION_DELAY", "0s"),
            ("IMGEST_REVALIDATION_DELAY", "2d"),
            ("IMGEST_MAX_ATTEMPTS", "many"),
            ("IMGEST_FETCH_PORTS", "80,https"),
            ("IMGEST_CLIENT_HOSTS", "acme"),
            ("IMGEST_CLIENT_HOSTS", "acme=a.example;acme=b.example"),
            ("IMGEST_CLIENT_HOSTS", "acme=a..example"),
            ("IMGEST_CLIENT_HOSTS", "ac me=a.example"),
            ("IMGEST_CIRCUIT_FAILURE_PERCENT", "0"),
            ("IMGEST_CIRCUIT_FAILURE_PERCENT", "101"),
            ("IMGEST_CIRCUIT_COOL_DOWN", "0s"),
            ("IMGEST_HASH_HEADERS", "img.example"),
            ("IMGEST_HASH_HEADERS", "img.example=bad header"),
        ] {
            let err = parse(&[(var, value)]).unwrap_err();
            assert_eq!(err.var, var, "{value}");
        }
    }
}
