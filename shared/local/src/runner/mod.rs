//! The local runner: the whole service in one process, the local form of every Lambda function.
//! [`LocalRunner::start`] is the one way it starts (`imgest serve`, the demo, the benchmarks
//! and the end-to-end tests):
//!
//! - the service over the settings' backend (the embedded one in production);
//! - the crawler, processing downloaded photos in this process, with its download pools on
//!   the embedded task queue ([`fetch_pool`]: the local form of the fetch functions' queues);
//! - the webhook deliveries ([`webhook_pool`]: the local form of the webhooks function);
//! - the API router on a listener, serving its files and presigned uploads too;
//! - optionally, GC on a timer (the local form of the scheduled GC function).

pub mod fetch_pool;
mod pool;
pub mod webhook_pool;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, warn};

use crate::app::{self, AppError};
use imgest_core::ports::{Clock, SystemClock, TaskQueue};
use imgest_crawl::{Crawler, Processing};
use imgest_flows::Service;
use imgest_http::auth::Authenticator;
use imgest_http::local_guard::LocalGuard;
use imgest_http::{ApiState, Edge, router};
use imgest_settings::{AuthSettings, Settings};

/// How a runner starts beyond its settings.
#[derive(Clone)]
pub struct RunnerOptions {
    /// The clock every flow reads (tests move a manual one).
    pub clock: Arc<dyn Clock>,
    /// Run GC this often (`None`: never; `imgest serve` runs it every `IMGEST_GC_INTERVAL`).
    pub gc_every: Option<Duration>,
    /// Work on a running backfill (`imgest serve` does; commands that only crawl do not).
    pub backfill: bool,
    /// Work through the erasures under way every [`ERASE_PENDING_EVERY`] (on by default; off
    /// beside a deployed erasure function, which works the same list).
    pub erasures: bool,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            gc_every: None,
            backfill: false,
            erasures: true,
        }
    }
}

/// A running local runner; [`stop`](Self::stop) ends it gracefully.
pub struct LocalRunner {
    service: Arc<Service>,
    crawler: Arc<Crawler>,
    queue: Option<Arc<dyn TaskQueue>>,
    addr: Option<SocketAddr>,
    base_url: String,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl LocalRunner {
    /// Starts the runner on `settings`, serving the API on `listener` (`None`: no API, for
    /// commands that only crawl). File and upload URLs start with `IMGEST_PUBLIC_URL`, else
    /// with the listener's address.
    pub async fn start(
        settings: &Settings,
        listener: Option<TcpListener>,
        options: RunnerOptions,
    ) -> Result<Self, AppError> {
        let addr = match &listener {
            Some(l) => Some(l.local_addr().map_err(|e| {
                AppError::Startup(format!("cannot read the listener's address: {e}"))
            })?),
            None => None,
        };
        let auth = Authenticator::for_runner(&settings.auth, addr)
            .map_err(|e| AppError::Startup(e.to_string()))?;
        if auth.is_open() && addr.is_some() {
            // The Host guard accepts the public URL's name: behind a proxy that serves it,
            // anyone who reaches the proxy could do everything.
            if !settings.public_url_is_loopback() && !settings.allow_open_public_url {
                return Err(AppError::Startup(format!(
                    "IMGEST_PUBLIC_URL={} is not a loopback URL and the API is open (no \
                     IMGEST_JWKS_FILE): whoever reaches that URL could do everything; set \
                     IMGEST_JWKS_FILE (with IMGEST_JWT_ISSUER and IMGEST_JWT_AUDIENCE) to check \
                     tokens, or IMGEST_ALLOW_OPEN_PUBLIC_URL=true to run open there on purpose",
                    settings.public_url.as_deref().unwrap_or_default()
                )));
            }
            warn!(
                "the API is open: every caller may do everything (no IMGEST_JWKS_FILE; {})",
                if settings.auth == AuthSettings::Off {
                    "IMGEST_AUTH=off"
                } else {
                    "listening on loopback only"
                }
            );
        }
        let base_url = match (&settings.public_url, addr) {
            (Some(url), _) => url.clone(),
            (None, Some(addr)) => format!("http://{addr}"),
            (None, None) => settings.public_base_url(),
        };
        let service = Arc::new(app::service(settings, &base_url, options.clock).await?);
        let crawler = Arc::new(Crawler::new(
            Arc::clone(&service),
            settings.crawl.clone(),
            Processing::Inline,
        ));
        // The download workers need it: built now, so a broken TLS setup stops the start.
        crawler
            .downloader()
            .map_err(|e| AppError::Startup(e.to_string()))?;
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        // The download pools need the task queue the crawler sends to; on the AWS backend
        // (tests only) the fetch functions' queues are SQS and nothing here polls them.
        let queue = service.ports().queue.clone();
        if let Some(queue) = &queue {
            tasks.push(tokio::spawn(fetch_pool::run(
                Arc::clone(&crawler),
                Arc::clone(queue),
                stopped.clone(),
            )));
            tasks.push(tokio::spawn(webhook_pool::run(
                Arc::clone(&crawler),
                Arc::clone(queue),
                stopped.clone(),
            )));
        }
        if let Some(every) = options.gc_every {
            tasks.push(tokio::spawn(gc_every(
                Arc::clone(&service),
                every,
                stopped.clone(),
            )));
        }
        if options.erasures {
            tasks.push(tokio::spawn(erase_pending(
                Arc::clone(&service),
                stopped.clone(),
            )));
        }
        if options.backfill && queue.is_some() {
            tasks.push(tokio::spawn(backfill_worker(
                Arc::clone(&service),
                stopped.clone(),
            )));
        }
        if let Some(listener) = listener {
            let open = auth.is_open();
            let mut state = ApiState::new(
                Arc::clone(&service),
                Arc::clone(&crawler),
                &format!("{base_url}/files"),
                auth,
            );
            // With no token to check, only requests addressed to this runner by its own name,
            // and no change asked from another site's page (see `local_guard`).
            if open && let Some(addr) = addr {
                state =
                    state.with_local_guard(LocalGuard::new(addr, settings.public_url.as_deref()));
            }
            let app = router(state, Edge::LocalRunner);
            let mut stopped = stopped.clone();
            tasks.push(tokio::spawn(async move {
                let shutdown = async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                };
                if let Err(e) = axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await
                {
                    error!(error = %e, "the API server stopped");
                }
            }));
        }
        Ok(Self {
            service,
            crawler,
            queue,
            addr,
            base_url,
            stop,
            tasks,
        })
    }

