//! `fgbpf flight`: the flight recorder. It records as `fgbpf wall` does
//! (same scoping options), at a low rate, until stopped; it forgets what
//! fell before the last `--keep`, so that its memory is that of the
//! recent past only; and on SIGUSR1 it writes that past as a new `wall`
//! capture directory under `--dumps`, the same files, without stopping.
//! At most `--max-dumps` are kept: the oldest this recorder wrote goes.
//! Triggers ask for a dump by themselves: a process on the CPU above
//! `--cpu-above` for `--cpu-for`, a process named by `--on-start` started,
//! a thread's wait that lasted `--wait-above` (told by the kernel as it
//! ends; its stack is named in the dump's `trigger.txt`).
//! The dump is written `--after` later, at most once per trigger per
//! `--cooldown`, and says why in `trigger.txt`.

use std::collections::VecDeque;
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::capture::{local_timestamp, local_timestamp_before, open, preflight};
use super::record::{self, Recording};
use super::session::signals::DumpSignal;
use super::session::window::EndReason;
use super::summary;
use super::views::Views;
use super::CliError;
use crate::cli::FlightArgs;
use crate::format::files::{self, OutDir};
use crate::probe::{Probe, Recorded};
use crate::profile::time;
use crate::symbolize::Symbolizer;

/// What a triggered dump says of its trigger.
const TRIGGER: &str = "trigger.txt";

/// How often what fell out of the kept window is forgotten.
const FORGET_EVERY: Duration = Duration::from_secs(10);

/// Runs the recorder until Ctrl-C, SIGTERM, `-d`, or the targets or
/// command end; returns the `-- COMMAND`'s exit status.
pub fn run(args: &FlightArgs) -> Result<Option<i32>, CliError> {
    if args.capture.output.is_some() {
        return Err(CliError::usage("fgbpf flight writes its dumps under --dumps DIR, not -o"));
    }
    let triggered = args.cpu_above.is_some() || !args.on_start.is_empty() || args.wait_above.is_some();
    if triggered && args.after >= args.keep.as_secs() {
        return Err(CliError::usage(format!(
            "--after {} s is not shorter than --keep {} s: a triggered dump would not hold what fired it",
            args.after,
            args.keep.as_secs()
        )));
    }
    if args.blocks.wakers {
        return Err(CliError::usage(
            "fgbpf flight does not keep wakers yet: drop --wakers (fgbpf offcpu --wakers records them)",
        ));
    }
    let rec = Recording {
        capture: &args.capture,
        maps: &args.maps,
        sampling: Some(&args.sampling),
        blocks: Some(&args.blocks),
        per_process: false,
    };
    rec.options(Default::default())?;
    summary::set_quiet(args.capture.quiet);
    let dumps = dumps_dir(&args.dumps)?;
    let signal = DumpSignal::install().map_err(CliError::failed)?;
    let prepared = preflight(&args.capture)?;
    let mut live = open(&args.capture, prepared, &rec.what(), |t| {
        let mut opts = rec.options(t)?;
        if let Some(off) = opts.offcpu.as_mut() {
            off.announce_wait = args.wait_above;
        }
        Ok(Probe::start(&opts)?)
    })?;
    if args.cpu_above.is_some() {
        live.recorder.tally_cpu();
    }
    summary::say(format_args!(
        "keeping the last {:.0} s; kill -USR1 {} writes them under {}/",
        args.keep.as_secs_f64(),
        std::process::id(),
        dumps.display()
    ));
    let mut flight = Flight {
        rec: &rec,
        args,
        dumps,
        written: VecDeque::new(),
        target: live.prepared.target.clone(),
        whole_system: live.prepared.targets.whole_system(),
        last_forget: Instant::now(),
        cpu: CpuWatch::default(),
        start_fired: None,
        wait_fired: None,
        pending: Vec::new(),
    };
    let end = {
        let (mut window, recorder, symbolizer) = live.window(&args.capture);
        if !args.on_start.is_empty() {
            window.started = Some(Vec::new());
        }
        let mut steps = window.begin();
        let end = loop {
            if let Some(end) = window.step(&mut steps, recorder, symbolizer) {
                break end;
            }
            if signal.take() {
                flight.dump(recorder, symbolizer, None);
            }
            flight.watch_cpu(recorder, symbolizer);
            flight.watch_waits(recorder, symbolizer);
            if let Some(started) = window.started.as_mut() {
                flight.watch_starts(std::mem::take(started));
            }
            let now = Instant::now();
            let (due, later): (Vec<Fired>, Vec<Fired>) = std::mem::take(&mut flight.pending).into_iter().partition(|f| now >= f.due);
            flight.pending = later;
            for fired in due {
                flight.dump(recorder, symbolizer, Some(&fired));
            }
            if flight.last_forget.elapsed() >= FORGET_EVERY {
                flight.last_forget = Instant::now();
                flight.forget(recorder, symbolizer);
            }
        };
        window.end(recorder, symbolizer);
        end
    };
    let (_, status) = live.close(&args.capture, end);
    let why = match end {
        EndReason::Duration => "-d ran out",
        EndReason::Interrupted => "stopped",
        EndReason::CommandExited(_) => "the command exited",
        EndReason::TargetsGone => "every target has exited",
    };
    let n = flight.written.len();
    summary::say(format_args!(
        "{why}: recording ended, {n} dump{} of it under {}/",
        if n == 1 { "" } else { "s" },
        flight.dumps.display()
    ));
    Ok(status)
}

