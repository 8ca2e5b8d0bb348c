//! Draining the double-buffered counts (`src/bpf/counts.bpf.h`) while the
//! capture runs: flip the generation, let programs that read the old one
//! finish, then read and delete the idle map into running totals. The
//! kernel's counts maps then hold at most one interval's keys, and the
//! totals are readable at any moment of the capture.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libbpf_rs::MapCore;

use super::drain::{take_entries, StackReader};
use super::wakers::WakerReader;
use crate::bpf::{types, FgbpfSkel};
use super::totals::{Spans, Totals};
use super::words::{monotonic_ns, interp_walk_of, state_of_raw, walk_of};
use super::DRAIN_EVERY;
use buffers::{flip, inserted, map_of};
use crate::procs::groups::Groups;
use crate::profile::merge::Ran;
use crate::profile::time::{self, Span};
use crate::profile::{More, RawStack, BEFORE_CAPTURE, END_UNTRACED, LOST_STACK, START_UNTRACED};

/// BPF programs run to completion without sleeping, in microseconds: one
/// that read the old generation before the flip is done well within this.
const SETTLE: Duration = Duration::from_millis(2);

/// The time slices of a capture: where they start on the kernel's clock
/// (`bpf_ktime_get_ns`) and how wide they are now. The kernel counts in
/// slices of the width asked for; when the spans outgrow [`MAX_SPANS`],
/// user space merges them `widened` (1, 2, 4...) at a time.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slicing {
    pub origin: u64,
    pub width: Duration,
    pub widened: u32,
}

impl Slicing {
    /// The slice as the spans count now, of a slice as the kernel counts.
    fn current(&self, kernel_slice: u32) -> u32 {
        kernel_slice / self.widened
    }

    /// The span of `weight` from `from_ns` to `to_ns` (kernel clock).
    pub fn span(&self, from_ns: u64, to_ns: u64, weight: u64) -> Span {
        let at = |ns: u64| {
            self.current(time::slice_of(Duration::from_nanos(ns.saturating_sub(self.origin)), self.width))
        };
        Span {
            first: at(from_ns),
            last: at(to_ns),
            weight,
        }
    }

    /// The width of a slice as the spans count now.
    pub fn width(&self) -> Duration {
        self.width * self.widened
    }
}

/// Spans kept in memory before slices are made twice as wide (16 bytes
/// each: 64 MB). An on-CPU capture at 99 Hz on 2 CPUs needs 200 a second;
/// a busy host's off-CPU capture a few thousand.
pub const MAX_SPANS: usize = 1 << 22;

/// How many times wider than asked slices may grow (a 100 ms slice
/// becomes 29 hours): widening stops there, as it cannot make spans fewer
/// than one per key.
const MAX_WIDENED: u32 = 1 << 20;

/// A `struct fg_key`'s bytes, kept inline: a capture holds hundreds of
/// thousands of keys, and a heap block each would double their cost.
pub(super) type Key = [u8; std::mem::size_of::<types::fg_key>()];

/// Where struct fg_key keeps its slices, zeroed in the keys of `totals`.
const SLICE_AT: usize = std::mem::offset_of!(types::fg_key, slice_first);
const SLICE_END: usize = std::mem::offset_of!(types::fg_key, slice_last) + 4;
const STATE_AT: usize = std::mem::offset_of!(types::fg_key, state);
const PID_AT: usize = std::mem::offset_of!(types::fg_key, pid);

/// Totals per key (the raw bytes of a `struct fg_key` without its slices)
/// over every drain, as spans of when they fell (raw units: samples, or
/// nanoseconds off-CPU), and the stacks they name, moved out of the
/// kernel's `stacks` map as they are drained.
pub(super) struct Counts {
    totals: Totals<Key>,
    slicing: Slicing,
    /// Spans held in `totals`, and merged by widening.
    spans: usize,
    merged: u64,
    stacks: HashMap<u64, Arc<[u64]>>,
    /// The stacks the last drain moved out of the kernel: counts not yet
    /// drained (the other buffer's) may hold them.
    moved: Vec<u64>,
    last_drain: Option<Instant>,
    /// (pid, user stack) of keys first seen since the last take_fresh.
    fresh: Vec<(u32, u64)>,
    /// The user stacks each process's keys (and wakers) hold, for
    /// [`Self::take_retired`].
    /// Each is the process's start (clock ticks) and the stack: a PID
    /// given again holds its processes' stacks apart.
    by_pid: HashMap<u32, Vec<(u32, u64)>>,
    /// Processes (PID, start) announced gone, with the number of drains
    /// done then.
    exits: Vec<((u32, u32), u64)>,
    drains: u64,
    drained_at: Option<u64>,
    /// `fgbpf flight`'s CPU trigger: on-CPU samples per process in the
    /// buffer the last drain read, and how long that buffer counted.
    cpu: Option<(HashMap<u32, u64>, Duration)>,
    /// `--group-by cgroup`: the names of the cgroups keys carry, looked
    /// up as they are first drained.
    groups: Option<Groups>,
    /// `fgbpf events`: the events by index, which keys carry in their
    /// cgroup field (src/bpf/events.bpf.h): each one's root frame.
    events: Option<Vec<String>>,
    /// `fgbpf alloc`: keys carry a kind and size in their cgroup field.
    allocations: bool,
}

