//! The emulator against a runtime written in sh and curl (`shell-runtime.sh`): events handed
//! out one at a time with Lambda's headers, answers and error reports given back, a dying
//! process, an init error and an oversized response each reported as such.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use imgest_runtime_api::{Function, FunctionError, InvokeError, Launch, Outcome};
use serde_json::Value;

fn shell_runtime() -> Launch {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shell-runtime.sh");
    // The environment is cleared: the script finds sh's tools and curl through PATH only.
    Launch::new(script, "echo").env("PATH", std::env::var_os("PATH").unwrap_or_default())
}

async fn answer(function: &mut Function, event: &str) -> Value {
    match function.invoke(event.as_bytes().to_vec()).await.unwrap() {
        Outcome::Response(body) => serde_json::from_slice(&body).unwrap(),
        other => panic!("not a response: {other:?}"),
    }
}

#[tokio::test]
async fn each_event_is_handed_out_with_lambdas_headers_and_answered_in_turn() {
    let mut function = shell_runtime().start().await.unwrap();
    assert_eq!(function.start_to_first_answer(), None);
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let first = answer(&mut function, r#"{"n":1}"#).await;
    let second = answer(&mut function, r#"{"n":2}"#).await;
    assert_eq!(first["event"]["n"], 1);
    assert_eq!(second["event"]["n"], 2);
    assert_ne!(
        first["id"], second["id"],
        "each invocation has its own request id"
    );
    assert_eq!(
        first["arn"],
        "arn:aws:lambda:us-east-1:123456789012:function:echo"
    );
    assert!(first["deadline_ms"].as_u64().unwrap() > now_ms);
    // Nothing of the test's environment reaches the function but what it was given.
    assert_eq!(first["home"], "unset");
    let init = function.init_duration().unwrap();
    assert!(function.start_to_first_answer().unwrap() >= init);
}

#[tokio::test]
async fn an_error_report_comes_back_with_its_type_and_the_function_goes_on() {
    let mut function = shell_runtime().start().await.unwrap();
    let Outcome::Error { error_type, body } = function.invoke(&b"\"fail\""[..]).await.unwrap()
    else {
        panic!("not an error")
    };
    assert_eq!(error_type, "Test.Failed");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["errorMessage"], "asked to fail");
    assert_eq!(answer(&mut function, "3").await["event"], 3);
}

#[tokio::test]
async fn an_answer_to_a_request_id_not_handed_out_is_refused_and_settles_nothing() {
    let mut function = shell_runtime().start().await.unwrap();
    let answer = answer(&mut function, "\"stray\"").await;
    assert_eq!(answer["stray_status"], 400, "{answer}");
}

#[tokio::test]
async fn a_process_that_dies_is_reported_with_its_status_and_last_output() {
    let mut function = shell_runtime().start().await.unwrap();
    let error = function.invoke(&b"\"exit\""[..]).await.unwrap_err();
    let FunctionError::Exited { status, log, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(status.code(), Some(3));
    assert!(log.contains("exiting as asked"), "{log}");
}

#[tokio::test]
async fn an_init_error_is_the_answer_to_every_invocation() {
    let mut function = shell_runtime().env("INIT", "fail").start().await.unwrap();
    let error = function.invoke(&b"{}"[..]).await.unwrap_err();
    let FunctionError::Invoke {
        source: InvokeError::InitError { error_type, body },
        ..
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(error_type, "Runtime.ConfigError");
    assert!(String::from_utf8_lossy(body).contains("missing setting"));
}

#[tokio::test]
async fn a_response_over_six_megabytes_settles_as_too_large() {
    let mut function = shell_runtime().start().await.unwrap();
    let Outcome::Error { error_type, .. } = function.invoke(&b"\"big\""[..]).await.unwrap() else {
        panic!("not an error")
    };
    assert_eq!(error_type, "Function.ResponseSizeTooLarge");
    assert_eq!(answer(&mut function, "4").await["event"], 4);
}

#[tokio::test]
async fn an_invocation_without_an_answer_times_out() {
    // A runtime that never polls: `sleep` stands in for a bootstrap stuck in its init.
    let mut function = Launch::new("/bin/sleep", "stuck")
        .runner(["/bin/sh", "-c", "exec \"$0\" 60"])
        .timeout(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    let error = function.invoke(&b"{}"[..]).await.unwrap_err();
    assert!(
        matches!(
            error,
            FunctionError::Invoke {
                source: InvokeError::Timeout(_),
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(function.init_duration(), None);
}
