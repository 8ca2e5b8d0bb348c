//! The BEAM in a capture: each process the probe reads is checked for the
//! emulator ([`super::find`]); the JIT's code map of those found is read
//! at each drain for the modules loaded since, and handed to the
//! symbolizer, which names the JIT's code from it before any perf map.
//! An interpreter's (OTP 23) stacks are named as they are stored, while
//! the node lives ([`super::interp`]).

use std::collections::HashMap;

use libbpf_rs::{MapCore, MapFlags};

use super::codemap::CodeMap;
use super::interp::{self, Names};
use super::process::{strip, Labeller, ERLANG_PROCESS, MARKER};
use super::{may_be_beam, Emulator, Node};
use crate::bpf::{types, FgbpfSkel};
use crate::procs::mem::Mem;
use crate::procs::perf_map::PerfMap;
use crate::profile::RawStack;
use crate::procs::frame_kind::FrameKind;
use crate::runtimes::shared::{by_pid, name_words, runtime_binary};
use crate::runtimes::{Found, Runtime, Settings};
use crate::symbolize::{Named, UnresolvedReason, UNKNOWN};

struct Process {
    node: Node,
    mem: Mem,
    map: CodeMap,
    /// An interpreter's names; `None` while its emulator has not started
    /// (read again at each tick until it has; one that cannot be read is
    /// moved to `unsupported`).
    names: Option<Names>,
    /// What the walker was last given (`beam_procs`).
    given: Option<(u64, u64, u64)>,
}

pub(crate) struct Beam {
    procs: HashMap<u32, Process>,
    found_at: HashMap<u32, (u64, u64)>,
    unsupported: HashMap<u32, String>,
    no_lines: bool,
}

/// What the summary says of one BEAM found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found1 {
    pub pid: u32,
    pub otp: String,
    pub erts: String,
    pub modules: usize,
    /// Whether the node keeps frame pointers (`+JPperf true`).
    pub frame_pointers: bool,
    /// Stacks that named their Erlang process but were not labelled
    /// with it (the release's pid layout is not known).
    pub unlabelled: u64,
    /// OTP 23's interpreter: what it read.
    pub interp: Option<Interpreted>,
}

/// What the summary says of an interpreter (OTP 23).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interpreted {
    /// Functions named.
    pub functions: usize,
    /// Samples with an Erlang frame named by no function.
    pub unnamed: u64,
    /// Samples in C code its loop called (no Erlang frames).
    pub in_c: u64,
}

pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: crate::runtimes::Plumbing {
        exact: &["global::process_main", "process_main", "sched_thread_func", "thr_wrapper"],
        prefixes: &["global::", "erts_beamasm:"],
        libraries: &[],
    },
    thread_roles: &[],
    marker: None,
    walker_maps: &[],
    id_label: Some(super::process::ERLANG_PROCESS),
};

/// Its reader, for every capture that walks user stacks.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    s.walks(crate::runtimes::BpfWalker::Beam).then(|| {
        Box::new(Beam { procs: HashMap::new(), found_at: HashMap::new(), unsupported: HashMap::new(), no_lines: s.no_lines }) as Box<dyn Runtime>
    })
}

impl Beam {
    /// An FG_BEAM_WORD of `pid`'s, named by its interpreter's code.
    fn name_word(&self, pid: u32, word: u64) -> Named {
        let name = self.procs.get(&pid).and_then(|p| p.names.as_ref()).zip(interp::code_of(word)).and_then(|(n, code)| n.name(code));
        match name {
            Some(name) => Named::known(vec![(name.to_string(), FrameKind::Evaluated)]),
            None => Named::unknown(
                UNKNOWN.into(),
                FrameKind::Evaluated,
                UnresolvedReason::Runtime {
                    why: "Erlang code of OTP 23's interpreter with no function's header before it (unloaded since, or a register the interpreter used for something else)",
                    remedy: "none",
                },
            ),
        }
    }

