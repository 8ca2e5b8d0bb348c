//! The one recorder behind `oncpu`, `offcpu` and `wall`: a capture is one
//! probe with the programs its views need, and each view is a profile
//! built from what the probe recorded. The subcommands only say which
//! views they want and how the probe is set.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::capture::{capture, output_names, write_view, Finished, TIMELINE};
use super::stages;
use super::summary::{finish, Outcome};
use super::views::{Views, Wanted};
use super::CliError;
use crate::cli::{BlockArgs, CaptureArgs, Format, GroupBy, MapArgs, SamplingArgs};
use crate::format::breakdown::Columns;
use crate::format::sidecar::{self, Sidecar};
use crate::format::{
    breakdown, files,
    folded::Leading,
    palette::{Heat, Scheme},
    report, svg, timeline, unresolved, wakers,
};
use crate::probe::{self, OffcpuOptions, OncpuOptions, Probe};
use crate::profile::{merge, thousands, Kind, Profile, State};

/// What a capture command records and writes.
pub struct Recording<'a> {
    pub capture: &'a CaptureArgs,
    pub maps: &'a MapArgs,
    /// Set for captures with an on-CPU view.
    pub sampling: Option<&'a SamplingArgs>,
    /// Set for captures with an off-CPU view.
    pub blocks: Option<&'a BlockArgs>,
    /// For `wall`: merge each process's threads under one root frame.
    pub per_process: bool,
}

impl Recording<'_> {
    /// The command's name, and the stem of its default output directory.
    fn kind(&self) -> &'static str {
        match (self.sampling.is_some(), self.blocks.is_some()) {
            (true, true) => "wall",
            (false, true) => "offcpu",
            _ => "oncpu",
        }
    }

    fn stems(&self) -> Vec<&'static str> {
        let mut stems = match self.kind() {
            "wall" => vec!["oncpu", "offcpu", "wall"],
            k => vec![k],
        };
        if self.blocks.is_some_and(|b| b.wakers) {
            stems.push("offwake");
        }
        // Go programs' goroutines, when any is found.
        if self.blocks.is_some() && !self.capture.no_go {
            stems.push("goroutines");
        }
        stems
    }

    pub fn what(&self) -> String {
        match (self.sampling, self.blocks) {
            (Some(s), Some(_)) => format!("on-CPU samples at {} Hz and off-CPU time", s.frequency),
            (Some(s), None) => format!("on-CPU samples at {} Hz", s.frequency),
            _ => "off-CPU time".to_string(),
        }
    }

    /// The probe's settings; bad block filters are refused here, before
    /// anything starts.
    pub fn options(&self, targets: probe::Targets) -> Result<probe::Options, CliError> {
        // --otlp is checked with the rest, before anything is captured.
        super::otlp::target(&self.capture.otlp)?;
        Ok(probe::Options {
            targets,
            btf: self.capture.btf.clone(),
            oncpu: self.sampling.map(|s| OncpuOptions {
                frequency: s.frequency,
                include_idle: s.include_idle,
            }),
            offcpu: self.blocks.map(offcpu_options).transpose()?,
            user_stacks: !self.capture.kernel_only,
            kernel_stacks: !self.capture.user_only,
            max_stacks: self.maps.max_stacks,
            max_entries: self.maps.max_entries,
            max_unwind_rows: self.maps.max_unwind_rows,
            python: !self.capture.no_python,
            java: !self.capture.no_java,
            node: !self.capture.no_node,
            ruby: !self.capture.no_ruby,
            php: !self.capture.no_php,
            goroutines: !self.capture.no_go && self.blocks.is_some(),
            go_labels: !self.capture.no_go,
            py_lines: !self.capture.no_py_lines,
            slice: Duration::from_millis(self.maps.slice.into()),
            group_cgroup: self.capture.group_by == Some(GroupBy::Cgroup),
            events_ring: probe::DEFAULT_EVENTS_RING,
            staged_start: true,
        })
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

/// Records, then writes every view the recording asks for.
pub fn run(rec: &Recording<'_>) -> Result<Outcome, CliError> {
    // Filters are checked before the capture; targets are filled in later.
    rec.options(Default::default())?;
    let outputs = rec.outputs();
    let Finished {
        prepared,
        out_dir,
        mut recorder,
        mut symbolizer,
        elapsed,
        end,
        command_status,
        started_at,
        started,
        mut stream,
    } = capture(rec.capture, rec.kind(), &outputs, &rec.what(), |targets| rec.start(targets), rec.wanted())?;
    stages::mark("capturing");
    if let Some(s) = stream.as_mut() {
        s.last(&mut recorder, &mut symbolizer, elapsed);
        stages::mark("OTLP's last interval");
    }
    let recorded = recorder.finish();
    stages::mark("counts read out");
    drop(recorder);
    stages::mark("probe dropped");
    let views = Views::build(rec.wanted(), recorded, &mut symbolizer, &prepared.target, elapsed);
    stages::mark("named");
    // Every stack is named: the symbolizer's caches (symbol tables, debug
    // information, processes' maps) are freed before the outputs are
    // written, which then use that memory (freeing takes 4-21 ms: a 5 s
    // whole-host capture, a 137 MB binary's debug information, a 2-minute
    // whole-host soak).
    let held = symbolizer.held();
    drop(symbolizer);
    let whole_system = prepared.targets.whole_system();
    let edges = views.edges.lines();
    let (written, main) = write(rec, views, &out_dir, &prepared.target, whole_system, (&started_at, Some(started)))?;
    stages::mark("written");
    if let Some(s) = stream {
        s.close();
    }
    Ok(finish(&main, &edges, written, held, end, command_status, rec.capture.json))
}

impl Recording<'_> {
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
        Ok(Probe::start(&self.options(targets)?)?)
    }

    /// The views it builds.
    pub fn wanted(&self) -> Wanted {
        Wanted {
            frequency: self.sampling.map(|s| s.frequency),
            offcpu: self.blocks.is_some(),
            wakers: self.blocks.is_some_and(|b| b.wakers),
            labels: self.capture.formats.contains(&Format::Pprof) || self.capture.otlp.otlp.is_some(),
            label_frames: self.capture.label_frames,
        }
    }
}

