//! The `erasure` Lambda function, every minute: the erasures under way (the files and every
//! version of them of images whose records were erased, and sellers' erasures waiting for the
//! offers that linked their image). The only function that may delete object versions.

use imgest_lambda::cloudwatch::flushed;
use imgest_lambda::{erasure, time_left};
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    imgest_lambda::init("info")?;
    let (_, service) = imgest_lambda::service_from_env().await?;
    let service = &erasure::eraser(service);
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let time_left = time_left(event.context.deadline);
            let answer = flushed(async {
                Ok::<_, lambda_runtime::Error>(serde_json::to_value(
                    erasure::handle(service, time_left).await?,
                )?)
            });
            answer.await
        },
    ))
    .await
}
