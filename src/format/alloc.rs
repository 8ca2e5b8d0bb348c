//! `fgbpf alloc`'s files: the four heap views (`alloc_space`,
//! `alloc_objects`, `inuse_space`, `inuse_objects`) as folded files and
//! SVGs, one `alloc.pb.gz` with Go's four sample types, and the report,
//! whose first lines name the top allocating and the top retaining paths.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::folded::Leading;
use super::outputs::{view_files, write_file, write_view};
use super::palette::{Heat, Scheme};
use super::{pprof, report, svg};
use crate::analysis::waits::Sites;
use crate::analysis::Lens;
use crate::cli::Format;
use crate::profile::heap::{Heap, ALLOC_OBJECTS, ALLOC_SPACE, INUSE_OBJECTS, INUSE_SPACE, TYPES};
use crate::profile::{thousands, Frames, Profile};

/// The views' file stems, in [`TYPES`]' order.
pub const STEMS: [&str; 4] = ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"];

/// The pprof file, all four types in one.
pub const PPROF: &str = "alloc.pb.gz";

/// Every file an `alloc` capture writes with `formats`.
pub fn output_names(formats: &[Format]) -> Vec<String> {
    let plain: Vec<Format> = formats.iter().copied().filter(|f| *f != Format::Pprof).collect();
    let mut names: Vec<String> = STEMS.iter().flat_map(|s| view_files(s, &plain)).collect();
    if formats.contains(&Format::Pprof) {
        names.push(PPROF.into());
    }
    names.push("report.txt".into());
    names
}

/// Bytes for people: 1.5 GiB, 12.0 MiB, 512 KiB, 100 B.
pub fn bytes(n: u64) -> String {
    let f = n as f64;
    match n {
        _ if f >= (1u64 << 30) as f64 => format!("{:.2} GiB", f / (1u64 << 30) as f64),
        _ if f >= (1u64 << 20) as f64 => format!("{:.1} MiB", f / (1u64 << 20) as f64),
        _ if f >= 1024.0 => format!("{:.1} KiB", f / 1024.0),
        _ => format!("{n} B"),
    }
}

/// The heaviest path of a view, all threads together: its frames
/// (root first) and value.
fn top_path(heap: &Heap, which: usize) -> Option<(Frames, u64)> {
    let mut by: HashMap<&Frames, u64> = HashMap::new();
    for (s, v) in heap.profile.stacks().iter().zip(&heap.values) {
        *by.entry(&s.frames).or_default() += v[which];
    }
    by.into_iter().filter(|(_, w)| *w > 0).max_by_key(|(_, w)| *w).map(|(f, w)| (f.clone(), w))
}

/// A path's last frames, root-most first: "main > work > malloc".
fn path_words(p: &Profile, frames: &Frames) -> String {
    let names: Vec<String> = frames.iter().map(|&f| p.frame(f).to_string()).collect();
    let from = names.len().saturating_sub(8);
    let cut = if from > 0 { "... > " } else { "" };
    format!("{cut}{}", names[from..].join(" > "))
}

