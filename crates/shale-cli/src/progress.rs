//! Progress bars and spinners on stderr for the commands that can take a
//! while (`compact`, `verify`, `repair`, `load`).
//!
//! They are drawn only when stderr is a terminal: piped or redirected, a
//! bar is hidden from the start and nothing extra is written, so scripts
//! and tests see exactly the output they saw before. (indicatif's
//! `ProgressDrawTarget::stderr()` also skips drawing when stderr is not a
//! terminal; the explicit check keeps that true whatever indicatif does,
//! and saves the polling threads.) A bar is cleared before the command
//! prints its result, so a terminal shows the same lines as a pipe.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::ops::Deref;
use std::time::Duration;

use indicatif::{HumanCount, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// How often a spinner turns (and its elapsed time is redrawn).
const TICK: Duration = Duration::from_millis(100);

/// Whether progress is drawn: stderr is a terminal.
pub fn enabled() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar or spinner, cleared from the terminal when dropped (on success
/// and on error alike), so that it never stays on screen above the
/// command's result or its error message.
pub struct Progress(ProgressBar);

impl Deref for Progress {
    type Target = ProgressBar;

    fn deref(&self) -> &ProgressBar {
        &self.0
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("hidden", &self.0.is_hidden())
            .finish()
    }
}

fn new_bar(length: Option<u64>) -> ProgressBar {
    if enabled() {
        ProgressBar::with_draw_target(length, ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    }
}

/// Starts `bar` turning (a hidden one needs no thread).
fn start(bar: ProgressBar, prefix: Cow<'static, str>) -> Progress {
    bar.set_prefix(prefix);
    if !bar.is_hidden() {
        bar.enable_steady_tick(TICK);
    }
    Progress(bar)
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("a valid progress template")
}

/// A spinner with the time since it started: `⠋ compact [00:00:12] MSG`.
pub fn spinner(prefix: impl Into<Cow<'static, str>>) -> Progress {
    let bar = new_bar(None);
    bar.set_style(style("{spinner:.green} {prefix} [{elapsed_precise}] {msg}"));
    start(bar, prefix.into())
}

/// A spinner counting `unit`s (its position) with their rate:
/// `⠋ load [00:00:12] 1,204,000 lines (98,000/s)`.
pub fn counter(prefix: impl Into<Cow<'static, str>>, unit: &str) -> Progress {
    let bar = new_bar(None);
    let template = format!(
        "{{spinner:.green}} {{prefix}} [{{elapsed_precise}}] {{human_pos}} {unit} ({{rate}}) {{msg}}"
    );
    // indicatif's own {per_sec} prints four decimals.
    let rate = |state: &ProgressState, out: &mut dyn std::fmt::Write| {
        // A rate of whole units per second; the cast only drops the fraction.
        let per_second = state.per_sec().max(0.0) as u64;
        let _ = write!(out, "{}/s", HumanCount(per_second));
    };
    bar.set_style(style(&template).with_key("rate", rate));
    start(bar, prefix.into())
}

/// A bar over `total` bytes, with speed and time left:
/// `load [00:00:03] [#####>----] 12.50 MiB/40.00 MiB (4.1 MiB/s, 7s) MSG`.
pub fn bytes_bar(prefix: impl Into<Cow<'static, str>>, total: u64) -> Progress {
    let bar = new_bar(Some(total));
    bar.set_style(
        style(
            "{prefix} [{elapsed_precise}] [{wide_bar:.cyan/blue}] {bytes}/{total_bytes} \
             ({bytes_per_sec}, {eta}) {msg}",
        )
        .progress_chars("#>-"),
    );
    start(bar, prefix.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_valid_and_hidden_bars_take_updates() {
        // Under `cargo test` stderr is usually captured (not a terminal);
        // either way the calls below must not panic.
        let spinner = spinner("test");
        spinner.set_message("message");
        drop(spinner);
        let counter = counter("test", "lines");
        counter.set_position(10);
        drop(counter);
        let bar = bytes_bar("test", 100);
        bar.inc(50);
        bar.set_message("half");
        assert_eq!(bar.position(), 50);
    }
}
