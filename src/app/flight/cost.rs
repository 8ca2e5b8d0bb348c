//! What the recorder costs the host, said every hour (to the journal,
//! under systemd) and when it stops: its own CPU as a share of the
//! machine, next to the host's rate of new processes and threads, which
//! is what drives it (each new program's memory map is read and parsed);
//! above 1%, what lowers it.

use std::fs;
use std::time::{Duration, Instant};

use super::summary;

/// How often the recorder says what it cost.
pub const SAY_EVERY: Duration = Duration::from_secs(3600);

/// The share of the machine above which the recorder says how to cost
/// less.
const GOAL_PCT: f64 = 1.0;

pub struct OwnUse {
    since: Instant,
    cpu: f64,
    clones: Option<u64>,
}

impl OwnUse {
    pub fn new() -> OwnUse {
        OwnUse {
            since: Instant::now(),
            cpu: summary::own_footprint().0,
            clones: clones(),
        }
    }

    /// What was used since the last time, when `every` has passed (or
    /// `every` is zero: at the end); starts the next period.
    pub fn news(&mut self, every: Duration) -> Option<String> {
        let took = self.since.elapsed();
        if took < every || took < Duration::from_secs(1) {
            return None;
        }
        let now = OwnUse::new();
        let said = said(
            took,
            now.cpu - self.cpu,
            now.clones.zip(self.clones).map(|(n, t)| n.saturating_sub(t)),
            cpus(),
        );
        *self = now;
        Some(said)
    }
}

fn said(took: Duration, cpu: f64, clones: Option<u64>, cpus: u32) -> String {
    let secs = took.as_secs_f64();
    let pct = 100.0 * cpu / secs / f64::from(cpus.max(1));
    let mut out = format!(
        "own use over the last {:.0} min: {cpu:.1} s CPU, {pct:.2}% of the {cpus}-CPU machine (its BPF programs, run in the recorded tasks, come on top: BENCHMARKS.md, \"Flight cost by churn\")",
        secs / 60.0
    );
    if let Some(n) = clones {
        out.push_str(&format!("; the host made {:.0} processes and threads a second", n as f64 / secs));
    }
    if pct > GOAL_PCT {
        out.push_str(&format!(
            "; above {GOAL_PCT}%: a host that starts many short programs costs most (each one's memory map is read); record fewer with -p, --cgroup, --unit or --container, or sample less with -F"
        ));
    }
    out
}

/// Processes and threads the host has made since boot (/proc/stat).
fn clones() -> Option<u64> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("processes "))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPUs online: the machine the share is of.
fn cpus() -> u32 {
    // SAFETY: sysconf takes no pointers.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_of_the_whole_machine_and_the_remedy_comes_above_one_percent() {
        let hour = Duration::from_secs(3600);
        let text = said(hour, 72.0, Some(3_600_000), 2);
        assert!(text.contains("72.0 s CPU, 1.00% of the 2-CPU machine"), "{text}");
        assert!(text.contains("1000 processes and threads a second"), "{text}");
        assert!(!text.contains("record fewer"), "{text}");
        let text = said(hour, 255.8, None, 2);
        assert!(text.contains("3.55% of the 2-CPU machine"), "{text}");
        assert!(text.contains("record fewer with -p"), "{text}");
        assert!(!text.contains("a second"), "{text}");
    }
}