    pub fn service(&self) -> &Arc<Service> {
        &self.service
    }

    pub fn crawler(&self) -> &Arc<Crawler> {
        &self.crawler
    }

    /// The embedded task queue the download pools take from (`None` on the AWS backend).
    pub fn queue(&self) -> Option<&Arc<dyn TaskQueue>> {
        self.queue.as_ref()
    }

    /// The API's address, if it serves one.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// Where the runner is reached (file and upload URLs start with this).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Stops serving and taking tasks, and waits for the requests and downloads under way.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for task in std::mem::take(&mut self.tasks) {
            if let Err(e) = task.await {
                error!(error = %e, "a runner task stopped abnormally");
            }
        }
        // What the downloads learned of their hosts outlives the process.
        self.crawler.flush_learning().await;
    }
}

/// A runner dropped without [`stop`](LocalRunner::stop) (a test that ends, a panic) stops at
/// once: nothing it started outlives it.
impl Drop for LocalRunner {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Works on a running backfill, a batch at a time, until `stop` turns true; checks for one
/// every second while none is running (or it is paused).
async fn backfill_worker(service: Arc<Service>, mut stop: watch::Receiver<bool>) {
    const BATCH: usize = 8;
    // The tasks a runner that died left leased run now, not when their leases end.
    if let Some(queue) = service.ports().queue.as_ref()
        && let Err(e) = queue
            .release_leases(imgest_flows::backfill::BACKFILL_QUEUE)
            .await
    {
        warn!(error = %e, "could not release stale backfill leases; their tasks wait for the leases to end");
    }
    while !*stop.borrow() {
        let idle = Duration::from_secs(1);
        let wait = match service.backfill_step(BATCH).await {
            Ok(step) => step.next_step_in(idle),
            Err(e) => {
                error!(error = %e, "backfill batch failed");
                idle
            }
        };
        if !wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                changed = stop.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// How often the runner looks at the erasures under way: sellers' erasures whose last offer
/// dropped the image go within this, and the files of erasures filed elsewhere (an AWS
/// function's) are erased.
const ERASE_PENDING_EVERY: Duration = Duration::from_secs(1);

/// Works through the erasures under way every [`ERASE_PENDING_EVERY`] until `stop` turns true.
async fn erase_pending(service: Arc<Service>, mut stop: watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(ERASE_PENDING_EVERY);
    while !*stop.borrow() {
        tokio::select! {
            _ = ticker.tick() => {
                if let Err(e) = service.erase_pending().await {
                    error!(error = %e, "erasures under way failed; tried again");
                }
            }
            changed = stop.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// Runs GC every `every` (the first run at once) until `stop` turns true.
async fn gc_every(service: Arc<Service>, every: Duration, mut stop: watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(every);
    while !*stop.borrow() {
        tokio::select! {
            _ = ticker.tick() => {
                if let Err(e) = service.gc().await {
                    error!(error = %e, "periodic gc failed");
                }
            }
            changed = stop.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}
