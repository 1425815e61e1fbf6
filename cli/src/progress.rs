//! Progress bars for the long commands, with a rate and an ETA, on stderr. Drawn only when
//! stderr is a terminal: scripts and logs get the result alone (and a command that printed a
//! line now and then still does, see [`Progress::is_hidden`]).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar counting `unit`s towards a total (which may grow, as a backfill's does), or a counter
/// where there is no total.
pub struct Progress(ProgressBar);

impl Progress {
    pub fn new(total: u64, unit: &str) -> Self {
        let bar = ProgressBar::new(total);
        let template = format!(
            "{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit} ({{per_sec}}, {{eta}} left) {{msg}}"
        );
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        Self(bar)
    }

    /// A spinner counting `unit`s, with their rate, where the total is not known beforehand
    /// (a walk of the index).
    pub fn counter(unit: &str) -> Self {
        let bar = ProgressBar::new_spinner();
        let template =
            format!("{{elapsed_precise}} {{spinner}} {{pos}} {unit} ({{per_sec}}) {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.tick_chars("-\\|/ "));
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        Self(bar)
    }

    pub fn set(&self, position: u64, total: u64) {
        self.0.set_length(total);
        self.0.set_position(position);
    }

    /// Moves a [`counter`](Self::counter) to `position`.
    pub fn count(&self, position: u64) {
        self.0.set_position(position);
    }

    pub fn inc(&self) {
        self.0.inc(1);
    }

    pub fn message(&self, message: String) {
        self.0.set_message(message);
    }

    /// Whether nothing is drawn (stderr is not a terminal).
    pub fn is_hidden(&self) -> bool {
        self.0.is_hidden()
    }

    /// Prints a line on stdout without tearing the bar.
    pub fn println(&self, line: &str) {
        self.0.suspend(|| println!("{line}"));
    }

    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
