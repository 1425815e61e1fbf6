//! What the Lambda functions share: their handlers as library functions (each takes the service
//! or the crawler and the event and returns the response, so they are tested with the sample
//! events in `events/` and no Lambda runtime), the service on AWS built from the environment
//! ([`service_from_env`]), and the telemetry ([`init`]: JSON logs, and metrics as CloudWatch
//! embedded-metric-format lines, [`cloudwatch`]). The function binaries only wire them to
//! `lambda_runtime`.
//!
//! - [`batch`]: partial batch failures, shared by the SQS and stream handlers; [`chain`]:
//!   long waits sent on at each of their 15-minute hops.
//! - [`backfill`]: the backfill's enumeration (scheduled) and its re-processing tasks (SQS).
//! - [`ttl_cleanup`]: image records removed by DynamoDB's TTL (read from the table's stream).
//! - [`scheduled_gc`]: the scheduled GC pass and sweep, within its run's time.
//! - [`erasure`]: the erasures under way, every minute (the only function that deletes object
//!   versions).
//!
//! The crawl functions' handlers (intake, fetch, process, settle) are in `imgest-lambda-crawl`,
//! built on this crate: a function that never crawls links no downloader. A function that
//! decodes photos gives [`service_from_env`] its pipeline; the others run without one and link
//! no codec.

pub mod backfill;
pub mod batch;
pub mod chain;
pub mod cloudwatch;
pub mod erasure;
pub mod scheduled_gc;
pub mod ttl_cleanup;

pub use batch::{BatchItemFailure, BatchResponse, SqsItem};

use std::sync::Arc;

use imgest_core::backend::Backend;
use imgest_core::imaging::Imaging;
use imgest_core::ports::SystemClock;
use imgest_core::telemetry::metrics::{MetricsError, MetricsLevel};
use imgest_flows::{Service, configure};
use imgest_settings::{AuthSettings, Settings, SettingsError};

/// The time until an invocation's deadline (milliseconds since the epoch, as Lambda gives it
/// in the event's context), from the system clock.
pub fn time_left(deadline_ms: u64) -> std::time::Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    std::time::Duration::from_millis(
        deadline_ms.saturating_sub(u64::try_from(now).unwrap_or(u64::MAX)),
    )
}

/// A Lambda function's start-up failed (it reports this as its init error).
pub type InitError = Box<dyn std::error::Error + Send + Sync>;

/// A Lambda function's telemetry: the JSON logs and, unless `IMGEST_METRICS=off`, the stages'
/// metrics as CloudWatch embedded-metric-format lines, which the function writes after each
/// invocation ([`cloudwatch::flushed`]).
pub fn init(default_log: &str) -> Result<MetricsLevel, MetricsError> {
    imgest_core::telemetry::init(default_log);
    cloudwatch::install()
}

/// What every Lambda function starts with: settings from the environment and the service on
/// AWS (the backend they must name), with the system clock, without the pipeline (a function
/// that decodes photos starts with [`decoding_service_from_env`]). A function told that
/// nobody checks callers does not start ([`refuse_open`]).
pub async fn service_from_env() -> Result<(Settings, Service), InitError> {
    let settings = Settings::from_env()?;
    refuse_open(&settings)?;
    let Backend::Aws(aws) = &settings.backend else {
        return Err("the Lambda functions run on AWS: set IMGEST_BACKEND=aws".into());
    };
    let ports = imgest_aws::ports(aws, Arc::new(SystemClock)).await;
    // The CDN erasures tell, where one is named (the template names it for the erasure
    // function only: no other deletes files it serves).
    let cdn = imgest_aws::cdn(aws).await;
    let service = configure::service(ports, &settings).with_cdn(cdn);
    Ok((settings, service))
}

/// [`service_from_env`] with the pipeline `imaging` makes of the settings and the watermark's
/// PNG (`imgest_pipeline::configure::imaging`): what the functions that decode photos start
/// with. A watermark in S3 is read here, once: a function that cannot read it fails to start
/// (it would make unmarked variants).
pub async fn decoding_service_from_env<E>(
    imaging: impl FnOnce(&Settings, Option<Vec<u8>>) -> Result<Arc<dyn Imaging>, E>,
) -> Result<(Settings, Service), InitError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let (settings, service) = service_from_env().await?;
    let watermark = match (&settings.backend, configure::watermark_on_s3(&settings)) {
        (Backend::Aws(aws), Some((bucket, key))) => {
            Some(imgest_aws::read_object(aws, bucket, key, configure::MAX_WATERMARK_BYTES).await?)
        }
        _ => None,
    };
    let imaging = imaging(&settings, watermark)?;
    Ok((settings, service.with_imaging(imaging)))
}

