//! A recording's arguments checked once: what it records ([`CaptureKind`]),
//! the probe's settings (the block filters checked), and the `--otlp`
//! target parsed. [`Recording::check`] builds it before anything starts;
//! every later stage (the capture, the views, the writing, `top`'s and
//! `flight`'s loops) takes this value rather than the arguments again.
//! Names of kinds are strings only at the edges: directory and file names.

use std::time::Duration;

use super::otlp::{self, Target};
use super::views::Wanted;
use super::CliError;
use crate::cli::{AllocArgs, BlockArgs, CaptureArgs, EventsArgs, Format, GroupBy, MapArgs, OffcpuArgs, OncpuArgs, RootArgs, SamplingArgs, WallArgs};
use crate::format::outputs::output_names;
use crate::format::sidecar;
use crate::probe::{self, OffcpuOptions, OncpuOptions, Probe};
use crate::profile::names::Leading;
use crate::profile::State;
use crate::runtimes::{BpfWalker, Settings, Walkers};

/// What a recording records: on-CPU samples, off-CPU time, or both with
/// the wall-clock view drawn from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureKind {
    OnCpu,
    OffCpu,
    Wall,
    /// `fgbpf events`: hits of tracepoints and probes, counted as
    /// on-CPU samples are.
    Events,
    /// `fgbpf alloc`: sampled allocations and their frees, counted as
    /// on-CPU samples are and weighed by size when written.
    Alloc,
}

impl CaptureKind {
    /// The command's name, the stem of its default output directory and
    /// of its main view's files.
    pub fn name(self) -> &'static str {
        match self {
            CaptureKind::OnCpu => "oncpu",
            CaptureKind::OffCpu => "offcpu",
            CaptureKind::Wall => "wall",
            CaptureKind::Events => "events",
            CaptureKind::Alloc => "alloc",
        }
    }

    /// The views it always writes, by file stem.
    fn stems(self) -> Vec<&'static str> {
        match self {
            CaptureKind::Wall => vec!["oncpu", "offcpu", "wall"],
            CaptureKind::Alloc => crate::format::alloc::STEMS.to_vec(),
            k => vec![k.name()],
        }
    }
}

/// A capture command's arguments, checked.
pub struct Recording<'a> {
    pub capture: &'a CaptureArgs,
    pub kind: CaptureKind,
    /// The probe's settings, checked; the targets are filled in when it
    /// starts ([`Recording::start`]).
    pub probe: probe::Options,
    /// `--otlp`, parsed.
    pub otlp: Option<Target>,
    /// The root frames asked for (`--per-program`, `--per-process`,
    /// `--per-thread`); `None` leaves them to the capture's scope
    /// ([`Roots::of`]).
    pub roots: Option<Leading>,
}

/// The root frames of a capture's pictures and of its report's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Roots {
    /// Every SVG's: by program on a whole host unless told otherwise (a
    /// host's processes and threads are too many narrow towers), by
    /// thread for a `-p`, `-t` or command capture.
    pub drawn: Leading,
    /// The on- and off-CPU reports' table: by process on a whole host.
    pub side: Leading,
    /// The wall-clock report's table: by thread unless `--per-process`.
    pub wall: Leading,
}

impl Roots {
    /// The roots for a capture of the whole host or not, `asked` the
    /// option given.
    pub fn of(asked: Option<Leading>, whole_system: bool) -> Roots {
        let by_scope = if whole_system { Leading::Process } else { Leading::ProcessAndThread };
        Roots {
            drawn: asked.unwrap_or(if whole_system { Leading::Program } else { Leading::ProcessAndThread }),
            side: match asked {
                Some(l @ (Leading::Process | Leading::ProcessAndThread)) => l,
                _ => by_scope,
            },
            wall: match asked {
                Some(Leading::Process) => Leading::Process,
                _ => Leading::ProcessAndThread,
            },
        }
    }
}

/// The roots a capture command's options ask for, if any.
fn asked(roots: &RootArgs) -> Option<Leading> {
    match (roots.per_program, roots.per_process, roots.per_thread) {
        (true, _, _) => Some(Leading::Program),
        (_, true, _) => Some(Leading::Process),
        (_, _, true) => Some(Leading::ProcessAndThread),
        _ => None,
    }
}

