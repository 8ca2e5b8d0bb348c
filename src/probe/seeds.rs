//! The user stacks of the waits that began before an off-CPU capture.
//! No switch-out walked them: the switch tracer was not there yet. At the
//! start, a task iterator (src/bpf/seeds.bpf.h) gives each user thread's
//! registers as its entry to the kernel saved them and its count of runs;
//! once the process's unwind tables are placed, the stack each seeded
//! thread waits in is walked here, in user space, with the same rows and
//! rules as the BPF walker (unwind.bpf.h, `walk_frame`), through
//! /proc/PID/mem. A thread that ran since (its count of runs moved) waits
//! elsewhere now: it is not walked, and counted. The walked stacks go to
//! the `[blocked before capture]` stacks of their threads.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use libbpf_rs::{Iter, MapCore, MapFlags};

use crate::bpf::{types, FgbpfSkel};
use super::unwind::Tables;
use super::{offcpu, Probe};
use crate::procs::unwind::{CfaType, RbpType};
use crate::profile::{RawStack, Walk, BEFORE_CAPTURE};

/// A stored stack's most frames (MAX_STACK_DEPTH, src/bpf/fgbpf.h).
const MAX_FRAMES: usize = 127;
/// The word the BPF walker puts for a signal's trampoline frame
/// (FG_SIGNAL_WORD: FG_RT_TAG | FG_RT_NATIVE << FG_RT_SHIFT).
const SIGNAL_WORD: u64 = (2 << 62) | (2 << 60);
/// Where the kernel's signal frame keeps the interrupted registers, from
/// rsp at the trampoline (FG_SIGCONTEXT*, src/bpf/fgbpf.h).
const SIGCONTEXT: u64 = 40;
const SIGCONTEXT_RBP: u64 = 80;
const SIGCONTEXT_RSP: u64 = 120;
const SIGCONTEXT_RIP: u64 = 128;
/// A stack is read no further than this above where the walk began (the
/// default stack limit): the addresses come from the target's memory.
const STACK_SPAN: u64 = 8 << 20;

/// How the seeded threads' stacks went, counted by thread among those
/// drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeedCounts {
    /// Walked from the saved registers.
    pub walked: u64,
    /// Ran before their process's tables were placed: waiting elsewhere by
    /// then.
    pub ran_first: u64,
    /// Their process was never read (it exited, or fgbpf had no tables
    /// for it), or its memory could not be read.
    pub unread: u64,
    /// The kernel has no task iterators (before 5.8): none was read.
    pub no_iterator: u64,
    /// The task iterator would not attach or read.
    pub iterator_failed: u64,
}

/// What became of one seeded thread.
enum Outcome {
    /// No registers: see [`Seeds::registers`].
    NoRegisters,
    Pending(types::fg_seed_regs),
    Walked(Arc<[u64]>, Walk),
    RanFirst,
    Unread,
}

/// Whether the registers were read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Registers {
    #[default]
    Read,
    /// The kernel has no task iterators.
    NoIterator,
    /// The iterator would not attach or read.
    Failed,
}

#[derive(Default)]
pub(super) struct Seeds {
    /// By thread id.
    threads: HashMap<u32, Outcome>,
    registers: Registers,
}

impl Seeds {
    /// Reads the registers of `tids` (threads seeded as waiting) through
    /// the task iterator, when the object has it loaded.
    pub fn read(skel: &FgbpfSkel<'_>, tids: &[u32], loaded: bool) -> Seeds {
        if tids.is_empty() {
            return Seeds::default();
        }
        let none = || tids.iter().map(|&t| (t, Outcome::NoRegisters)).collect();
        if !loaded {
            return Seeds { threads: none(), registers: Registers::NoIterator };
        }
        let Some(records) = iterate(skel) else {
            return Seeds { threads: none(), registers: Registers::Failed };
        };
        let mut threads: HashMap<u32, Outcome> = tids.iter().map(|&t| (t, Outcome::Unread)).collect();
        for r in records {
            if let Some(o) = threads.get_mut(&r.tid) {
                *o = Outcome::Pending(r);
            }
        }
        Seeds { threads, registers: Registers::Read }
    }

