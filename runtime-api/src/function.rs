//! A function's `bootstrap` process, started as Lambda starts it and invoked through its own
//! [`RuntimeApi`].
//!
//! The environment is cleared, then given Lambda's reserved variables and the caller's: what
//! the function reads is what the test says, not what the test process happened to have. The
//! process is killed when the [`Function`] is dropped. Its stdout and stderr are kept (the last
//! [`LOG_LINES`] lines) for the error messages of a failed invocation.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::server::{InvokeError, Outcome, RuntimeApi};

/// How many lines of the function's output are kept for error messages.
pub const LOG_LINES: usize = 200;

/// How long an invocation may take by default: generous, as an emulated arm64 process on a
/// busy machine is many times slower than the real thing.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a function could not be started or gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum FunctionError {
    #[error("serving the Runtime API: {0}")]
    RuntimeApi(std::io::Error),
    #[error("starting {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{function} exited ({status}) before answering; its last output:\n{log}")]
    Exited {
        function: String,
        status: ExitStatus,
        log: String,
    },
    #[error("{function}: {source}; its last output:\n{log}")]
    Invoke {
        function: String,
        source: InvokeError,
        log: String,
    },
}

/// How to start a bootstrap; see [`Launch::start`].
#[derive(Debug, Clone)]
pub struct Launch {
    program: PathBuf,
    name: String,
    runner: Vec<OsString>,
    memory_mb: u32,
    timeout: Duration,
    env: Vec<(OsString, OsString)>,
}

impl Launch {
    /// The bootstrap at `program`, as the function `name` (`AWS_LAMBDA_FUNCTION_NAME`).
    pub fn new(program: impl Into<PathBuf>, name: &str) -> Self {
        Self {
            program: program.into(),
            name: name.to_owned(),
            runner: Vec::new(),
            memory_mb: 1024,
            timeout: DEFAULT_TIMEOUT,
            env: Vec::new(),
        }
    }

    /// Runs the bootstrap under a program and its arguments (e.g. `qemu-aarch64-static -L
    /// /usr/aarch64-linux-gnu`); nothing (the default) runs it directly.
    pub fn runner<S: Into<OsString>>(mut self, argv: impl IntoIterator<Item = S>) -> Self {
        self.runner = argv.into_iter().map(Into::into).collect();
        self
    }

    /// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` (default 1024).
    pub fn memory_mb(mut self, memory_mb: u32) -> Self {
        self.memory_mb = memory_mb;
        self
    }

    /// How long each invocation may take (the deadline the function is told); 120 s by
    /// default.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// One more environment variable for the function.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// More environment variables for the function.
    pub fn envs<K: Into<OsString>, V: Into<OsString>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Starts the Runtime API, then the process.
    pub async fn start(self) -> Result<Function, FunctionError> {
        let program = self.program.display().to_string();
        let api = RuntimeApi::start(&self.name)
            .await
            .map_err(FunctionError::RuntimeApi)?;
        // The runner, if any, then the bootstrap as the runner's argument.
        let mut argv = self.runner.clone();
        argv.push(self.program.clone().into_os_string());
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .env_clear()
            .envs(lambda_reserved(&self, &api))
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let started = Instant::now();
        let mut child = command
            .spawn()
            .map_err(|source| FunctionError::Spawn { program, source })?;
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(tokio::spawn(keep_lines(out, log.clone())));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(tokio::spawn(keep_lines(err, log.clone())));
        }
        Ok(Function {
            name: self.name,
            api,
            child,
            timeout: self.timeout,
            started,
            first_answer: None,
            log,
            readers,
        })
    }
}