/// The native frames' addresses of a user stack, as naming looks them up
/// (a caller's return address moved into its call): those before an
/// interpreter's marker.
fn native_addresses(stack: &[u64]) -> impl Iterator<Item = u64> + '_ {
    let native = stack.iter().position(|&a| crate::runtimes::is_interp_marker(a));
    crate::profile::build::adjusted(&stack[..native.unwrap_or(stack.len())])
}

/// What [`Counts::forget_before`] left.
#[derive(Default)]
pub struct Forgotten {
    /// The processes with keys left.
    pub held: HashSet<u32>,
    /// The processes that lost keys (and so, perhaps, stacks).
    pub thinned: HashSet<u32>,
}

impl Counts {
    pub fn new(slicing: Slicing, groups: Option<Groups>) -> Counts {
        Counts {
            totals: Totals::default(),
            slicing,
            spans: 0,
            merged: 0,
            stacks: HashMap::new(),
            moved: Vec::new(),
            last_drain: None,
            fresh: Vec::new(),
            by_pid: HashMap::new(),
            exits: Vec::new(),
            drains: 0,
            drained_at: None,
            cpu: None,
            groups,
            events: None,
            allocations: false,
        }
    }

    /// Names each key's event (`fgbpf events`) in its stack's root frame.
    pub fn naming_events(mut self, names: Vec<String>) -> Counts {
        self.events = (!names.is_empty()).then_some(names);
        self
    }

    /// Names each key's kind and size (`fgbpf alloc`: src/probe/alloc.rs)
    /// in its stack's group.
    pub fn naming_allocations(mut self, on: bool) -> Counts {
        self.allocations = on;
        self
    }

    /// From now on, tallies each drain's on-CPU samples per process.
    pub fn tally_cpu(&mut self) {
        self.cpu.get_or_insert_with(Default::default);
    }

    /// On-CPU samples per process in the buffer the last drain read, and
    /// how long it counted (`None` before two drains, or untallied).
    pub fn cpu(&self) -> Option<(&HashMap<u32, u64>, Duration)> {
        self.cpu.as_ref().filter(|(_, d)| !d.is_zero()).map(|(c, d)| (c, *d))
    }

    /// The names of cgroups, with `--group-by cgroup`.
    pub fn groups(&self) -> Option<&Groups> {
        self.groups.as_ref()
    }

    /// The slices spans count in now.
    /// Moves the slices' origin to `origin` (nothing counted yet).
    pub fn restart(&mut self, origin: u64) {
        self.slicing.origin = origin;
    }

    pub fn slicing(&self) -> Slicing {
        self.slicing
    }

    /// The user addresses `pid`'s kept keys' stacks hold, as
    /// [`Self::take_retired`] gives them (where the symbolizer keeps them
    /// located).
    pub fn held_addresses(&self, pid: u32) -> HashSet<u64> {
        let ids = self.by_pid.get(&pid).map(Vec::as_slice).unwrap_or_default();
        ids.iter().filter_map(|(_, id)| self.stacks.get(id)).flat_map(|s| native_addresses(s)).collect()
    }

    /// About how many bytes the totals and the stacks they name hold.
    pub fn bytes(&self) -> usize {
        let stacks: usize = self.stacks.values().map(|s| s.len() * 8 + 16 + 32).sum();
        let by_pid: usize = self.by_pid.values().map(|v| v.capacity() * 16 + 40).sum();
        self.totals.bytes() + stacks + by_pid
    }

    /// Spans merged into wider slices to bound memory (0 when none were).
    pub fn merged_spans(&self) -> u64 {
        self.merged
    }