    /// Walks the pending threads whose process has its tables placed:
    /// those of `pids` (processes just read), or of any process.
    pub fn walk_ready<M: MapCore>(&mut self, tables: Option<&Tables>, proc_unwind: &M, pids: Option<&[u32]>) {
        let Some(tables) = tables else { return };
        if pids.is_some_and(|p| p.is_empty()) {
            return;
        }
        let mut files: HashMap<u32, Option<File>> = HashMap::new();
        for (&tid, outcome) in self.threads.iter_mut() {
            let Outcome::Pending(regs) = *outcome else { continue };
            if pids.is_some_and(|p| !p.contains(&regs.pid)) {
                continue;
            }
            let Some(proc) = proc_entry(proc_unwind, regs.pid) else { continue };
            // Without the kernel's count of runs (no schedstats), whether
            // it ran since cannot be told: not walked.
            if regs.pcount == 0 {
                *outcome = Outcome::Unread;
                continue;
            }
            if runs(regs.pid, tid) != Some(regs.pcount) {
                *outcome = Outcome::RanFirst;
                continue;
            }
            let file = files
                .entry(regs.pid)
                .or_insert_with(|| File::open(format!("/proc/{}/mem", regs.pid)).ok());
            let Some(file) = file.as_ref() else {
                *outcome = Outcome::Unread;
                continue;
            };
            let (ips, walk) = walk(&regs, &proc, tables, file);
            // Read again: a thread woken during the walk may have
            // overwritten what it read.
            *outcome = if runs(regs.pid, tid) != Some(regs.pcount) {
                Outcome::RanFirst
            } else if ips.is_empty() {
                Outcome::Unread
            } else {
                Outcome::Walked(ips.into(), walk)
            };
        }
    }

    /// Gives the `[blocked before capture]` stacks without user frames the
    /// stacks their threads were walked in, and counts the threads drawn.
    pub fn fill(&self, stacks: &mut [RawStack]) -> SeedCounts {
        let mut counts = SeedCounts::default();
        let mut seen = std::collections::HashSet::new();
        for s in stacks.iter_mut() {
            if s.root_note != Some(BEFORE_CAPTURE) || !s.user.is_empty() {
                continue;
            }
            let first = seen.insert(s.tid);
            let count = |c: &mut u64| {
                if first {
                    *c += 1;
                }
            };
            match self.threads.get(&s.tid) {
                Some(Outcome::Walked(ips, walk)) => {
                    s.user = ips.clone();
                    s.walk = Some(*walk);
                    count(&mut counts.walked);
                }
                Some(Outcome::RanFirst) => count(&mut counts.ran_first),
                Some(Outcome::Pending(_) | Outcome::Unread) => count(&mut counts.unread),
                Some(Outcome::NoRegisters) => match self.registers {
                    Registers::NoIterator => count(&mut counts.no_iterator),
                    _ => count(&mut counts.iterator_failed),
                },
                // Not seeded at the start: a held command's thread, stopped
                // at its entry point until the window restarted.
                None => {}
            }
        }
        counts
    }
}

impl Probe {
    /// Threads already blocked when tracing starts would otherwise go
    /// unseen until they wake (and, in a wall-clock capture, running ones
    /// until they switch out): start their clocks at `origin`, from /proc,
    /// and read the registers of those blocked (`iterator`: the object
    /// has the task iterator loaded).
    pub(super) fn seed_threads(&mut self, origin: u64, iterator: bool) {
        let Some(off) = &self.opts.offcpu else {
            return;
        };
        let waiting = offcpu::seed_threads(
            &self.skel.maps.starts,
            &self.opts.targets,
            (&off.states, off.skips_kernel_threads(&self.opts.targets), self.opts.measures_runs()),
            origin,
        );
        self.seeds = Seeds::read(&self.skel, &waiting, iterator);
        self.walk_seeds(None);
    }

    /// Walks the seeded threads of `pids` (processes just read; None: of
    /// any process) whose process has its tables by now.
    pub(super) fn walk_seeds(&mut self, pids: Option<&[u32]>) {
        self.seeds.walk_ready(self.tables.as_ref(), &self.skel.maps.proc_unwind, pids);
    }
}

/// Every user thread's record from the task iterator; None when it would
/// not attach or read.
fn iterate(skel: &FgbpfSkel<'_>) -> Option<Vec<types::fg_seed_regs>> {
    use std::io::Read;
    let link = skel.progs.seed_regs.attach().ok()?;
    let mut iter = Iter::new(&link).ok()?;
    let mut bytes = Vec::new();
    iter.read_to_end(&mut bytes).ok()?;
    let size = std::mem::size_of::<types::fg_seed_regs>();
    let records = bytes
        .chunks_exact(size)
        .filter_map(|c| {
            let mut r = types::fg_seed_regs::default();
            plain::copy_from_bytes(&mut r, c).ok().map(|()| r)
        })
        .collect();
    Some(records)
}

