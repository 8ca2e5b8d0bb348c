//! What the registry keeps of processes that exited: where each address
//! of their stacks lay, while a capture (or `fgbpf flight`'s window)
//! still holds those stacks.

use std::collections::HashSet;

use super::{same_start, Registry, Target};

impl Registry {
    /// Lets go of an exited process (`pid` since `start`) whose stacks
    /// are all drained, keeping where each of `addrs` (the distinct user
    /// addresses of its stacks) lies, and the lines of its perf map they
    /// need. Another process under the PID since keeps its own map.
    pub fn retire(&mut self, pid: u32, start: u32, addrs: &[u64]) {
        let is_now = self.procs.get(&pid).is_some_and(|p| same_start(p.start, start));
        if !is_now && !self.older.contains_key(&(pid, start)) {
            return;
        }
        let at = self.locator(pid, start);
        let located: Vec<(u64, Target)> = addrs.iter().map(|&a| (a, at.locate(a))).collect();
        let jit: Vec<u64> = located
            .iter()
            .filter(|(_, t)| matches!(t, Target::Jit | Target::Unmapped))
            .map(|&(a, _)| a)
            .collect();
        let perf_map = match (jit.is_empty(), is_now) {
            (true, _) => None,
            (false, true) => self.perf_map(pid).map(|m| m.keep_only(&jit)),
            // An older process's perf map is not read again: JIT frames of
            // a process whose PID was given again before it was retired
            // stay unnamed rather than be named from the new one's.
            (false, false) => None,
        };
        let r = self.retired.entry((pid, start)).or_default();
        r.located.extend(located);
        r.located.sort_by_key(|&(a, _)| a);
        r.located.dedup_by_key(|&mut (a, _)| a);
        if perf_map.is_some() {
            r.perf_map = perf_map;
        }
        let old = match is_now {
            true => self.procs.remove(&pid),
            false => self.older.remove(&(pid, start)),
        };
        if let Some(old) = old {
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
        self.retired.retain(|(pid, _), r| {
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
