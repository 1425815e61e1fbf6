//! The `scheduled-gc` Lambda function, every 15 minutes: GC of expired records, then the sweep from its
//! saved place, within the invocation's time; on the audit's schedule, the audit of one segment of the index.

use imgest_lambda::cloudwatch::flushed;
use imgest_lambda::{scheduled_gc, time_left};
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_lambda::init("info")?;
    let (settings, service) = imgest_lambda::service_from_env().await?;
    let (service, shards) = (&service, settings.sweep_shards_per_run);
    let audit_segments = settings.audit_segments;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let answer = flushed(async {
                Ok::<_, lambda_runtime::Error>(if scheduled_gc::is_audit(&event.payload) {
                    serde_json::to_value(scheduled_gc::audit(service, audit_segments).await?)?
                } else {
                    let budget = scheduled_gc::budget(time_left(event.context.deadline));
                    serde_json::to_value(scheduled_gc::handle(service, shards, budget).await?)?
                })
            });
            answer.await
        },
    ))
    .await
}
