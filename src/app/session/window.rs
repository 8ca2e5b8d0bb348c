//! The capture window: runs until the duration elapses, Ctrl-C, the
//! command exits or every target is gone, feeding process announcements to
//! the symbolizer and showing progress on a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use super::command::HeldCommand;
use super::signals::StopFlag;
use super::targets::task_alive;
use crate::probe::events::{ProcEvent, ProcEventKind};
use crate::probe::Probe;
use crate::symbolize::Symbolizer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    Duration,
    Interrupted,
    CommandExited(i32),
    TargetsGone,
}

pub struct Window<'a> {
    pub duration: Option<Duration>,
    pub stop: &'a StopFlag,
    pub command: Option<&'a mut HeldCommand>,
    /// `-p` and `-t` targets whose disappearance ends the capture.
    pub watched: Vec<u32>,
    /// Processes whose symbols to load while the capture runs (`-p`).
    pub prepare: Vec<u32>,
    /// `--quiet`: no progress line.
    pub quiet: bool,
    /// When set, each process started or exec'd is noted here (pid, name),
    /// for `fgbpf flight`'s start trigger to take.
    pub started: Option<Vec<(u32, String)>>,
}

const POLL: Duration = Duration::from_millis(50);
/// How long before the end of a timed capture the symbols its stacks will
/// need are read: late enough that a busy target does not share its CPUs
/// with the reading for most of the window, early enough that the reading
/// (tens of milliseconds, more for large debug information) is done when
/// the window closes, instead of delaying the flamegraph. Captures ended
/// by Ctrl-C or their command read them after.
const PREPARE_AHEAD: Duration = Duration::from_millis(1000);
const TARGET_CHECK: Duration = Duration::from_millis(200);

/// Where a window is between steps.
pub struct Steps {
    start: Instant,
    last_check: Instant,
    unprepared: bool,
}