/// The variables Lambda sets for a `provided.al2023` function.
fn lambda_reserved(launch: &Launch, api: &RuntimeApi) -> Vec<(OsString, OsString)> {
    let name = launch.name.as_str();
    [
        ("AWS_LAMBDA_RUNTIME_API", api.address()),
        ("AWS_LAMBDA_FUNCTION_NAME", name.to_owned()),
        (
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
            launch.memory_mb.to_string(),
        ),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
        (
            "AWS_LAMBDA_LOG_STREAM_NAME",
            "2026/01/01/[$LATEST]0123456789abcdef".to_owned(),
        ),
        ("LAMBDA_TASK_ROOT", "/var/task".to_owned()),
        ("LAMBDA_RUNTIME_DIR", "/var/runtime".to_owned()),
        ("TZ", ":UTC".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect()
}

/// Keeps the last [`LOG_LINES`] lines of a stream.
async fn keep_lines(stream: impl AsyncRead + Unpin, log: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
        if log.len() == LOG_LINES {
            log.pop_front();
        }
        log.push_back(line);
    }
}

/// A running bootstrap and its Runtime API; the process is killed when this is dropped.
#[derive(Debug)]
pub struct Function {
    name: String,
    api: RuntimeApi,
    child: Child,
    timeout: Duration,
    started: Instant,
    first_answer: Option<Instant>,
    log: Arc<Mutex<VecDeque<String>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Function {
    /// Invokes the function with `event` (a JSON document) and waits for its answer, the
    /// process's exit, or the timeout, whichever comes first.
    pub async fn invoke(&mut self, event: impl Into<Bytes>) -> Result<Outcome, FunctionError> {
        let invoked = self.api.invoke(event.into(), self.timeout);
        let exited = self.child.wait();
        let ended = tokio::select! {
            result = invoked => Ok(result),
            status = exited => Err(status),
        };
        match ended {
            Ok(Ok(outcome)) => {
                self.first_answer.get_or_insert_with(Instant::now);
                Ok(outcome)
            }
            Ok(Err(source)) => Err(FunctionError::Invoke {
                function: self.name.clone(),
                source,
                log: self.log(),
            }),
            Err(status) => {
                // Its last words may still be in the pipes: read them to the end (a child
                // of its own could hold them open, hence the bound).
                let readers = std::mem::take(&mut self.readers);
                let drained = futures_util::future::join_all(readers);
                let _ = tokio::time::timeout(Duration::from_secs(2), drained).await;
                Err(FunctionError::Exited {
                    function: self.name.clone(),
                    status: status.unwrap_or_default(),
                    log: self.log(),
                })
            }
        }
    }

    /// From starting the process to its first poll for an event: Lambda's init duration.
    pub fn init_duration(&self) -> Option<Duration> {
        self.api
            .first_poll()
            .map(|at| at.saturating_duration_since(self.started))
    }

    /// From starting the process to its first answer: init plus the first invocation.
    pub fn start_to_first_answer(&self) -> Option<Duration> {
        self.first_answer
            .map(|at| at.saturating_duration_since(self.started))
    }

    /// The last [`LOG_LINES`] lines the function wrote (stdout and stderr, interleaved).
    pub fn log(&self) -> String {
        let log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        log.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The function's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The most resident memory the process has had so far, in bytes (Linux's `VmHWM`; under
    /// a runner such as qemu-user, the runner's, which holds the emulated program's memory and
    /// its own); `None` where it cannot be read.
    pub fn peak_memory(&self) -> Option<u64> {
        let pid = self.child.id()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    }

    /// The resident memory a runner such as qemu-user holds for itself, in bytes: its
    /// translated-code cache (its writable and executable anonymous mappings) and its own
    /// heap (`[heap]`: qemu-user maps the emulated program's memory, its heap included,
    /// elsewhere). Meaningful only for a program started through a runner: run natively, the
    /// heap is the program's own. `None` where it cannot be read.
    pub fn runner_own_memory(&self) -> Option<u64> {
        let pid = self.child.id()?;
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
        let mut total_kb = 0;
        let mut runners = false;
        for line in smaps.lines() {
            let mut fields = line.split_whitespace();
            match (fields.next(), fields.next()) {
                // A mapping's header: `start-end perms offset dev inode [path]`.
                (Some(range), Some(perms)) if range.contains('-') && perms.len() == 4 => {
                    runners = perms.starts_with("rwx") || line.ends_with("[heap]");
                }
                (Some("Rss:"), Some(kb)) if runners => {
                    total_kb += kb.parse::<u64>().unwrap_or(0);
                }
                _ => {}
            }
        }
        Some(total_kb * 1024)
    }

    /// Kills the process at once (SIGKILL: a function that runs out of time or memory dies
    /// so, mid-invocation), and waits until it is gone.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}