    /// Drains when [`DRAIN_EVERY`] has passed since the last drain, or
    /// sooner when the buffer in use is half full (`high`: half its
    /// entries): a storm of short threads or processes brings new keys
    /// faster than one drain a second takes them, and what follows the
    /// storm would find the map full.
    pub fn tick(&mut self, skel: &mut FgbpfSkel<'_>, high: u64) {
        let now = Instant::now();
        let filling = inserted(skel, None) >= high;
        match self.last_drain {
            None => self.last_drain = Some(now),
            Some(t) if now - t >= DRAIN_EVERY || filling => {
                self.last_drain = Some(now);
                let flipped = monotonic_ns();
                let idle = flip(skel);
                std::thread::sleep(SETTLE);
                if let (Some((cpu, counted)), Some(before)) = (self.cpu.as_mut(), self.drained_at) {
                    cpu.clear();
                    *counted = Duration::from_nanos(flipped.saturating_sub(before));
                }
                self.drain(map_of(skel, idle), &skel.maps.stacks, Some(&skel.maps.wakers));
                inserted(skel, Some(idle));
                self.drained_at = Some(flipped);
            }
            Some(_) => {}
        }
    }

    /// Drains both buffers; for the end of the capture, when no program
    /// runs any more.
    pub fn drain_all(&mut self, skel: &FgbpfSkel<'_>) {
        self.drain(&skel.maps.counts0, &skel.maps.stacks, None);
        self.drain(&skel.maps.counts1, &skel.maps.stacks, None);
    }

    /// The (pid, user stack) of every key first drained since the last
    /// call, with the stack's frames when they were moved out already.
    pub fn take_fresh(&mut self) -> Vec<(u32, &[u64])> {
        let fresh = std::mem::take(&mut self.fresh);
        fresh
            .into_iter()
            .filter_map(|(pid, k)| self.stacks.get(&k).map(|s| (pid, &s[..])))
            .collect()
    }

    /// The stacks moved out of the kernel so far, for reading the totals.
    pub fn stacks(&self) -> &HashMap<u64, Arc<[u64]>> {
        &self.stacks
    }

    /// When the last drain switched buffers (monotonic ns): every count
    /// taken before is in the totals. `None` before the first drain.
    pub fn drained_at(&self) -> Option<u64> {
        self.drained_at
    }

    /// `wakers`: where the waker keys of new counts are read, to index
    /// the wakers' stacks by their processes too.
    fn drain<M: MapCore, S: MapCore>(&mut self, map: &M, stacks: &S, wakers: Option<&libbpf_rs::Map<'_>>) {
        let mut cgroups = Vec::new();
        for (k, v) in take_entries(map) {
            let Ok(mut k) = Key::try_from(&k[..]) else { continue };
            if v.len() < 8 {
                continue;
            }
            let value = u64::from_ne_bytes(v[..8].try_into().expect("8 bytes"));
            let slice = |at: usize| u32::from_ne_bytes(k[at..at + 4].try_into().expect("4 bytes"));
            let state = u16::from_ne_bytes(k[STATE_AT..STATE_AT + 2].try_into().expect("2 bytes"));
            if let Some((cpu, _)) = self.cpu.as_mut().filter(|_| state == 0) {
                *cpu.entry(slice(PID_AT)).or_default() += value;
            }
            let span = Span {
                first: self.slicing.current(slice(SLICE_AT)),
                last: self.slicing.current(slice(SLICE_END - 4)),
                weight: value,
            };
            k[SLICE_AT..SLICE_END].fill(0);
            // Most keys only ever get one span: no room for more yet.
            let (spans, new) = self.totals.entry(k);
            // A slice that straddles two drains comes in twice.
            match spans.last_mut() {
                Some(last) if (last.first, last.last) == (span.first, span.last) => last.weight += value,
                _ => {
                    spans.push(span);
                    self.spans += 1;
                }
            }
            if new {
                let mut key = types::fg_key::default();
                if plain::copy_from_bytes(&mut key, &k).is_ok() {
                    if self.groups.is_some() {
                        cgroups.push(key.cgroup);
                    }
                    if key.user_stack != 0 {
                        self.fresh.push((key.pid, key.user_stack));
                        let at = (key.start, key.user_stack);
                        self.by_pid.entry(key.pid).or_default().push(at);
                    }
                    if let Some(w) = wakers.and_then(|m| super::wakers::lookup(m, key.waker)) {
                        if w.user_stack != 0 {
                            let at = (w.start as u32, w.user_stack);
                            self.by_pid.entry(w.pid).or_default().push(at);
                        }
                    }
                }
            }
        }
        if let Some(groups) = self.groups.as_mut() {
            groups.note(cgroups);
        }
        while self.spans > MAX_SPANS && self.slicing.widened < MAX_WIDENED {
            self.widen();
        }
        // Then every stored stack moves out of the kernel, those of the
        // counts just read among them (each was stored before its count):
        // the map only ever holds one interval's new stacks, so a long
        // capture on a host with ever new stacks (new processes, new
        // addresses) never fills it. A key is the hash of its frames, so a
        // stack a program stores again under the same key is the same.
        self.moved.clear();
        for (k, v) in take_entries(stacks) {
            if let Ok(k) = <[u8; 8]>::try_from(&k[..]) {
                let id = u64::from_ne_bytes(k);
                self.moved.push(id);
                self.stacks.insert(id, super::drain::ips_of(&v).into());
            }
        }
        self.drains += 1;
    }