impl Window<'_> {
    /// Runs the window to its end; `each` is called after every step (an
    /// OTLP stream's intervals).
    pub fn run(
        mut self,
        live: &mut Probe,
        symbolizer: &mut Symbolizer,
        each: &mut dyn FnMut(&mut Probe, &mut Symbolizer),
    ) -> (Duration, EndReason) {
        let tty = std::io::stderr().is_terminal() && !self.quiet;
        let mut steps = self.begin();
        let mut last_status = steps.start;
        let reason = loop {
            if let Some(end) = self.step(&mut steps, live, symbolizer) {
                break end;
            }
            each(live, symbolizer);
            let now = Instant::now();
            if tty && now - last_status >= Duration::from_secs(1) {
                last_status = now;
                let elapsed = (now - steps.start).as_secs_f64();
                let of = self
                    .duration
                    .map_or_else(String::new, |d| format!(" / {:.0} s", d.as_secs_f64()));
                eprint!("\r\x1b[Kfgbpf: {elapsed:.0} s{of}, {}", live.progress());
                let _ = std::io::stderr().flush();
            }
        };
        self.end(live, symbolizer);
        if tty {
            eprint!("\r\x1b[K");
        }
        (steps.start.elapsed(), reason)
    }

    /// The window opens now.
    pub fn begin(&self) -> Steps {
        let start = Instant::now();
        Steps {
            start,
            last_check: start,
            unprepared: true,
        }
    }

    /// One turn of the window, waiting up to 50 ms for process
    /// announcements: names, unwind tables and counts kept up to date.
    /// `Some` when the window ends.
    pub fn step(&mut self, at: &mut Steps, live: &mut Probe, symbolizer: &mut Symbolizer) -> Option<EndReason> {
        let start = at.start;
        // Waking at the deadline, not at the next poll after it, takes up
        // to a poll's 50 ms off the wait for the flamegraph.
        let wait = self.duration.map_or(POLL, |d| {
            (start + d)
                .saturating_duration_since(Instant::now())
                .min(POLL)
        });
        let events = live.poll_processes(wait);
        // Exits first: a PID announced after its exit in the same turn is
        // a new process, read as such.
        for &(pid, start) in live.exited() {
            symbolizer.exited(pid, start);
        }
        // Each process's maps read once, for its names and its walkers; a
        // process announced twice in one turn (forked, then exec'd) once,
        // as it is now, under its last name.
        let mut seen = std::collections::HashSet::new();
        let last: Vec<&ProcEvent> = events.iter().rev().filter(|ev| seen.insert(ev.pid)).collect();
        let mut execs = Vec::new();
        let read: Vec<(u32, String)> = last
            .into_iter()
            .rev()
            .filter_map(|ev| match inherited(ev, live, symbolizer) {
                true => None,
                false => {
                    // Forked, then exec'd in this turn: its stacks from
                    // before the exec are its parent's code, named from
                    // what was read of the parent (its map of then can no
                    // longer be read), those after from its own, read now.
                    let forked = events.iter().find_map(|e| match e.kind {
                        ProcEventKind::New { forked: Some(f) } if e.pid == ev.pid && e.start == ev.start => Some(f),
                        _ => None,
                    });
                    if let Some(f) = forked {
                        symbolizer.inherit(ev.pid, ev.start, f.parent, 0, &ev.comm);
                    }
                    let text = symbolizer.remember(ev.pid, ev.start, &ev.comm)?;
                    if ev.kind == ProcEventKind::Exec {
                        execs.push(ev.pid);
                    }
                    Some((ev.pid, text))
                }
            })
            .collect();
        live.read_after_exec(&execs);
        if let Some(started) = self.started.as_mut() {
            let new = |e: &&ProcEvent| matches!(e.kind, ProcEventKind::New { .. } | ProcEventKind::Exec);
            started.extend(events.iter().filter(new).map(|e| (e.pid, e.comm.clone())));
        }
        live.track_processes(&read);
        if self
            .duration
            .is_some_and(|d| start.elapsed() + PREPARE_AHEAD >= d)
            && std::mem::take(&mut at.unprepared)
        {
            symbolizer.prepare_kernel();
            for &pid in &self.prepare {
                symbolizer.prepare_process(pid);
            }
        }
        // Picks up code mapped since a process was first seen; it paces
        // itself, as does draining the counts. The map of a young process
        // re-read for its unwind tables (20, 100 and 500 ms after it
        // appears) is taken for names too: the first read may have come
        // before the loader mapped its libraries, and a short command may
        // exit before the symbolizer's own round.
        symbolizer.refresh();
        for (pid, text) in live.tick() {
            symbolizer.reread_from(pid, &text);
        }
        // Mappings the walker found in processes not read (a process that
        // lived a millisecond): placed before the processes are retired.
        symbolizer.place_found(live.found());
        // Processes gone whose stacks are all drained: what naming them
        // needs is kept, the rest let go.
        for ((pid, start), addrs) in live.retired() {
            symbolizer.retire(pid, start, &addrs);
        }
        let now = Instant::now();
        if self.stop.stopped() {
            return Some(EndReason::Interrupted);
        }
        if self.duration.is_some_and(|d| now - start >= d) {
            return Some(EndReason::Duration);
        }
        if let Some(code) = self.command.as_mut().and_then(|c| c.try_wait()) {
            return Some(EndReason::CommandExited(code));
        }
        if !self.watched.is_empty() && now - at.last_check >= TARGET_CHECK {
            at.last_check = now;
            if !self.watched.iter().any(|&id| task_alive(id)) {
                return Some(EndReason::TargetsGone);
            }
        }
        None
    }

    /// Announcements still queued belong to processes that ran in the
    /// window: remember them before anything else exits.
    pub fn end(&self, live: &mut Probe, symbolizer: &mut Symbolizer) {
        for ev in live.poll_processes(Duration::ZERO) {
            symbolizer.remember(ev.pid, ev.start, &ev.comm);
        }
    }
}

/// A child forked from a process read already, and running its image still,
/// takes what was read of it (its mappings for names, its unwind tables)
/// instead of having its maps read: a fork-and-exec child's first stack is
/// often before its exec. True when it did. The names are taken even when
/// the tables are not (the child is gone, or exec'd: its maps are read
/// then, if it still lives).
fn inherited(ev: &ProcEvent, live: &mut Probe, symbolizer: &mut Symbolizer) -> bool {
    let ProcEventKind::New { forked: Some(f) } = ev.kind else {
        return false;
    };
    symbolizer.inherit(ev.pid, ev.start, f.parent, f.size, &ev.comm) && live.inherit(ev.pid, f.parent)
}
