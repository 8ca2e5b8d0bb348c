//! The words a capture directory says of its views: `report.txt`'s text
//! for an on-CPU, off-CPU or wall-clock capture (hotspots, the off-CPU
//! edges, unresolved frames, how stacks were walked, time by process and
//! thread, wakers and goroutines), each view's SVG title and subtitle, and
//! the timeline page's. Built from the profiles alone; writing them is
//! [`super::outputs`]'s.

use std::time::Duration;

use super::breakdown::{self, Columns};
use super::folded::Leading;
use super::palette::{Heat, Scheme};
use super::{report, svg, timeline, unresolved};
use crate::analysis::waits::Sites;
use crate::analysis::Lens;
use crate::profile::{thousands, Kind, Profile};

/// The off-CPU edges' lines as the report says them: each after a blank
/// line.
pub fn edges_note(lines: &[String]) -> String {
    lines.iter().map(|l| format!("\n{l}\n")).collect()
}

/// The report of a wall-clock capture (`wake`: its offwake view, whose
/// wakers the findings name): its hotspots, the off-CPU edges,
/// then time per `leading` root split on and off CPU; `tail` (wakers,
/// goroutines) last.
pub fn wall_report(wall: &Profile, wake: Option<&Profile>, edges_note: &str, leading: Leading, tail: &str) -> String {
    let sites = Sites::learn(wall, Lens::default());
    let mut text = report::render_with(wall, &report::Options { kind: "wall-clock".into(), ..Default::default() }, &sites, wake);
    text.push_str(edges_note);
    text.push_str(&unresolved::render(wall));
    text.push_str(&unwinding_section(wall));
    text.push_str(&breakdown::render_with(wall, &breakdown::Options::new(leading, Columns::Both), &sites));
    text.push_str(tail);
    text
}

/// The report of an on-CPU capture; `tail` (wakers, goroutines) last.
pub fn oncpu_report(on: &Profile, wake: Option<&Profile>, roots: Leading, tail: &str) -> String {
    let sites = Sites::learn(on, Lens::default());
    report::render_with(on, &report::Options::default(), &sites, wake)
        + &unresolved::render(on)
        + &unwinding_section(on)
        + &breakdown::render_with(on, &breakdown::Options::new(roots, Columns::OnCpu), &sites)
        + tail
}

/// `fgbpf events`' report: the on-CPU report's sections, worded for hits
/// of events, with a table of hits by event where the on-CPU report has
/// its cgroups.
pub fn events_report(on: &Profile, roots: Leading) -> String {
    let sites = Sites::learn(on, Lens::default());
    let opts = report::Options { kind: "event count".into(), ..Default::default() };
    let text = report::render_with(on, &opts, &sites, None)
        + &unresolved::render(on)
        + &unwinding_section(on)
        + &breakdown::render_with(on, &breakdown::Options::new(roots, Columns::OnCpu), &sites);
    text.replacen("\nBy cgroup (", "\nBy event (", 1).replace("of CPU time", "of the hits").replace(" samples", " hits")
}

/// The off-CPU report: hotspots, then time per process and per thread split
/// by state; `tail` (wakers, goroutines) last.
pub fn offcpu_report(profile: &Profile, wake: Option<&Profile>, edges_note: &str, roots: Leading, tail: &str) -> String {
    let sites = Sites::learn(profile, Lens::default());
    let mut text = report::render_with(
        profile,
        &report::Options {
            kind: "off-CPU".into(),
            ..Default::default()
        },
        &sites,
        wake,
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
        text.push_str(&breakdown::render_with(profile, &breakdown::Options::new(roots, Columns::OffCpu), &sites));
    }
    text.push_str(tail);
    text
}

