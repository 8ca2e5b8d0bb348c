//! The one in-memory model every output is written from: weighted stacks of
//! interned frames, with a unit and the threads they belong to.

pub mod build;
pub mod frame_lists;
pub mod heap;
pub mod merge;
pub mod names;
pub mod raw;
pub mod thread_roles;
mod labels;
mod losses;
pub mod time;
mod thread_index;
pub mod unwinding;

pub use crate::procs::frame_kind::FrameKind;
pub use raw::{Evaluator, More, InterpFrame, Pattern, InterpWalk, RawStack, State, BEFORE_CAPTURE, END_UNTRACED, LOST_STACK, START_UNTRACED};
pub use time::{Span, Spans};
pub use unwinding::{Walk, Unwinding};

use rayon::slice::ParallelSliceMut;
use rustc_hash::FxHashMap as HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::time::Duration;

/// What a stack's weight counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// On-CPU samples, one per timer tick.
    Samples,
    /// Time, in microseconds (off-CPU and wall-clock views).
    Microseconds,
}

impl Unit {
    /// The word used for the unit in flamegraphs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Samples => "samples",
            Unit::Microseconds => "us",
        }
    }

    /// `n` of this unit for people: "12,345 samples", "245.85 s",
    /// "12.3 ms", "850 us".
    pub fn amount(self, n: u64) -> String {
        match self {
            Unit::Samples => format!("{} samples", thousands(n)),
            Unit::Microseconds if n >= 1_000_000 => format!("{:.2} s", n as f64 / 1e6),
            Unit::Microseconds if n >= 1_000 => format!("{:.1} ms", n as f64 / 1e3),
            Unit::Microseconds => format!("{n} us"),
        }
    }
}

/// `n` with a comma between each group of three digits: 1,234,567.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod amount_tests {
    use super::*;

    #[test]
    fn amounts_read_as_people_say_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(245_853_390), "245,853,390");
        assert_eq!(Unit::Samples.amount(12_345), "12,345 samples");
        assert_eq!(Unit::Microseconds.amount(245_853_390), "245.85 s");
        assert_eq!(Unit::Microseconds.amount(12_340), "12.3 ms");
        assert_eq!(Unit::Microseconds.amount(850), "850 us");
    }
}

#[derive(Clone, Debug)]
pub struct Frame {
    pub name: String,
    pub kind: FrameKind,
    /// The binary its code lies in (name and build ID), when the capture
    /// knew it: pprof's and OTLP's mappings. Frames of the same name in two
    /// binaries are two frames.
    pub module: Option<std::sync::Arc<crate::symbolize::Module>>,
    /// One address of its code in `module`, as the binary is linked (ELF
    /// virtual address; 0 when not known): one of the addresses it was
    /// named from, where it is the innermost function when there is one
    /// (not code inlined into it), for a backend that names code by build
    /// ID and address (OTLP's locations). Not part of the frame's
    /// identity: stacks merge by function, and a frame keeps the first
    /// address [`Profile::intern_frame`] met it with, or the one
    /// [`Profile::place_frame`] gives it.
    pub address: u64,
}

/// Frames are the same function when their name, kind and binary are: the
/// address they carry is one of many.
impl PartialEq for Frame {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.kind == other.kind && self.module == other.module
    }
}

impl Eq for Frame {}

impl std::hash::Hash for Frame {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.name, self.kind, &self.module).hash(state);
    }
}

impl Frame {
    pub fn new(name: impl Into<String>, kind: FrameKind) -> Self {
        Frame {
            name: name.into(),
            kind,
            module: None,
            address: 0,
        }
    }