/// Writes the recording's views, timeline, reports and sidecar into `dir`;
/// returns the files written and the main view (the wall-clock one of a
/// wall capture). Each view is dropped once written, and the wall view
/// takes the off-CPU view's stacks: a large capture's end holds each
/// stack as few times as it can.
pub fn write(
    rec: &Recording<'_>,
    mut views: Views,
    dir: &Path,
    target: &str,
    whole_system: bool,
    (started_at, started): (&str, Option<std::time::SystemTime>),
) -> Result<(Vec<PathBuf>, Profile), CliError> {
    // --otlp: the views are sent as they are written, in one export
    // (streamed instead with --otlp-interval).
    let otlp = super::otlp::target(&rec.capture.otlp)?.filter(|t| t.interval.is_none());
    let mut export = otlp.as_ref().map(|_| crate::format::otlp::Request::new());
    let start_ns = |p: &Profile| {
        let at = started.unwrap_or_else(|| std::time::SystemTime::now() - p.meta.duration);
        at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    };
    let folded = rec.capture.formats.contains(&Format::Folded);
    let formats = &rec.capture.formats;
    // A whole host has hundreds of threads: one root per process there.
    let thread_roots = match whole_system {
        true => Leading::Process,
        false => Leading::ProcessAndThread,
    };
    let wall_roots = match rec.per_process {
        true => Leading::Process,
        false => Leading::ProcessAndThread,
    };
    let edges = views.edges.lines();
    let edges_note: String = edges.iter().map(|l| format!("\n{l}\n")).collect();
    let mut written = Vec::new();
    // What capture.json says of each folded file: the views' kinds.
    let mut side = Sidecar::default();
    for (stem, p) in [("oncpu", views.on.as_ref()), ("offcpu", views.off.as_ref()), ("offwake", views.wake.as_ref())] {
        if let Some(p) = p.filter(|_| rec.stems().contains(&stem)) {
            side.add(&format!("{stem}.folded"), p, thread_roots == Leading::Process);
        }
    }
    let mut waker_text = views.wake.as_ref().map(wakers::render).unwrap_or_default();
    // The report's goroutine section comes last, as the wakers' do.
    waker_text.push_str(&views.goroutines_text);
    if let Some(g) = views.goroutines.take() {
        written.extend(write_view(dir, "goroutines", &g, formats, &goroutines_svg(&g, started_at), None)?);
        side.add("goroutines.folded", &g, false);
    }
    if let Some(wake) = views.wake.take() {
        written.extend(write_view(dir, "offwake", &wake, formats, &offwake_svg(&wake, started_at, thread_roots), None)?);
    }
    let main = match (views.on.take(), views.off.take()) {
        (Some(on), Some(mut off)) => {
            written.extend(write_view(dir, "oncpu", &on, formats, &oncpu_svg(&on, started_at, thread_roots), None)?);
            stages::mark("on-CPU view written");
            written.extend(write_view(dir, "offcpu", &off, formats, &offcpu_svg(&off, started_at, thread_roots), None)?);
            stages::mark("off-CPU view written");
            if let Some(e) = export.as_mut() {
                e.add(&on, start_ns(&on));
                e.add(&off, start_ns(&off));
            }
            let leading = wall_roots;
            let mut wall = merge::wall(&on, &mut off, std::mem::take(&mut views.runs));
            let frequency = on.meta.frequency.unwrap_or(1);
            let duration = on.meta.duration;
            drop((on, off));
            stages::mark("wall view merged");
            wall.meta.losses = views.losses(true, true);
            let mut text = report::render(&wall, &report::Options { kind: "wall-clock".into(), ..Default::default() });
            text.push_str(&edges_note);
            text.push_str(&unresolved::render(&wall));
            text.push_str(&unwinding_section(&wall));
            text.push_str(&breakdown::render(&wall, &breakdown::Options::new(leading, Columns::Both)));
            text.push_str(&waker_text);
            let svg_opts = svg::Options {
                title: format!("Wall-clock flame graph: {}", target),
                subtitle: Some(format!(
                    "{:.1} s from {started_at}, in us: each thread's on-CPU time as the scheduler measured it, shared among its stacks by {} Hz samples; each box warm if mostly on CPU (red user, orange kernel), blue if mostly waiting",
                    duration.as_secs_f64(),
                    frequency
                )),
                leading,
                scheme: Scheme::Majority,
                ..Default::default()
            };
            written.extend(write_view(dir, "wall", &wall, formats, &svg_opts, Some(&text))?);
            stages::mark("wall view written");
            if let Some(e) = export.as_mut() {
                e.add(&wall, start_ns(&wall));
            }
            wall
        }
        (Some(on), None) => {
            let text = report::render(&on, &report::Options::default())
                + &unresolved::render(&on)
                + &unwinding_section(&on)
                + &breakdown::render(&on, &breakdown::Options::new(thread_roots, Columns::OnCpu))
                + &waker_text;
            written.extend(write_view(dir, "oncpu", &on, formats, &oncpu_svg(&on, started_at, thread_roots), Some(&text))?);
            if let Some(e) = export.as_mut() {
                e.add(&on, start_ns(&on));
            }
            on
        }
        (None, Some(off)) => {
            let text = offcpu_report(&off, &edges_note, thread_roots) + &waker_text;
            written.extend(write_view(dir, "offcpu", &off, formats, &offcpu_svg(&off, started_at, thread_roots), Some(&text))?);
            if let Some(e) = export.as_mut() {
                e.add(&off, start_ns(&off));
            }
            off
        }
        (None, None) => unreachable!("every recording has a view"),
    };
    written.push(write_timeline(dir, &main, target, started_at)?);
    stages::mark("timeline written");
    if let (Some(target), Some(export)) = (otlp, export) {
        super::otlp::send(&target, export);
        stages::mark("OTLP sent");
    }
    if folded {
        if rec.kind() == "wall" {
            side.add("wall.folded", &main, wall_roots == Leading::Process);
        }
        let path = dir.join(sidecar::FILE);
        files::write_atomic(&path, files::Durability::Synced, |w: &mut dyn std::io::Write| side.write(w))
            .map_err(|e| CliError::failed(format!("writing {}: {e}", path.display())))?;
        written.push(path);
    }
    Ok((written, main))
}

