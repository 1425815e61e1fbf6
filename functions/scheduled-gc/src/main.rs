//! The `scheduled-gc` Lambda function, every 15 minutes: GC of expired records and the sweep
//! from its saved place (in `GcParts` and `SweepParts` runs side by side), each in a run of its
//! own (an event naming neither job does both), within the invocation's time; on the audit's
//! schedule, the audit of one segment of the index.

use imgest_lambda::cloudwatch::flushed;
use imgest_lambda::scheduled_gc::{self, Job};
use imgest_lambda::time_left;
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
                let budget = scheduled_gc::budget(time_left(event.context.deadline));
                Ok::<_, lambda_runtime::Error>(match scheduled_gc::job(&event.payload)? {
                    Job::Audit => {
                        serde_json::to_value(scheduled_gc::audit(service, audit_segments).await?)?
                    }
                    Job::Collect(part) => {
                        serde_json::to_value(scheduled_gc::collect(service, part, budget).await?)?
                    }
                    Job::Sweep(part) => serde_json::to_value(
                        scheduled_gc::sweep(service, part, shards, budget).await?,
                    )?,
                    Job::Both => {
                        serde_json::to_value(scheduled_gc::handle(service, shards, budget).await?)?
                    }
                })
            });
            answer.await
        },
    ))
    .await
}
