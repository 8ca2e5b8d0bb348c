//! The profiles a recording's views are drawn from: the probe's raw
//! stacks named once into an on-CPU, an off-CPU and an off-wake profile,
//! with the losses, the off-CPU edges and the unwinding accounts each
//! view's report states. Built at the end of a capture, and by `top` at
//! each refresh.

use std::time::Duration;

use crate::probe::{self, Recorded};
use crate::profile::unwinding::{by_process, Lean};
use crate::profile::{build, merge, thousands, Kind, Losses, Meta, Profile, RawStack, Unit, Unwinding};
use crate::profile::{BEFORE_CAPTURE, END_UNTRACED, START_UNTRACED};
use crate::format::goroutines as format_goroutines;
use crate::symbolize::Symbolizer;


/// Which views a recording has.
#[derive(Clone, Copy, Debug)]
pub struct Wanted {
    /// On-CPU samples at this rate.
    pub frequency: Option<u64>,
    pub offcpu: bool,
    pub wakers: bool,
    /// Stacks keep their labels (a Go program's goroutine and pprof
    /// labels): pprof output is written.
    pub labels: bool,
    /// `--label-frames`: the labels also as a frame at each stack's root.
    pub label_frames: bool,
}

impl Wanted {
    /// A profile's labels as asked: a frame, kept for pprof, or dropped
    /// (every other view would list a stack once per goroutine).
    fn keep_labels(&self, p: &mut Profile) {
        if self.label_frames {
            p.labels_as_frames();
        }
        if !self.labels {
            p.drop_labels();
        }
    }
}

/// The profiles a recording's views are drawn from.
pub struct Views {
    pub on: Option<Profile>,
    pub off: Option<Profile>,
    /// `--wakers`: off-CPU stacks joined with their wakers' stacks.
    pub wake: Option<Profile>,
    pub edges: Edges,
    oncpu_losses: Losses,
    offcpu_losses: Losses,
    shared_losses: Losses,
    /// Wall-clock captures: each thread's run time, measured.
    pub runs: Vec<merge::Ran>,
    /// Go programs: their goroutines' time by stack and state, and the
    /// report's section on them (see [`goroutines`]).
    pub goroutines: Option<Profile>,
    pub goroutines_text: String,
}