struct Flight<'a> {
    rec: &'a Recording<'a>,
    args: &'a FlightArgs,
    dumps: PathBuf,
    /// The dumps this recorder wrote, oldest first.
    written: VecDeque<PathBuf>,
    target: String,
    whole_system: bool,
    last_forget: Instant,
    cpu: CpuWatch,
    /// When `--on-start` last fired.
    start_fired: Option<Instant>,
    /// When `--wait-above` last fired.
    wait_fired: Option<Instant>,
    /// Triggers that fired, their dumps not yet written (two at once
    /// write two).
    pending: Vec<Fired>,
}

/// A trigger that fired: why, when, and when its dump is due.
struct Fired {
    why: String,
    at: String,
    due: Instant,
    /// `--wait-above`: the wait, whose stack the dump names.
    wait: Option<Waited>,
}

/// A long wait: the thread, and when it began in the capture's time.
struct Waited {
    tid: u32,
    began: Duration,
}

/// `--cpu-above`: how long each process has been above it, through which
/// drain, and when it last fired.
#[derive(Default)]
struct CpuWatch {
    above: std::collections::HashMap<u32, Duration>,
    through: Option<Duration>,
    fired: Option<Instant>,
}

impl Flight<'_> {
    /// Where the kept window starts now, in the capture's time.
    fn window_start(&self, recorder: &Probe) -> Duration {
        let through = recorder.drained_through().unwrap_or_default();
        through.saturating_sub(self.args.keep)
    }

    /// Forgets what fell before the kept window, and what is kept of
    /// exited processes whose stacks went with it.
    fn forget(&self, recorder: &mut Probe, symbolizer: &mut Symbolizer) {
        let held = recorder.forget_before(self.window_start(recorder));
        symbolizer.forget_retired(&held);
    }

    /// After each drain: which processes were above `--cpu-above` over the
    /// second it read, and for how long in a row; one above it for
    /// `--cpu-for` fires the trigger, unless it fired within `--cooldown`.
    fn watch_cpu(&mut self, recorder: &Probe, symbolizer: &Symbolizer) {
        let Some(pct) = self.args.cpu_above else { return };
        let through = recorder.drained_through();
        if through == self.cpu.through {
            return;
        }
        self.cpu.through = through;
        let Some((samples, counted)) = recorder.cpu_last_drain() else { return };
        let per_pct = self.args.sampling.frequency as f64 * counted.as_secs_f64() / 100.0;
        let before = std::mem::take(&mut self.cpu.above);
        // pid 0: the idle task (--include-idle), not a process.
        for (&pid, &n) in samples.iter().filter(|(&pid, _)| pid != 0) {
            if n as f64 / per_pct >= f64::from(pct) {
                self.cpu.above.insert(pid, before.get(&pid).copied().unwrap_or_default() + counted);
            }
        }
        let cooling = self.cpu.fired.is_some_and(|t| t.elapsed() < self.args.cooldown);
        let wanted = Duration::from_secs(self.args.cpu_for);
        let Some((&pid, _)) = self.cpu.above.iter().find(|(_, &d)| d >= wanted) else { return };
        if cooling {
            return;
        }
        self.cpu.fired = Some(Instant::now());
        let name = printable(&symbolizer.process_name(pid, ""));
        self.fire(format!("cpu: pid {pid} ({name}) above {pct}% of a CPU for {} s", self.args.cpu_for));
    }

    /// `--on-start`: the processes started since the last turn, by name
    /// (a process's name is at most 15 bytes: longer names given match
    /// their first 15).
    fn watch_starts(&mut self, started: Vec<(u32, String)>) {
        for (pid, name) in started {
            let wanted = self.args.on_start.iter().any(|n| {
                let cut = (0..=n.len().min(15)).rev().find(|&i| n.is_char_boundary(i)).unwrap_or(0);
                n[..cut] == name
            });
            let cooling = self.start_fired.is_some_and(|t| t.elapsed() < self.args.cooldown);
            if !wanted || cooling {
                continue;
            }
            self.start_fired = Some(Instant::now());
            self.fire(format!("start: pid {pid} ({}) started", printable(&name)));
        }
    }

    /// `--wait-above`: the waits that long ended since the last turn
    /// (the kernel tells them); the longest fires, unless the trigger
    /// fired within `--cooldown`.
    fn watch_waits(&mut self, recorder: &mut Probe, symbolizer: &Symbolizer) {
        let waits = recorder.take_long_waits();
        let Some((pid, w, began)) = waits.into_iter().max_by_key(|(_, w, _)| w.ns) else { return };
        if self.wait_fired.is_some_and(|t| t.elapsed() < self.args.cooldown) {
            return;
        }
        self.wait_fired = Some(Instant::now());
        let process = printable(&symbolizer.process_name(pid, ""));
        let why = format!(
            "wait: thread {} ({}) of pid {pid} ({process}) waited {:.3} s off the CPU",
            w.tid,
            printable(&w.thread),
            w.ns as f64 / 1e9
        );
        self.fire_with(why, Some(Waited { tid: w.tid, began }));
    }

    /// A trigger fired for `why`: its dump is due `--after` from now.
    fn fire(&mut self, why: String) {
        self.fire_with(why, None);
    }

    fn fire_with(&mut self, why: String, wait: Option<Waited>) {
        summary::say(format_args!("trigger {why}; its dump in {} s", self.args.after));
        self.pending.push(Fired {
            why,
            at: local_timestamp("%Y-%m-%d %H:%M:%S"),
            due: Instant::now() + Duration::from_secs(self.args.after),
            wait,
        });
    }

    /// Writes the kept window as a capture directory (with `trigger.txt`
    /// when a trigger asked for it), and removes the oldest dump past
    /// `--max-dumps`.
    fn dump(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer, fired: Option<&Fired>) {
        let through = recorder.drained_through().unwrap_or_default();
        let from = self.window_start(recorder);
        let mut recorded = recorder.snapshot();
        let first = recorder.slice_at(from);
        since(&mut recorded, first);
        let views = Views::build(self.rec.wanted(), recorded, symbolizer, &self.target, through - from);
        let wait_stack = fired.and_then(|f| f.wait.as_ref()).map(|w| {
            let slice = recorder.slice_at(w.began).saturating_sub(first);
            views.off.as_ref().and_then(|off| stack_of_wait(off, w.tid, slice))
        });
        // Each binary's tables are read again at the next dump: a recorder
        // that runs for weeks would otherwise hold every one it ever named.
        symbolizer.drop_caches();
        let mut outputs = self.rec.outputs();
        if fired.is_some() {
            outputs.push(TRIGGER.to_string());
        }
        let names: Vec<&str> = outputs.iter().map(String::as_str).collect();
        let base = self.dumps.join(format!("dump-{}", local_timestamp("%Y%m%d-%H%M%S")));
        let ago = recorder.recorded_window().saturating_sub(from);
        let started_at = local_timestamp_before("%Y-%m-%d %H:%M:%S", ago);
        let written = files::prepare_dir(OutDir::Fresh(&base), &names)
            .map_err(CliError::failed)
            .and_then(|dir| {
                record::write(self.rec, views, &dir, &self.target, self.whole_system, &started_at)?;
                if let Some(f) = fired {
                    let path = dir.join(TRIGGER);
                    files::write_atomic(&path, files::Durability::Synced, |w: &mut dyn std::io::Write| {
                        writeln!(w, "{}, fired at {}", f.why, f.at)?;
                        match &wait_stack {
                            Some(Some(frames)) => {
                                writeln!(w, "its stack in offcpu.folded, root first:")?;
                                frames.iter().try_for_each(|f| writeln!(w, "  {f}"))
                            }
                            Some(None) => writeln!(w, "its stack is not in this dump (the report's losses say why)"),
                            None => Ok(()),
                        }
                    })
                    .map_err(|e| CliError::failed(format!("writing {}: {e}", path.display())))?;
                }
                Ok(dir)
            });
        match written {
            Ok(dir) => {
                summary::say(format_args!(
                    "dump{}: wrote the last {:.1} s to {}/",
                    fired.map_or_else(String::new, |f| format!(" ({})", f.why)),
                    (through - from).as_secs_f64(),
                    dir.display()
                ));
                self.written.push_back(dir);
                while self.written.len() > self.args.max_dumps as usize {
                    if let Some(old) = self.written.pop_front() {
                        if let Err(e) = fs::remove_dir_all(&old) {
                            summary::say(format_args!("dump: could not remove the old dump {}: {e}", old.display()));
                        }
                    }
                }
            }
            // A full disk or a removed directory: said, and recording
            // goes on.
            Err(e) => summary::say(format_args!("dump: could not write: {e}")),
        }
    }
}