/// Writes `timeline.html` of `main` and says what its cap left out.
fn write_timeline(dir: &std::path::Path, main: &Profile, target: &str, started_at: &str) -> Result<std::path::PathBuf, CliError> {
    let opts = timeline::Options {
        title: format!("Timeline: {target}"),
        subtitle: Some(format!("{:.1} s from {started_at}", main.meta.duration.as_secs_f64())),
        heat: match main.meta.kind {
            Kind::OffCpu => Heat::OffCpu,
            _ => Heat::OnCpu,
        },
        ..Default::default()
    };
    let path = dir.join(TIMELINE);
    let mut page = None;
    files::write_atomic(&path, files::Durability::Synced, |w: &mut dyn std::io::Write| {
        page = Some(timeline::write(main, &opts, w)?);
        Ok(())
    })
    .map_err(|e| CliError::failed(format!("writing {}: {e}", path.display())))?;
    if let Some(p) = page.filter(|p| p.left_out_stacks > 0) {
        crate::app::summary::say(format_args!(
            "{TIMELINE}: the {} lightest stacks ({:.2}% of the weight) are left out of the page to keep it small; the .folded and .slices files have them all",
            p.left_out_stacks,
            p.left_out_weight as f64 * 100.0 / p.total_weight.max(1) as f64
        ));
    }
    Ok(path)
}