impl Views {
    pub fn build(
        rec: Wanted,
        mut recorded: Recorded,
        symbolizer: &mut Symbolizer,
        target: &str,
        elapsed: Duration,
    ) -> Views {
        let (mut on_raw, mut off_raw) = split_sides(std::mem::take(&mut recorded.stacks));
        // `fgbpf alloc`: Go programs' own heap profiles beside the C
        // library's sampled calls (not in the walks' account: no stack
        // of theirs was walked).
        let go_heap = std::mem::take(&mut recorded.runtimes.go_heap);
        let mut views = Views {
            on: None,
            off: None,
            wake: None,
            edges: Edges {
                open_blocks: recorded.open_blocks,
                idle: recorded.idle,
                kthread_switches: recorded.kthread_switches,
                untraced: (recorded.stats.untraced_ins, recorded.stats.untraced_outs),
                switch_misses: recorded.switch_misses,
                stale_starts: recorded.stats.stale_starts,
                seeded: recorded.seeded,
            },
            oncpu_losses: recorded.oncpu_losses,
            offcpu_losses: recorded.offcpu_losses,
            shared_losses: recorded.shared_losses,
            runs: recorded.runs,
            goroutines: None,
            goroutines_text: String::new(),
        };
        let mut unwinding = unwinding(&recorded.stats, recorded.tables.as_ref());
        // What the runtimes say of a process is said even when no stack
        // was walked (`fgbpf alloc` on a Go program: its own heap profile).
        if unwinding.is_none() && !recorded.runtimes.notes.is_empty() {
            unwinding = Some(Unwinding::default());
        }
        if let Some(u) = unwinding.as_mut() {
            u.refused = recorded.tables_refused.clone();
            u.walkers_refused = recorded.walkers_refused.interpreters_line();
            u.lean = recorded.walkers_joined.map(|after| Lean {
                after_ms: after.as_millis() as u64,
                samples: recorded.stats.lean_samples,
                all_samples: recorded.stats.samples,
                switches: recorded.stats.lean_switches,
                all_switches: recorded.stats.switches,
            });
            // Weighted as the main view: samples on-CPU, microseconds
            // off-CPU, and in a wall-clock capture both in microseconds.
            let period_us = match (rec.frequency, rec.offcpu) {
                (Some(f), true) => 1_000_000 / f.max(1),
                _ => 1,
            };
            let on = on_raw.iter().map(|r| (r, r.weight * period_us));
            let off = off_raw.iter().map(|r| (r, r.weight));
            let name_of = |pid, comm: &str| symbolizer.process_name(pid, comm);
            let weighed: Vec<(&RawStack, u64)> = match (rec.frequency.is_some(), rec.offcpu) {
                (true, true) => on.chain(off).collect(),
                (true, false) => on.collect(),
                (false, _) => off.collect(),
            };
            let name_of_process = |pid, start, comm: &str| symbolizer.process_name_of(pid, start, comm);
            u.processes = by_process(weighed.iter().copied(), name_of_process, |r| cut_at(symbolizer, r));
            u.runtimes = crate::runtimes::report::of(
                &recorded.runtimes,
                &crate::runtimes::walks::Context {
                    weighed: &weighed,
                    period_us,
                    stats: &recorded.stats,
                    refused: &recorded.walkers_refused,
                    name_of: &name_of,
                    perf_map: &|pid| symbolizer.has_perf_map(pid),
                },
            );
        }
        symbolizer.add_runtime_names(recorded.runtimes.runtime_names);
        symbolizer.add_code_maps(recorded.runtimes.code_maps);
        let meta = |kind, frequency, losses, symbols| Meta {
            kind,
            target: target.to_string(),
            duration: elapsed,
            frequency,
            losses,
            unwinding: unwinding.clone(),
            kernel: recorded.kernel.clone(),
            kernel_words: recorded.kernel_words.clone(),
            slice: recorded.slice,
            window_ns: recorded.window_ns,
            id_labels: crate::runtimes::id_labels().collect(),
            symbols,
        };
        // Each side's raw stacks are freed as they are named.
        if let Some(frequency) = rec.frequency {
            on_raw.extend(go_heap);
            let mut p = build::from_raw(on_raw, Unit::Samples, symbolizer);
            p.meta = meta(Kind::OnCpu, Some(frequency), views.losses(true, false), symbolizer.source_lines());
            rec.keep_labels(&mut p);
            views.on = Some(p);
            super::stages::mark("on-CPU named");
        }
        if rec.wakers {
            let mut p = build::from_raw(off_raw.clone(), Unit::Microseconds, symbolizer);
            p.meta = meta(Kind::OffCpu, None, views.losses(false, true), symbolizer.source_lines());
            rec.keep_labels(&mut p);
            views.wake = Some(p);
            // The off-CPU view sums each wait over its wakers.
            for r in &mut off_raw {
                r.waker = None;
            }
        }
        if rec.offcpu {
            let mut p = build::from_raw(off_raw, Unit::Microseconds, symbolizer);
            p.meta = meta(Kind::OffCpu, None, views.losses(false, true), symbolizer.source_lines());
            rec.keep_labels(&mut p);
            views.off = Some(p);
            super::stages::mark("off-CPU named");
        }
        (views.goroutines, views.goroutines_text) = goroutines(recorded.runtimes.goroutines, &recorded.runtimes.go_snapshots, symbolizer);
        if let Some(p) = views.goroutines.as_mut() {
            p.meta = meta(Kind::Wall, None, Losses::default(), symbolizer.source_lines());
        }
        views
    }

    /// The losses of the on-CPU side, the off-CPU side, or both, with
    /// those they share counted once.
    pub fn losses(&self, on: bool, off: bool) -> Losses {
        let mut all = Losses::default();
        let parts = [(on, &self.oncpu_losses), (off, &self.offcpu_losses), (true, &self.shared_losses)];
        for (_, l) in parts.iter().filter(|(want, _)| *want) {
            all.entries.extend(l.entries.iter().cloned());
        }
        all
    }
}

