//! The `backfill` Lambda function: every minute it enumerates the running backfill onto the
//! `backfill` queue; from that queue, under its own concurrency quota, it re-processes images.

use imgest_lambda::backfill::{self, Event};
use imgest_lambda::cloudwatch::flushed;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_lambda::init("info")?;
    let (settings, service) =
        imgest_lambda::decoding_service_from_env(imgest_pipeline::configure::imaging).await?;
    let (service, senders) = (&service, &settings.crawl.senders);
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let answer = flushed(async {
                Ok::<_, lambda_runtime::Error>(match Event::of(event.payload)? {
                    Event::Tasks(batch) => {
                        serde_json::to_value(backfill::tasks(service, senders, batch).await)?
                    }
                    Event::Schedule => serde_json::to_value(backfill::enumerate(service).await?)?,
                })
            });
            answer.await
        },
    ))
    .await
}
