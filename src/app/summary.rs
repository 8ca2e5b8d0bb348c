//! The end of a capture, said once: the lines on stderr (what was
//! recorded, what was lost and how to avoid it, what was written, fgbpf's
//! own cost), or with `--json` the same facts as one JSON object on stdout
//! for scripts. `--quiet` keeps stderr for errors only.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use super::session::window::EndReason;
use crate::format::report::FINDINGS;
use crate::format::unresolved;
use crate::analysis::findings::{findings, Finding};
use crate::analysis::idle::{idle, Idle};
use crate::analysis::waits::Sites;
use crate::analysis::{pct, Lens};
use crate::profile::{thousands, Profile};
use crate::procs::Held;

static QUIET: AtomicBool = AtomicBool::new(false);
/// Lines said while a full-screen view owns the terminal (`fgbpf top`):
/// on stderr they would be drawn over by it, or garble it.
static DEFERRED: Mutex<Option<Deferred>> = Mutex::new(None);
/// Deferred lines kept to be printed at the end; the rest counted.
const DEFERRED_MAX: usize = 200;

#[derive(Default)]
struct Deferred {
    lines: Vec<String>,
    over: usize,
    /// The newest line the view has not shown yet.
    unseen: Option<String>,
}

/// What a finished capture wrote.
pub struct Outcome {
    pub written: Vec<PathBuf>,
    pub end: EndReason,
    /// The `-- COMMAND`'s exit status (128 + signal when killed) if it
    /// ended; fgbpf exits with it.
    pub command_status: Option<i32>,
}

/// `--quiet`: from now on [`say`] prints nothing.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// One informational line on stderr, `fgbpf: ` first, unless `--quiet`
/// (held while [`defer`] is in force).
pub fn say(line: impl std::fmt::Display) {
    if quiet() {
        return;
    }
    let line = format!("fgbpf: {line}");
    if let Some(d) = DEFERRED.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        d.push(line);
        return;
    }
    eprintln!("{line}");
}

impl Deferred {
    fn push(&mut self, line: String) {
        if self.lines.len() < DEFERRED_MAX {
            self.lines.push(line.clone());
        } else {
            self.over += 1;
        }
        self.unseen = Some(line);
    }
}

/// From now on [`say`] holds its lines (a view owns the terminal) until
/// [`print_deferred`].
pub fn defer() {
    *DEFERRED.lock().unwrap_or_else(|e| e.into_inner()) = Some(Deferred::default());
}

/// The newest held line not yet taken, for the view to show.
pub fn newest_deferred() -> Option<String> {
    DEFERRED.lock().unwrap_or_else(|e| e.into_inner()).as_mut().and_then(|d| d.unseen.take())
}

/// Prints the held lines (the terminal is back) and stops holding.
pub fn print_deferred() {
    let Some(d) = DEFERRED.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
    for line in &d.lines {
        eprintln!("{line}");
    }
    if d.over > 0 {
        eprintln!("fgbpf: ({} more lines said while the view was up, not kept)", d.over);
    }
}

/// What `--json` prints.
#[derive(Serialize)]
struct Json<'a> {
    /// "duration", "interrupted", "command-exited", "targets-gone".
    end: &'static str,
    command_status: Option<i32>,
    duration_s: f64,
    unit: &'static str,
    total: u64,
    unique_stacks: usize,
    unresolved_leaf_pct: f64,
    lost: Vec<Lost<'a>>,
    written: &'a [PathBuf],
    own_cpu_s: f64,
    own_peak_rss_mb: f64,
    /// The heaviest findings, as in report.txt.
    findings: Vec<Finding>,
    /// What the symbolizer's process registry held at the end: bounded by
    /// the live processes, the binaries and the profile's addresses.
    registry: Held,
    /// The kernel fallbacks taken (FGBPF_FORCE_FALLBACK, or features the
    /// kernel lacks), one sentence each; empty when none.
    kernel_fallbacks: &'a [String],
    /// The same, one word each (docs/kernels.md, "Supported kernels").
    kernel_fallback_words: &'a [&'static str],
    /// The window recorded, [start, end] on CLOCK_MONOTONIC in
    /// nanoseconds, to line the capture up with other accounts of the same
    /// seconds (/proc/TID/schedstat, perf's timestamps).
    window_monotonic_ns: Option<[u64; 2]>,
    /// Where names came from beyond the binaries and the host's debug
    /// files (each debuginfod server used, and its cache), one sentence
    /// each; empty when none was asked.
    symbols_fetched: &'a [String],
}

#[derive(Serialize)]
struct Lost<'a> {
    what: &'a str,
    count: u64,
    remedy: &'a str,
}

