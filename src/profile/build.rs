//! Building a [`Profile`] from what the probe recorded: every distinct
//! kernel address and every distinct (process, user address) is named once
//! by the [`Symbolizer`], interned once, and the stacks are assembled from
//! those entries; the weight of stacks whose leaf stayed unnamed is
//! accounted per process and reason in [`Profile::unresolved`].

use std::collections::HashMap;
use std::sync::Arc;

use super::frame_lists::FrameLists;
use super::raw::{INTERRUPT_WAKER, WAKER_SEPARATOR};
use super::{Evaluator, 
    Frame, FrameId, FrameKind, Profile, InterpFrame, RawStack, Stack, State, Thread, ThreadId, Unit,
    Unresolved, UnresolvedReason,
};
use crate::procs::{BinaryId, Target};
use crate::symbolize::{Named, Symbolizer};

/// Maps keyed by address, looked up millions of times per capture: SipHash
/// would cost more than the lookups. The addresses come from the profiled
/// processes' stacks, which they control, so the hasher is still seeded per
/// process (ahash), not a fixed function an attacker could collide.
type AddrMap<V> = HashMap<u64, V, ahash::RandomState>;

/// Names every frame of `raw` and returns the profile, with the samples
/// whose leaf frame stayed unnamed in [`Profile::unresolved`]. Each raw
/// stack's addresses and spans are freed (moved) as its named stack is
/// made, so that a large capture does not hold both at once.
pub fn from_raw(mut raw: Vec<RawStack>, unit: Unit, symbolizer: &mut Symbolizer) -> Profile {
    let mut profile = Profile::new(unit);
    // Libraries and JIT code mapped since a process was last read.
    let mut pids: Vec<u32> = raw
        .iter()
        .flat_map(parts)
        .filter(|r| !r.user.is_empty() && r.pid != 0)
        .map(|r| r.pid)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    for &pid in &pids {
        symbolizer.reread(pid);
    }
    let hasher = ahash::RandomState::new();
    let mut table = Table::default();
    let kernel = kernel_entries(&raw, symbolizer, &mut profile, &mut table, &hasher);
    let user = user_entries(&raw, symbolizer, &mut profile, &mut table, &hasher);
    profile.reserve(raw.len());
    let mut next_user = 0;
    let mut lists = FrameLists::default();
    let mut frames: Vec<FrameId> = Vec::new();
    let mut waker_frames: HashMap<FrameId, FrameId> = HashMap::new();

    // Each (pid, tid)'s thread as first met. A thread met again under
    // another name or group (renamed during the capture) is found by the
    // profile's own index of its threads: rare, and a whole host's
    // hundreds of thousands of threads then need one small entry each.
    let mut thread_ids: HashMap<(u32, u32, u32), ThreadId> = HashMap::new();
    let mut process_names: HashMap<(u32, u32), Arc<str>> = HashMap::new();
    let mut unnamed_threads = std::collections::HashSet::new();
    let mut roles: HashMap<ThreadId, &'static str> = HashMap::new();
    let roles_of = symbolizer.thread_roles();
    // Per process, unresolved weight by reason.
    let mut accounts: HashMap<(u32, u32), HashMap<UnresolvedReason, u64>> = HashMap::new();
    // The raw stacks named so far are dropped a quarter at a time, so
    // that the named ones take their memory as they come.
    let mut at = 0;
    while at < raw.len() {
        if at >= 4096 && at * 4 >= raw.len() {
            raw.drain(..at);
            raw.shrink_to_fit();
            at = 0;
        }
        let r = &mut raw[at];
        at += 1;
        // What the stack holds is taken, and freed once it is named.
        let user_ips = std::mem::take(&mut r.user);
        let kernel_ips = std::mem::take(&mut r.kernel);
        let mut more = r.more.take().map(|m| *m).unwrap_or_default();
        let interp = std::mem::take(&mut more.interp);
        let evaluator = more.evaluator.take();
        let labels = more.labels.take();
        let spans = std::mem::take(&mut r.spans);
        let waker = r.waker.take();
        let r: &RawStack = r;
        // This stack's slots, in the order user_entries recorded them.
        let slots = &user.frame_slots[next_user..next_user + user_ips.len()];
        next_user += user_ips.len();
        // One buffer for every stack: each is kept as its shared list.
        frames.clear();
        if let Some(note) = r.root_note {
            frames.push(profile.intern_frame(Frame::new(note, FrameKind::Pseudo)));
        }
        // An interpreter's frame at the leaf stands for the native frames
        // it replaced (its evaluator's loop): none of them is shown.
        let mut interp_leaf = false;
        if interp.is_empty() {
            for &slot in slots.iter().rev() {
                frames.extend_from_slice(table.frames(user.entries[slot as usize]));
            }
        } else {
            let named: Vec<&[FrameId]> =
                slots.iter().map(|&s| table.frames(user.entries[s as usize])).collect();
            let whole = r.interp_walk == Some(super::InterpWalk::Whole);
            let evaluator = evaluator.unwrap_or(Evaluator::NONE);
            merge_interp(&named, &interp, &evaluator, whole, &mut frames, &mut profile);
            interp_leaf = frames.last().is_some_and(|&f| profile.frame(f).kind == FrameKind::Evaluated);
        }
        // A stack taken inside the tracer (off-CPU stacks with raw
        // tracepoints) starts with the tracer's own frames: left out, up
        // to the last of them near the leaf. The program's own frame is
        // often unnamed: it is unloaded before the stacks are named.
        let entries: Vec<u32> = kernel_ips.iter().enumerate().map(|(i, &ip)| kernel[&caller_adjusted(ip, i)]).collect();
        let tracer = match r.state {
            Some(_) => entries[..entries.len().min(TRACER_DEPTH)]
                .iter()
                .rposition(|&e| table.is_tracer(e))
                .map_or(0, |i| i + 1),
            None => 0,
        };
        for &e in entries[tracer..].iter().rev() {
            frames.extend_from_slice(table.frames(e));
        }
        for name in more.kernel_names.iter().rev() {
            let (name, module) = match name.strip_suffix(']').and_then(|n| n.rsplit_once(" [")) {
                Some((name, module)) => (name, Some(module)),
                None => (name.as_str(), None),
            };
            let frame = Frame { module: symbolizer.kernel_image(module), ..Frame::new(name, FrameKind::Kernel) };
            frames.push(profile.intern_frame(frame));
        }
        if let Some(note) = r.kernel_note {
            frames.push(profile.intern_frame(Frame::new(note, FrameKind::Pseudo)));
        }
        if let Some(note) = r.state.map(State::frame) {
            frames.push(profile.intern_frame(Frame::new(note, FrameKind::Pseudo)));
        }
        if let Some(w) = waker.as_deref() {
            let wslots = &user.frame_slots[next_user..next_user + w.user.len()];
            next_user += w.user.len();
            let ctx = WakerFrames {
                table: &table,
                kernel: &kernel,
                user_entries: &user.entries,
            };
            ctx.push(w, wslots, &mut frames, &mut waker_frames, &mut profile);
        }
        // The user leaf says which code of the process ran or waited;
        // kernel leaves nearly always resolve and would hide it.
        let reason = match (slots.first(), kernel_ips.first()) {
            (Some(_), _) if interp_leaf => None,
            (Some(&slot), _) => table.unresolved(user.entries[slot as usize]),
            (None, Some(&ip)) if more.kernel_names.is_empty() => table.unresolved(kernel[&ip]),
            _ => None,
        };
        if let Some(reason) = reason.filter(|_| r.weight > 0) {
            *accounts
                .entry((r.pid, r.start))
                .or_default()
                .entry(reason.clone())
                .or_default() += r.weight;
        }
        let first = thread_ids.get(&(r.pid, r.start, r.tid)).copied().filter(|&t| {
            let known = profile.thread(t);
            *known.name == *r.comm && known.group == more.group
        });
        let thread = match first {
            Some(t) => t,
            None => {
                let process = process_names
                    .entry((r.pid, r.start))
                    .or_insert_with(|| symbolizer.process_name_of(r.pid, r.start, &r.comm).into())
                    .clone();
                let unnamed = r.tid != r.pid && *r.comm == *process;
                let t = profile.intern_thread(Thread {
                    pid: r.pid,
                    start: r.start,
                    tid: r.tid,
                    process,
                    name: r.comm.clone(),
                    group: more.group.clone(),
                });
                if unnamed {
                    unnamed_threads.insert(t);
                }
                thread_ids.entry((r.pid, r.start, r.tid)).or_insert(t);
                t
            }
        };
        // A thread its runtime left named as its process (Node.js's own
        // threads) is named by what it runs, from a stack that shows it.
        if unnamed_threads.contains(&thread) && !roles.contains_key(&thread) {
            if let Some(role) = super::thread_roles::thread_role(roles_of, frames.iter().map(|&f| profile.frame(f).name.as_str())) {
                roles.insert(thread, role);
            }
        }
        profile.push(Stack {
            thread: Some(thread),
            frames: lists.share(&frames),
            weight: r.weight,
            spans,
            labels,
        });
    }
    for (t, role) in roles {
        profile.rename_thread(t, role);
    }
    drop(raw);
    profile.coalesce();
    profile.unresolved = unresolved_list(accounts, &process_names);
    profile
}