/// Refuses `IMGEST_AUTH` unset or `off`, in every function whatever its trigger: the API would
/// answer anyone, and the crawl functions would put every client's offers and crawls in one
/// shared namespace (identity decides whether offers are per client). A deployed function
/// runs with `IMGEST_AUTH=gateway` (API Gateway's authorizer checks tokens; the template sets
/// it for every function) or `jwt`.
pub fn refuse_open(settings: &Settings) -> Result<(), SettingsError> {
    let value = match settings.auth {
        AuthSettings::Unset => "",
        AuthSettings::Off => "off",
        AuthSettings::Jwt { .. } | AuthSettings::Gateway { .. } => return Ok(()),
    };
    Err(SettingsError {
        var: "IMGEST_AUTH",
        value: value.to_owned(),
        reason: "refused on AWS Lambda: the API would be open to anyone and every client's \
                 crawls would share one namespace; set IMGEST_AUTH=gateway with \
                 IMGEST_JWT_AUDIENCE (as the template does), or IMGEST_JWKS_FILE"
            .to_owned(),
    })
}

/// The SQS queue name of the logical queue `queue` (its URL's last part), if configured.
pub fn queue_name(settings: &Settings, queue: &str) -> Option<String> {
    let Backend::Aws(aws) = &settings.backend else {
        return None;
    };
    let url = aws.queues.get(queue)?;
    url.rsplit('/').next().map(str::to_owned)
}

/// Whether an SQS event came from the queue named `name` (its records' source ARN ends with
/// it; one event source's batch comes from one queue).
pub fn from_queue(event: &aws_lambda_events::event::sqs::SqsEvent, name: &str) -> bool {
    event.records.first().is_some_and(|r| {
        r.event_source_arn
            .as_deref()
            .and_then(|arn| arn.rsplit(':').next())
            == Some(name)
    })
}

/// Every message of an SQS batch, as the handlers take it: its id, body, receive count, its
/// sender as `senders` decide it (SQS's `SenderId`, or the original sender a listed
/// redriver's message names) and, for a chained wait from the stack, when it is due. The
/// `imgest.*` attributes of a message that the stack's roles did not send are the sender's
/// own words: none is read. Public so that the fuzz targets read an SQS event as the
/// handlers do.
pub fn sqs_items(
    event: aws_lambda_events::event::sqs::SqsEvent,
    senders: &imgest_settings::QueueSenders,
) -> Vec<SqsItem> {
    event
        .records
        .into_iter()
        .map(|m| {
            let attribute = |name: &str| {
                m.message_attributes
                    .get(name)
                    .and_then(|v| v.string_value.as_deref())
            };
            let sender = senders
                .sender_of(
                    m.attributes.get("SenderId").map(String::as_str),
                    attribute(imgest_aws::sqs_dead_letters::SENDER),
                )
                .map(str::to_owned);
            let from_stack = senders.is_stack_role(sender.as_deref());
            let due = if from_stack {
                chain::due_of(attribute(imgest_aws::sqs::DUE_ATTRIBUTE))
            } else {
                None
            };
            SqsItem {
                id: m.message_id.clone().unwrap_or_default(),
                body: m.body.clone().unwrap_or_default(),
                receives: m
                    .attributes
                    .get("ApproximateReceiveCount")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1),
                sender,
                from_stack,
                due,
            }
        })
        .collect()
}

/// Where an SQS handler's given-up items go: `queue`'s dead letters, through `service`, after
/// the receive limit its policy says.
pub fn dead_letters<'a>(service: &'a Service, queue: &'a str) -> batch::DeadLetters<'a> {
    batch::DeadLetters {
        service,
        queue,
        max_receives: service.policy().max_receives,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_map(&map).unwrap()
    }

    #[test]
    fn no_function_starts_with_nobody_checking_callers() {
        for (pairs, value) in [(&[][..], ""), (&[("IMGEST_AUTH", "off")][..], "off")] {
            let refused = refuse_open(&settings(pairs)).unwrap_err();
            assert_eq!(
                (refused.var, refused.value.as_str()),
                ("IMGEST_AUTH", value)
            );
            assert!(refused.reason.contains("IMGEST_AUTH=gateway"), "{refused}");
        }
        let gateway = [
            ("IMGEST_AUTH", "gateway"),
            ("IMGEST_JWT_AUDIENCE", "imgest"),
        ];
        assert!(refuse_open(&settings(&gateway)).is_ok());
        let jwt = [
            ("IMGEST_JWKS_FILE", "jwks.json"),
            ("IMGEST_JWT_ISSUER", "https://id.example"),
            ("IMGEST_JWT_AUDIENCE", "imgest"),
        ];
        assert!(refuse_open(&settings(&jwt)).is_ok());
    }
}
