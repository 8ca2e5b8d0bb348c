//! What the runtimes' walkers read in a capture and what they could not,
//! as the summary and the report say it (put together by
//! [`super::report`]). How far the interpreters' stacks could be read
//! (CPython's, Ruby's and PHP's, whose walkers share one contract, and Go's
//! goroutine on its stacks): per process, the share of its weight whose interpreter frames were read to
//! the outermost one, and why the rest were not; and the processes fgbpf
//! could not read at all. Java's and Node.js's: [`super::java::walks`],
//! [`super::v8::walks`].

use std::collections::BTreeMap;

use crate::bpf::types::fg_stats;
use crate::profile::names::sanitize;
use crate::profile::{InterpWalk, RawStack, BEFORE_CAPTURE};

/// One interpreter process's stacks by how their interpreter frames were
/// read, weighted like the profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterpWalks {
    pub pid: u32,
    pub process: String,
    /// e.g. "3.11".
    pub version: String,
    pub total: u64,
    pub whole: u64,
    /// Threads without a Python thread state (native threads).
    pub no_thread: u64,
    /// Cut at the 127-frame limit.
    pub cut: u64,
    /// Cut by a failed read of the interpreter's memory.
    pub fault: u64,
    /// Taken before fgbpf was reading the interpreter: before it had found
    /// it in the process (its first moments, while fgbpf read its
    /// binaries), or before the walkers joined a staged start
    /// (src/probe/staged.rs). Native frames only.
    pub early: u64,
}

/// An interpreter process fgbpf could not read: (pid, process, why).
pub type Unreadable = (u32, String, String);

/// Per interpreter process of one language (`versions`: pid → "3.11"),
/// how its stacks' interpreter frames were read.
pub fn by_process<'a>(
    raw: impl IntoIterator<Item = (&'a RawStack, u64)>,
    versions: &BTreeMap<u32, String>,
    name_of: impl Fn(u32, &str) -> String,
) -> Vec<InterpWalks> {
    let mut per: BTreeMap<u32, InterpWalks> = BTreeMap::new();
    for (r, weight) in raw {
        let Some(version) = versions.get(&r.pid) else { continue };
        // A stack with no user frames was walked neither way, and one of
        // a thread blocked since before the capture by user space from
        // its saved registers (src/probe/seeds.rs), native frames only:
        // not counted.
        if (r.user.is_empty() || r.root_note == Some(BEFORE_CAPTURE)) && r.interp_walk.is_none() {
            continue;
        }
        let e = per.entry(r.pid).or_insert_with(|| InterpWalks {
            pid: r.pid,
            process: name_of(r.pid, &r.comm),
            version: version.clone(),
            ..Default::default()
        });
        e.total += weight;
        *match r.interp_walk {
            Some(InterpWalk::Whole) => &mut e.whole,
            Some(InterpWalk::NoThread) => &mut e.no_thread,
            Some(InterpWalk::Cut) => &mut e.cut,
            Some(InterpWalk::Fault) => &mut e.fault,
            None => &mut e.early,
        } += weight;
    }
    let mut out: Vec<InterpWalks> = per.into_values().filter(|p| p.total > 0).collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.total));
    out
}

/// What the report of the runtimes needs besides what they found.
pub struct Context<'a> {
    /// The capture's stacks, weighted as its main view is.
    pub weighed: &'a [(&'a RawStack, u64)],
    /// Microseconds per on-CPU sample (1 without on-CPU samples).
    pub period_us: u64,
    /// The probe's counters (the walkers' own counts of frames).
    pub stats: &'a fg_stats,
    /// Why the walkers the user wanted were not loaded.
    pub refused: &'a crate::runtimes::Refused,
    /// A process's name, from its pid and its stacks' name.
    pub name_of: &'a dyn Fn(u32, &str) -> String,
    /// Whether a process writes a perf map.
    pub perf_map: &'a dyn Fn(u32) -> bool,
}

impl Context<'_> {
    /// A process's name, from its pid alone.
    pub fn process(&self, pid: u32) -> String {
        (self.name_of)(pid, "")
    }

    /// Processes a runtime could not read, (pid, why), each named.
    pub fn unreadable(&self, list: &[(u32, String)]) -> Vec<Unreadable> {
        list.iter().map(|(pid, why)| (*pid, self.process(*pid), why.clone())).collect()
    }

    /// Frames a runtime could not name, per (pid, why, remedy), with each
    /// process named: (pid, process, why, remedy, on-CPU samples, off-CPU
    /// microseconds).
    pub fn unnamed(&self, weights: &super::shared::Unnamed) -> Vec<(u32, String, &'static str, &'static str, u64, u64)> {
        weights
            .iter()
            .map(|(&(pid, why, remedy), &(samples, us))| (pid, self.process(pid), why, remedy, samples, us))
            .collect()
    }
}