/// Appends, root first, the user frames of a stack whose interpreter
/// frames were read: `native` is each native address's frames (leaf first,
/// each root first), `interp` the interpreter's frames leaf first. They
/// come in runs, one per call of the evaluator, each ending at an entry
/// frame; the innermost run takes the place of the innermost evaluator
/// frame, and so on outwards. Runs left over (the native walk stopped
/// short of their evaluator frames) go at the root, where they were called
/// from. With the interpreter's stack read whole (`whole`), evaluator
/// frames beyond the runs are the innermost ones: a call of the evaluator
/// whose frame was popped and which has yet to return (Ruby's leave from a
/// block called from C), which stay native. An evaluator frame's loop
/// (Ruby's vm_exec_core under rb_vm_exec) goes with it.
pub(crate) fn merge_interp(
    native: &[&[FrameId]],
    interp: &[InterpFrame],
    evaluator: &Evaluator,
    whole: bool,
    frames: &mut Vec<FrameId>,
    profile: &mut Profile,
) {
    let mut runs: Vec<&[InterpFrame]> = Vec::new();
    let mut start = 0;
    for (i, f) in interp.iter().enumerate() {
        if f.entry {
            runs.push(&interp[start..=i]);
            start = i + 1;
        }
    }
    if start < interp.len() {
        runs.push(&interp[start..]);
    }
    let mut run_of = vec![None; native.len()];
    let mut vm_loop = vec![false; native.len()];
    let mut next = 0;
    let name = |ids: &[FrameId], profile: &Profile| ids.first().map(|&f| profile.frame(f).name.clone());
    // An evaluator's frame, or compiled code its JIT jumped to on that
    // frame (PHP's), called from where the evaluator is called from.
    let evaluator_at = |i: usize, n: &str, profile: &Profile| {
        evaluator.is(n) || evaluator.is_jit(n) && native.get(i + 1).and_then(|c| name(c, profile)).is_some_and(|c| evaluator.is_jit_caller(&c))
    };
    let evaluators = native.iter().enumerate().filter(|(i, ids)| name(ids, profile).is_some_and(|n| evaluator_at(*i, &n, profile))).count();
    let mut empty = if whole { evaluators.saturating_sub(runs.len()) } else { 0 };
    for (i, ids) in native.iter().enumerate() {
        let Some(n) = name(ids, profile) else { continue };
        let at = evaluator_at(i, &n, profile);
        if empty > 0 && at {
            empty -= 1;
            continue;
        }
        if next < runs.len() && at {
            run_of[i] = Some(next);
            next += 1;
            if i > 0 && name(native[i - 1], profile).is_some_and(|c| evaluator.is_loop(&c)) {
                vm_loop[i - 1] = true;
            }
        }
    }
    let push_run = |run: &[InterpFrame], frames: &mut Vec<FrameId>, profile: &mut Profile| {
        for f in run.iter().rev() {
            frames.push(profile.intern_frame(Frame::new(&*f.text, FrameKind::Evaluated)));
        }
    };
    for run in runs[next..].iter().rev() {
        push_run(run, frames, profile);
    }
    for (i, ids) in native.iter().enumerate().rev() {
        match run_of[i] {
            Some(r) => push_run(runs[r], frames, profile),
            None if vm_loop[i] => {}
            None => frames.extend_from_slice(ids),
        }
    }
}