impl<'a> Recording<'a> {
    /// Checks the arguments of a recording with an on-CPU view when
    /// `sampling` is given and an off-CPU view when `blocks` is: `--otlp`,
    /// then the block filters. Nothing has started yet.
    pub fn check(
        capture: &'a CaptureArgs,
        maps: &MapArgs,
        sampling: Option<&SamplingArgs>,
        blocks: Option<&BlockArgs>,
        roots: Option<Leading>,
    ) -> Result<Self, CliError> {
        let kind = match (sampling.is_some(), blocks.is_some()) {
            (true, true) => CaptureKind::Wall,
            (false, true) => CaptureKind::OffCpu,
            _ => CaptureKind::OnCpu,
        };
        let otlp = otlp::target(&capture.otlp)?;
        let probe = probe::Options {
            targets: Default::default(),
            btf: capture.btf.clone(),
            oncpu: sampling.map(|s| OncpuOptions {
                frequency: s.frequency,
                include_idle: s.include_idle,
            }),
            offcpu: blocks.map(offcpu_options).transpose()?,
            user_stacks: !capture.kernel_only,
            kernel_stacks: !capture.user_only,
            max_stacks: maps.max_stacks,
            max_entries: maps.max_entries,
            max_unwind_rows: maps.max_unwind_rows,
            runtimes: runtime_settings(capture, blocks.is_some()),
            slice: Duration::from_millis(maps.slice.into()),
            group_cgroup: capture.group_by == Some(GroupBy::Cgroup),
            events_ring: probe::DEFAULT_EVENTS_RING,
            staged_start: true,
            events: Vec::new(),
            event_weight: 0,
            alloc: None,
        };
        Ok(Recording { capture, kind, probe, otlp, roots })
    }

    pub fn oncpu(args: &'a OncpuArgs) -> Result<Self, CliError> {
        Self::check(&args.capture, &args.maps, Some(&args.sampling), None, asked(&args.roots))
    }

    pub fn offcpu(args: &'a OffcpuArgs) -> Result<Self, CliError> {
        Self::check(&args.capture, &args.maps, None, Some(&args.blocks), asked(&args.roots))
    }

    /// `fgbpf events`: the events parsed; no sampler, no staged start
    /// (the events' programs need the whole walker from the start).
    pub fn events(args: &'a EventsArgs) -> Result<Self, CliError> {
        if args.capture.group_by == Some(GroupBy::Cgroup) {
            return Err(CliError::usage("fgbpf events does not take --group-by cgroup: its stacks are grouped by event"));
        }
        let events = probe::points::parse_all(&args.events).map_err(CliError::usage)?;
        let mut rec = Self::check(&args.capture, &args.maps, None, None, asked(&args.roots))?;
        rec.kind = CaptureKind::Events;
        rec.probe.event_weight = probe::points::parse_weight(args.weight.as_deref(), &events).map_err(CliError::usage)?;
        rec.probe.events = events;
        rec.probe.staged_start = false;
        Ok(rec)
    }

    /// `fgbpf alloc`: the sampling settings; the C library is found
    /// when the targets are known ([`Recording::start`]).
    pub fn alloc(args: &'a AllocArgs) -> Result<Self, CliError> {
        if args.capture.group_by == Some(GroupBy::Cgroup) {
            return Err(CliError::usage("fgbpf alloc does not take --group-by cgroup"));
        }
        if args.capture.otlp.otlp_interval.is_some() {
            return Err(CliError::usage("fgbpf alloc sends its four views once, at the end: --otlp-interval is for the capture commands and flight"));
        }
        if args.capture.kernel_only {
            return Err(CliError::usage("fgbpf alloc records user stacks: --kernel-only leaves nothing"));
        }
        let mut rec = Self::check(&args.capture, &args.maps, None, None, asked(&args.roots))?;
        rec.kind = CaptureKind::Alloc;
        rec.probe.staged_start = false;
        rec.probe.kernel_stacks = false;
        rec.probe.alloc = Some(probe::alloc::Options {
            mean: args.sample_bytes,
            libc: Default::default(),
            pid: -1,
            measure: false,
            unread: Vec::new(),
            replacement: None,
            candidates: Vec::new(),
            max_live: args.max_live,
            max_overhead: (!args.force).then_some((args.max_overhead.max(0.0) * 100.0) as u64),
        });
        Ok(rec)
    }

    pub fn wall(args: &'a WallArgs) -> Result<Self, CliError> {
        Self::check(&args.capture, &args.maps, Some(&args.sampling), Some(&args.blocks), asked(&args.roots))
    }
}

