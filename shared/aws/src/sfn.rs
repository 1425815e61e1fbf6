//! [`StepFunctionsDelay`]: long waits (`IMGEST_LONG_WAITS=step-functions`) through the
//! delayed-send state machine (`infra/statemachine/delayed-send.asl.json`): one execution per
//! message, which waits, then sends the message to its queue. Its input is
//! `{"queue", "body", "wait_seconds"}`, the queue named by its logical name: the state machine
//! knows the URLs of the only queues it may send to ([`SERVED`]: the fetch queues), so a caller
//! that may start it cannot use it to reach any other queue. The webhook deliveries' long waits
//! are chained through their own queue: the fetch functions, which parse hostile bytes and may
//! start the machine, must not reach the deliveries through it.

use aws_sdk_sfn::config::http::HttpResponse;
use aws_sdk_sfn::error::{ProvideErrorMetadata, SdkError};
use serde::Serialize;

use crate::sdk_error::sdk_error;
use imgest_core::ports::StoreError;

/// The logical queues the state machine sends to (its `Choice` state names the same).
pub const SERVED: [&str; 3] = ["fetch-0", "fetch-1", "fetch-2"];

/// The delayed-send state machine and a client to start it.
#[derive(Debug, Clone)]
pub struct StepFunctionsDelay {
    client: aws_sdk_sfn::Client,
    state_machine_arn: String,
}

/// The state machine's input (what its `$.queue`, `$.body` and `$.wait_seconds` read).
#[derive(Debug, Serialize)]
struct DelayedSend<'a> {
    queue: &'a str,
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

    /// Whether the state machine sends to the logical queue `queue`.
    pub fn serves(queue: &str) -> bool {
        SERVED.contains(&queue)
    }

    /// Starts one execution that sends `body` to the logical queue `queue` (one it
    /// [serves](Self::serves)) after `wait_seconds`.
    pub async fn start(
        &self,
        queue: &str,
        body: &str,
        wait_seconds: u64,
    ) -> Result<(), StoreError> {
        let input = serde_json::to_string(&DelayedSend {
            queue,
            body,
            wait_seconds,
        })
        .map_err(|e| StoreError::backend("encoding a delayed message", e))?;
        // A name of its own: executions are told apart in the console and the alarm's history
        // (and an emulator that would name them all alike accepts them).
        let name = format!("delay-{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        self.client
            .start_execution()
            .state_machine_arn(&self.state_machine_arn)
            .name(name)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An execution's input is the caller's (a fetch function parses hostile bytes and may
    /// start one): whatever queue it names, the machine itself sends only to the fetch queues,
    /// and an input naming another fails before it waits or sends.
    #[test]
    fn the_state_machine_sends_only_to_the_queues_it_serves_and_fails_any_other() {
        let asl: serde_json::Value = serde_json::from_str(include_str!(
            "../../../infra/statemachine/delayed-send.asl.json"
        ))
        .unwrap();
        let states = &asl["States"];
        let choice = &states[asl["StartAt"].as_str().unwrap()];
        assert_eq!(choice["Type"], "Choice");
        let named: Vec<&str> = choice["Choices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                assert_eq!(c["Variable"], "$.queue");
                c["StringEquals"].as_str().unwrap()
            })
            .collect();
        assert_eq!(named, SERVED);
        let default = choice["Default"].as_str().unwrap();
        assert_eq!(states[default]["Type"], "Fail", "a forged queue name fails");
        // The queue's URL comes from the machine (a Pass of the template's substitution over
        // whatever `queue_url` the input carried), never from the input.
        assert_eq!(states["Send"]["Parameters"]["QueueUrl.$"], "$.queue_url");
        for queue in SERVED {
            let pass = &states[queue];
            assert_eq!(pass["Type"], "Pass");
            assert_eq!(pass["ResultPath"], "$.queue_url");
            assert!(pass["Result"].as_str().unwrap().starts_with("${FetchQueue"));
        }
        assert!(StepFunctionsDelay::serves("fetch-1") && !StepFunctionsDelay::serves("webhooks"));
    }
}