/// A raw stack and its waker's, in the order their frames are named.
fn parts(r: &RawStack) -> impl Iterator<Item = &RawStack> {
    std::iter::once(r).chain(r.waker.as_deref())
}

/// What assembling a waker's side of an offwake stack reads.
struct WakerFrames<'a> {
    table: &'a Table,
    kernel: &'a AddrMap<u32>,
    user_entries: &'a [u32],
}

impl WakerFrames<'_> {
    /// Appends `--`, then the waker's frames from its leaf down to its
    /// root, then its thread name, so that the two leaves meet at the
    /// separator. A wakeup in an interrupt or softirq keeps only the
    /// interrupt's kernel frames and is named [`INTERRUPT_WAKER`]: the
    /// task it interrupted, and that task's stack, are unrelated.
    fn push(
        &self,
        w: &RawStack,
        slots: &[u32],
        frames: &mut Vec<FrameId>,
        as_waker: &mut HashMap<FrameId, FrameId>,
        profile: &mut Profile,
    ) {
        let mut waker = |f: FrameId, profile: &mut Profile| -> FrameId {
            *as_waker.entry(f).or_insert_with(|| {
                let name = profile.frame(f).name.clone();
                profile.intern_frame(Frame::new(name, FrameKind::Waker))
            })
        };
        frames.push(profile.intern_frame(Frame::new(WAKER_SEPARATOR, FrameKind::Pseudo)));
        let mut kernel_ids: Vec<FrameId> = Vec::new();
        for (i, &ip) in w.kernel.iter().enumerate() {
            // Each address's frames are root first: reversed, leaf first.
            let named = self.table.frames(self.kernel[&caller_adjusted(ip, i)]);
            kernel_ids.extend(named.iter().rev());
        }
        // The waker's stack was taken inside the tracer: its first frames
        // are the BPF program and the tracepoint's plumbing.
        let first = kernel_ids
            .iter()
            .take(8)
            .position(|&f| profile.frame(f).name == "try_to_wake_up")
            .unwrap_or(0);
        let kernel_ids = &kernel_ids[first..];
        let entry = kernel_ids
            .iter()
            .position(|&f| is_interrupt_entry(&profile.frame(f).name));
        if let Some(end) = entry {
            for &f in &kernel_ids[..=end] {
                let id = waker(f, profile);
                frames.push(id);
            }
            frames.push(profile.intern_frame(Frame::new(INTERRUPT_WAKER, FrameKind::Waker)));
            return;
        }
        for &f in kernel_ids {
            let id = waker(f, profile);
            frames.push(id);
        }
        for &slot in slots {
            for &f in self.table.frames(self.user_entries[slot as usize]).iter().rev() {
                let id = waker(f, profile);
                frames.push(id);
            }
        }
        let name = if w.comm.is_empty() { "[unknown waker]".to_string() } else { w.comm.to_string() };
        frames.push(profile.intern_frame(Frame::new(name, FrameKind::Waker)));
    }
}