    /// Reads what the JIT registered since the last read, or an
    /// interpreter's names until they read, and gives the walker the span
    /// of its code. False when the process cannot be read.
    fn read<M: MapCore>(&mut self, pid: u32, procs: &M) -> bool {
        let Some(p) = self.procs.get_mut(&pid) else { return false };
        // Ok(None): not ready yet, read again at the next tick.
        let value = match &p.node.emulator {
            Emulator::Jit { descriptor } => p.map.update(&p.mem, *descriptor).map(|()| {
                let (Some((lo, hi)), Some((frame_pointers, normal_exit))) = (p.map.span(), p.map.emulator) else { return None };
                Some(types::fg_beam_proc { lo, hi, normal_exit, frame_pointers: frame_pointers as u32, ..Default::default() })
            }),
            Emulator::Interp(l) => {
                let opened = match p.names {
                    Some(_) => Ok(()),
                    None => Names::open(&p.mem, l).map(|names| p.names = names),
                };
                opened.map_err(|why| format!("Erlang/OTP 23's interpreter: {why}")).map(|()| {
                    let (lo, hi) = l.main;
                    p.names.is_some().then_some(types::fg_beam_proc { lo, hi, normal_exit: l.normal_exit, interp: 1, heap_at: interp::HEAP_AT, hend_at: interp::HEND_AT, ..Default::default() })
                })
            }
        };
        let value = match value {
            Ok(Some(value)) => value,
            Ok(None) => return true,
            Err(why) => {
                let _ = procs.delete(&pid.to_ne_bytes());
                self.unsupported.insert(pid, why);
                self.procs.remove(&pid);
                return false;
            }
        };
        let (lo, hi, normal_exit) = (value.lo, value.hi, value.normal_exit);
        if p.given != Some((lo, hi, normal_exit)) {
            // SAFETY: fg_beam_proc is a plain struct of integers.
            let bytes = unsafe { plain::as_bytes(&value) };
            if procs.update(&pid.to_ne_bytes(), bytes, MapFlags::ANY).is_ok() {
                p.given = Some((lo, hi, normal_exit));
            }
        }
        true
    }

    fn read_all<M: MapCore>(&mut self, procs: &M) {
        let pids: Vec<u32> = self.procs.keys().copied().collect();
        for pid in pids {
            self.read(pid, procs);
        }
    }
}

impl Runtime for Beam {
    fn track(&mut self, skel: &mut FgbpfSkel<'_>, pid: u32, text: &str) {
        let Some((m, file)) = runtime_binary(pid, text, may_be_beam, None, &mut self.found_at) else { return };
        match super::find(&file, m.path, m.start, m.offset) {
            Ok(Some(node)) => match Mem::open(pid) {
                Ok(mem) => {
                    self.procs.insert(pid, Process { node, mem, map: CodeMap::default(), names: None, given: None });
                    if self.read(pid, &skel.maps.beam_procs) {
                        beam_added(skel);
                    }
                }
                Err(e) => {
                    self.unsupported.insert(pid, format!("/proc/{pid}/mem: {e}"));
                }
            },
            Ok(None) => {}
            Err(why) => {
                self.unsupported.insert(pid, why);
            }
        }
    }

    fn refresh(&mut self, skel: &mut FgbpfSkel<'_>) {
        self.read_all(&skel.maps.beam_procs);
    }

    fn reads_fresh(&self) -> bool {
        self.procs.values().any(|p| matches!(p.node.emulator, Emulator::Interp(_)))
    }

    /// An interpreter's stack: its words named while the node lives.
    fn fresh(&mut self, pid: u32, user: &[u64]) {
        let Some(p) = self.procs.get_mut(&pid) else { return };
        let (Emulator::Interp(_), Some(names)) = (&p.node.emulator, &mut p.names) else { return };
        for code in user.iter().filter_map(|&w| interp::code_of(w)) {
            names.see(&p.mem, code);
        }
    }

