//! The one recorder behind `oncpu`, `offcpu` and `wall`: a capture is one
//! probe with the programs its views need, and each view is a profile
//! built from what the probe recorded. The subcommands only check their
//! arguments into a [`Recording`]; this wires the stages: the capture
//! ([`capture`]), the views named ([`Views`]), and the files written by
//! [`crate::format`] (what they say is [`crate::format::capture`]'s).

use std::path::{Path, PathBuf};

use super::capture::{capture, Finished};
use super::recording::{CaptureKind, Recording, Roots};
use super::stages;
use super::summary::{finish, Outcome};
use super::views::Views;
use super::CliError;
use crate::cli::Format;
use crate::format::capture::{self as words, edges_note};
use crate::format::folded::Leading;
use crate::format::outputs::{write_file, write_timeline, write_view, TIMELINE};
use crate::format::sidecar::{self, Sidecar};
use crate::format::wakers;
use crate::profile::{merge, Profile};

/// Records, then writes every view the recording asks for.
pub fn run(rec: Recording<'_>) -> Result<Outcome, CliError> {
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
        stream,
    } = capture(&rec)?;
    let recorded = recorder.finish();
    if !recorded.events.is_empty() {
        super::summary::say(format_args!("{}", crate::probe::points::summary_line(&recorded.events)));
    }
    if let Some(a) = &recorded.alloc {
        super::summary::say(format_args!("{}", a.summary_line()));
    }
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
    let (written, main, wake) = write(&rec, views, &out_dir, &prepared.target, whole_system, (&started_at, Some(started)))?;
    stages::mark("written");
    if let Some(s) = stream {
        s.close();
    }
    Ok(finish(&main, wake.as_ref(), &edges, written, held, end, command_status, rec.capture.json))
}

