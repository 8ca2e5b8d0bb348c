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
        }
    }

    pub fn parse(text: &str) -> Option<Counted> {
        let (kind, size) = text.split_once(' ')?;
        let size = size.parse().ok()?;
        match kind {
            "alloc" => Some(Counted::Alloc(size)),
            "free" => Some(Counted::Free(size)),
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
    /// bytes; frames and threads as the views share them.
    pub profile: Profile,
    /// Each stack's values, in [`TYPES`]' order (the profile's stacks').
    pub values: Vec<[u64; 4]>,
    /// The mean bytes between samples (pprof's period).
    pub mean: u64,
}

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
        // (thread, frames) → [alloc objects, alloc bytes, freed objects, freed bytes]
        let mut sums: HashMap<(Option<ThreadId>, Frames), [f64; 4]> = HashMap::default();
        let mut threads: HashMap<ThreadId, (ThreadId, Option<Counted>)> = HashMap::default();
        let mut order = Vec::new();
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
            let ids: Frames = s.frames.iter().map(|&f| frames[f as usize]).collect::<Vec<_>>().into();
            let n = s.weight as f64;
            let sum = sums.entry((thread, ids.clone())).or_insert_with(|| {
                order.push((thread, ids));
                [0.0; 4]
            });
            match counted {
                Counted::Alloc(size) => {
                    let (b, o) = weight(size, mean);
                    sum[0] += n * o;
                    sum[1] += n * b;
                }
                Counted::Free(size) => {
                    let (b, o) = weight(size, mean);
                    sum[2] += n * o;
                    sum[3] += n * b;
                }
            }
        }
        let mut values = Vec::with_capacity(order.len());
        for key in order {
            let s = sums[&key];
            let v = [s[0].round() as u64, s[1].round() as u64, (s[0] - s[2]).max(0.0).round() as u64, (s[1] - s[3]).max(0.0).round() as u64];
            if v[ALLOC_SPACE] == 0 {
                continue;
            }
            let (thread, frames) = key;
            profile.push(Stack { thread, frames, weight: v[ALLOC_SPACE], ..Default::default() });
            values.push(v);
        }
        Heap { profile, values, mean }
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