/// The kernel's interrupt and softirq entry points on x86_64: a wakeup
/// under one of them was made by the interrupt, not by the task it
/// interrupted.
fn is_interrupt_entry(name: &str) -> bool {
    name.starts_with("asm_sysvec_")
        || name.starts_with("asm_common_interrupt")
        || name == "handle_softirqs"
        || name == "__do_softirq"
}

/// Names every distinct kernel address of `raw`: address -> entry of
/// `table`.
fn kernel_entries(
    raw: &[RawStack],
    symbolizer: &Symbolizer,
    profile: &mut Profile,
    table: &mut Table,
    hasher: &ahash::RandomState,
) -> AddrMap<u32> {
    let mut entries = AddrMap::with_hasher(hasher.clone());
    for r in raw.iter().flat_map(parts) {
        for a in adjusted(&r.kernel) {
            entries.insert(a, u32::MAX);
        }
    }
    let addrs: Vec<u64> = entries.keys().copied().collect();
    for (a, named) in addrs.iter().zip(symbolizer.kernel(&addrs)) {
        entries.insert(*a, table.add(profile, named));
    }
    entries
}

/// The user frames of a capture, named: each frame's slot (in the order of
/// the stacks and their frames, leaf first), and each slot's entry in the
/// [`Table`].
struct UserEntries {
    frame_slots: Vec<u32>,
    entries: Vec<u32>,
}