    fn finish(&mut self, stacks: &mut [RawStack], found: &mut Found) {
        // An interpreter's words not named as they were stored (stacks
        // drained before their frames were, the last drain's): named now,
        // while the node lives.
        for r in stacks.iter() {
            self.fresh(r.pid, &r.user);
        }
        for p in self.procs.values_mut() {
            if let Some(names) = &mut p.names {
                names.recheck(&p.mem);
            }
        }
        // Each process's span once, not once a stack.
        let spans: HashMap<u32, (u64, u64)> = self.procs.iter().filter_map(|(&pid, p)| Some((pid, p.map.span()?))).collect();
        let mut labellers: HashMap<u32, Labeller> = self.procs.iter().map(|(&pid, p)| (pid, Labeller::new(&p.node.otp))).collect();
        let mut in_c: HashMap<u32, u64> = HashMap::new();
        let mains: HashMap<u32, (u64, u64)> = self.procs.iter().filter_map(|(&pid, p)| if let Emulator::Interp(l) = &p.node.emulator { Some((pid, l.main)) } else { None }).collect();
        let mut one = |r: &mut RawStack| {
            // An interpreter's thread on a CPU in C code it called: the
            // loop among the callers, no Erlang frames.
            if let Some(&(lo, hi)) = mains.get(&r.pid) {
                if r.state.is_none() && !r.user.contains(&MARKER) && r.user.iter().skip(1).any(|&w| (lo..hi).contains(&w.wrapping_sub(1))) {
                    *in_c.entry(r.pid).or_default() += r.weight;
                }
            }
            match labellers.get_mut(&r.pid) {
                Some(l) => l.split(r),
                None => strip(r),
            }
            if let Some(&span) = spans.get(&r.pid) {
                clean(r, &self.procs[&r.pid].map, span);
            }
        };
        for r in stacks.iter_mut() {
            one(r);
            if let Some(w) = r.waker.as_deref_mut() {
                one(w);
            }
        }
        let (names, unnamed) = name_words(stacks, interp::RUNTIME, |pid, w| (self.name_word(pid, w), None));
        found.runtime_names.extend(names);
        for (&pid, p) in &self.procs {
            let unnamed: u64 = unnamed.range((pid, "", "")..).take_while(|((p, _, _), _)| *p == pid).map(|(_, (on, off))| on + off).sum();
            let (frame_pointers, _) = p.map.emulator.unwrap_or((false, 0));
            let unlabelled = labellers.get(&pid).map_or(0, |l| l.unlabelled);
            let interp = match (&p.node.emulator, &p.names) {
                (Emulator::Jit { .. }, _) => {
                    found.code_maps.push((pid, PerfMap::from_entries(p.map.pieces(!self.no_lines))));
                    None
                }
                (Emulator::Interp(_), Some(names)) => Some(Interpreted { functions: names.functions(), unnamed, in_c: in_c.get(&pid).copied().unwrap_or(0) }),
                (Emulator::Interp(_), None) => {
                    self.unsupported.insert(pid, "Erlang/OTP 23's interpreter: its emulator had not started".to_string());
                    continue;
                }
            };
            found.beams.push(Found1 { pid, otp: p.node.otp.clone(), erts: p.node.erts.clone(), modules: p.map.modules, frame_pointers, unlabelled, interp });
        }
        found.beams.sort_by_key(|b| b.pid);
        found.beam_unsupported = by_pid(&self.unsupported);
    }

    fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        self.procs.retain(|&pid, _| keep(pid));
        self.found_at.retain(|&pid, _| keep(pid));
        self.unsupported.retain(|&pid, _| keep(pid));
    }

    fn knows(&self, pid: u32) -> bool {
        self.procs.contains_key(&pid) || self.unsupported.contains_key(&pid)
    }
}

/// Drops the words the walker took for return addresses that are in the
/// span of the JIT's code but in none of its ranges (a frame pointer into
/// a stack the span holds): not frames. The leaf, a pc, is kept.
fn clean(r: &mut RawStack, map: &CodeMap, (lo, hi): (u64, u64)) {
    let stray = |w: u64| (lo..hi).contains(&w) && !map.holds(w.wrapping_sub(1));
    if r.user.iter().skip(1).any(|&w| stray(w)) {
        let words: Vec<u64> = r.user.iter().take(1).copied().chain(r.user.iter().skip(1).copied().filter(|&w| !stray(w))).collect();
        r.user = words.into();
    }
}

/// Tells the walker a process was added to `beam_procs` (beam.bpf.h:
/// `beam_tracked`): until then no frame looks the BEAM up.
fn beam_added(skel: &mut FgbpfSkel<'_>) {
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        let p: *mut u32 = &mut bss.beam_tracked;
        // SAFETY: as in crate::runtimes::interp_added: a field of the
        // mapped .bss, written once with a volatile store.
        unsafe { std::ptr::write_volatile(p, 1) };
    }
}