/// The report: the top paths, the totals, then the report of allocated
/// and of in-use bytes.
pub fn report_text(heap: &Heap, views: &[Profile]) -> String {
    let mut text = String::new();
    let share = |w: u64, of: u64| w as f64 * 100.0 / of.max(1) as f64;
    let (alloc, inuse) = (heap.total(ALLOC_SPACE), heap.total(INUSE_SPACE));
    match top_path(heap, ALLOC_SPACE) {
        Some((f, w)) => text.push_str(&format!(
            "Top allocating path: {:.1}% of the bytes allocated ({}): {}\n",
            share(w, alloc),
            bytes(w),
            path_words(&heap.profile, &f)
        )),
        None => text.push_str("Top allocating path: none (no allocation was sampled)\n"),
    }
    match top_path(heap, INUSE_SPACE) {
        Some((f, w)) => text.push_str(&format!(
            "Top retaining path: {:.1}% of the bytes still in use at the end ({}): {}\n",
            share(w, inuse),
            bytes(w),
            path_words(&heap.profile, &f)
        )),
        None => text.push_str("Top retaining path: none (every sampled allocation was freed)\n"),
    }
    let every = match heap.mean {
        1 => "every allocation recorded".to_string(),
        m => format!("estimated from allocations sampled once every {} on average", bytes(m)),
    };
    let in_use = if heap.go {
        "allocated in the window and not freed; a Go program's, its runtime's own account at its last GC"
    } else {
        "allocated in the window, not freed"
    };
    text.push_str(&format!(
        "Allocated: {} in {} objects; in use at the end ({in_use}): {} in {} objects ({every}).\n\n",
        bytes(alloc),
        thousands(heap.total(ALLOC_OBJECTS)),
        bytes(inuse),
        thousands(heap.total(INUSE_OBJECTS)),
    ));
    if heap.go_pages > 0 {
        text.push_str(&format!(
            "Left out: {} the C library's mmap gave the Go runtime (runtime.mmap through cgo): its heap's own pages, whose objects its heap profile counts.\n\n",
            bytes(heap.go_pages)
        ));
    }
    for (which, title) in [(ALLOC_SPACE, "allocated bytes"), (INUSE_SPACE, "in-use bytes at the end")] {
        let p = &views[which];
        if p.total() == 0 {
            continue;
        }
        text.push_str(&format!("=== {title} ===\n"));
        let sites = Sites::learn(p, Lens::default());
        let opts = report::Options { kind: title.into(), ..Default::default() };
        let r = report::render_with(p, &opts, &sites, None);
        text.push_str(&r.replace("of CPU time", "of the bytes").replace(" samples", " bytes"));
        text.push('\n');
    }
    text
}

fn svg_options(p: &Profile, which: usize, started_at: &str, leading: Leading) -> svg::Options {
    let (name, unit) = TYPES[which];
    let what = match which {
        ALLOC_OBJECTS => "objects allocated",
        ALLOC_SPACE => "bytes allocated",
        INUSE_OBJECTS => "objects still in use at the end",
        _ => "bytes still in use at the end",
    };
    let amount = if unit == "bytes" { bytes(p.total()) } else { thousands(p.total()) };
    svg::Options {
        title: format!("Allocation flame graph ({name}): {}", p.meta.target),
        subtitle: Some(format!(
            "{what}: {amount} over {:.1} s from {started_at}, estimated from sampled allocations; each stack ends in the allocating function",
            p.meta.duration.as_secs_f64()
        )),
        leading,
        scheme: Scheme::Heat(Heat::OnCpu),
        ..Default::default()
    }
}

/// Writes every file of an `alloc` capture from its raw counts `raw`
/// sampled at `mean` bytes; returns the files and the `inuse_space`
/// view... with `alloc_space`'s as the main one (the summary's).
pub fn write(
    dir: &Path,
    raw: &Profile,
    mean: u64,
    formats: &[Format],
    started_at: &str,
    leading: Leading,
) -> Result<(Vec<PathBuf>, Heap, Vec<Profile>), String> {
    let heap = Heap::build(raw, mean);
    let views: Vec<Profile> = (0..4).map(|i| heap.view(i)).collect();
    let plain: Vec<Format> = formats.iter().copied().filter(|f| *f != Format::Pprof).collect();
    let mut written = Vec::new();
    let text = report_text(&heap, &views);
    for (i, p) in views.iter().enumerate() {
        let report = (i == ALLOC_SPACE).then_some(text.as_str());
        written.extend(write_view(dir, STEMS[i], p, &plain, &svg_options(p, i, started_at, leading), report)?);
    }
    if formats.contains(&Format::Pprof) {
        let path = dir.join(PPROF);
        write_file(&path, |w| pprof::write_heap(&heap, w))?;
        written.push(path);
    }
    Ok((written, heap, views))
}
