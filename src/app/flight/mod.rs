//! `fgbpf flight`: the flight recorder. It records as `fgbpf wall` does
//! (same scoping options), at a low rate, until stopped; it forgets what
//! fell before the last `--keep`, so that its memory is that of the
//! recent past only; and when asked (SIGUSR1, or `fgbpf dump` through its
//! socket, [`control`]) or when a trigger fires ([`triggers`]) it writes
//! that past as a new `wall` capture directory under `--dumps`, the same
//! files and a `trigger.txt` saying who asked, without stopping. At most
//! `--max-dumps` are kept: the oldest this recorder wrote goes.

use std::collections::VecDeque;
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::capture::{local_timestamp, local_timestamp_before, start};
use super::record;
use super::recording::Recording;
use super::session::signals::DumpSignal;
use super::stages;
use super::session::window::EndReason;
use super::summary;
use super::views::Views;
use super::CliError;
use crate::cli::FlightArgs;
use crate::format::files::{self, OutDir};
use crate::probe::Probe;
use crate::symbolize::Symbolizer;
use ceiling::Ceiling;
use control::Control;
use triggers::{stack_of_wait, Fired, Triggers};

mod ceiling;
pub mod control;
mod cost;
mod triggers;

/// What a dump says of who asked for it.
const TRIGGER: &str = "trigger.txt";

/// The process-announcement ring buffer: a dump of a busy host's window
/// takes seconds, during which nothing reads it (the hour-long soak lost
/// about 2,000 announcements a dump with the captures' 256 KB); 4 MB holds
/// about 75,000.
const EVENTS_RING: u32 = 4 << 20;

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
    let mut rec = Recording::check(&args.capture, &args.maps, Some(&args.sampling), Some(&args.blocks), None)?;
    if let Some(off) = rec.probe.offcpu.as_mut() {
        off.announce_wait = args.wait_above;
    }
    rec.probe.events_ring = EVENTS_RING;
    // Not kept in a window yet: a recorder's goroutine time would grow
    // for as long as it runs.
    rec.probe.runtimes.goroutines = false;
    let dumps = dumps_dir(&args.dumps)?;
    let signal = DumpSignal::install().map_err(CliError::failed)?;
    let mut live = start(&rec)?;
    if args.cpu_above.is_some() {
        live.recorder.tally_cpu();
    }
    let mut control = Control::open(&dumps)?;
    summary::say(format_args!(
        "keeping the last {:.0} s; `fgbpf dump --dumps {}` (listening at {}) or kill -USR1 {} writes them under {}/",
        args.keep.as_secs_f64(),
        dumps.display(),
        control.path().display(),
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
        triggers: Triggers::new(args),
        pending: Vec::new(),
        ceiling: Ceiling::new(args.max_memory),
    };
    let mut own = cost::OwnUse::new();
    // --otlp-interval: streamed as recorded (without it, each dump is sent).
    let mut stream = live.stream(&rec);
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
            if let Some(s) = stream.as_mut() {
                s.step(recorder, symbolizer);
            }
            if signal.take() {
                flight.pending.push(Fired::now("asked by SIGUSR1".to_string(), None));
            }
            while let Some(asker) = control.take() {
                let why = format!("asked by fgbpf dump, pid {}", asker.pid);
                flight.pending.push(Fired::now(why, Some(asker)));
            }
            let triggers = &mut flight.triggers;
            let mut fired: Vec<Fired> = triggers.cpu(recorder, symbolizer).into_iter().collect();
            fired.extend(triggers.waits(recorder, symbolizer));
            if let Some(started) = window.started.as_mut() {
                fired.extend(triggers.starts(std::mem::take(started)));
            }
            flight.pending.extend(fired);
            flight.write_due(recorder, symbolizer);
            if flight.last_forget.elapsed() >= FORGET_EVERY {
                flight.last_forget = Instant::now();
                flight.forget(recorder, symbolizer);
            }
            if let Some(news) = own.news(cost::SAY_EVERY) {
                summary::say(format_args!("{news}"));
            }
        };
        window.end(recorder, symbolizer);
        end
    };
    let (elapsed, status) = live.close(&args.capture, end);
    if let Some(mut s) = stream {
        s.last(&mut live.recorder, &mut live.symbolizer, elapsed);
        s.close();
    }
    let why = match end {
        EndReason::Duration => "-d ran out",
        EndReason::Interrupted => "stopped",
        EndReason::CommandExited(_) => "the command exited",
        EndReason::TargetsGone => "every target has exited",
    };
    if let Some(said) = flight.ceiling.summary() {
        summary::say(format_args!("{said}"));
    }
    if let Some(news) = own.news(Duration::ZERO) {
        summary::say(format_args!("{news}"));
    }
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
    triggers: Triggers<'a>,
    /// Dumps asked for, not yet written (two triggers that fire together
    /// write two).
    pending: Vec<Fired>,
    ceiling: Ceiling,
}