/// The process's entry in `proc_unwind`, if user space has read it.
pub(super) fn proc_entry<M: MapCore>(proc_unwind: &M, pid: u32) -> Option<types::fg_proc_unwind> {
    let bytes = proc_unwind.lookup(&pid.to_ne_bytes(), MapFlags::ANY).ok()??;
    let mut value = types::fg_proc_unwind::default();
    plain::copy_from_bytes(&mut value, &bytes).ok()?;
    // FG_PROC_READ: written by user space, not a fork's inherited copy.
    (value.flags & 1 != 0).then_some(value)
}

/// The thread's count of runs (sched_info.pcount) as /proc shows it.
fn runs(pid: u32, tid: u32) -> Option<u64> {
    offcpu::schedstat(pid, tid).map(|(_, _, runs)| runs)
}

/// Walks the stack from `regs` as the BPF walker would (unwind.bpf.h,
/// `walk_frame`): rows where the process's tables have them, the frame
/// pointer where they do not. Returns the frames, leaf first, and how the
/// walk ended.
fn walk(regs: &types::fg_seed_regs, proc: &types::fg_proc_unwind, tables: &Tables, mem: &File) -> (Vec<u64>, Walk) {
    let floor = regs.sp;
    let read = |addr: u64| -> Option<u64> {
        if addr < floor || addr.checked_add(8)? > floor.saturating_add(STACK_SPAN) {
            return None;
        }
        let mut word = [0u8; 8];
        mem.read_exact_at(&mut word, addr).ok()?;
        Some(u64::from_ne_bytes(word))
    };
    let maps = &proc.maps[..(proc.count as usize).min(proc.maps.len())];
    let (mut ip, mut sp, mut bp) = (regs.ip, regs.sp, regs.bp);
    let mut ips: Vec<u64> = Vec::new();
    let mut used_fp = false;
    let done = |used_fp: bool| if used_fp { Walk::Mixed } else { Walk::Tables };
    loop {
        ips.push(ip);
        if ips.len() >= MAX_FRAMES {
            return (ips, Walk::Depth);
        }
        // A caller's return address points after its call.
        let pc = if ips.len() == 1 { ip } else { ip.wrapping_sub(1) };
        let row = maps
            .iter()
            .find(|m| pc >= m.start && pc < m.end)
            .and_then(|m| tables.row_for(m, pc));
        // No row here: the frame pointer.
        let Some(r) = row.filter(|r| r.cfa() != CfaType::None) else {
            // rbp zero: the ABI's mark of the outermost frame.
            if bp == 0 {
                return (ips, done(used_fp));
            }
            if bp < sp {
                return (ips, Walk::Lost);
            }
            let (Some(saved), Some(ra)) = (read(bp), read(bp.wrapping_add(8))) else {
                return (ips, Walk::Lost);
            };
            (sp, bp, ip) = (bp + 16, saved, ra);
            used_fp = true;
            if ip == 0 {
                return (ips, done(used_fp));
            }
            continue;
        };
        let cfa = match r.cfa() {
            CfaType::Rsp => sp.wrapping_add_signed(i64::from(r.cfa_off)),
            CfaType::Rbp => bp.wrapping_add_signed(i64::from(r.cfa_off)),
            CfaType::Plt => sp.wrapping_add_signed(i64::from(r.cfa_off)) + if ip & 15 >= 11 { 8 } else { 0 },
            CfaType::End => return (ips, done(used_fp)),
            CfaType::Signal => {
                let ctx = sp.wrapping_add(SIGCONTEXT);
                let (Some(rip), Some(rsp), Some(rbp)) =
                    (read(ctx + SIGCONTEXT_RIP), read(ctx + SIGCONTEXT_RSP), read(ctx + SIGCONTEXT_RBP))
                else {
                    return (ips, Walk::Fault);
                };
                *ips.last_mut().expect("pushed above") = SIGNAL_WORD;
                // Kept a byte on, as the BPF walker keeps it.
                (ip, sp, bp) = (if rip == 0 { 0 } else { rip + 1 }, rsp, rbp);
                if ip == 0 {
                    return (ips, done(used_fp));
                }
                continue;
            }
            // None was left to the frame pointer above.
            CfaType::Unsupported | CfaType::None => return (ips, Walk::Unsupported),
        };
        let Some(ra) = read(cfa.wrapping_sub(8)) else {
            return (ips, Walk::Fault);
        };
        match r.rbp() {
            RbpType::AtCfa => {
                let Some(saved) = read(cfa.wrapping_add_signed(i64::from(r.rbp_off))) else {
                    return (ips, Walk::Fault);
                };
                bp = saved;
            }
            RbpType::Same => {}
            RbpType::Unsupported => bp = 0,
        }
        (sp, ip) = (cfa, ra);
        if ip == 0 {
            return (ips, done(used_fp));
        }
    }
}
