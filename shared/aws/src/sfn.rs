//! [`StepFunctionsDelay`]: messages delayed beyond SQS's 15-minute maximum go through a Step
//! Functions state machine (`infra/statemachine/delayed-send.asl.json`) that waits, then sends
//! the message to its queue. Its input is `{"queue_url", "body", "wait_seconds"}`.

use aws_sdk_sfn::config::http::HttpResponse;
use aws_sdk_sfn::error::{ProvideErrorMetadata, SdkError};
use serde::Serialize;

use crate::sdk_error::sdk_error;
use imgest_core::ports::StoreError;

/// The delayed-send state machine and a client to start it.
#[derive(Debug, Clone)]
pub struct StepFunctionsDelay {
    pub client: aws_sdk_sfn::Client,
    pub state_machine_arn: String,
}

/// The state machine's input (what its `$.queue_url`, `$.body` and `$.wait_seconds` read).
#[derive(Debug, Serialize)]
struct DelayedSend<'a> {
    queue_url: &'a str,
    body: &'a str,
    wait_seconds: u64,
}

impl StepFunctionsDelay {
    pub fn new(client: aws_sdk_sfn::Client, state_machine_arn: impl Into<String>) -> Self {
        Self {
            client,
            state_machine_arn: state_machine_arn.into(),
        }
    }

    /// Starts one execution that sends `body` to `queue_url` after `wait_seconds`.
    pub async fn start(
        &self,
        queue_url: &str,
        body: &str,
        wait_seconds: u64,
    ) -> Result<(), StoreError> {
        let input = serde_json::to_string(&DelayedSend {
            queue_url,
            body,
            wait_seconds,
        })
        .map_err(|e| StoreError::backend("encoding a delayed message", e))?;
        self.client
            .start_execution()
            .state_machine_arn(&self.state_machine_arn)
            .input(input)
            .send()
            .await
            .map_err(|e| translate("starting a delayed send", e))?;
        Ok(())
    }
}

/// A missing state machine is a configuration error, not a missing record.
fn translate<E>(context: &str, err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match sdk_error(context, err) {
        StoreError::NotFound(message) => StoreError::Backend {
            message,
            source: None,
        },
        other => other,
    }
}
