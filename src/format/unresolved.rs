//! Says which processes' samples end in frames that could not be named,
//! why, and what would name them: a section of report.txt and lines of the
//! end-of-capture summary.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::analysis::pct;
// Process and file names come from the target: terminal controls are
// kept out of the summary and the report.
use crate::profile::names::printable;
use crate::profile::{Profile, Unresolved, UnresolvedReason};

/// Processes listed in report.txt; the rest are counted.
const REPORT_PROCESSES: usize = 20;
/// Processes listed in the terminal summary.
const SUMMARY_PROCESSES: usize = 5;
/// Processes whose unresolved share is below this (percent of their own
/// weight) stay out of the summary: a stray frame is not worth a line.
const SUMMARY_MIN_PCT: f64 = 1.0;

/// The weight of all stacks whose leaf frame is unresolved: from the
/// capture's own accounting (which also counts `module+0x...` leaves), or,
/// for a profile read from a file, its `[unknown]` leaves.
pub fn leaf_weight(profile: &Profile) -> u64 {
    if profile.unresolved.is_empty() {
        return profile.unknown_leaf_weight();
    }
    profile.unresolved.iter().map(Unresolved::weight).sum()
}

/// What went unnamed and the remedy, for one reason.
pub fn explain(reason: &UnresolvedReason) -> (String, &'static str) {
    match reason {
        UnresolvedReason::NoSymbols { module } => (
            format!("no symbols in {}", printable(module)),
            "install its debug symbols (the -dbgsym, -dbg or -debuginfo package), pass --debug-dir DIR holding its .build-id/xx/*.debug file, or name a debuginfod server in DEBUGINFOD_URLS (kept through sudo as `sudo DEBUGINFOD_URLS=\"$DEBUGINFOD_URLS\" fgbpf ...`)",
        ),
        UnresolvedReason::Unreadable { module } => (
            format!("{} could not be opened", printable(module)),
            "run fgbpf as root: reading another process's mapped files needs CAP_SYS_ADMIN",
        ),
        UnresolvedReason::JitWithoutPerfMap => (
            "JIT code, and the process writes no perf map".into(),
            "start Node with --perf-basic-prof, Python 3.12+ with -X perf, Java with a perf-map agent",
        ),
        UnresolvedReason::NotInPerfMap => (
            "JIT code missing from the process's perf map".into(),
            "start the runtime with its perf map enabled from the beginning; Node: add --interpreted-frames-native-stack",
        ),
        UnresolvedReason::ProcessGone => (
            "the process exited before its memory map could be read".into(),
            "none for this capture; a process living longer than ~50 ms after its first sample is read in time",
        ),
        UnresolvedReason::Unmapped => (
            "code mapped after fgbpf last read the process's memory map".into(),
            "none for this capture (e.g. a library loaded just before the process exited)",
        ),
        UnresolvedReason::Kernel => (
            "kernel address missing from kallsyms".into(),
            "run as root, with kernel.kptr_restrict below 2",
        ),
        UnresolvedReason::Runtime { why, remedy } => (why.to_string(), remedy),
    }
}

/// The report.txt section: every process with unresolved leaf frames,
/// heaviest first, with each reason's share of that process's weight.
pub fn render(profile: &Profile) -> String {
    let unit = profile.unit.name();
    let mut out = String::new();
    if profile.unresolved.is_empty() {
        out.push_str("\nUnresolved leaf frames: none\n");
        return out;
    }
    let totals = process_totals(profile);
    let all = profile.total();
    let _ = writeln!(
        out,
        "\nUnresolved leaf frames: {:.1}% of all {unit} (leaf: the innermost user frame, or kernel frame when there is none)",
        pct(leaf_weight(profile), all)
    );
    for u in profile.unresolved.iter().take(REPORT_PROCESSES) {
        let total = totals.get(&u.pid).copied().unwrap_or(0).max(u.weight());
        let _ = writeln!(
            out,
            "  {} (pid {}): {:.1}% of its {total} {unit}",
            printable(&u.process),
            u.pid,
            pct(u.weight(), total)
        );
        for (reason, w) in &u.reasons {
            let (what, remedy) = explain(reason);
            let _ = writeln!(
                out,
                "    {:>5.1}%  {what}; remedy: {remedy}",
                pct(*w, total)
            );
        }
    }
    let more = profile.unresolved.len().saturating_sub(REPORT_PROCESSES);
    if more > 0 {
        let _ = writeln!(out, "  ... and {more} more processes");
    }
    out
}

