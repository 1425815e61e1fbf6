//! Lower bounds on the time windows a deletion waits for. Each protects data: shorter, and a
//! live upload's files, a form's photos or a processing claim can be taken as garbage. A value
//! below its bound is refused at start with the reason. `IMGEST_UNSAFE_SHORT_WINDOWS=1` lifts
//! the bounds for tests and demos (seconds-long TTLs), and is itself refused on Lambda.

use std::time::Duration;

use super::SettingsError;
use super::parse::Vars;

/// Set by AWS Lambda in every function's environment: the bounds cannot be lifted there.
pub(super) const LAMBDA_MARKER: &str = "AWS_LAMBDA_INITIALIZATION_TYPE";

const HOUR: Duration = Duration::from_secs(3600);
const CLAIM_TTL_MIN: Duration = Duration::from_secs(30);

/// The windows as parsed.
pub(super) struct Windows {
    pub orphan_ttl: Duration,
    pub sweep_grace: Duration,
    pub claim_ttl: Duration,
    pub upload_url_ttl: Duration,
    pub dedup_wait: Duration,
}

fn at_least(
    vars: &Vars<'_>,
    var: &'static str,
    value: Duration,
    min: Duration,
    reason: &str,
) -> Result<(), SettingsError> {
    if value < min {
        let min = humantime::format_duration(min);
        let value = humantime::format_duration(value);
        return Err(SettingsError {
            var,
            value: vars
                .get(var)
                .map_or_else(|| value.to_string(), str::to_owned),
            reason: format!("must be at least {min}: {reason}"),
        });
    }
    Ok(())
}

/// Refuses a window below its bound, unless the bounds are lifted (never on Lambda).
pub(super) fn check(vars: &Vars<'_>, w: &Windows) -> Result<(), SettingsError> {
    if vars.flag("IMGEST_UNSAFE_SHORT_WINDOWS", false)? {
        if vars.get(LAMBDA_MARKER).is_some() {
            return Err(vars.bad(
                "IMGEST_UNSAFE_SHORT_WINDOWS",
                "not allowed on AWS Lambda: short windows let GC and the sweep delete live data",
            ));
        }
        return Ok(());
    }
    at_least(
        vars,
        "IMGEST_SWEEP_GRACE",
        w.sweep_grace,
        HOUR,
        "a file is written up to 15 minutes (a function's longest run) before its record; a \
         shorter grace lets the sweep delete a live upload's files",
    )?;
    at_least(
        vars,
        "IMGEST_ORPHAN_TTL",
        w.orphan_ttl,
        HOUR,
        "a photo uploaded for a form must outlive the form's submission, and a record any \
         request that may still write it",
    )?;
    at_least(
        vars,
        "IMGEST_ORPHAN_TTL",
        w.orphan_ttl,
        w.upload_url_ttl + w.claim_ttl,
        "a presigned upload (IMGEST_UPLOAD_URL_TTL) and its processing (IMGEST_CLAIM_TTL) must \
         end before its image may expire",
    )?;
    // Longer than any IMGEST_DEDUP_WAIT (at most 25 s) too: a waiting upload sees a claim
    // end, or answers 503, rather than take over a claim that is still being worked on.
    at_least(
        vars,
        "IMGEST_CLAIM_TTL",
        w.claim_ttl,
        CLAIM_TTL_MIN.max(w.dedup_wait),
        "a claim shorter than a decode is taken over mid-way",
    )
}
