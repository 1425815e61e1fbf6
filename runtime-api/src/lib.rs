//! A Lambda Runtime API on 127.0.0.1, and a function's `bootstrap` run against it: what the
//! Lambda service does for a `provided.al2023` function, small enough to run in a test.
//!
//! [`RuntimeApi`] serves the four routes a runtime client uses (`invocation/next`, an
//! invocation's `response` and `error`, `init/error`), hands out the events it is given one at
//! a time and gives back what the function answered. [`Launch`] starts a bootstrap as Lambda
//! would (a cleared environment with Lambda's reserved variables, optionally under a runner
//! such as `qemu-aarch64-static` for an arm64 binary on an x86-64 machine), and the
//! [`Function`] it returns invokes it, notices when the process dies, keeps the tail of its
//! logs, and records when it first polled for work and first answered (its cold start).
//!
//! ```no_run
//! # async fn demo() -> Result<(), imgest_runtime_api::FunctionError> {
//! use imgest_runtime_api::{Launch, Outcome};
//! let mut function = Launch::new("target/lambda/imgest-api/bootstrap", "imgest-api")
//!     .runner(["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"])
//!     .env("AWS_REGION", "us-east-1")
//!     .start()
//!     .await?;
//! let event = br#"{"version":"2.0","rawPath":"/healthz"}"#.to_vec();
//! match function.invoke(event).await? {
//!     Outcome::Response(body) => println!("{}", String::from_utf8_lossy(&body)),
//!     Outcome::Error { error_type, body } => println!("{error_type}: {body:?}"),
//! }
//! # Ok(()) }
//! ```

mod function;
mod server;

pub use self::function::{Function, FunctionError, Launch};
pub use self::server::{InvokeError, MAX_PAYLOAD, Outcome, RuntimeApi};