fn oncpu_svg(profile: &Profile, started_at: &str, leading: Leading) -> svg::Options {
    svg::Options {
        title: format!("CPU flame graph: {}", profile.meta.target),
        subtitle: Some(format!(
            "on-CPU samples: {} at {} Hz over {:.1} s, from {started_at}; user code red, kernel orange (search _[k]), inlined aqua (_[i]), JIT green",
            profile.total(),
            profile.meta.frequency.unwrap_or(0),
            profile.meta.duration.as_secs_f64()
        )),
        leading,
        scheme: Scheme::Heat(Heat::OnCpu),
        ..Default::default()
    }
}

fn offcpu_svg(profile: &Profile, started_at: &str, leading: Leading) -> svg::Options {
    svg::Options {
        title: format!("Off-CPU flame graph: {}", profile.meta.target),
        subtitle: Some(format!(
            "off-CPU time in us: {:.1} thread-seconds blocked across {} threads over {:.1} s from {started_at}; stacks end in the wait state",
            profile.total() as f64 / 1e6,
            thousands(threads(profile)),
            profile.meta.duration.as_secs_f64(),
        )),
        leading,
        scheme: Scheme::Heat(Heat::OffCpu),
        ..Default::default()
    }
}

fn goroutines_svg(profile: &Profile, started_at: &str) -> svg::Options {
    svg::Options {
        title: format!("Goroutines: {}", profile.meta.target),
        subtitle: Some(format!(
            "goroutine time in us over {:.1} s from {started_at}, read from outside every 100 ms or more: each goroutine's stack where it parked, ending in its state or Go's wait reason",
            profile.meta.duration.as_secs_f64(),
        )),
        leading: Leading::ProcessAndThread,
        scheme: Scheme::Heat(Heat::OffCpu),
        ..Default::default()
    }
}

fn offwake_svg(profile: &Profile, started_at: &str, leading: Leading) -> svg::Options {
    svg::Options {
        title: format!("Off-wake flame graph: {}", profile.meta.target),
        subtitle: Some(format!(
            "off-CPU time in us over {:.1} s from {started_at}, by waker. Below `--`: the blocked stack; above it (purple): the waker's stack from its leaf up to its thread name",
            profile.meta.duration.as_secs_f64(),
        )),
        leading,
        scheme: Scheme::Heat(Heat::OffCpu),
        ..Default::default()
    }
}

/// How many threads a profile's stacks come from.
fn threads(profile: &Profile) -> u64 {
    let mut seen: Vec<_> = profile.stacks().iter().filter_map(|s| s.thread).collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len() as u64
}

/// The report's sections on the kernel fallbacks taken and on how user
/// stacks were walked.
fn unwinding_section(profile: &Profile) -> String {
    let mut text = String::new();
    if !profile.meta.kernel.is_empty() {
        text.push_str("\nKernel fallbacks\n");
        for line in &profile.meta.kernel {
            text.push_str(&format!("  {line}\n"));
        }
    }
    let Some(u) = &profile.meta.unwinding else {
        return text;
    };
    text.push_str("\nUser stacks\n");
    for line in u.lines() {
        text.push_str(&format!("  {line}\n"));
    }
    text
}

/// The off-CPU report: hotspots, then time per process and per thread split
/// by state.
fn offcpu_report(profile: &Profile, edges_note: &str, roots: Leading) -> String {
    let mut text = report::render(
        profile,
        &report::Options {
            kind: "off-CPU".into(),
            ..Default::default()
        },
    );
    text.push_str(edges_note);
    text.push_str(&unresolved::render(profile));
    text.push_str(&unwinding_section(profile));
    let processes = breakdown::Options {
        sites: 0,
        ..breakdown::Options::new(Leading::Process, Columns::OffCpu)
    };
    text.push_str(&breakdown::render(profile, &processes));
    if roots == Leading::ProcessAndThread {
        text.push_str(&breakdown::render(profile, &breakdown::Options::new(roots, Columns::OffCpu)));
    }
    text
}
