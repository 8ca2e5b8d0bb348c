//! What the flight recorder (`fgbpf flight`) asks of a running probe
//! besides a capture's: the long waits the kernel told, forgetting what
//! fell before the kept window, and the on-CPU samples per process of
//! each drain (its triggers).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::counts::Forgotten;
use super::{events, Probe};

impl Probe {
    /// `fgbpf flight --wait-above`: the long waits that ended since the
    /// last call, each with the pid and the capture's time it began at
    /// (to the slice).
    pub fn take_long_waits(&mut self) -> Vec<(u32, events::LongWait, Duration)> {
        let width = self.counts.slicing().width;
        std::mem::take(&mut self.long_waits)
            .into_iter()
            .map(|(pid, w)| {
                let began = width * w.first_slice;
                (pid, w, began)
            })
            .collect()
    }

    /// `fgbpf flight`: forgets what was recorded before the capture's time
    /// `at`, and the runtimes' frame names of exited processes with no
    /// stack left; says which processes have stacks left, and which lost
    /// some.
    pub fn forget_before(&mut self, at: Duration) -> Forgotten {
        let first = self.slice_at(at);
        let left = self.counts.forget_before(first);
        // Asked once per process, however many names it has.
        let alive = std::cell::RefCell::new(HashMap::new());
        let keep = |pid: u32| {
            left.held.contains(&pid)
                || *alive
                    .borrow_mut()
                    .entry(pid)
                    .or_insert_with(|| std::path::Path::new(&format!("/proc/{pid}")).exists())
        };
        self.runtimes.forget(&keep);
        left
    }

    /// The user addresses the kept stacks of `pid` hold (what is kept
    /// located of an exited process need not be more).
    pub fn held_addresses(&self, pid: u32) -> HashSet<u64> {
        self.counts.held_addresses(pid)
    }

    /// About how many bytes the kept counts and their stacks hold.
    pub fn held_bytes(&self) -> usize {
        self.counts.bytes()
    }

    /// `fgbpf flight`'s CPU trigger: from now on, each drain tallies its
    /// on-CPU samples per process ([`Self::cpu_last_drain`]).
    pub fn tally_cpu(&mut self) {
        self.counts.tally_cpu();
    }

    /// On-CPU samples per process that the last drain read, and the time
    /// they were counted over (about a second); `None` before two drains.
    pub fn cpu_last_drain(&self) -> Option<(&HashMap<u32, u64>, Duration)> {
        self.counts.cpu()
    }
}