    /// A frame from its folded text. Suffixes `_[k]`, `_[i]`, `_[j]`, `_[0]`,
    /// `_[1]`, `_[p]` and `_[w]` give the kind; bracketed names are pseudo-frames only in fgbpf's own
    /// files (`ours`), since other tools bracket the module names of
    /// unsymbolized code (`[libc.so.6]`).
    pub fn from_folded(text: &str, ours: bool) -> Frame {
        for kind in [
            FrameKind::Kernel,
            FrameKind::Inlined,
            FrameKind::Jit,
            FrameKind::Interpreted,
            FrameKind::C1,
            FrameKind::Evaluated,
            FrameKind::Waker,
        ] {
            if let Some(name) = text.strip_suffix(kind.suffix()) {
                return Frame::new(name, kind);
            }
        }
        let pseudo = ours && text == raw::WAKER_SEPARATOR
            || ours
            && text.starts_with('[')
            && text.ends_with(']')
            && text != UNKNOWN
            && text != "[unnamed]";
        let kind = if pseudo {
            FrameKind::Pseudo
        } else {
            FrameKind::User
        };
        Frame::new(text, kind)
    }

    /// True for frames that could not be named at all.
    pub fn is_unknown(&self) -> bool {
        self.name == UNKNOWN
    }
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.name, self.kind.suffix())
    }
}

/// The name of a frame nothing is known about.
pub use crate::symbolize::UNKNOWN;

/// Counts of lines or stacks from which sorting is spread over threads:
/// smaller inputs sort faster than the threads start.
pub const PARALLEL_FROM: usize = 100_000;

pub type FrameId = u32;
pub type ThreadId = u32;

/// A thread as the capture saw it. Names come from the target and are
/// untrusted: outputs sanitize or escape them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Thread {
    pub pid: u32,
    /// With `pid`, which process (its start in clock ticks since boot; 0
    /// when not known): a PID given again is another process's thread.
    pub start: u32,
    pub tid: u32,
    pub process: std::sync::Arc<str>,
    pub name: std::sync::Arc<str>,
    /// `--group-by cgroup`: the cgroup it ran in, e.g. `container
    /// 3f2a1b4c5d6e` or `cgroup /system.slice/redis.service`, drawn as a
    /// root frame above its process; `None` when not grouped.
    pub group: Option<String>,
}

/// A stack's frames, root first.
pub type Frames = std::sync::Arc<[FrameId]>;

pub use labels::Labels;
pub use losses::{Loss, Losses};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stack {
    /// Index into [`Profile::threads`]; `None` for profiles read from
    /// folded files that carry no thread identity.
    pub thread: Option<ThreadId>,
    /// Root first; shared by the stacks with the same frames (whole-host
    /// captures hold hundreds of thousands of threads' stacks over a few
    /// thousand frame lists).
    pub frames: Frames,
    pub weight: u64,
    /// When the weight fell, in slices of [`Meta::slice`], adding up to
    /// `weight`; empty when the profile has no time (see [`time`]).
    pub spans: Spans,
    /// What it ran under (a goroutine and its labels); `None` for most.
    pub labels: Option<Labels>,
}

/// What the weights measure, beyond their unit: decides pprof sample types
/// and titles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// On-CPU samples (unit: samples).
    OnCpu,
    /// Time blocked off-CPU (unit: microseconds).
    OffCpu,
    /// On-CPU and off-CPU time together (unit: microseconds).
    Wall,
    /// Read from a folded file of unknown origin.
    #[default]
    Other,
    /// `fgbpf alloc`'s views: bytes or objects allocated or in use
    /// (src/profile/heap.rs; unit: samples, each one byte or object).
    Alloc,
}