    /// Makes slices twice as wide, merging their spans: a long capture of
    /// many threads keeps bounded memory at the cost of resolution in time.
    fn widen(&mut self) {
        let before = self.spans;
        self.spans = 0;
        for spans in self.totals.spans_mut() {
            time::widen(spans, 2);
            self.spans += spans.len();
        }
        self.merged += (before - self.spans) as u64;
        self.slicing.widened *= 2;
    }

    /// Notes that `pid` since `start` exited (its announced exit).
    pub fn exited(&mut self, pid: u32, start: u32) {
        self.exits.push(((pid, start), self.drains));
    }

    /// Processes that exited at least two drains ago, so that both count
    /// buffers were read since (every stack of theirs is out of the
    /// kernel), each with the distinct native addresses of its stacks, as
    /// they will be named.
    pub fn take_retired(&mut self) -> Vec<((u32, u32), Vec<u64>)> {
        let drains = self.drains;
        let (ready, waiting): (Vec<_>, Vec<_>) =
            self.exits.drain(..).partition(|&(_, at)| drains >= at + 2);
        self.exits = waiting;
        ready
            .into_iter()
            .map(|((pid, start), _)| {
                // Its own stacks, not those of a process given its PID since.
                let mut ids = self.by_pid.remove(&pid).unwrap_or_default();
                let (its, others): (Vec<_>, Vec<_>) =
                    ids.drain(..).partition(|&(s, _)| s == start || s == 0 || start == 0);
                if !others.is_empty() {
                    self.by_pid.insert(pid, others);
                }
                let mut addrs: Vec<u64> = its
                    .iter()
                    .filter_map(|(_, k)| self.stacks.get(k))
                    .flat_map(|s| native_addresses(s))
                    .collect();
                addrs.sort_unstable();
                addrs.dedup();
                ((pid, start), addrs)
            })
            .collect()
    }

    /// Forgets the weight that fell before slice `first` (`fgbpf flight`
    /// keeps only the recent past): keys left with none go, and with them
    /// the stacks no key holds any more, but those the last drain moved,
    /// which counts still in the kernel may hold. Says which processes
    /// have keys left, and which lost some.
    pub fn forget_before(&mut self, first: u32) -> Forgotten {
        let mut held: HashSet<u64, ahash::RandomState> =
            HashSet::with_capacity_and_hasher(self.stacks.len(), ahash::RandomState::new());
        held.extend(self.moved.iter().copied());
        let mut left = Forgotten::default();
        let mut spans_left = 0;
        let by_pid = &mut self.by_pid;
        by_pid.clear();
        // In place: most keys keep all their spans.
        self.totals.retain(|k, spans| {
            let mut key = types::fg_key::default();
            if plain::copy_from_bytes(&mut key, k).is_err() {
                return false;
            }
            if spans.iter().any(|s| s.first < first) && time::keep_within(spans, first, u32::MAX) == 0 {
                left.thinned.insert(key.pid);
                return false;
            }
            held.extend([key.user_stack, key.kern_stack]);
            left.held.insert(key.pid);
            if key.user_stack != 0 {
                by_pid.entry(key.pid).or_default().push((key.start, key.user_stack));
            }
            spans_left += spans.len();
            true
        });
        self.spans = spans_left;
        self.stacks.retain(|id, _| held.contains(id));
        left
    }

    /// The totals, taken out: the capture's end reads them once
    /// ([`Self::read_out`]), moving each key's spans instead of copying
    /// them beside the table.
    pub fn take_totals(&mut self) -> Totals<Key> {
        self.spans = 0;
        std::mem::take(&mut self.totals)
    }

