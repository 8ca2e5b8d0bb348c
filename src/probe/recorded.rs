//! What a capture hands over at its end ([`Recorded`]): every stack and
//! run it recorded, the probe's counts, what it lost and why, and what the
//! runtimes found: the probe's outputs, apart from its settings
//! ([`super::options`]).

use std::time::Duration;

use super::{Stats, TableStats};
use crate::profile::{Losses, RawStack};

/// Everything a finished capture recorded, read out of the kernel.
#[derive(Debug, Default)]
pub struct Recorded {
    /// On-CPU samples (`state` None, weight in samples) and off-CPU
    /// intervals (`state` set, weight in microseconds).
    pub stacks: Vec<RawStack>,
    pub stats: Stats,
    /// Losses of the on-CPU sampler only.
    pub oncpu_losses: Losses,
    /// Losses of the off-CPU tracer only.
    pub offcpu_losses: Losses,
    /// Losses every view shares: the stack store, process announcements.
    pub shared_losses: Losses,
    /// Off-CPU blocks still open when the capture ended (their time so far
    /// is in `stacks`).
    pub open_blocks: u64,
    /// The threads blocked since before the capture that were drawn: how
    /// their user stacks were read (src/probe/seeds.rs).
    pub seeded: super::SeedCounts,
    /// Wall-clock captures: the time each thread ran, measured at its
    /// switches (weight and spans in microseconds; no stacks), up to the
    /// end for those still running. Their on-CPU samples divide it among
    /// their stacks.
    pub runs: Vec<crate::profile::merge::Ran>,
    /// System-wide: threads blocked from before the capture to its end,
    /// not drawn unless `--idle-threads`: (threads, microseconds).
    pub idle: (u64, u64),
    /// Switch-outs of kernel threads left out (system-wide default).
    pub kthread_switches: u64,
    /// How many times the kernel skipped the sched_switch program (its
    /// recursion misses); `None` without one, or before Linux 5.12.
    pub switch_misses: Option<u64>,
    /// The window recorded, on CLOCK_MONOTONIC (ns): time 0 to the stop,
    /// or to the read while recording goes on.
    pub window_ns: Option<(u64, u64)>,
    /// What the unwind tables covered; `None` with frame pointers only.
    pub tables: Option<TableStats>,
    /// Why the kernel refused the table walker, when it did.
    pub tables_refused: Option<String>,
    /// Why the runtimes' walkers the user wanted were not loaded.
    pub walkers_refused: crate::runtimes::Refused,
    /// A staged start (src/probe/staged.rs): how long after the capture's
    /// time 0 (its slices' origin) the runtimes' walkers joined (the stats
    /// count what was recorded before: `lean_samples`, `lean_switches`).
    pub walkers_joined: Option<std::time::Duration>,
    /// The kernel fallbacks taken, one sentence each (see
    /// [`features::Paths::lines`](super::features::Paths::lines)).
    pub kernel: Vec<String>,
    /// The same, one word each ([`features::Paths::words`](super::features::Paths::words)).
    pub kernel_words: Vec<&'static str>,
    /// What the runtimes found, named and could not read.
    pub runtimes: crate::runtimes::Found,
    /// The width of the time slices the stacks' spans count in, widened
    /// from the one asked for when their number outgrew its bound.
    pub slice: Option<Duration>,
    /// `fgbpf events`: each event's hits and losses.
    pub events: Vec<super::points::Tally>,
    /// `fgbpf alloc`: the calls seen, sampled, matched and lost.
    pub alloc: Option<super::alloc::Tally>,
}

impl Recorded {
    /// Keeps what fell in slices `from..to`, renumbered so that `from` is
    /// slice 0: a flight recorder's dump (`to` unbounded), an OTLP
    /// stream's interval. Each stack and run keeps its part in the range
    /// (spread evenly over its spans' slices); those with none go.
    pub fn keep_slices(&mut self, from: u32, to: u32) {
        use crate::profile::time::keep_within;
        let renumber = |spans: &mut crate::profile::time::Spans| {
            for s in spans.iter_mut() {
                s.first -= from;
                s.last -= from;
            }
        };
        for r in &mut self.stacks {
            r.weight = keep_within(&mut r.spans, from, to);
            renumber(&mut r.spans);
        }
        self.stacks.retain(|r| r.weight > 0);
        for r in &mut self.runs {
            r.us = keep_within(&mut r.spans, from, to);
            renumber(&mut r.spans);
        }
        self.runs.retain(|r| r.us > 0);
    }
}