/// Facts about the capture that outputs print alongside the stacks.
#[derive(Clone, Debug, Default)]
pub struct Meta {
    pub kind: Kind,
    /// What was profiled, e.g. the command line or "pid 1234".
    pub target: String,
    pub duration: Duration,
    /// Sampling frequency (on-CPU captures).
    pub frequency: Option<u64>,
    pub losses: Losses,
    /// How user stacks were walked; `None` for profiles read from files.
    pub unwinding: Option<Unwinding>,
    /// The kernel fallbacks the capture took, one sentence each (none on
    /// a kernel with every feature, and for profiles read from files).
    pub kernel: Vec<String>,
    /// The same, one word each (`FGBPF_FORCE_FALLBACK`'s words and
    /// `no-task-stack`, `btf-file`).
    pub kernel_words: Vec<&'static str>,
    /// The width of the time slices stacks' spans count in; `None` when
    /// the profile has no time.
    pub slice: Option<Duration>,
    /// The window recorded, from the programs' attaching to the stop, on
    /// CLOCK_MONOTONIC in nanoseconds (the clock of bpf_ktime_get_ns and
    /// of /proc's scheduler accounts); `None` for profiles read from files.
    pub window_ns: Option<(u64, u64)>,
    /// The label keys whose value is the numeric id of the task a stack
    /// ran under, given by the runtimes that label stacks (printed `key
    /// id`, a numeric pprof label), as against the text labels a program
    /// gives its work.
    pub id_labels: Vec<&'static str>,
    /// Where frames' names came from beyond the binaries and the host's
    /// debug files, and what could not be fetched, one sentence each (each
    /// debuginfod server used); empty for profiles read from files.
    pub symbols: Vec<String>,
}

/// Why the leaf frame of some samples could not be named.
pub use crate::symbolize::UnresolvedReason;

/// The weight of one process's stacks whose leaf frame is unresolved, by
/// reason. The leaf is the innermost user frame, or the innermost kernel
/// frame of a stack without user frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unresolved {
    pub pid: u32,
    pub process: String,
    /// Unresolved weight by reason, heaviest first. Shares are taken of
    /// the process's weight in the profile's stacks.
    pub reasons: Vec<(UnresolvedReason, u64)>,
}

impl Unresolved {
    /// The unresolved weight, all reasons together.
    pub fn weight(&self) -> u64 {
        self.reasons.iter().map(|(_, w)| w).sum()
    }
}

#[derive(Clone, Debug)]
pub struct Profile {
    pub unit: Unit,
    pub meta: Meta,
    /// Processes with unresolved leaf frames, heaviest first; filled by the
    /// symbolizer, empty for profiles read from files. Kept out of
    /// [`Meta`] so that commands rebuilding `meta` do not drop it.
    pub unresolved: Vec<Unresolved>,
    frames: Vec<Frame>,
    frame_ids: HashMap<Frame, FrameId>,
    threads: Vec<Thread>,
    thread_ids: thread_index::ThreadIndex,
    stacks: Vec<Stack>,
}

impl Profile {
    pub fn new(unit: Unit) -> Self {
        Profile {
            unit,
            meta: Meta::default(),
            unresolved: Vec::new(),
            frames: Vec::new(),
            frame_ids: HashMap::default(),
            threads: Vec::new(),
            thread_ids: Default::default(),
            stacks: Vec::new(),
        }
    }

    pub fn intern_frame(&mut self, frame: Frame) -> FrameId {
        let next = FrameId::try_from(self.frames.len()).expect("fewer than 2^32 distinct frames");
        match self.frame_ids.entry(frame) {
            Entry::Occupied(known) => *known.get(),
            Entry::Vacant(new) => {
                self.frames.push(new.key().clone());
                *new.insert(next)
            }
        }
    }

    pub fn intern_thread(&mut self, thread: Thread) -> ThreadId {
        if let Some(id) = self.thread_ids.find(&self.threads, &thread) {
            return id;
        }
        let id = ThreadId::try_from(self.threads.len()).expect("fewer than 2^32 threads");
        self.thread_ids.insert(&thread, id);
        self.threads.push(thread);
        id
    }

    /// Adds a stack; zero-weight stacks carry nothing and are dropped.
    pub fn push(&mut self, stack: Stack) {
        if stack.weight > 0 {
            self.stacks.push(stack);
        }
    }