/// Lines for the end-of-capture summary (without a `fgbpf: ` prefix): the
/// processes with a noticeable unresolved share, each with its main reason
/// and remedy. Empty when there is nothing to act on.
pub fn summary_lines(profile: &Profile) -> Vec<String> {
    let totals = process_totals(profile);
    let notable: Vec<(&Unresolved, u64)> = profile
        .unresolved
        .iter()
        .map(|u| (u, totals.get(&u.pid).copied().unwrap_or(0).max(u.weight())))
        .filter(|&(u, total)| pct(u.weight(), total) >= SUMMARY_MIN_PCT)
        .collect();
    let mut lines: Vec<String> = notable
        .iter()
        .take(SUMMARY_PROCESSES)
        .map(|&(u, total)| {
            let (reason, w) = &u.reasons[0];
            let (what, remedy) = explain(reason);
            let mut line = format!(
                "{} (pid {}): {:.1}% of its {} unresolved: {:.1}% {what} ({remedy})",
                printable(&u.process),
                u.pid,
                pct(u.weight(), total),
                profile.unit.name(),
                pct(*w, total)
            );
            if u.reasons.len() > 1 {
                line.push_str("; other reasons in report.txt");
            }
            line
        })
        .collect();
    if notable.len() > SUMMARY_PROCESSES {
        lines.push(format!(
            "{} more processes have unresolved frames (see report.txt)",
            notable.len() - SUMMARY_PROCESSES
        ));
    }
    lines
}

fn process_totals(profile: &Profile) -> HashMap<u32, u64> {
    let mut totals = HashMap::new();
    for s in profile.stacks() {
        if let Some(t) = s.thread {
            *totals.entry(profile.thread(t).pid).or_default() += s.weight;
        }
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Stack, Thread, Unit};

    fn profile() -> Profile {
        let mut p = Profile::new(Unit::Samples);
        let t = p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 42,
            tid: 42,
            process: "node".into(),
            name: "node".into(),
        });
        let u = p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 7,
            tid: 7,
            process: "ok\x1b[2J".into(),
            name: "ok".into(),
        });
        let f = p.intern_frame(Frame::new("main", FrameKind::User));
        p.push(Stack {
            thread: Some(t),
            frames: vec![f].into(),
            weight: 200,
            ..Default::default()
        });
        p.push(Stack {
            thread: Some(u),
            frames: vec![f].into(),
            weight: 1000,
            ..Default::default()
        });
        p.unresolved = vec![
            Unresolved {
                pid: 42,
                process: "node".into(),
                reasons: vec![
                    (UnresolvedReason::JitWithoutPerfMap, 50),
                    (
                        UnresolvedReason::NoSymbols {
                            module: "libx.so".into(),
                        },
                        10,
                    ),
                ],
            },
            Unresolved {
                pid: 7,
                process: "ok\x1b[2J".into(),
                reasons: vec![(UnresolvedReason::ProcessGone, 1)],
            },
        ];
        p
    }

    #[test]
    fn report_gives_shares_reasons_and_remedies() {
        let text = render(&profile());
        assert!(text.contains("5.1% of all samples"), "{text}");
        assert!(
            text.contains("node (pid 42): 30.0% of its 200 samples"),
            "{text}"
        );
        assert!(text.contains(" 25.0%  JIT code"), "{text}");
        assert!(text.contains("--perf-basic-prof"), "{text}");
        assert!(
            text.contains("no symbols in libx.so; remedy: install its debug symbols"),
            "{text}"
        );
        assert!(
            text.contains("ok?[2J (pid 7)") && !text.contains('\x1b'),
            "{text}"
        );
        assert_eq!(leaf_weight(&profile()), 61);
    }

    #[test]
    fn summary_skips_processes_with_a_sliver() {
        let lines = summary_lines(&profile());
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("node (pid 42): 30.0% of its samples unresolved: 25.0% JIT code")
        );
        assert!(lines[0].contains("other reasons in report.txt"));
    }

    #[test]
    fn nothing_unresolved() {
        let p = Profile::new(Unit::Samples);
        assert!(summary_lines(&p).is_empty());
        assert_eq!(render(&p), "\nUnresolved leaf frames: none\n");
    }
}