    /// The totals as raw stacks (see [`Self::read_out`]), copied: the
    /// capture goes on.
    pub fn raw_stacks<M: MapCore, W: MapCore>(
        &self,
        reader: &mut StackReader<'_, M>,
        wakers: &mut WakerReader<'_, W>,
        from: u32,
    ) -> (Vec<RawStack>, Vec<Ran>) {
        // Only the counts that reach slice `from`: an OTLP stream's interval
        // does not read an hour's counts again each time.
        let entries = self
            .totals
            .iter()
            .filter(|(_, spans)| from == 0 || spans.iter().any(|s| s.last >= from))
            .map(|(k, spans)| (*k, spans.clone()));
        // Room for every count only when every count is read.
        let n = if from == 0 { self.totals.len() } else { 0 };
        self.read_out(entries, n, reader, wakers)
    }

    /// `entries` (`n` of them, totals per key) as raw stacks, their stacks
    /// read from the stack store, and the time threads ran (wall-clock
    /// captures). Nanoseconds become microseconds.
    pub fn read_out<M: MapCore, W: MapCore>(
        &self,
        entries: impl Iterator<Item = (Key, Spans)>,
        n: usize,
        reader: &mut StackReader<'_, M>,
        wakers: &mut WakerReader<'_, W>,
    ) -> (Vec<RawStack>, Vec<Ran>) {
        let mut out = Vec::with_capacity(n);
        let mut runs = Vec::new();
        for (k, mut spans) in entries {
            let value: u64 = spans.iter().map(|s| s.weight).sum();
            let mut key = types::fg_key::default();
            if plain::copy_from_bytes(&mut key, &k).is_err() {
                continue;
            }
            time::normalize(&mut spans);
            if u32::from(key.state) == RAN {
                runs.push(Ran {
                    pid: key.pid,
                    tid: key.tid,
                    comm: reader.name(&key.comm),
                    spans: in_microseconds(spans),
                    us: (value + 500) / 1000,
                });
                continue;
            }
            let user = reader.get(key.user_stack);
            let kernel = reader.get(key.kern_stack);
            let state = state_of_raw(key.state.into());
            let pre_existing = key.flags & 1 != 0;
            let root_note = match () {
                _ if pre_existing => Some(BEFORE_CAPTURE),
                _ if key.flags & 4 != 0 => Some(START_UNTRACED),
                _ if user.is_none() || kernel.is_none() => Some(LOST_STACK),
                _ => None,
            };
            out.push(RawStack {
                pid: key.pid,
                start: key.start,
                tid: key.tid,
                comm: reader.name(&key.comm),
                user: user.unwrap_or_default(),
                kernel: kernel.unwrap_or_default(),
                spans: match state {
                    None => spans,
                    Some(_) => in_microseconds(spans),
                },
                weight: match state {
                    None => value,
                    Some(_) => (value + 500) / 1000,
                },
                root_note,
                kernel_note: (key.flags & 2 != 0).then_some(END_UNTRACED),
                state,
                walk: walk_of(key.flags.into()),
                waker: wakers.get(key.waker, reader),
                interp_walk: interp_walk_of(key.flags.into()),
                more: RawStack::more_of(More {
                    group: match &self.events {
                        _ if self.allocations => super::alloc::Counted::of(key.cgroup).map(|c| c.name()),
                        Some(names) => Some(names.get(key.cgroup as usize).cloned().unwrap_or_else(|| format!("event #{}", key.cgroup))),
                        None => self.groups.as_ref().map(|g| g.label(key.cgroup)),
                    },
                    ..More::default()
                }),
            });
        }
        (out, runs)
    }
}

/// `FG_RAN` of `enum fg_state`: a thread's measured run time.
const RAN: u32 = 4;

/// Spans of nanoseconds in microseconds, in place, rounded so that they
/// add up to their total rounded: each span gets the rounded running
/// sum's step (spans left with none are dropped).
fn in_microseconds(mut spans: Spans) -> Spans {
    let mut sum_ns = 0u64;
    let mut sum_us = 0u64;
    spans.retain(|s| {
        sum_ns += s.weight;
        let us = (sum_ns + 500) / 1000 - sum_us;
        sum_us += us;
        s.weight = us;
        us > 0
    });
    spans
}

#[path = "buffers.rs"]
mod buffers;

#[cfg(test)]
#[path = "counts_tests.rs"]
mod tests;