/// Ends a capture command: prints the summary, with what the symbolizer's
/// process registry held (`held`) in `--json`; `wake`, the offwake view,
/// names who woke the findings' waits.
/// `notes`: what the capture cut at its edges or left out (one sentence
/// each), said after the findings and the losses.
pub fn finish(
    profile: &Profile,
    wake: Option<&Profile>,
    notes: &[String],
    written: Vec<PathBuf>,
    held: Held,
    end: EndReason,
    command_status: Option<i32>,
    json: bool,
) -> Outcome {
    // The findings once, for both the JSON and the lines.
    let sites = Sites::learn(profile, Lens::default());
    let idle = idle(profile, &sites);
    let mut found = findings(profile, &sites, &idle, FINDINGS);
    if let Some(wake) = wake {
        crate::analysis::woken::name_wakers(&mut found, wake, &sites);
    }
    if json {
        let mut j = to_json(profile, &written, end, command_status, found.clone());
        j.registry = held;
        println!("{}", serde_json::to_string(&j).expect("plain data serializes"));
    }
    if !quiet() {
        eprint!("{}", text(profile, notes, &written, &found, &idle));
    }
    Outcome {
        written,
        end,
        command_status,
    }
}

fn unresolved_pct(profile: &Profile) -> f64 {
    pct(unresolved::leaf_weight(profile), profile.total())
}

fn to_json<'a>(
    profile: &'a Profile,
    written: &'a [PathBuf],
    end: EndReason,
    command_status: Option<i32>,
    findings: Vec<Finding>,
) -> Json<'a> {
    let (cpu, rss_mb) = own_footprint();
    Json {
        end: match end {
            EndReason::Duration => "duration",
            EndReason::Interrupted => "interrupted",
            EndReason::CommandExited(_) => "command-exited",
            EndReason::TargetsGone => "targets-gone",
        },
        command_status,
        duration_s: profile.meta.duration.as_secs_f64(),
        unit: profile.unit.name(),
        total: profile.total(),
        unique_stacks: profile.stacks().len(),
        unresolved_leaf_pct: unresolved_pct(profile),
        lost: profile
            .meta
            .losses
            .entries
            .iter()
            .map(|l| Lost {
                what: &l.what,
                count: l.count,
                remedy: &l.remedy,
            })
            .collect(),
        written,
        own_cpu_s: cpu,
        own_peak_rss_mb: rss_mb,
        findings,
        registry: Held::default(),
        kernel_fallbacks: &profile.meta.kernel,
        kernel_fallback_words: &profile.meta.kernel_words,
        window_monotonic_ns: profile.meta.window_ns.map(|(a, b)| [a, b]),
        symbols_fetched: &profile.meta.symbols,
    }
}

/// The end-of-capture summary lines: the answer first.
fn text(profile: &Profile, notes: &[String], written: &[PathBuf], found: &[Finding], idle: &Idle) -> String {
    let total = profile.total();
    let mut out: String = found
        .iter()
        .map(|f| format!("fgbpf: {}\n", f.text))
        .collect();
    if let Some(line) = idle.line() {
        out += &format!("fgbpf: {line}\n");
    }
    out += &format!(
        "fgbpf: {} in {} unique stacks over {:.1} s; {:.1}% with an unresolved leaf frame\n",
        match profile.meta.kind {
            crate::profile::Kind::Alloc => format!("{} bytes allocated (estimated)", thousands(total)),
            _ => profile.unit.amount(total),
        },
        thousands(profile.stacks().len() as u64),
        profile.meta.duration.as_secs_f64(),
        unresolved_pct(profile)
    );
    if profile.meta.losses.entries.is_empty() {
        out.push_str("fgbpf: lost: none\n");
    }
    for l in &profile.meta.losses.entries {
        out.push_str(&format!(
            "fgbpf: lost {} {} ({})\n",
            l.count, l.what, l.remedy
        ));
    }
    for line in notes {
        out.push_str(&format!("fgbpf: {line}\n"));
    }
    for line in &profile.meta.kernel {
        out.push_str(&format!("fgbpf: kernel fallback: {line}\n"));
    }
    for line in &profile.meta.symbols {
        out.push_str(&format!("fgbpf: {line}\n"));
    }
    if let Some(u) = &profile.meta.unwinding {
        for line in u.lines() {
            out.push_str(&format!("fgbpf: {line}\n"));
        }
    }
    for line in unresolved::summary_lines(profile) {
        out.push_str(&format!("fgbpf: {line}\n"));
    }
    if total == 0 {
        out.push_str("fgbpf: no samples: the target did not run during the capture\n");
    }
    for p in written {
        out.push_str(&format!("fgbpf: wrote {}\n", p.display()));
    }
    let (cpu, rss_mb) = own_footprint();
    out.push_str(&format!(
        "fgbpf: own use: {cpu:.2} s CPU, {rss_mb:.0} MB peak memory\n"
    ));
    out
}

/// fgbpf's own CPU time (user + system) and peak resident memory, so that
/// its cost on the host is visible after every capture.
pub(super) fn own_footprint() -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        secs(usage.ru_utime) + secs(usage.ru_stime),
        // FGBPF_MEMORY_STAGES resets the kernel's peak at each step.
        (usage.ru_maxrss as u64).max(super::stages::highest_kb()) as f64 / 1024.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferred_lines_are_bounded_and_the_newest_shown_once() {
        let mut d = Deferred::default();
        for i in 0..DEFERRED_MAX + 5 {
            d.push(format!("line {i}"));
        }
        assert_eq!((d.lines.len(), d.over), (DEFERRED_MAX, 5));
        assert_eq!(d.lines[0], "line 0");
        assert_eq!(d.unseen.take().as_deref(), Some(format!("line {}", DEFERRED_MAX + 4).as_str()));
        assert_eq!(d.unseen, None);
    }
}
