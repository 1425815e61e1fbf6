//! The `backfill` Lambda function: every minute it enumerates the running backfill onto the
//! `backfill` queue; from that queue, under its own concurrency quota, it re-processes images.

use imgest_shared::handlers::backfill::{self, Event};
use imgest_shared::telemetry::metrics::flushed;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_shared::telemetry::init_lambda("info")?;
    let (_, service) = imgest_shared::app::service_from_env().await?;
    let service = &service;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let answer = flushed(async {
                Ok::<_, lambda_runtime::Error>(match Event::of(event.payload)? {
                    Event::Tasks(batch) => {
                        serde_json::to_value(backfill::tasks(service, batch).await)?
                    }
                    Event::Schedule => serde_json::to_value(backfill::enumerate(service).await?)?,
                })
            });
            answer.await
        },
    ))
    .await
}
