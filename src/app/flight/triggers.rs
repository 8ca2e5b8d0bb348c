//! The flight recorder's triggers: what asks for a dump besides SIGUSR1
//! and `fgbpf dump`. A process on the CPU above `--cpu-above` for
//! `--cpu-for`; a process named by `--on-start` starting; one thread's wait
//! off the CPU of `--wait-above` (the kernel tells it as it ends). Each
//! fires at most once per `--cooldown`, and its dump is due `--after`
//! later, saying why in `trigger.txt`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::super::capture::local_timestamp;
use super::super::summary;
use super::control::Asker;
use crate::cli::FlightArgs;
use crate::probe::Probe;
use crate::profile::names::printable;
use crate::profile::Profile;
use crate::symbolize::Symbolizer;

/// A dump asked for: why, when, and when it is due.
pub(super) struct Fired {
    pub why: String,
    pub at: String,
    pub due: Instant,
    /// `--wait-above`: the wait, whose stack the dump names.
    pub wait: Option<Waited>,
    /// `fgbpf dump`: who waits for the answer.
    pub asker: Option<Asker>,
}

impl Fired {
    /// A dump asked for now, written now.
    pub fn now(why: String, asker: Option<Asker>) -> Fired {
        Fired {
            why,
            at: local_timestamp("%Y-%m-%d %H:%M:%S"),
            due: Instant::now(),
            wait: None,
            asker,
        }
    }
}

/// A long wait: the thread, and when it began in the capture's time.
pub(super) struct Waited {
    pub tid: u32,
    pub began: Duration,
}

/// What the triggers remember between turns.
pub(super) struct Triggers<'a> {
    args: &'a FlightArgs,
    /// `--cpu-above`: how long each process has been above it, and
    /// through which drain.
    above: HashMap<u32, Duration>,
    through: Option<Duration>,
    /// When each trigger last fired.
    cpu_fired: Option<Instant>,
    start_fired: Option<Instant>,
    wait_fired: Option<Instant>,
}

impl<'a> Triggers<'a> {
    pub fn new(args: &'a FlightArgs) -> Self {
        Triggers {
            args,
            above: HashMap::new(),
            through: None,
            cpu_fired: None,
            start_fired: None,
            wait_fired: None,
        }
    }

    fn cooling(&self, fired: Option<Instant>) -> bool {
        fired.is_some_and(|t| t.elapsed() < self.args.cooldown)
    }

    /// After each drain: which processes were above `--cpu-above` over the
    /// second it read, and for how long in a row; one above it for
    /// `--cpu-for` fires.
    pub fn cpu(&mut self, recorder: &Probe, symbolizer: &Symbolizer) -> Option<Fired> {
        let pct = self.args.cpu_above?;
        let through = recorder.drained_through();
        if through == self.through {
            return None;
        }
        self.through = through;
        let (samples, counted) = recorder.cpu_last_drain()?;
        let per_pct = self.args.sampling.frequency as f64 * counted.as_secs_f64() / 100.0;
        let before = std::mem::take(&mut self.above);
        // pid 0: the idle task (--include-idle), not a process.
        for (&pid, &n) in samples.iter().filter(|(&pid, _)| pid != 0) {
            if n as f64 / per_pct >= f64::from(pct) {
                self.above.insert(pid, before.get(&pid).copied().unwrap_or_default() + counted);
            }
        }
        let wanted = Duration::from_secs(self.args.cpu_for);
        let (&pid, _) = self.above.iter().find(|(_, &d)| d >= wanted)?;
        if self.cooling(self.cpu_fired) {
            return None;
        }
        self.cpu_fired = Some(Instant::now());
        let name = printable(&symbolizer.process_name(pid, ""));
        Some(self.fire(format!("cpu: pid {pid} ({name}) above {pct}% of a CPU for {} s", self.args.cpu_for), None))
    }

    /// `--on-start`: the processes started since the last turn, by name
    /// (a process's name is at most 15 bytes: longer names given match
    /// their first 15).
    pub fn starts(&mut self, started: Vec<(u32, String)>) -> Vec<Fired> {
        let mut fired = Vec::new();
        for (pid, name) in started {
            let wanted = self.args.on_start.iter().any(|n| {
                let cut = (0..=n.len().min(15)).rev().find(|&i| n.is_char_boundary(i)).unwrap_or(0);
                n[..cut] == name
            });
            if !wanted || self.cooling(self.start_fired) {
                continue;
            }
            self.start_fired = Some(Instant::now());
            fired.push(self.fire(format!("start: pid {pid} ({}) started", printable(&name)), None));
        }
        fired
    }

    /// `--wait-above`: the waits that long that ended since the last turn
    /// (the kernel tells them); the longest fires.
    pub fn waits(&mut self, recorder: &mut Probe, symbolizer: &Symbolizer) -> Option<Fired> {
        let waits = recorder.take_long_waits();
        let (pid, w, began) = waits.into_iter().max_by_key(|(_, w, _)| w.ns)?;
        if self.cooling(self.wait_fired) {
            return None;
        }
        self.wait_fired = Some(Instant::now());
        let process = printable(&symbolizer.process_name(pid, ""));
        let why = format!(
            "wait: thread {} ({}) of pid {pid} ({process}) waited {:.3} s off the CPU",
            w.tid,
            printable(&w.thread),
            w.ns as f64 / 1e9
        );
        Some(self.fire(why, Some(Waited { tid: w.tid, began })))
    }

    /// A trigger fired for `why`: said, its dump due `--after` from now.
    fn fire(&self, why: String, wait: Option<Waited>) -> Fired {
        summary::say(format_args!("trigger {why}; its dump in {} s", self.args.after));
        Fired {
            due: Instant::now() + Duration::from_secs(self.args.after),
            wait,
            ..Fired::now(why, None)
        }
    }
}

/// The frames of the off-CPU stack of thread `tid` with the most weight in
/// a span that begins at `slice` (a long wait is one span, from the slice
/// it began in; one that began before the window, from its start), each
/// printable.
pub(super) fn stack_of_wait(off: &Profile, tid: u32, slice: u32) -> Option<Vec<String>> {
    let (stack, _) = off
        .stacks()
        .iter()
        .filter(|s| s.thread.is_some_and(|t| off.thread(t).tid == tid))
        .filter_map(|s| {
            let w = s.spans.iter().filter(|p| p.first == slice).map(|p| p.weight).max()?;
            Some((s, w))
        })
        .max_by_key(|(_, w)| *w)?;
    Some(stack.frames.iter().map(|&id| printable(&off.frame(id).to_string())).collect())
}