/// Writes the recording's views, timeline, reports and sidecar into `dir`;
/// returns the files written, the main view (the wall-clock one of a
/// wall capture) and the offwake view (`--wakers`). Each view is dropped once written, and the wall view
/// takes the off-CPU view's stacks: a large capture's end holds each
/// stack as few times as it can.
pub fn write(
    rec: &Recording<'_>,
    mut views: Views,
    dir: &Path,
    target: &str,
    whole_system: bool,
    (started_at, started): (&str, Option<std::time::SystemTime>),
) -> Result<(Vec<PathBuf>, Profile, Option<Profile>), CliError> {
    // --otlp: the views are sent as they are written, in one export
    // (streamed instead with --otlp-interval).
    let otlp = rec.otlp.as_ref().filter(|t| t.interval.is_none());
    let mut export = otlp.map(|_| crate::format::otlp::Request::new());
    let start_ns = |p: &Profile| {
        let at = started.unwrap_or_else(|| std::time::SystemTime::now() - p.meta.duration);
        at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    };
    let formats = &rec.capture.formats;
    let view = |stem: &str, p: &Profile, svg: &crate::format::svg::Options, text: Option<&str>| {
        write_view(dir, stem, p, formats, svg, text).map_err(CliError::failed)
    };
    // A whole host has hundreds of threads and processes: its pictures
    // have one root per program, its on- and off-CPU tables one row per
    // process.
    let roots = Roots::of(rec.roots, whole_system);
    let (drawn, thread_roots, wall_roots) = (roots.drawn, roots.side, roots.wall);
    let edges_note = edges_note(&views.edges.lines());
    let mut written = Vec::new();
    // What capture.json says of each folded file: the views' kinds.
    let mut side = Sidecar::default();
    // `fgbpf events` writes its counts as the on-CPU view, named so.
    let on_stem = if rec.kind == CaptureKind::Events { "events" } else { "oncpu" };
    for (stem, p) in [(on_stem, views.on.as_ref()), ("offcpu", views.off.as_ref()), ("offwake", views.wake.as_ref())] {
        if let Some(p) = p.filter(|_| rec.stems().contains(&stem)) {
            side.add(&format!("{stem}.folded"), p, thread_roots == Leading::Process, drawn);
        }
    }
    let mut waker_text = views.wake.as_ref().map(wakers::render).unwrap_or_default();
    // The report's goroutine section comes last, as the wakers' do.
    waker_text.push_str(&views.goroutines_text);
    if let Some(g) = views.goroutines.take() {
        written.extend(view("goroutines", &g, &words::goroutines_svg(&g, started_at), None)?);
        side.add("goroutines.folded", &g, false, Leading::ProcessAndThread);
    }
    // Kept to the end: the findings say who woke their waits.
    let wake = views.wake.take();
    if let Some(wake) = &wake {
        written.extend(view("offwake", wake, &words::offwake_svg(wake, started_at, drawn), None)?);
    }
    if let (CaptureKind::Alloc, Some(raw)) = (rec.kind, views.on.as_ref()) {
        let mean = rec.probe.alloc.as_ref().map_or(1, |a| a.mean);
        let (files, heap, mut heap_views) =
            crate::format::alloc::write(dir, raw, mean, formats, started_at, drawn).map_err(CliError::failed)?;
        if heap.go_pages > 0 {
            super::summary::say(format_args!(
                "alloc: {} bytes (estimated) the C library's mmap gave the Go runtime left out: its heap's own pages (runtime.mmap through cgo), whose objects its heap profile counts",
                heap.go_pages
            ));
        }
        written.extend(files);
        for (stem, p) in crate::format::alloc::STEMS.iter().zip(&heap_views) {
            side.add(&format!("{stem}.folded"), p, thread_roots == Leading::Process, drawn);
        }
        if formats.contains(&Format::Folded) {
            let path = dir.join(sidecar::FILE);
            write_file(&path, |w| side.write(w)).map_err(CliError::failed)?;
            written.push(path);
        }
        if let (Some(target), Some(mut export)) = (otlp, export) {
            export.add_heap(&heap_views, mean, start_ns(&heap_views[0]));
            super::otlp::send(target, export);
            stages::mark("OTLP sent");
        }
        let main = heap_views.swap_remove(crate::profile::heap::ALLOC_SPACE);
        return Ok((written, main, None));
    }
    let main = match (views.on.take(), views.off.take()) {
        (Some(on), Some(mut off)) => {
            written.extend(view("oncpu", &on, &words::oncpu_svg(&on, started_at, drawn), None)?);
            stages::mark("on-CPU view written");
            written.extend(view("offcpu", &off, &words::offcpu_svg(&off, started_at, drawn), None)?);
            stages::mark("off-CPU view written");
            if let Some(e) = export.as_mut() {
                e.add(&on, start_ns(&on));
                e.add(&off, start_ns(&off));
            }
            let mut wall = merge::wall(&on, &mut off, std::mem::take(&mut views.runs));
            let frequency = on.meta.frequency.unwrap_or(1);
            let duration = on.meta.duration;
            drop((on, off));
            stages::mark("wall view merged");
            wall.meta.losses = views.losses(true, true);
            let text = words::wall_report(&wall, wake.as_ref(), &edges_note, wall_roots, &waker_text);
            let svg = words::wall_svg(target, duration, frequency, started_at, drawn);
            written.extend(view("wall", &wall, &svg, Some(&text))?);
            stages::mark("wall view written");
            if let Some(e) = export.as_mut() {
                e.add(&wall, start_ns(&wall));
            }
            wall
        }
        (Some(mut on), None) if rec.kind == CaptureKind::Events => {
            // Hits are no time: pprof says counts only, the report no rate.
            on.meta.frequency = None;
            let text = words::events_report(&on, thread_roots);
            written.extend(view(on_stem, &on, &words::events_svg(&on, started_at, drawn), Some(&text))?);
            if let Some(e) = export.as_mut() {
                e.add(&on, start_ns(&on));
            }
            on
        }
        (Some(on), None) => {
            let text = words::oncpu_report(&on, wake.as_ref(), thread_roots, &waker_text);
            written.extend(view(on_stem, &on, &words::oncpu_svg(&on, started_at, drawn), Some(&text))?);
            if let Some(e) = export.as_mut() {
                e.add(&on, start_ns(&on));
            }
            on
        }
        (None, Some(off)) => {
            let text = words::offcpu_report(&off, wake.as_ref(), &edges_note, thread_roots, &waker_text);
            written.extend(view("offcpu", &off, &words::offcpu_svg(&off, started_at, drawn), Some(&text))?);
            if let Some(e) = export.as_mut() {
                e.add(&off, start_ns(&off));
            }
            off
        }
        (None, None) => unreachable!("every recording has a view"),
    };
    written.push(timeline(dir, &main, target, started_at, drawn)?);
    stages::mark("timeline written");
    if let (Some(target), Some(export)) = (otlp, export) {
        super::otlp::send(target, export);
        stages::mark("OTLP sent");
    }
    if formats.contains(&Format::Folded) {
        if rec.kind == CaptureKind::Wall {
            side.add("wall.folded", &main, wall_roots == Leading::Process, drawn);
        }
        let path = dir.join(sidecar::FILE);
        write_file(&path, |w| side.write(w)).map_err(CliError::failed)?;
        written.push(path);
    }
    Ok((written, main, wake))
}

/// Writes `timeline.html` of `main` and says what its cap left out.
fn timeline(dir: &Path, main: &Profile, target: &str, started_at: &str, roots: Leading) -> Result<PathBuf, CliError> {
    let opts = words::timeline_options(main, target, started_at, roots);
    let (path, page) = write_timeline(dir, main, &opts).map_err(CliError::failed)?;
    if let Some(p) = page.filter(|p| p.left_out_stacks > 0) {
        super::summary::say(format_args!(
            "{TIMELINE}: the {} lightest stacks ({:.2}% of the weight) are left out of the page to keep it small; the .folded and .slices files have them all",
            p.left_out_stacks,
            p.left_out_weight as f64 * 100.0 / p.total_weight.max(1) as f64
        ));
    }
    Ok(path)
}