/// Names every distinct (process, address) of the user stacks of `raw`.
fn user_entries(
    raw: &[RawStack],
    symbolizer: &Symbolizer,
    profile: &mut Profile,
    table: &mut Table,
    hasher: &ahash::RandomState,
) -> UserEntries {
    // Each distinct place a frame lies gets a slot: a binary's offset is
    // one slot for every process that maps the binary (a whole host's
    // processes of one program, each at its own address), the rest one per
    // (pid, address). Each frame of `raw` records its slot, so that stacks
    // are later assembled without a second lookup per frame.
    let mut slots_of: HashMap<Slot, u32, ahash::RandomState> = HashMap::with_hasher(hasher.clone());
    let mut slot_keys: Vec<(u32, u64, Target)> = Vec::new();
    let mut frame_slots = Vec::with_capacity(raw.iter().flat_map(parts).map(|r| r.user.len()).sum());
    for r in raw.iter().flat_map(parts).filter(|r| !r.user.is_empty()) {
        let locate = symbolizer.locator(r.pid, r.start);
        for a in adjusted(&r.user) {
            let target = locate(a);
            let key = match target {
                Target::Binary(b, off) => Slot::Binary(b, off),
                Target::Vdso(off) => Slot::Vdso(off),
                Target::Gone => Slot::Gone,
                Target::Jit | Target::Unmapped => Slot::Process(r.pid, a),
            };
            let slot = *slots_of.entry(key).or_insert_with(|| {
                slot_keys.push((r.pid, a, target));
                (slot_keys.len() - 1) as u32
            });
            frame_slots.push(slot);
        }
    }
    drop(slots_of);
    let (names, index) = symbolizer.user(&slot_keys);
    let named: Vec<u32> = names.into_iter().map(|n| table.add(profile, n)).collect();
    let entries = index.into_iter().map(|i| named[i as usize]).collect();
    UserEntries {
        frame_slots,
        entries,
    }
}

/// Where a user frame lies, as naming it needs: the same offset of one
/// binary names the same in every process, JIT code and addresses outside
/// every mapping are looked up per process (its perf map).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Binary(BinaryId, u64),
    Vdso(u64),
    Gone,
    Process(u32, u64),
}

/// What distinct addresses were named: each entry a run of interned frames
/// (root first) and, when unnamed, why. Entries are few (one per distinct
/// name the symbolizer made) and contiguous, so that the millions of frame
/// lookups of a large capture stay in cache.
#[derive(Default)]
struct Table {
    frames: Vec<FrameId>,
    entries: Vec<(u32, u32, Option<UnresolvedReason>)>,
    /// Frames of the tracer itself (see [`is_tracer_frame`]).
    tracer: std::collections::HashSet<FrameId>,
    /// Frames whose address is one where they are the innermost function.
    innermost: std::collections::HashSet<FrameId>,
}

