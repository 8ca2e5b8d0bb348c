//! `fgbpf offcpu`: measure where threads wait and why, and write
//! `offcpu.folded` (microseconds), `offcpu.svg` and `report.txt`.

use std::time::Duration;

use super::capture::{capture, finish, output_names, write_view, Finished};
use super::oncpu::Outcome;
use super::CliError;
use crate::capture::offcpu::{OffcpuOptions, OffcpuTracer, State};
use crate::capture::procs::ProcEvent;
use crate::capture::Targets;
use crate::cli::{BlockArgs, CaptureArgs, MapArgs, OffcpuArgs};
use crate::output::{
    breakdown,
    folded::Leading,
    palette::{Heat, Scheme},
    report, svg, unresolved,
};
use crate::profile::{Kind, Meta, Profile, Unit};
use crate::session::window::Live;
use crate::symbolize::Symbolizer;

impl Live for OffcpuTracer {
    fn poll_processes(&self, timeout: Duration) -> Vec<ProcEvent> {
        OffcpuTracer::poll_processes(self, timeout)
    }

    fn progress(&self) -> String {
        format!("{} off-CPU intervals", self.stats().recorded)
    }

    fn stop(&mut self) {
        OffcpuTracer::stop(self)
    }
}

/// Checks the block filters before anything starts.
pub fn options(
    targets: Targets,
    capture: &CaptureArgs,
    blocks: &BlockArgs,
    maps: &MapArgs,
) -> Result<OffcpuOptions, CliError> {
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
    states.dedup();
    if states.is_empty() {
        states = State::ALL.to_vec();
    }
    Ok(OffcpuOptions {
        targets,
        user_stacks: !capture.kernel_only,
        kernel_stacks: !capture.user_only,
        min_block: Duration::from_micros(blocks.min_block.unwrap_or(0)),
        max_block: blocks.max_block.map(Duration::from_micros),
        states,
        sample_every: blocks.sample_every.unwrap_or(1),
        max_stacks: maps.max_stacks,
        max_entries: maps.max_entries,
    })
}

/// Drains a stopped tracer into its profile (microseconds).
pub fn profile(
    tracer: &OffcpuTracer,
    symbolizer: &mut Symbolizer,
    target: &str,
    elapsed: Duration,
) -> (Profile, u64) {
    let drained = tracer.drain();
    let mut profile = symbolizer.profile(&drained.stacks, Unit::Microseconds);
    profile.meta = Meta {
        kind: Kind::OffCpu,
        target: target.to_string(),
        duration: elapsed,
        frequency: None,
        losses: drained.losses,
    };
    (profile, drained.open_blocks)
}

pub fn svg_options(profile: &Profile, started_at: &str, leading: Leading) -> svg::Options {
    svg::Options {
        title: format!("Off-CPU flame graph: {}", profile.meta.target),
        subtitle: Some(format!(
            "off-CPU time in us over {:.1} s from {started_at}; {:.2} s blocked in all; stacks end in the wait state",
            profile.meta.duration.as_secs_f64(),
            profile.total() as f64 / 1e6
        )),
        leading,
        scheme: Scheme::Heat(Heat::OffCpu),
        ..Default::default()
    }
}

/// The report line on waits the capture ended in the middle of.
pub fn open_blocks_note(open_blocks: u64) -> String {
    match open_blocks {
        0 => String::new(),
        n => format!("\n{n} off-CPU blocks were still open when the capture ended; their time so far is included.\n"),
    }
}

/// The off-CPU report: hotspots, then time per process and per thread split
/// by state.
pub fn report_text(profile: &Profile, open_blocks: u64) -> String {
    let mut text = report::render(
        profile,
        &report::Options {
            kind: "off-CPU".into(),
            ..Default::default()
        },
    );
    text.push_str(&open_blocks_note(open_blocks));
    text.push_str(&unresolved::render(profile));
    text.push_str(&breakdown::render(profile, Leading::Process, false, 0));
    text.push_str(&breakdown::render(
        profile,
        Leading::ProcessAndThread,
        false,
        3,
    ));
    text
}

pub fn run(args: &OffcpuArgs) -> Result<Outcome, CliError> {
    // Filters are checked before the capture; targets are filled in later.
    options(Targets::default(), &args.capture, &args.blocks, &args.maps)?;
    let outputs = output_names(&["offcpu"], &args.capture.formats);
    let Finished {
        prepared,
        recorder,
        mut symbolizer,
        elapsed,
        end,
        started_at,
    } = capture(
        &args.capture,
        "offcpu",
        &outputs,
        "off-CPU time",
        |targets| {
            Ok(OffcpuTracer::start(&options(
                targets,
                &args.capture,
                &args.blocks,
                &args.maps,
            )?)?)
        },
    )?;
    let (profile, open_blocks) = profile(&recorder, &mut symbolizer, &prepared.target, elapsed);
    drop(recorder);
    let written = write_view(
        &prepared.out_dir,
        "offcpu",
        &profile,
        &args.capture.formats,
        &svg_options(&profile, &started_at, Leading::ProcessAndThread),
        Some(&report_text(&profile, open_blocks)),
    )?;
    Ok(finish(&profile, written, symbolizer, end))
}