impl Flight<'_> {
    /// Where `--keep` starts the window now, in the capture's time.
    fn keep_start(&self, recorder: &Probe) -> Duration {
        let through = recorder.drained_through().unwrap_or_default();
        through.saturating_sub(self.args.keep)
    }

    /// Where the kept window starts now: `--keep`'s start, or later where
    /// the memory ceiling cut it.
    fn window_start(&self, recorder: &Probe) -> Duration {
        let keep = self.keep_start(recorder);
        self.ceiling.from.map_or(keep, |f| f.max(keep))
    }

    /// Forgets what fell before the kept window, and what is kept of
    /// exited processes whose stacks went with it; then, when the memory
    /// ceiling asks, the oldest of what is left. Gives the bytes the
    /// recorder holds after (what [`Ceiling`] plans with).
    fn forget(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer) -> u64 {
        let start = self.window_start(recorder);
        forget_before(recorder, symbolizer, start);
        let through = recorder.drained_through().unwrap_or_default();
        let held_now = |recorder: &Probe, symbolizer: &Symbolizer| (recorder.held_bytes() + symbolizer.held().bytes) as u64;
        let mut held = held_now(recorder, symbolizer);
        let resident = stages::resident_kb().0 << 10;
        if let Some(at) = self.ceiling.cut(resident, held, start, through) {
            forget_before(recorder, symbolizer, at);
            held = held_now(recorder, symbolizer);
        }
        let keep_start = self.keep_start(recorder);
        let window = through.saturating_sub(self.window_start(recorder));
        if let Some(news) = self.ceiling.news(self.args.keep, window, keep_start) {
            summary::say(format_args!("{news}"));
        }
        if stages::enabled() {
            let h = symbolizer.held();
            stages::note(format_args!(
                "kept {:.0} s: counts {:.1} MB, registry {:.1} MB ({} processes, {} mappings, {} located, {} binaries)",
                window.as_secs_f64(),
                held.saturating_sub(h.bytes as u64) as f64 / 1048576.0,
                h.bytes as f64 / 1048576.0,
                h.processes,
                h.mappings,
                h.located,
                h.binaries
            ));
        }
        held
    }

    /// Writes the dumps that are due, answering those who asked.
    fn write_due(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer) {
        let now = Instant::now();
        let (due, later): (Vec<Fired>, Vec<Fired>) =
            std::mem::take(&mut self.pending).into_iter().partition(|f| now >= f.due);
        self.pending = later;
        for mut fired in due {
            let written = self.dump(recorder, symbolizer, &fired);
            if let Some(asker) = fired.asker.take() {
                asker.answer(&written);
            }
        }
    }

    /// Writes the kept window as a capture directory, with `trigger.txt`
    /// saying who asked, and removes the oldest dump past `--max-dumps`.
    /// One that cannot be written (a full disk) is said, what it wrote
    /// removed, and recording goes on.
    fn dump(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer, fired: &Fired) -> Result<PathBuf, String> {
        // The ceiling holds through the dump: what it needs is made room for.
        let held = self.forget(recorder, symbolizer);
        let before = stages::resident_kb().0 << 10;
        stages::reset_peak();
        let written = self.write_dump(recorder, symbolizer, fired);
        self.ceiling.learn(before, stages::peak_kb() << 10, held);
        written
    }

    fn write_dump(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer, fired: &Fired) -> Result<PathBuf, String> {
        let through = recorder.drained_through().unwrap_or_default();
        let from = self.window_start(recorder);
        let cut = self.ceiling.cutting(self.keep_start(recorder)).then(|| self.ceiling.in_dump(self.args.keep, through - from));
        let first = recorder.slice_at(from);
        let mut recorded = recorder.snapshot_from(first);
        recorded.keep_slices(first, u32::MAX);
        let views = Views::build(self.rec.wanted(), recorded, symbolizer, &self.target, through - from);
        let wait_stack = fired.wait.as_ref().map(|w| {
            let slice = recorder.slice_at(w.began).saturating_sub(first);
            views.off.as_ref().and_then(|off| stack_of_wait(off, w.tid, slice))
        });
        // Each binary's tables are read again at the next dump: a recorder
        // that runs for weeks would otherwise hold every one it ever named.
        symbolizer.drop_caches();
        let mut outputs = self.rec.outputs();
        outputs.push(TRIGGER.to_string());
        let names: Vec<&str> = outputs.iter().map(String::as_str).collect();
        let base = self.dumps.join(format!("dump-{}", local_timestamp("%Y%m%d-%H%M%S")));
        let ago = recorder.recorded_window().saturating_sub(from);
        let started_at = local_timestamp_before("%Y-%m-%d %H:%M:%S", ago);
        let dir = match files::prepare_dir(OutDir::Fresh(&base), &names) {
            Ok(dir) => dir,
            Err(e) => {
                summary::say(format_args!("dump ({}): could not write: {e}", fired.why));
                return Err(e);
            }
        };
        let written = record::write(self.rec, views, &dir, &self.target, self.whole_system, (&started_at, None))
            .map_err(|e| e.to_string())
            .and_then(|_| {
                let path = dir.join(TRIGGER);
                files::write_atomic(&path, files::Durability::Synced, |w: &mut dyn std::io::Write| {
                    writeln!(w, "{}, at {}", fired.why, fired.at)?;
                    if let Some(cut) = &cut {
                        writeln!(w, "{cut}")?;
                    }
                    match &wait_stack {
                        Some(Some(frames)) => {
                            writeln!(w, "its stack in offcpu.folded, root first:")?;
                            frames.iter().try_for_each(|f| writeln!(w, "  {f}"))
                        }
                        Some(None) => writeln!(w, "its stack is not in this dump (the report's losses say why)"),
                        None => Ok(()),
                    }
                })
                .map_err(|e| format!("writing {}: {e}", path.display()))
            });
        if let Err(e) = written {
            // A full disk: what was written goes (the directory is new,
            // and this recorder's), so that the next dump has room.
            let _ = fs::remove_dir_all(&dir);
            summary::say(format_args!("dump ({}): could not write: {e}; recording goes on", fired.why));
            return Err(e);
        }
        summary::say(format_args!(
            "dump ({}): wrote the last {:.1} s to {}/",
            fired.why,
            (through - from).as_secs_f64(),
            dir.display()
        ));
        // The dump's tables are gone by now: their pages go back too.
        stages::mark("dump written");
        self.written.push_back(dir.clone());
        while self.written.len() > self.args.max_dumps as usize {
            if let Some(old) = self.written.pop_front() {
                if let Err(e) = fs::remove_dir_all(&old) {
                    summary::say(format_args!("dump: could not remove the old dump {}: {e}", old.display()));
                }
            }
        }
        Ok(dir)
    }
}

/// Forgets what was recorded before the capture's time `at`, and what is
/// kept of exited processes whose stacks went with it.
fn forget_before(recorder: &mut Probe, symbolizer: &mut Symbolizer, at: Duration) {
    let left = recorder.forget_before(at);
    // Only a process that lost keys may hold fewer addresses.
    let addresses = |pid| left.thinned.contains(&pid).then(|| recorder.held_addresses(pid));
    symbolizer.forget_retired(&left.held, &addresses);
    stages::trim();
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
