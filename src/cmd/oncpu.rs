//! `fgbpf oncpu`: sample on-CPU stacks and write `oncpu.folded`,
//! `oncpu.svg` and `report.txt`.

use std::path::PathBuf;
use std::time::Duration;

use super::capture::{capture, finish, output_names, write_view, Finished};
use super::CliError;
use crate::capture::oncpu::{OncpuOptions, OncpuSampler};
use crate::capture::procs::ProcEvent;
use crate::capture::Targets;
use crate::cli::{CaptureArgs, MapArgs, OncpuArgs, SamplingArgs};
use crate::output::{
    folded::Leading,
    palette::{Heat, Scheme},
    report, svg, unresolved,
};
use crate::profile::{Kind, Meta, Profile, Unit};
use crate::session::window::{EndReason, Live};
use crate::symbolize::Symbolizer;

impl Live for OncpuSampler {
    fn poll_processes(&self, timeout: Duration) -> Vec<ProcEvent> {
        OncpuSampler::poll_processes(self, timeout)
    }

    fn progress(&self) -> String {
        format!("{} samples", self.stats().samples)
    }

    fn stop(&mut self) {
        OncpuSampler::stop(self)
    }
}

/// What a finished capture wrote.
pub struct Outcome {
    pub written: Vec<PathBuf>,
    pub end: EndReason,
}

pub fn options(
    targets: Targets,
    capture: &CaptureArgs,
    sampling: &SamplingArgs,
    maps: &MapArgs,
) -> OncpuOptions {
    OncpuOptions {
        targets,
        frequency: sampling.frequency,
        include_idle: sampling.include_idle,
        user_stacks: !capture.kernel_only,
        kernel_stacks: !capture.user_only,
        max_stacks: maps.max_stacks,
        max_entries: maps.max_entries,
    }
}

/// Drains a stopped sampler into its profile.
pub fn profile(
    sampler: &OncpuSampler,
    symbolizer: &mut Symbolizer,
    target: &str,
    elapsed: Duration,
) -> Profile {
    let drained = sampler.drain();
    let mut profile = symbolizer.profile(&drained.stacks, Unit::Samples);
    profile.meta = Meta {
        kind: Kind::OnCpu,
        target: target.to_string(),
        duration: elapsed,
        frequency: Some(sampler.frequency),
        losses: drained.losses,
    };
    profile
}

pub fn svg_options(profile: &Profile, started_at: &str, leading: Leading) -> svg::Options {
    svg::Options {
        title: format!("CPU flame graph: {}", profile.meta.target),
        subtitle: Some(format!(
            "on-CPU samples: {} at {} Hz over {:.1} s, from {started_at}; kernel frames orange, user frames red-yellow",
            profile.total(),
            profile.meta.frequency.unwrap_or(0),
            profile.meta.duration.as_secs_f64()
        )),
        leading,
        scheme: Scheme::Heat(Heat::OnCpu),
        ..Default::default()
    }
}

pub fn run(args: &OncpuArgs) -> Result<Outcome, CliError> {
    let outputs = output_names(&["oncpu"], &args.capture.formats);
    let what = format!("on-CPU samples at {} Hz", args.sampling.frequency);
    let Finished {
        prepared,
        recorder,
        mut symbolizer,
        elapsed,
        end,
        started_at,
    } = capture(&args.capture, "oncpu", &outputs, &what, |targets| {
        Ok(OncpuSampler::start(&options(
            targets,
            &args.capture,
            &args.sampling,
            &args.maps,
        ))?)
    })?;
    let profile = profile(&recorder, &mut symbolizer, &prepared.target, elapsed);
    drop(recorder);
    let svg_opts = svg_options(&profile, &started_at, Leading::ProcessAndThread);
    let written = write_view(
        &prepared.out_dir,
        "oncpu",
        &profile,
        &args.capture.formats,
        &svg_opts,
        Some(
            &(report::render(&profile, &report::Options::default())
                + &unresolved::render(&profile)),
        ),
    )?;
    Ok(finish(&profile, written, symbolizer, end))
}
