//! Reading `IMGEST_*` variables: one helper per kind of value, each naming the variable and
//! what was expected when a value is bad. Shared by every group of settings.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use super::SettingsError;

/// The variables settings are parsed from (the environment, or a map in tests). Blank values
/// count as unset.
pub(super) struct Vars<'a> {
    map: &'a HashMap<String, String>,
}

impl<'a> Vars<'a> {
    pub(super) fn new(map: &'a HashMap<String, String>) -> Self {
        Self { map }
    }

    /// The trimmed value, if set and not blank.
    pub(super) fn get(&self, var: &'static str) -> Option<&'a str> {
        self.map
            .get(var)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The error for `var`'s value (as set), with what was expected.
    pub(super) fn bad(&self, var: &'static str, reason: impl Into<String>) -> SettingsError {
        SettingsError {
            var,
            value: self.get(var).unwrap_or_default().to_owned(),
            reason: reason.into(),
        }
    }

    /// A value required by another setting (`needed_by` says which).
    pub(super) fn required(
        &self,
        var: &'static str,
        needed_by: &str,
    ) -> Result<&'a str, SettingsError> {
        self.get(var)
            .ok_or_else(|| self.bad(var, format!("required when {needed_by}")))
    }

    /// A humantime duration (`90s`, `24h`, `14d`); zero allowed.
    pub(super) fn duration(
        &self,
        var: &'static str,
        default: Duration,
    ) -> Result<Duration, SettingsError> {
        match self.get(var) {
            None => Ok(default),
            Some(v) => humantime::parse_duration(v)
                .map_err(|e| self.bad(var, format!("{e} (expected e.g. 14d, 24h, 90s)"))),
        }
    }

    /// A humantime duration greater than zero.
    pub(super) fn positive_duration(
        &self,
        var: &'static str,
        default: Duration,
    ) -> Result<Duration, SettingsError> {
        match self.get(var) {
            None => Ok(default),
            Some(v) => humantime::parse_duration(v)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| self.bad(var, "expected a positive duration, e.g. 5s, 90s, 7d")),
        }
    }

    /// A whole number within `min..=max`.
    pub(super) fn number<T>(
        &self,
        var: &'static str,
        default: T,
        min: T,
        max: T,
    ) -> Result<T, SettingsError>
    where
        T: FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        match self.get(var) {
            None => Ok(default),
            Some(v) => v
                .parse::<T>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| {
                    self.bad(var, format!("expected a whole number from {min} to {max}"))
                }),
        }
    }

    /// `true`/`1` or `false`/`0`.
    pub(super) fn flag(&self, var: &'static str, default: bool) -> Result<bool, SettingsError> {
        match self.get(var) {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(_) => Err(self.bad(var, "expected true or false")),
        }
    }

    /// A byte size (`20000000`, `20MB`, `20 MiB`, `512kB`).
    pub(super) fn size(&self, var: &'static str, default: u64) -> Result<u64, SettingsError> {
        match self.get(var) {
            None => Ok(default),
            Some(v) => parse_size(v).ok_or_else(|| self.bad(var, "expected bytes, e.g. 20MB")),
        }
    }

    /// A count (`50000000`, `50M`, `500K`).
    pub(super) fn count(&self, var: &'static str, default: u64) -> Result<u64, SettingsError> {
        match self.get(var) {
            None => Ok(default),
            Some(v) => parse_count(v).ok_or_else(|| self.bad(var, "expected a count, e.g. 50M")),
        }
    }

    /// The comma-separated items of a list, trimmed (blank items kept: callers decide).
    pub(super) fn list(&self, var: &'static str) -> Option<impl Iterator<Item = &'a str>> {
        self.get(var).map(|v| v.split(',').map(str::trim))
    }

    /// `key=value` pairs of a comma-separated list, blank items skipped; `None` for an item
    /// without `=` or with an empty side.
    pub(super) fn pairs(&self, var: &'static str) -> Option<Vec<Option<(&'a str, &'a str)>>> {
        self.list(var).map(|items| {
            items
                .filter(|item| !item.is_empty())
                .map(|item| {
                    item.split_once('=')
                        .map(|(k, v)| (k.trim(), v.trim()))
                        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                })
                .collect()
        })
    }
}

/// `20000000`, `20MB`, `20 MiB`, `512kB`.
pub(super) fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult).filter(|&b| b > 0)
}

/// `50000000`, `50M`, `500K`.
fn parse_count(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1_000),
        'm' | 'M' => (&v[..v.len() - 1], 1_000_000),
        _ => (v, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()?
        .checked_mul(mult)
        .filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts_take_units() {
        assert_eq!(parse_size("20MB"), Some(20_000_000));
        assert_eq!(parse_size("5 MiB"), Some(5 << 20));
        assert_eq!(parse_size("512kB"), Some(512_000));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_count("50M"), Some(50_000_000));
        assert_eq!(parse_count("500K"), Some(500_000));
        assert_eq!(parse_count("M"), None);
    }

    #[test]
    fn blank_values_are_unset_and_pairs_are_checked() {
        let map: HashMap<String, String> = [
            ("IMGEST_A", "  "),
            ("IMGEST_B", "x=1, ,y = 2"),
            ("IMGEST_C", "x=1,z"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let vars = Vars::new(&map);
        assert_eq!(vars.get("IMGEST_A"), None);
        assert_eq!(
            vars.pairs("IMGEST_B"),
            Some(vec![Some(("x", "1")), Some(("y", "2"))])
        );
        assert_eq!(vars.pairs("IMGEST_C"), Some(vec![Some(("x", "1")), None]));
        assert_eq!(vars.bad("IMGEST_C", "r").value, "x=1,z");
    }
}