/// Interpreter processes listed.
const LISTED: usize = 5;

/// How the summary speaks of one language's interpreter.
pub struct Lang {
    /// "Python", "Ruby".
    pub name: &'static str,
    /// The runtime named with its version: "CPython", "Ruby".
    pub runtime: &'static str,
    /// What its stacks show when its frames are not read.
    pub native: &'static str,
    /// Where time was spent that ran none of its code.
    pub outside: &'static str,
    /// Said of the time whose stack was read whole, cut at the depth
    /// limit, or cut by a failed read; and of a process not read.
    pub whole: &'static str,
    pub cut: &'static str,
    pub fault: &'static str,
    pub not_read: &'static str,
    /// Said of the time before the process was read.
    pub early: &'static str,
}

/// Lines for the summary and the report.
pub fn lines(walks: &[InterpWalks], unreadable: &[Unreadable], lang: &Lang) -> Vec<String> {
    let name = lang.name;
    let mut out = Vec::new();
    for p in walks.iter().take(LISTED) {
        let pct = |w: u64| w as f64 * 100.0 / p.total as f64;
        let mut parts = vec![format!("{:.1}% of its time {}", pct(p.whole), lang.whole)];
        for (w, why) in [
            (p.no_thread, lang.outside.to_string()),
            (p.cut, lang.cut.to_string()),
            (p.fault, lang.fault.to_string()),
            (p.early, lang.early.to_string()),
        ] {
            if w > 0 {
                parts.push(format!("{:.1}% {why}", pct(w)));
            }
        }
        out.push(format!(
            "{name}: pid {} ({}, {} {}): {}",
            p.pid,
            sanitize(&p.process),
            lang.runtime,
            p.version,
            parts.join("; ")
        ));
    }
    if walks.len() > LISTED {
        out.push(format!("{name}: {} more interpreter processes", walks.len() - LISTED));
    }
    for (pid, process, why) in unreadable.iter().take(LISTED) {
        out.push(format!(
            "{name}: pid {pid} ({}): {}, {}; its stacks show {}",
            sanitize(process),
            lang.not_read,
            sanitize(why),
            lang.native
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(pid: u32, walk: Option<InterpWalk>) -> RawStack {
        RawStack {
            pid,
            comm: "python3".into(),
            user: vec![0x40_1000].into(),
            interp_walk: walk,
            ..Default::default()
        }
    }

    #[test]
    fn shares_are_per_interpreter_process() {
        let stacks = [
            raw(1, Some(InterpWalk::Whole)),
            raw(1, Some(InterpWalk::NoThread)),
            raw(2, Some(InterpWalk::Whole)),
            raw(3, None),
            raw(2, None),
            // Blocked since before the capture: no user stack, not counted.
            RawStack { pid: 2, ..Default::default() },
        ];
        let versions = BTreeMap::from([(1, "3.11".to_string()), (2, "3.12".to_string())]);
        let walks = by_process(stacks.iter().map(|r| (r, 10)), &versions, |_, c| c.to_string());
        assert_eq!(walks.len(), 2);
        let one = walks.iter().find(|p| p.pid == 1).unwrap();
        assert_eq!((one.total, one.whole, one.no_thread), (20, 10, 10));
        let two = walks.iter().find(|p| p.pid == 2).unwrap();
        assert_eq!((two.total, two.whole, two.early), (20, 10, 10));
        let text = lines(&walks, &[(4, "python3.14".into(), "CPython 3.14 (fgbpf reads 3.8 to 3.13)".into())], &crate::runtimes::python::walker::LANG);
        assert!(text[0].contains("50.0% of its time with the Python stack read whole; 50.0% in threads not running Python"), "{text:?}");
        assert!(text[1].contains("50.0% taken before fgbpf was reading the interpreter"), "{text:?}");
        assert!(text.last().unwrap().contains("pid 4 (python3.14): Python frames not read, CPython 3.14"), "{text:?}");
    }
}