/// The report's sections on the kernel fallbacks taken, on where names
/// came from beyond the binaries (debuginfod), and on how user stacks were
/// walked.
fn unwinding_section(profile: &Profile) -> String {
    let mut text = String::new();
    if !profile.meta.symbols.is_empty() {
        text.push_str("\nSymbols fetched\n");
        for line in &profile.meta.symbols {
            text.push_str(&format!("  {line}\n"));
        }
    }
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

/// The wall-clock view's picture: `duration` long, its on-CPU time shared
/// by samples at `frequency`.
pub fn wall_svg(target: &str, duration: Duration, frequency: u64, started_at: &str, leading: Leading) -> svg::Options {
    svg::Options {
        title: format!("Wall-clock flame graph: {}{}", target, roots_words(leading)),
        subtitle: Some(format!(
            "{:.1} s from {started_at}, in us: each thread's on-CPU time as the scheduler measured it, shared among its stacks by {} Hz samples; each box warm if mostly on CPU (red user, orange kernel), blue if mostly waiting",
            duration.as_secs_f64(),
            frequency
        )),
        leading,
        scheme: Scheme::Majority,
        ..Default::default()
    }
}

pub fn oncpu_svg(profile: &Profile, started_at: &str, leading: Leading) -> svg::Options {
    let subtitle = format!(
        "on-CPU samples: {} at {} Hz over {:.1} s, from {started_at}; user code red, kernel orange (search _[k]), inlined aqua (_[i]), JIT green",
        profile.total(),
        profile.meta.frequency.unwrap_or(0),
        profile.meta.duration.as_secs_f64()
    );
    heat_svg(format!("CPU flame graph: {}", profile.meta.target), subtitle, leading, Heat::OnCpu)
}

pub fn events_svg(profile: &Profile, started_at: &str, leading: Leading) -> svg::Options {
    let subtitle = format!(
        "hits of events: {} over {:.1} s from {started_at}, one root frame per event; user code red, kernel orange (search _[k]), inlined aqua (_[i]), JIT green",
        profile.total(),
        profile.meta.duration.as_secs_f64()
    );
    heat_svg(format!("Event flame graph: {}", profile.meta.target), subtitle, leading, Heat::OnCpu)
}

pub fn offcpu_svg(profile: &Profile, started_at: &str, leading: Leading) -> svg::Options {
    let subtitle = format!(
        "off-CPU time in us: {:.1} thread-seconds blocked across {} threads over {:.1} s from {started_at}; stacks end in the wait state",
        profile.total() as f64 / 1e6,
        thousands(threads(profile)),
        profile.meta.duration.as_secs_f64(),
    );
    heat_svg(format!("Off-CPU flame graph: {}", profile.meta.target), subtitle, leading, Heat::OffCpu)
}

pub fn goroutines_svg(profile: &Profile, started_at: &str) -> svg::Options {
    let subtitle = format!(
        "goroutine time in us over {:.1} s from {started_at}, read from outside every 100 ms or more: each goroutine's stack where it parked, ending in its state or Go's wait reason",
        profile.meta.duration.as_secs_f64(),
    );
    heat_svg(format!("Goroutines: {}", profile.meta.target), subtitle, Leading::ProcessAndThread, Heat::OffCpu)
}

pub fn offwake_svg(profile: &Profile, started_at: &str, leading: Leading) -> svg::Options {
    let subtitle = format!(
        "off-CPU time in us over {:.1} s from {started_at}, by waker. Below `--`: the blocked stack; above it (purple): the waker's stack from its leaf up to its thread name",
        profile.meta.duration.as_secs_f64(),
    );
    heat_svg(format!("Off-wake flame graph: {}", profile.meta.target), subtitle, leading, Heat::OffCpu)
}

/// What a title says of its picture's root frames: only that they are
/// programs, which a reader who knows fgbpf's per-thread roots would not
/// expect (a subtitle is too long already to be read whole).
pub fn roots_words(leading: Leading) -> &'static str {
    match leading {
        Leading::Program => ", by program",
        _ => "",
    }
}

/// A picture coloured by one side's heat.
fn heat_svg(title: String, subtitle: String, leading: Leading, heat: Heat) -> svg::Options {
    svg::Options {
        title: title + roots_words(leading),
        subtitle: Some(subtitle),
        leading,
        scheme: Scheme::Heat(heat),
        ..Default::default()
    }
}

/// The timeline page of a capture's main view, its flamegraph standing on
/// `roots` as the capture's SVGs do.
pub fn timeline_options(main: &Profile, target: &str, started_at: &str, roots: Leading) -> timeline::Options {
    timeline::Options {
        roots,
        title: format!("Timeline: {target}"),
        subtitle: Some(format!("{:.1} s from {started_at}", main.meta.duration.as_secs_f64())),
        heat: match main.meta.kind {
            Kind::OffCpu => Heat::OffCpu,
            _ => Heat::OnCpu,
        },
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
