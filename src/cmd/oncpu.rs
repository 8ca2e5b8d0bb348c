//! `fgbpf oncpu`: sample on-CPU stacks and write `oncpu.folded`,
//! `oncpu.svg` and `report.txt`.

use std::path::PathBuf;
use std::time::Duration;

use super::capture::{local_timestamp, preflight, summary, view_files, write_view};
use super::CliError;
use crate::capture::oncpu::{OncpuOptions, OncpuSampler};
use crate::capture::procs::ProcEvent;
use crate::cli::OncpuArgs;
use crate::output::{folded::Leading, palette::Heat, report, svg};
use crate::profile::{Kind, Meta, Unit};
use crate::session::command::HeldCommand;
use crate::session::signals::StopFlag;
use crate::session::window::{EndReason, Live, Window};
use crate::symbolize::{self, Symbolizer};

impl Live for OncpuSampler {
    fn poll_processes(&self, timeout: Duration) -> Vec<ProcEvent> {
        OncpuSampler::poll_processes(self, timeout)
    }

    fn progress(&self) -> String {
        format!("{} samples", self.stats().samples)
    }
}

/// What a finished on-CPU capture wrote.
pub struct Outcome {
    pub written: Vec<PathBuf>,
    pub end: EndReason,
}

pub fn run(args: &OncpuArgs) -> Result<Outcome, CliError> {
    let mut outputs = view_files("oncpu", &args.capture.formats);
    outputs.push("report.txt".into());
    let names: Vec<&str> = outputs.iter().map(String::as_str).collect();
    let prepared = preflight(&args.capture, "oncpu", &names)?;
    let stop = StopFlag::install().map_err(CliError::failed)?;
    let mut held = match args.capture.command.is_empty() {
        true => None,
        false => Some(HeldCommand::spawn(&args.capture.command).map_err(CliError::usage)?),
    };
    let mut targets = prepared.targets.clone();
    if let Some(h) = &held {
        targets.pids.push(h.pid);
    }
    let opts = OncpuOptions {
        targets,
        frequency: args.frequency,
        include_idle: args.include_idle,
        user_stacks: !args.capture.kernel_only,
        kernel_stacks: !args.capture.user_only,
        max_stacks: args.max_stacks,
        max_entries: args.max_entries,
    };
    let mut sampler = OncpuSampler::start(&opts)?;
    let mut symbolizer = Symbolizer::new(&symbolize::Options::default());
    if let Some(h) = held.as_mut() {
        h.release().map_err(CliError::usage)?;
    }
    eprintln!(
        "fgbpf: sampling {} at {} Hz on {} CPUs (attached in {:.0} ms){}",
        prepared.target,
        args.frequency,
        sampler.cpus,
        sampler.attach_time.as_secs_f64() * 1000.0,
        if args.capture.duration.is_none() {
            "; Ctrl-C to stop"
        } else {
            ""
        }
    );
    let started_at = local_timestamp("%Y-%m-%d %H:%M:%S");
    let window = Window {
        duration: args.capture.duration,
        stop: &stop,
        command: held.as_mut(),
        watched: [&args.capture.pids[..], &args.capture.tids[..]].concat(),
    };
    let (elapsed, end) = window.run(&sampler, &mut symbolizer);
    sampler.stop();
    let drained = sampler.drain();
    drop(sampler);

    let mut profile = symbolizer.profile(&drained.stacks, Unit::Samples);
    profile.meta = Meta {
        kind: Kind::OnCpu,
        target: prepared.target.clone(),
        duration: elapsed,
        frequency: Some(args.frequency),
        losses: drained.losses,
    };
    let svg_opts = svg::Options {
        title: format!("CPU flame graph: {}", prepared.target),
        subtitle: Some(format!(
            "on-CPU samples: {} at {} Hz over {:.1} s, from {started_at}; kernel frames orange, user frames red-yellow",
            profile.total(),
            args.frequency,
            elapsed.as_secs_f64()
        )),
        leading: Leading::ProcessAndThread,
        heat: Heat::OnCpu,
        ..Default::default()
    };
    let written = write_view(
        &prepared.out_dir,
        "oncpu",
        &profile,
        &args.capture.formats,
        &svg_opts,
        Some(&report::Options::default()),
    )?;
    eprint!("{}", summary(&profile, &written));
    if let EndReason::CommandExited(code) = end {
        if code != 0 {
            eprintln!("fgbpf: the command exited with status {code}");
        }
    }
    Ok(Outcome { written, end })
}
