//! `fgbpf alloc`'s four views from its raw counts: each stack's sampled
//! allocations and frees (by size, in its thread's group: src/probe/alloc.rs)
//! weighed into unbiased estimates of objects and bytes allocated, and of
//! those still in use (allocated in the window and not freed) — the four
//! sample types of Go's heap profiles.

use rustc_hash::FxHashMap as HashMap;

use super::{Frames, Kind, Profile, Stack, ThreadId, Unit};

/// The kind in a count key's cgroup field (FG_ALLOC_SHIFT of src/bpf/alloc.bpf.h).
const SHIFT: u32 = 56;

/// What one count of `fgbpf alloc` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// A sampled allocation of `size` bytes.
    Alloc(u64),
    /// A sampled allocation of `size` bytes freed in the window.
    Free(u64),
    /// From a Go program's own heap profile (src/runtimes/go/heap.rs),
    /// sampled every `rate` bytes on average: an allocation of `size`
    /// bytes in the window, and one in use at the runtime's last GC.
    GoAlloc { size: u64, rate: u64 },
    GoInUse { size: u64, rate: u64 },
}

impl Counted {
    /// The kind and size of a key's cgroup field.
    pub fn of(cgroup: u64) -> Option<Counted> {
        let size = cgroup & ((1 << SHIFT) - 1);
        match cgroup >> SHIFT {
            1 => Some(Counted::Alloc(size)),
            2 => Some(Counted::Free(size)),
            _ => None,
        }
    }

    /// As a stack's group name (src/probe/counts.rs), read back by
    /// [`Counted::parse`].
    pub fn name(self) -> String {
        match self {
            Counted::Alloc(s) => format!("alloc {s}"),
            Counted::Free(s) => format!("free {s}"),
            Counted::GoAlloc { size, rate } => format!("go-alloc {size} {rate}"),
            Counted::GoInUse { size, rate } => format!("go-inuse {size} {rate}"),
        }
    }

    pub fn parse(text: &str) -> Option<Counted> {
        let mut words = text.split(' ');
        let kind = words.next()?;
        let size = words.next()?.parse().ok()?;
        let rate = words.next().map(str::parse::<u64>);
        match (kind, rate) {
            ("alloc", None) => Some(Counted::Alloc(size)),
            ("free", None) => Some(Counted::Free(size)),
            ("go-alloc", Some(Ok(rate))) => Some(Counted::GoAlloc { size, rate }),
            ("go-inuse", Some(Ok(rate))) => Some(Counted::GoInUse { size, rate }),
            _ => None,
        }
    }
}

