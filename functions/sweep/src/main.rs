//! The `sweep` Lambda function, on a schedule: GC of expired records, then a batch of shards.

use imgest_shared::handlers::sweep;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_shared::telemetry::init("info");
    let (settings, service) = imgest_shared::app::service_from_env().await?;
    let (service, shards) = (&service, settings.sweep_shards_per_run);
    lambda_runtime::run(service_fn(
        move |_: LambdaEvent<serde_json::Value>| async move {
            let report = sweep::handle(service, shards).await?;
            Ok::<_, lambda_runtime::Error>(serde_json::to_value(report)?)
        },
    ))
    .await
}