/// Go programs' goroutine view (named; its meta left to the caller) and
/// the report's section: each process's last snapshot, named (those
/// whose goroutines could not be read are the unwinding account's).
fn goroutines(
    time: Vec<RawStack>,
    snapshots: &[crate::runtimes::go::walker::Snapshot],
    symbolizer: &mut Symbolizer,
) -> (Option<Profile>, String) {
    let view = (!time.is_empty()).then(|| build::from_raw(time, Unit::Microseconds, symbolizer));
    let named: Vec<(String, Profile)> = snapshots
        .iter()
        .map(|s| (symbolizer.process_name(s.pid, ""), build::from_raw(s.stacks.clone(), Unit::Samples, symbolizer)))
        .collect();
    let parts: Vec<format_goroutines::Snapshot<'_>> = snapshots
        .iter()
        .zip(&named)
        .map(|(s, (process, profile))| format_goroutines::Snapshot {
            process,
            pid: s.pid,
            version: &s.version,
            reads: s.reads,
            at_secs: s.at.as_secs_f64(),
            not_read: s.not_read,
            profile,
        })
        .collect();
    (view, format_goroutines::render(&parts))
}

/// The on-CPU stacks and the off-CPU ones, without a second copy of every
/// raw stack: the on-CPU ones are moved to the front in place and copied
/// out; the off-CPU ones keep the buffer.
fn split_sides(mut stacks: Vec<RawStack>) -> (Vec<RawStack>, Vec<RawStack>) {
    let mut on = 0;
    for i in 0..stacks.len() {
        if stacks[i].state.is_none() {
            stacks.swap(on, i);
            on += 1;
        }
    }
    let on_raw: Vec<RawStack> = stacks.drain(..on).collect();
    stacks.shrink_to_fit();
    (on_raw, stacks)
}

/// The probe's walk counters and table coverage, for the model.
fn unwinding(stats: &probe::Stats, tables: Option<&probe::TableStats>) -> Option<Unwinding> {
    let mut u = Unwinding {
        tables: stats.unw_tables,
        mixed: stats.unw_mixed,
        frame_pointers: stats.unw_fp_only,
        depth: stats.unw_depth,
        fault: stats.unw_fault,
        unsupported: stats.unw_unsupported,
        lost: stats.unw_lost_fp,
        enabled: tables.is_some(),
        ..Default::default()
    };
    if let Some(t) = tables {
        u.binaries = t.binaries;
        u.rows = t.rows;
        u.capacity = t.capacity;
        u.build_ms = t.build_time.as_millis() as u64;
        u.mappings_dropped = t.mappings_dropped;
        u.without = t
            .without
            .iter()
            .map(|(path, why)| {
                let why = match why {
                    probe::NoTable::NoUnwindInfo(e) => format!("{e}; its frames are walked by frame pointers"),
                    probe::NoTable::NoRoom => "the unwind-table array is full (raise --max-unwind-rows)".to_string(),
                };
                (path.clone(), why)
            })
            .collect();
    }
    (u.total() > 0).then_some(u)
}

/// What the off-CPU side cut at the capture's end or left out by choice.
#[derive(Clone, Copy, Debug, Default)]
pub struct Edges {
    open_blocks: u64,
    /// Threads blocked for the whole capture, not drawn, and their us.
    idle: (u64, u64),
    kthread_switches: u64,
    /// Switch-ins and switch-outs sched_switch did not report.
    untraced: (u64, u64),
    /// The kernel's count of the times it skipped the switch program.
    switch_misses: Option<u64>,
    /// Entries of threads gone whose ids new threads took, dropped.
    stale_starts: u64,
    /// The threads blocked since before the capture, drawn: how their
    /// user stacks were read.
    seeded: crate::probe::SeedCounts,
}