impl Table {
    fn add(&mut self, profile: &mut Profile, named: Named) -> u32 {
        let start = self.frames.len() as u32;
        let last = named.frames.len().saturating_sub(1);
        for (i, (name, kind)) in named.frames.iter().enumerate() {
            // A frame's address says its function only where nothing is
            // inlined into it there (addr2line names the innermost): the
            // functions code was inlined into get none from it.
            let innermost = i == last && named.address != 0;
            let frame = Frame {
                module: named.module.clone(),
                address: if innermost { named.address } else { 0 },
                ..Frame::new(name.as_str(), *kind)
            };
            let id = profile.intern_frame(frame);
            if innermost && self.innermost.insert(id) {
                profile.place_frame(id, named.address);
            }
            if *kind == FrameKind::Kernel && is_tracer_frame(name) {
                self.tracer.insert(id);
            }
            self.frames.push(id);
        }
        self.entries
            .push((start, self.frames.len() as u32 - start, named.unresolved));
        (self.entries.len() - 1) as u32
    }

    fn frames(&self, entry: u32) -> &[FrameId] {
        let (start, len, _) = self.entries[entry as usize];
        &self.frames[start as usize..(start + len) as usize]
    }

    fn unresolved(&self, entry: u32) -> Option<&UnresolvedReason> {
        self.entries[entry as usize].2.as_ref()
    }

    /// Whether the entry is a frame of a BPF program or of the code that
    /// runs it at a tracepoint.
    fn is_tracer(&self, entry: u32) -> bool {
        self.frames(entry).first().is_some_and(|&f| self.tracer.contains(&f))
    }
}

/// How many leaf frames of an off-CPU kernel stack may be the tracer's:
/// the program, bpf_trace_runN, __bpf_trace_*, __traceiter_*.
const TRACER_DEPTH: usize = 4;

/// Frames of the BPF tracer itself at a tracepoint: the program, and the
/// kernel's code that calls it.
fn is_tracer_frame(name: &str) -> bool {
    name.starts_with("bpf_prog_")
        || name.starts_with("bpf_trace_run")
        || name.starts_with("__bpf_trace_")
        || name.starts_with("__traceiter_")
}

fn unresolved_list(
    accounts: HashMap<(u32, u32), HashMap<UnresolvedReason, u64>>,
    names: &HashMap<(u32, u32), Arc<str>>,
) -> Vec<Unresolved> {
    let mut list: Vec<Unresolved> = accounts
        .into_iter()
        .map(|((pid, start), reasons)| {
            let mut reasons: Vec<(UnresolvedReason, u64)> = reasons.into_iter().collect();
            reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            Unresolved {
                pid,
                process: names.get(&(pid, start)).map(|n| n.to_string()).unwrap_or_default(),
                reasons,
            }
        })
        .collect();
    list.sort_by(|a, b| b.weight().cmp(&a.weight()).then_with(|| a.pid.cmp(&b.pid)));
    list
}

/// Return addresses point after the call; step back into the call
/// instruction so callers resolve to the calling function and line.
/// A runtime's frame word (see [`crate::symbolize::RuntimeNames`]) is kept
/// whole: its walker already looked its call up.
fn caller_adjusted(ip: u64, index_from_leaf: usize) -> u64 {
    if index_from_leaf == 0 || crate::symbolize::is_runtime_word(ip) {
        ip
    } else {
        ip.saturating_sub(1)
    }
}

/// A stack's addresses as they are named: callers stepped back into the
/// call. What must stay locatable of a process that exited.
pub fn adjusted(ips: &[u64]) -> impl Iterator<Item = u64> + '_ {
    ips.iter()
        .enumerate()
        .map(|(i, &ip)| caller_adjusted(ip, i))
}

#[cfg(test)]
#[path = "build_tests.rs"]
mod tests;