    /// Makes room for `n` more stacks at once, so that a profile built to a
    /// known size does not grow by doubling (and for a moment hold its
    /// stacks twice).
    pub fn reserve(&mut self, n: usize) {
        self.stacks.reserve_exact(n);
    }

    /// Keeps only the stacks `keep` accepts.
    pub fn retain(&mut self, keep: impl FnMut(&Stack) -> bool) {
        self.stacks.retain(keep);
    }

    /// Names a thread anew, keeping its id (and its stacks).
    pub fn rename_thread(&mut self, id: ThreadId, name: &str) {
        let Some(t) = self.threads.get(id as usize) else { return };
        let mut renamed = t.clone();
        renamed.name = name.into();
        if self.thread_ids.find(&self.threads, &renamed).is_some() {
            return;
        }
        self.thread_ids.remove(t, id);
        self.thread_ids.insert(&renamed, id);
        self.threads[id as usize] = renamed;
    }

    pub fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id as usize]
    }

    /// Gives an interned frame the representative address `address` (see
    /// [`Frame::address`]).
    pub fn place_frame(&mut self, id: FrameId, address: u64) {
        if let Some(f) = self.frames.get_mut(id as usize) {
            f.address = address;
        }
    }

    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

/// Whether its threads carry a `--group-by` group (every thread does
    /// then), drawn as a root frame above the process.
    pub fn is_grouped(&self) -> bool {
        self.threads().iter().any(|t| t.group.is_some())
    }

        pub fn thread(&self, id: ThreadId) -> &Thread {
        &self.threads[id as usize]
    }

    pub fn threads(&self) -> &[Thread] {
        &self.threads
    }

    pub fn stacks(&self) -> &[Stack] {
        &self.stacks
    }

    pub fn total(&self) -> u64 {
        self.stacks.iter().map(|s| s.weight).sum()
    }

    /// Weight of the stacks whose leaf frame could not be named.
    pub fn unknown_leaf_weight(&self) -> u64 {
        self.stacks
            .iter()
            .filter(|s| s.frames.last().is_some_and(|&f| self.frame(f).is_unknown()))
            .map(|s| s.weight)
            .sum()
    }

    /// Moves every stack of `other` in, its weight mapped by `scale`;
    /// frames and threads are re-interned, so the same code path shares
    /// frames. `other` keeps its frames, threads and meta. Moved rather
    /// than copied: a whole host's wall view is built from an off-CPU
    /// profile as large, which is not held twice.
    pub fn absorb(&mut self, other: &mut Profile, scale: impl Fn(u64) -> u64) {
        let (frames, threads) = self.intern_all(other);
        let mut lists = frame_lists::Remap::default();
        let mut moved = std::mem::take(&mut other.stacks);
        for s in &mut moved {
            // Scaled span by span, the parts still add up to the whole.
            for p in &mut s.spans {
                p.weight = scale(p.weight);
            }
            s.weight = match s.spans.is_empty() {
                true => scale(s.weight),
                false => s.spans.iter().map(|p| p.weight).sum(),
            };
            s.thread = s.thread.map(|t| threads[t as usize]);
            s.frames = lists.map(&s.frames, &frames);
        }
        moved.retain(|s| s.weight > 0);
        // Into an empty profile, the stacks keep their own buffer.
        match self.stacks.is_empty() {
            true => self.stacks = moved,
            false => self.stacks.append(&mut moved),
        }
    }

    /// Interns every frame and thread of `other` (each once, in its order);
    /// returns each one's id here, by its id there.
    pub fn intern_all(&mut self, other: &Profile) -> (Vec<FrameId>, Vec<ThreadId>) {
        let frames = other.frames.iter().map(|f| self.intern_frame(f.clone())).collect();
        let threads = other.threads.iter().map(|t| self.intern_thread(t.clone())).collect();
        (frames, threads)
    }

    /// Adds every stack of `other` as [`Profile::absorb`] does, stack `i`
    /// weighing `weights[i]`: its spans rescaled in proportion, rounded so
    /// that they still add up to it.
    pub fn absorb_reweighted(&mut self, other: &Profile, weights: &[u64]) {
        let (frames, threads) = self.intern_all(other);
        let mut lists = frame_lists::Remap::default();
        for (s, &weight) in other.stacks.iter().zip(weights) {
            let total = u128::from(s.spans.iter().map(|p| p.weight).sum::<u64>().max(1));
            let (mut before, mut given) = (0u128, 0u64);
            let spans = s
                .spans
                .iter()
                .filter_map(|p| {
                    before += u128::from(p.weight);
                    let upto = (before * u128::from(weight) + total / 2) / total;
                    let w = upto as u64 - given;
                    given += w;
                    (w > 0).then_some(Span { weight: w, ..*p })
                })
                .collect();
            self.push(Stack {
                thread: s.thread.map(|t| threads[t as usize]),
                frames: lists.map(&s.frames, &frames),
                weight,
                spans,
                labels: s.labels.clone(),
            });
        }
    }

    /// Adds the unresolved weights of `other`, mapped by `scale`, as
    /// [`Profile::absorb`] adds its stacks (e.g. on-CPU samples into a
    /// wall-clock view in microseconds).
    pub fn absorb_unresolved(&mut self, other: &Profile, scale: impl Fn(u64) -> u64) {
        let mut at: HashMap<u32, usize> = self.unresolved.iter().enumerate().map(|(i, u)| (u.pid, i)).collect();
        for o in &other.unresolved {
            let i = *at.entry(o.pid).or_insert_with(|| {
                self.unresolved.push(Unresolved {
                    pid: o.pid,
                    process: o.process.clone(),
                    reasons: Vec::new(),
                });
                self.unresolved.len() - 1
            });
            let u = &mut self.unresolved[i];
            for (reason, w) in &o.reasons {
                match u.reasons.iter_mut().find(|(r, _)| r == reason) {
                    Some((_, have)) => *have += scale(*w),
                    None => u.reasons.push((reason.clone(), scale(*w))),
                }
            }
        }
        for u in &mut self.unresolved {
            u.reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        }
        self.unresolved
            .sort_by(|a, b| b.weight().cmp(&a.weight()).then_with(|| a.pid.cmp(&b.pid)));
    }

    /// Merges stacks with the same thread and frames, heaviest first, so
    /// outputs are small and deterministic.
    pub fn coalesce(&mut self) {
        // Sorting groups equal stacks without hashing every frame list;
        // a million stacks read from a file sort in half the time on two
        // CPUs.
        let by_stack = |a: &Stack, b: &Stack| {
            a.thread
                .cmp(&b.thread)
                .then_with(|| a.frames.cmp(&b.frames))
                .then_with(|| a.labels.cmp(&b.labels))
        };
        let parallel = self.stacks.len() >= PARALLEL_FROM;
        if parallel {
            self.stacks.par_sort_unstable_by(by_stack);
        } else {
            self.stacks.sort_unstable_by(by_stack);
        }
        self.stacks.dedup_by(|later, kept| {
            let same = later.thread == kept.thread && later.frames == kept.frames && later.labels == kept.labels;
            if same {
                kept.weight += later.weight;
                time::merge_spans(kept, later);
            }
            same
        });
        let by_weight = |a: &Stack, b: &Stack| {
            b.weight
                .cmp(&a.weight)
                .then_with(|| a.thread.cmp(&b.thread))
                .then_with(|| a.frames.cmp(&b.frames))
                .then_with(|| a.labels.cmp(&b.labels))
        };
        // The order is total (no two stacks left have the same thread,
        // frames and labels): an unstable sort gives the same order, without the
        // stable sort's buffer of half the stacks.
        if parallel {
            self.stacks.par_sort_unstable_by(by_weight);
        } else {
            self.stacks.sort_unstable_by(by_weight);
        }
    }
}

#[cfg(test)]
mod tests;
