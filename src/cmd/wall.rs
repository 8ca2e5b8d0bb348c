//! `fgbpf wall`: the on-CPU sampler and the off-CPU tracer over the same
//! targets and window, and the combined wall-clock view in which both kinds
//! of time share one unit (microseconds) and one tree.

use std::time::Duration;

use super::capture::{capture, finish, output_names, write_view, Finished};
use super::oncpu::Outcome;
use super::{offcpu, oncpu, CliError};
use crate::capture::offcpu::OffcpuTracer;
use crate::capture::oncpu::OncpuSampler;
use crate::capture::procs::{ProcEvent, ProcEventKind};
use crate::cli::WallArgs;
use crate::output::{breakdown, folded::Leading, palette::Scheme, report, svg, unresolved};
use crate::profile::{Kind, Meta, Profile, Unit};
use crate::session::window::Live;

/// Both recorders, run together.
pub struct WallRecorder {
    pub on: OncpuSampler,
    pub off: OffcpuTracer,
}

impl Live for WallRecorder {
    fn poll_processes(&self, timeout: Duration) -> Vec<ProcEvent> {
        let mut events = self.on.poll_processes(timeout);
        events.extend(self.off.poll_processes(Duration::ZERO));
        // Both programs announce each process: read its mappings once.
        events.sort_by_key(|e| (e.pid, e.kind == ProcEventKind::Exec));
        events.dedup_by_key(|e| (e.pid, e.kind == ProcEventKind::Exec));
        events
    }

    fn progress(&self) -> String {
        format!(
            "{} samples, {} off-CPU intervals",
            self.on.stats().samples,
            self.off.stats().recorded
        )
    }

    fn stop(&mut self) {
        // Stop both before either is drained so they cover the same window.
        self.on.stop();
        self.off.stop();
    }
}

/// One tree in microseconds: each on-CPU sample weighs 1e6/F µs, each
/// off-CPU interval its measured length.
pub fn combine(on: &Profile, off: &Profile) -> Profile {
    let hz = on.meta.frequency.unwrap_or(1).max(1);
    let mut wall = Profile::new(Unit::Microseconds);
    wall.absorb(on, |samples| samples * 1_000_000 / hz);
    wall.absorb(off, |us| us);
    wall.absorb_unresolved(on, |samples| samples * 1_000_000 / hz);
    wall.absorb_unresolved(off, |us| us);
    wall.coalesce();
    let mut losses = on.meta.losses.clone();
    losses
        .entries
        .extend(off.meta.losses.entries.iter().cloned());
    wall.meta = Meta {
        kind: Kind::Wall,
        target: on.meta.target.clone(),
        duration: on.meta.duration,
        frequency: Some(hz),
        losses,
    };
    wall
}

pub fn run(args: &WallArgs) -> Result<Outcome, CliError> {
    offcpu::options(Default::default(), &args.capture, &args.blocks, &args.maps)?;
    let outputs = output_names(&["oncpu", "offcpu", "wall"], &args.capture.formats);
    let what = format!(
        "on-CPU samples at {} Hz and off-CPU time",
        args.sampling.frequency
    );
    let Finished {
        prepared,
        recorder,
        mut symbolizer,
        elapsed,
        end,
        started_at,
    } = capture(&args.capture, "wall", &outputs, &what, |targets| {
        let off = OffcpuTracer::start(&offcpu::options(
            targets.clone(),
            &args.capture,
            &args.blocks,
            &args.maps,
        )?)?;
        let on = OncpuSampler::start(&oncpu::options(
            targets,
            &args.capture,
            &args.sampling,
            &args.maps,
        ))?;
        Ok(WallRecorder { on, off })
    })?;
    let on = oncpu::profile(&recorder.on, &mut symbolizer, &prepared.target, elapsed);
    let (off, open_blocks) =
        offcpu::profile(&recorder.off, &mut symbolizer, &prepared.target, elapsed);
    drop(recorder);
    let wall = combine(&on, &off);

    let leading = if args.per_process {
        Leading::Process
    } else {
        Leading::ProcessAndThread
    };
    let dir = &prepared.out_dir;
    let formats = &args.capture.formats;
    let mut written = write_view(
        dir,
        "oncpu",
        &on,
        formats,
        &oncpu::svg_options(&on, &started_at, Leading::ProcessAndThread),
        None,
    )?;
    written.extend(write_view(
        dir,
        "offcpu",
        &off,
        formats,
        &offcpu::svg_options(&off, &started_at, Leading::ProcessAndThread),
        None,
    )?);

    let wall_svg = svg::Options {
        title: format!("Wall-clock flame graph: {}", prepared.target),
        subtitle: Some(format!(
            "{:.1} s from {started_at}, in us (a CPU sample = {} us). Warm frames: mostly on CPU; cool frames: mostly waiting",
            elapsed.as_secs_f64(),
            1_000_000 / args.sampling.frequency
        )),
        leading,
        scheme: Scheme::Majority,
        ..Default::default()
    };
    let mut report = report::render(
        &wall,
        &report::Options {
            kind: "wall-clock".into(),
            ..Default::default()
        },
    );
    report.push_str(&offcpu::open_blocks_note(open_blocks));
    report.push_str(&unresolved::render(&wall));
    report.push_str(&breakdown::render(&wall, leading, true, 3));
    written.extend(write_view(
        dir,
        "wall",
        &wall,
        formats,
        &wall_svg,
        Some(&report),
    )?);
    Ok(finish(&wall, written, symbolizer, end))
}
