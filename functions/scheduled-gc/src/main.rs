//! The `scheduled-gc` Lambda function, hourly: GC of expired records, then a batch of the
//! sweep's shards.

use imgest_shared::handlers::scheduled_gc;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_shared::telemetry::init("info");
    let (settings, service) = imgest_shared::app::service_from_env().await?;
    let (service, shards) = (&service, settings.sweep_shards_per_run);
    lambda_runtime::run(service_fn(
        move |_: LambdaEvent<serde_json::Value>| async move {
            let report = scheduled_gc::handle(service, shards).await?;
            Ok::<_, lambda_runtime::Error>(serde_json::to_value(report)?)
        },
    ))
    .await
}