impl Edges {
    /// One line each, for the report and the end-of-capture summary.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.open_blocks > 0 {
            out.push(format!(
                "{} off-CPU blocks were still open when the capture ended; their time so far is included.",
                thousands(self.open_blocks)
            ));
        }
        out.extend(seeded_line(&self.seeded));
        let (threads, us) = self.idle;
        if threads > 0 {
            out.push(format!(
                "{} threads blocked for the whole capture ({:.1} thread-seconds) are not drawn (idle daemons and pools); --idle-threads draws them.",
                thousands(threads),
                us as f64 / 1e6
            ));
        }
        if self.kthread_switches > 0 {
            out.push(format!(
                "kernel threads are left out of a whole-system capture ({} of their context switches); --kernel-threads keeps them.",
                thousands(self.kthread_switches)
            ));
        }
        let (ins, outs) = self.untraced;
        // Who missed them, by the kernel's own count: its record of the
        // program (recursion misses) says whether the tracepoint ran
        // fgbpf's program every time it was called.
        let whose = match self.switch_misses {
            Some(0) => " (not fgbpf's misses: the kernel ran its program each time the tracepoint fired, its recursion misses are 0)",
            Some(_) => "",
            None => " (this kernel does not count the program's recursion misses)",
        };
        if ins > 0 {
            out.push(format!(
                "the kernel did not report {} switch-ins through sched_switch{whose}: those waits end where the scheduler says the thread ran again (sched_info.last_arrival), their kernel frames drawn as {END_UNTRACED}.",
                thousands(ins)
            ));
        }
        if outs > 0 {
            out.push(format!(
                "the kernel did not report {} switch-outs through sched_switch (its own count of the threads' runs, sched_info.pcount, is that many above the switch-ins it reported){whose}: the time after each is split as the scheduler accounted it (run time, run-queue delay, the rest off-CPU, as /proc/TID/schedstat shows them) and drawn without user stacks, under {START_UNTRACED}.",
                thousands(outs)
            ));
        }
        if let Some(n) = self.switch_misses.filter(|&n| n > 0) {
            out.push(format!(
                "the kernel skipped fgbpf's sched_switch program {} times (its recursion misses: the program was running on that CPU already), so switches were lost; another BPF program on sched_switch can cause this.",
                thousands(n)
            ));
        }
        if self.stale_starts > 0 {
            out.push(format!(
                "{} threads took the id of a thread that had ended; what was left of the earlier one was dropped, and each was traced from its birth.",
                thousands(self.stale_starts)
            ));
        }
        out
    }
}

/// Where a walk cut for want of an unwind row and a frame pointer stopped
/// (or cut before its binary's rows were placed, [`Walk::Late`]): its last
/// frame, located in the process's map.
fn cut_at(symbolizer: &Symbolizer, r: &RawStack) -> String {
    use crate::procs::Target;
    let Some(addr) = build::adjusted(&r.user).last() else {
        return "with no frame".into();
    };
    match symbolizer.locator(r.pid, r.start)(addr) {
        // A late walk's code has rows now: it was cut before they were
        // placed.
        Target::Binary(b, _) => match r.walk {
            Some(crate::profile::Walk::Late) => format!("in code of {}", crate::profile::names::sanitize(symbolizer.binary_name(b))),
            _ => format!("in code of {} no unwind row covers", crate::profile::names::sanitize(symbolizer.binary_name(b))),
        },
        Target::Jit => "in JIT code, memory no file backs".into(),
        Target::Vdso(_) => "in the vDSO".into(),
        Target::Unmapped => "at an address outside the mappings read".into(),
        Target::Gone => "in a process gone before its map was read".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::State;

    #[test]
    fn sides_split_keep_every_stack() {
        let stack = |pid, state| RawStack {
            pid,
            state,
            ..Default::default()
        };
        let all = vec![
            stack(1, Some(State::Sleeping)),
            stack(2, None),
            stack(3, Some(State::Sleeping)),
            stack(4, Some(State::Sleeping)),
            stack(5, None),
        ];
        let (on, off) = split_sides(all);
        let mut on: Vec<u32> = on.iter().map(|s| s.pid).collect();
        let mut off: Vec<u32> = off.iter().map(|s| s.pid).collect();
        on.sort_unstable();
        off.sort_unstable();
        assert_eq!((on, off), (vec![2, 5], vec![1, 3, 4]));
        let (on, off) = split_sides(Vec::new());
        assert!(on.is_empty() && off.is_empty());
    }
}

/// How the user stacks of the waits begun before the capture were read.
fn seeded_line(s: &crate::probe::SeedCounts) -> Option<String> {
    let outcomes = [
        (s.walked, "drawn with the user stack they wait in, walked from the registers the kernel saved for them at the start"),
        (s.ran_first, "woke before fgbpf had read their process's unwind tables and are drawn without user frames"),
        (s.unread, "drawn without user frames: their process exited or was never read, or its memory could not be read"),
        (s.no_iterator, "drawn without user frames: this kernel has no task iterators (Linux 5.8) to read their registers"),
        (s.iterator_failed, "drawn without user frames: the task iterator that reads their registers would not attach"),
    ];
    let all: u64 = outcomes.iter().map(|(n, _)| n).sum();
    if all == 0 {
        return None;
    }
    let parts: Vec<String> =
        outcomes.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{} {what}", thousands(*n))).collect();
    Some(format!(
        "{} threads were blocked from before the capture ({BEFORE_CAPTURE}): {}.",
        thousands(all),
        parts.join("; ")
    ))
}