/// The sample types, in Go's order: (type, unit).
pub const TYPES: [(&str, &str); 4] = [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"), ("inuse_space", "bytes")];

/// Indexes into [`TYPES`] and [`Heap::values`].
pub const ALLOC_OBJECTS: usize = 0;
pub const ALLOC_SPACE: usize = 1;
pub const INUSE_OBJECTS: usize = 2;
pub const INUSE_SPACE: usize = 3;

/// What one sample of `size` bytes stands for when allocations are
/// sampled once every `mean` bytes on average (Poisson): it was sampled
/// with probability 1 - exp(-size/mean), so it counts as
/// (bytes, objects) = (size, 1) / that. `mean` 1: every allocation, itself.
pub fn weight(size: u64, mean: u64) -> (f64, f64) {
    if mean <= 1 || size == 0 {
        return (size as f64, 1.0);
    }
    let p = -(-(size as f64) / mean as f64).exp_m1();
    (size as f64 / p, 1.0 / p)
}

/// The stacks with their four values.
pub struct Heap {
    /// Every stack once (by thread and frames), weighing its allocated
    /// bytes (or its bytes in use, when more); frames and threads as the
    /// views share them.
    pub profile: Profile,
    /// Each stack's values, in [`TYPES`]' order (the profile's stacks').
    pub values: Vec<[u64; 4]>,
    /// The mean bytes between samples (pprof's period).
    pub mean: u64,
    /// Whether a Go program's own heap profile is in it (its in use is
    /// its runtime's account, not the window's).
    pub go: bool,
    /// Estimated bytes the C library's `mmap` gave a Go runtime whose
    /// heap profile is read (through cgo: its heap's own pages, whose
    /// objects the profile counts), left out.
    pub go_pages: u64,
}

/// The Go runtime's wrapper of every mapping it makes: below it, through
/// cgo, the C library's `mmap` gives the Go heap its pages.
const GO_MMAP: &str = "runtime.mmap";

impl Heap {
    /// Weighs `raw` (an `alloc` capture's counts: weights are samples, a
    /// thread's group the kind and size) sampled at `mean` bytes.
    pub fn build(raw: &Profile, mean: u64) -> Heap {
        let mut profile = Profile::new(Unit::Samples);
        profile.meta = raw.meta.clone();
        profile.meta.kind = Kind::Alloc;
        profile.meta.frequency = None;
        profile.meta.slice = None;
        profile.unresolved = raw.unresolved.clone();
        let frames: Vec<_> = raw.frames().iter().map(|f| profile.intern_frame(f.clone())).collect();
        // (thread, frames) → [alloc objects, alloc bytes, in-use objects, in-use bytes]
        let mut sums: HashMap<(Option<ThreadId>, Frames), [f64; 4]> = HashMap::default();
        let mut threads: HashMap<ThreadId, (ThreadId, Option<Counted>)> = HashMap::default();
        let mut order = Vec::new();
        let mut go = false;
        let mut go_pages = 0.0;
        // The processes whose Go heap profile was read.
        let go_pids: std::collections::HashSet<u32> = raw
            .threads()
            .iter()
            .filter(|t| t.group.as_deref().and_then(Counted::parse).is_some_and(|c| matches!(c, Counted::GoAlloc { .. } | Counted::GoInUse { .. })))
            .map(|t| t.pid)
            .collect();
        let go_mmap: Vec<bool> = raw.frames().iter().map(|f| f.name == GO_MMAP).collect();
        for s in raw.stacks() {
            let (thread, counted) = match s.thread {
                Some(t) => {
                    let (id, c) = *threads.entry(t).or_insert_with(|| {
                        let mut th = raw.thread(t).clone();
                        let c = th.group.take().and_then(|g| Counted::parse(&g));
                        (profile.intern_thread(th), c)
                    });
                    (Some(id), c)
                }
                None => (None, None),
            };
            let Some(counted) = counted else { continue };
            if let (Counted::Alloc(size) | Counted::Free(size), Some(t)) = (counted, s.thread) {
                if go_pids.contains(&raw.thread(t).pid) && s.frames.iter().any(|&f| go_mmap[f as usize]) {
                    if let Counted::Alloc(_) = counted {
                        go_pages += s.weight as f64 * weight(size, mean).0;
                    }
                    continue;
                }
            }
            let ids: Frames = s.frames.iter().map(|&f| frames[f as usize]).collect::<Vec<_>>().into();
            let n = s.weight as f64;
            let sum = sums.entry((thread, ids.clone())).or_insert_with(|| {
                order.push((thread, ids));
                [0.0; 4]
            });
            // A sampled call's allocation is in use until its free; a Go
            // program's in use is its runtime's own account.
            go |= matches!(counted, Counted::GoAlloc { .. } | Counted::GoInUse { .. });
            let (size, mean, alloc, in_use) = match counted {
                Counted::Alloc(size) => (size, mean, 1.0, 1.0),
                Counted::Free(size) => (size, mean, 0.0, -1.0),
                Counted::GoAlloc { size, rate } => (size, rate, 1.0, 0.0),
                Counted::GoInUse { size, rate } => (size, rate, 0.0, 1.0),
            };
            let (b, o) = weight(size, mean);
            sum[0] += alloc * n * o;
            sum[1] += alloc * n * b;
            sum[2] += in_use * n * o;
            sum[3] += in_use * n * b;
        }
        let mut values = Vec::with_capacity(order.len());
        for key in order {
            let s = sums[&key];
            let v = s.map(|x| x.max(0.0).round() as u64);
            if v[ALLOC_SPACE] == 0 && v[INUSE_SPACE] == 0 {
                continue;
            }
            // Weighing what it allocated, or what it holds (a Go stack
            // holding what it allocated before the window).
            let (thread, frames) = key;
            profile.push(Stack { thread, frames, weight: v[ALLOC_SPACE].max(v[INUSE_SPACE]), ..Default::default() });
            values.push(v);
        }
        Heap { profile, values, mean, go, go_pages: go_pages.round() as u64 }
    }

    /// One sample type's view: the same stacks weighing its values.
    pub fn view(&self, which: usize) -> Profile {
        let mut p = Profile::new(Unit::Samples);
        p.meta = self.profile.meta.clone();
        p.unresolved = self.profile.unresolved.clone();
        let weights: Vec<u64> = self.values.iter().map(|v| v[which]).collect();
        p.absorb_reweighted(&self.profile, &weights);
        p
    }

    /// A view's total.
    pub fn total(&self, which: usize) -> u64 {
        self.values.iter().map(|v| v[which]).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_undo_the_sampling_and_every_allocation_is_itself() {
        assert_eq!(weight(100, 1), (100.0, 1.0));
        // Far above the mean: always sampled, itself.
        let (b, o) = weight(1 << 30, 512 * 1024);
        assert!((b - (1u64 << 30) as f64).abs() < 1.0 && (o - 1.0).abs() < 1e-6);
        // Far below: about mean / size objects, mean bytes.
        let (b, o) = weight(16, 512 * 1024);
        assert!((b - 524_296.0).abs() < 1.0, "{b}");
        assert!((o - 524_296.0 / 16.0).abs() < 0.1, "{o}");
    }

    #[test]
    fn in_use_is_what_was_allocated_less_what_was_freed_per_stack() {
        use crate::profile::{Frame, FrameKind, Thread};
        let mut raw = Profile::new(Unit::Samples);
        let (a, b) = (raw.intern_frame(Frame::new("a", FrameKind::User)), raw.intern_frame(Frame::new("b", FrameKind::User)));
        let mut add = |frame, group: Counted, n| {
            let thread = raw.intern_thread(Thread { pid: 1, tid: 1, group: Some(group.name()), ..Default::default() });
            raw.push(Stack { thread: Some(thread), frames: vec![frame].into(), weight: n, ..Default::default() });
        };
        add(a, Counted::Alloc(100), 3);
        add(a, Counted::Free(100), 3);
        add(b, Counted::Alloc(1000), 2);
        add(b, Counted::Free(1000), 1);
        let heap = Heap::build(&raw, 1);
        assert_eq!(heap.values, vec![[3, 300, 0, 0], [2, 2000, 1, 1000]]);
        // One thread again, its group gone.
        assert_eq!(heap.profile.threads().len(), 1);
        assert_eq!(heap.profile.threads()[0].group, None);
        assert_eq!(heap.view(INUSE_SPACE).total(), 1000);
        assert_eq!(heap.view(ALLOC_OBJECTS).total(), 5);
    }
}