/// The frames of the off-CPU stack of thread `tid` with the most weight in
/// a span that begins at `slice` (a long wait is one span, from the slice
/// it began in; one that began before the window, from its start), each
/// printable.
fn stack_of_wait(off: &crate::profile::Profile, tid: u32, slice: u32) -> Option<Vec<String>> {
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

/// A process's name as it may be printed: it is the process's own choice,
/// so control characters become `?`.
fn printable(name: &str) -> String {
    name.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// Keeps of `recorded` what fell from slice `first` on, renumbered from
/// it: a dump's slices, and its timeline, start at the kept window.
fn since(recorded: &mut Recorded, first: u32) {
    for r in &mut recorded.stacks {
        r.weight = time::keep_from(&mut r.spans, first);
    }
    recorded.stacks.retain(|r| r.weight > 0);
    for r in &mut recorded.runs {
        r.us = time::keep_from(&mut r.spans, first);
    }
    recorded.runs.retain(|r| r.us > 0);
}

/// The dumps' directory, made (readable by root only) when missing; a
/// symbolic link there is refused, as fgbpf never writes through one.
fn dumps_dir(dir: &Path) -> Result<PathBuf, CliError> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(CliError::usage(format!(
            "--dumps {}: a symbolic link; give the directory itself",
            dir.display()
        ))),
        Ok(m) if !m.is_dir() => Err(CliError::usage(format!("--dumps {}: not a directory", dir.display()))),
        Ok(_) => Ok(dir.to_path_buf()),
        Err(_) => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map(|_| dir.to_path_buf())
            .map_err(|e| CliError::usage(format!("--dumps {}: cannot create it: {e}", dir.display()))),
    }
}
