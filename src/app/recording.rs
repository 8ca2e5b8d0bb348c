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
use crate::cli::{BlockArgs, CaptureArgs, Format, GroupBy, MapArgs, OffcpuArgs, OncpuArgs, SamplingArgs, WallArgs};
use crate::format::outputs::output_names;
use crate::format::sidecar;
use crate::probe::{self, OffcpuOptions, OncpuOptions, Probe};
use crate::profile::State;
use crate::runtimes::{BpfWalker, Settings, Walkers};

/// What a recording records: on-CPU samples, off-CPU time, or both with
/// the wall-clock view drawn from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureKind {
    OnCpu,
    OffCpu,
    Wall,
}

impl CaptureKind {
    /// The command's name, the stem of its default output directory and
    /// of its main view's files.
    pub fn name(self) -> &'static str {
        match self {
            CaptureKind::OnCpu => "oncpu",
            CaptureKind::OffCpu => "offcpu",
            CaptureKind::Wall => "wall",
        }
    }

    /// The views it always writes, by file stem.
    fn stems(self) -> Vec<&'static str> {
        match self {
            CaptureKind::Wall => vec!["oncpu", "offcpu", "wall"],
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
    /// For `wall`: merge each process's threads under one root frame.
    pub per_process: bool,
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
        per_process: bool,
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
        };
        Ok(Recording { capture, kind, probe, otlp, per_process })
    }

    pub fn oncpu(args: &'a OncpuArgs) -> Result<Self, CliError> {
        Self::check(&args.capture, &args.maps, Some(&args.sampling), None, false)
    }

    pub fn offcpu(args: &'a OffcpuArgs) -> Result<Self, CliError> {
        Self::check(&args.capture, &args.maps, None, Some(&args.blocks), false)
    }

    pub fn wall(args: &'a WallArgs) -> Result<Self, CliError> {
        Self::check(&args.capture, &args.maps, Some(&args.sampling), Some(&args.blocks), args.per_process)
    }
}

impl Recording<'_> {
    /// On-CPU samples per second, when they are recorded.
    pub fn frequency(&self) -> Option<u64> {
        self.probe.oncpu.as_ref().map(|s| s.frequency)
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
        match (self.frequency(), self.kind) {
            (Some(f), CaptureKind::Wall) => format!("on-CPU samples at {f} Hz and off-CPU time"),
            (Some(f), _) => format!("on-CPU samples at {f} Hz"),
            _ => "off-CPU time".to_string(),
        }
    }

    /// Every file the recording writes.
    pub fn outputs(&self) -> Vec<String> {
        let mut outputs = output_names(&self.stems(), &self.capture.formats);
        if self.capture.formats.contains(&Format::Folded) {
            outputs.push(sidecar::FILE.to_string());
        }
        outputs
    }

    /// Loads and attaches the probe for `targets`.
    pub fn start(&self, targets: probe::Targets) -> Result<Probe, CliError> {
        Ok(Probe::start(&probe::Options { targets, ..self.probe.clone() })?)
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
        (capture.no_go, BpfWalker::Go),
        (capture.no_java, BpfWalker::Java),
        (capture.no_node, BpfWalker::V8),
    ];
    Settings {
        walkers: Walkers::all().without(off.into_iter().filter(|(no, _)| *no).map(|(_, w)| w).collect()),
        goroutines: !capture.no_go && blocks,
        no_lines: capture.no_py_lines,
    }
}