/// What the summary and the report say of the BEAMs found.
pub fn lines(found: &Found, ctx: &crate::runtimes::walks::Context) -> Vec<String> {
    use crate::profile::names::printable;
    let mut out = Vec::new();
    if let Some(why) = ctx.refused.why(crate::runtimes::BpfWalker::Beam) {
        out.push(format!(
            "Erlang frames were not read ({why}): the BEAM's schedulers show process_main, and its JIT code is named from a perf map alone (+JPperf true), at the leaf"
        ));
    }
    for b in &found.beams {
        let (process, otp, erts) = (printable(&ctx.process(b.pid)), printable(&b.otp), printable(&b.erts));
        let Some(Interpreted { functions, unnamed, in_c }) = b.interp else {
            out.push(format!(
                "Erlang: pid {} ({process}, OTP {otp}, erts {erts}): JIT-compiled functions named from the JIT's own code map ({} modules), their callers read from each Erlang process's own stack",
                b.pid, b.modules
            ));
            continue;
        };
        out.push(format!(
            "Erlang: pid {} ({process}, OTP {otp}, erts {erts}, the interpreter): functions named from the headers of their loaded code ({functions} functions; no lines: the module table that leads to them is not exported), their callers read from each Erlang process's own stack",
            b.pid
        ));
        if unnamed > 0 {
            out.push(format!(
                "Erlang: pid {}: {unnamed} samples with an Erlang frame named by no function (no function's header found before its code: unloaded since, or a register the interpreter used for something else); left unnamed",
                b.pid
            ));
        }
        if in_c > 0 {
            out.push(format!(
                "Erlang: pid {}: {in_c} samples in C code the interpreter's loop called (the scheduler between processes, a BIF, the garbage collector): Erlang frames, if any, not read (the interpreter's registers, saved by the C code, are not restored by fgbpf's walk); they end at process_main",
                b.pid
            ));
        }
    }
    // Off-CPU time of a node is its threads': an Erlang process waiting
    // (receive, a timer, a socket read) blocks none, and is in no stack.
    for b in &found.beams {
        let off: u64 = ctx.weighed.iter().filter(|(r, _)| r.pid == b.pid && r.state.is_some()).map(|(_, w)| w).sum();
        if off > 0 {
            out.push(format!(
                "Erlang: pid {}: its off-CPU time is its threads' (schedulers waiting for work in erts_schedule, the poll and aux threads); an Erlang process that waits (receive, a timer, a socket read) blocks no thread and is not in this profile: the node's own erlang:process_info(Pid, current_stacktrace) shows where it waits",
                b.pid
            ));
        }
    }
    let (walked, cut, in_c) = (ctx.stats.beam_walked, ctx.stats.beam_cut, ctx.stats.beam_in_c);
    let (labelled, no_pid) = (ctx.stats.beam_pid, ctx.stats.beam_no_pid);
    if walked > 0 {
        out.push(format!(
            "Erlang: the Erlang process read for {labelled} of {walked} Erlang stacks, given them as the label {ERLANG_PROCESS} (in pprof and OTLP; a frame with --label-frames){}",
            match no_pid {
                0 => String::new(),
                n => format!("; {n} not: the JIT's register for the running process (r13) held no process"),
            }
        ));
    }
    for b in found.beams.iter().filter(|b| b.unlabelled > 0) {
        out.push(format!(
            "Erlang: pid {}: {} stacks not labelled with their Erlang process: how OTP {} lays out a pid's number and serial is not known to fgbpf (measured: OTP 25 and 27)",
            b.pid,
            b.unlabelled,
            printable(&b.otp)
        ));
    }
    if ctx.stats.beam_no_process > 0 {
        out.push(format!(
            "Erlang: {} samples in the interpreter's loop (process_main) with no Erlang process in its registers (between processes); they keep its C frames",
            ctx.stats.beam_no_process
        ));
    }
    if in_c > 0 {
        out.push(format!(
            "Erlang: {in_c} of {} stacks in JIT code without their Erlang callers: in C code the JIT called (a BIF, the garbage collector, a trace breakpoint), where the JIT keeps the process's stack pointer in the process (c_p->stop), which fgbpf does not read yet; they end at the JIT code that called C (a stub such as global::call_light_bif_shared, or the function itself)",
            walked + cut + in_c
        ));
    }
    if cut > 0 {
        out.push(format!(
            "Erlang: {cut} of {} stacks in Erlang code without their Erlang callers: no `normal_exit` (a process's first frame) within 4 KiB of the stack pointer (deep recursion, or the scheduler's own stack between processes)",
            walked + cut + in_c
        ));
    }
    for (pid, why) in &found.beam_unsupported {
        out.push(format!(
            "Erlang: pid {pid} ({}): not read: {}; its stacks show the emulator's C frames (process_main) and JIT code unnamed",
            printable(&ctx.process(*pid)),
            printable(why)
        ));
    }
    out
}
