//! What the registry keeps of processes that exited: where each address
//! of their stacks lay, while a capture (or `fgbpf flight`'s window)
//! still holds those stacks.

use std::collections::HashSet;

use super::{maps, Registry, Target};

impl Registry {
    /// Lets go of an exited process whose stacks are all drained, keeping
    /// where each of `addrs` (the distinct user addresses of its stacks)
    /// lies, and the lines of its perf map they need. A process running
    /// under the PID again (reused since), or whose exit is still to be
    /// retired (it exited since, its last stacks not yet drained), keeps
    /// its map: its stacks are named with it.
    pub fn retire(&mut self, pid: u32, addrs: &[u64]) {
        if !self.procs.contains_key(&pid) {
            return;
        }
        let at = self.locator(pid);
        let located: Vec<(u64, Target)> = addrs.iter().map(|&a| (a, at.locate(a))).collect();
        let jit: Vec<u64> = located
            .iter()
            .filter(|(_, t)| matches!(t, Target::Jit | Target::Unmapped))
            .map(|&(a, _)| a)
            .collect();
        let perf_map = match jit.is_empty() {
            true => None,
            false => self.perf_map(pid).map(|m| m.keep_only(&jit)),
        };
        let r = self.retired.entry(pid).or_default();
        r.located.extend(located);
        r.located.sort_by_key(|&(a, _)| a);
        r.located.dedup_by_key(|&mut (a, _)| a);
        if perf_map.is_some() {
            r.perf_map = perf_map;
        }
        let Some(p) = self.procs.get_mut(&pid) else { return };
        p.exits = p.exits.saturating_sub(1);
        if p.exits > 0 {
            return;
        }
        // Running under the PID again (a zombie's vsize is 0); not asked
        // of one whose exit was told and that was not announced since.
        if p.alive && maps::vsize(pid).is_some_and(|size| size != 0) {
            return;
        }
        if let Some(old) = self.procs.remove(&pid) {
            self.release_root(old.root);
            self.retired_count += 1;
        }
    }

    /// Lets go of what is kept of exited processes whose stacks are no
    /// longer held (`fgbpf flight` forgets the past): those not in `held`,
    /// and of the others, the addresses their kept stacks no longer hold
    /// (`addresses`, `None` when they are as before): a PID used again and
    /// again would otherwise gather every address of every process that
    /// had it.
    pub fn forget_retired(&mut self, held: &HashSet<u32>, addresses: &dyn Fn(u32) -> Option<HashSet<u64>>) {
        self.retired.retain(|pid, r| {
            if !held.contains(pid) {
                return false;
            }
            if let Some(kept) = addresses(*pid) {
                r.located.retain(|(a, _)| kept.contains(a));
                r.located.shrink_to_fit();
            }
            true
        });
        // Names too, but of the processes still read (alive).
        let procs = &self.procs;
        self.names.retain(|pid, _| held.contains(pid) || procs.contains_key(pid));
    }
}