impl Recording<'_> {
    /// On-CPU samples per second, when they are recorded.
    pub fn frequency(&self) -> Option<u64> {
        match self.kind {
            // Hits weigh 1 each, as samples at 1 Hz would.
            CaptureKind::Events | CaptureKind::Alloc => Some(1),
            _ => self.probe.oncpu.as_ref().map(|s| s.frequency),
        }
    }

    fn wakers(&self) -> bool {
        self.probe.offcpu.as_ref().is_some_and(|b| b.wakers)
    }

    /// The views it writes, by file stem.
    pub fn stems(&self) -> Vec<&'static str> {
        let mut stems = self.kind.stems();
        if self.wakers() {
            stems.push("offwake");
        }
        // Go programs' goroutines, when any is found.
        if self.probe.offcpu.is_some() && !self.capture.no_go {
            stems.push("goroutines");
        }
        stems
    }

    /// What is recorded, for the start message.
    pub fn what(&self) -> String {
        if let Some(a) = &self.probe.alloc {
            let every = match a.mean {
                1 => "every allocation".to_string(),
                m => format!("allocations sampled every {m} bytes on average"),
            };
            return format!("{every} (malloc and free by uprobes: a trap per call)");
        }
        if self.kind == CaptureKind::Events {
            let names: Vec<&str> = self.probe.events.iter().map(|e| e.text.as_str()).collect();
            return format!("stacks at {}", names.join(", "));
        }
        match (self.frequency(), self.kind) {
            (Some(f), CaptureKind::Wall) => format!("on-CPU samples at {f} Hz and off-CPU time"),
            (Some(f), _) => format!("on-CPU samples at {f} Hz"),
            _ => "off-CPU time".to_string(),
        }
    }

    /// Every file the recording writes.
    pub fn outputs(&self) -> Vec<String> {
        if self.kind == CaptureKind::Alloc {
            let mut outputs = crate::format::alloc::output_names(&self.capture.formats);
            if self.capture.formats.contains(&Format::Folded) {
                outputs.push(sidecar::FILE.to_string());
            }
            return outputs;
        }
        let mut outputs = output_names(&self.stems(), &self.capture.formats);
        if self.capture.formats.contains(&Format::Folded) {
            outputs.push(sidecar::FILE.to_string());
        }
        outputs
    }

    /// Loads and attaches the probe for `targets`.
    pub fn start(&self, targets: probe::Targets) -> Result<Probe, CliError> {
        let mut opts = probe::Options { targets, ..self.probe.clone() };
        if let Some(a) = opts.alloc.as_mut() {
            probe::alloc::place(a, &opts.targets).map_err(CliError::failed)?;
        }
        let probe = Probe::start(&opts)?;
        if let Some(a) = &opts.alloc {
            if let Some(said) = probe.alloc_cost_check(a).map_err(CliError::failed)? {
                super::summary::say(said);
            }
        }
        Ok(probe)
    }

    /// The views it builds.
    pub fn wanted(&self) -> Wanted {
        Wanted {
            frequency: self.frequency(),
            offcpu: self.probe.offcpu.is_some(),
            wakers: self.wakers(),
            labels: self.capture.formats.contains(&Format::Pprof) || self.otlp.is_some(),
            label_frames: self.capture.label_frames,
        }
    }
}

/// Checks the block filters and turns them into the tracer's settings.
fn offcpu_options(blocks: &BlockArgs) -> Result<OffcpuOptions, CliError> {
    if let (Some(min), Some(max)) = (blocks.min_block, blocks.max_block) {
        if min > max {
            return Err(CliError::usage(format!(
                "--min-block {min} is above --max-block {max}: no interval could be recorded"
            )));
        }
    }
    let mut states: Vec<State> = blocks
        .states
        .iter()
        .filter_map(|s| State::parse(s))
        .collect();
    states.sort();
    states.dedup();
    if states.is_empty() {
        states = State::ALL.to_vec();
    }
    Ok(OffcpuOptions {
        min_block: Duration::from_micros(blocks.min_block.unwrap_or(0)),
        max_block: blocks.max_block.map(Duration::from_micros),
        states,
        sample_every: blocks.sample_every.unwrap_or(1),
        wakers: blocks.wakers,
        kernel_threads: blocks.kernel_threads,
        idle_threads: blocks.idle_threads,
        announce_wait: None,
    })
}

/// What the runtimes are asked: every walker but those turned off
/// (`--no-python`…), goroutines with off-CPU time (`blocks`).
fn runtime_settings(capture: &CaptureArgs, blocks: bool) -> Settings {
    let off = [
        (capture.no_python, BpfWalker::Python),
        (capture.no_ruby, BpfWalker::Ruby),
        (capture.no_php, BpfWalker::Php),
        (capture.no_perl, BpfWalker::Perl),
        (capture.no_luajit, BpfWalker::LuaJit),
        (capture.no_go, BpfWalker::Go),
        (capture.no_java, BpfWalker::Java),
        (capture.no_node, BpfWalker::V8),
        (capture.no_beam, BpfWalker::Beam),
    ];
    Settings {
        walkers: Walkers::all().without(off.into_iter().filter(|(no, _)| *no).map(|(_, w)| w).collect()),
        goroutines: !capture.no_go && blocks,
        // Read only by `fgbpf alloc` (src/probe/options.rs).
        heap: !capture.no_go,
        no_lines: capture.no_py_lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_host_is_drawn_by_program_unless_asked_otherwise() {
        use Leading::{Process, ProcessAndThread as Thread, Program};
        // (asked, whole host) → (drawn, on/off-CPU table, wall table)
        let cases = [
            (None, true, (Program, Process, Thread)),
            (None, false, (Thread, Thread, Thread)),
            (Some(Program), false, (Program, Thread, Thread)),
            (Some(Process), true, (Process, Process, Process)),
            (Some(Thread), true, (Thread, Thread, Thread)),
        ];
        for (asked, whole, (drawn, side, wall)) in cases {
            assert_eq!(Roots::of(asked, whole), Roots { drawn, side, wall }, "{asked:?} {whole}");
        }
        let args = |program, process, thread| RootArgs { per_program: program, per_process: process, per_thread: thread };
        assert_eq!(super::asked(&args(false, false, false)), None);
        assert_eq!(super::asked(&args(true, false, false)), Some(Program));
        assert_eq!(super::asked(&args(false, true, false)), Some(Process));
        assert_eq!(super::asked(&args(false, false, true)), Some(Thread));
    }
}
