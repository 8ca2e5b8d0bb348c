//! A capture directory's files: their names (each view in each format,
//! the slices beside a folded file, the timeline, the report), and one
//! view written in each format asked for, synced before it is named
//! ([`super::files::write_atomic`]). What the files say is the formats'
//! own and [`super::capture`]'s.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::files;
use super::folded::{self, Leading};
use super::{pprof, slices, speedscope, svg, timeline};
use crate::cli::Format;
use crate::profile::Profile;

/// The capture's heat map in time, of its main view.
pub const TIMELINE: &str = "timeline.html";

/// The output file names of a capture: each view in each format (with
/// its slices beside its folded file), the timeline and the report.
pub fn output_names(stems: &[&str], formats: &[Format]) -> Vec<String> {
    let mut names: Vec<String> = stems.iter().flat_map(|s| view_files(s, formats)).collect();
    if formats.contains(&Format::Folded) {
        names.extend(stems.iter().map(|s| format!("{s}.slices")));
    }
    names.push(TIMELINE.into());
    names.push("report.txt".into());
    names
}

/// The file names a view named `stem` is written to, by format.
pub fn view_files(stem: &str, formats: &[Format]) -> Vec<String> {
    formats
        .iter()
        .map(|f| match f {
            Format::Svg => format!("{stem}.svg"),
            Format::Folded => format!("{stem}.folded"),
            Format::Pprof => format!("{stem}.pb.gz"),
            Format::Speedscope => format!("{stem}.speedscope.json"),
        })
        .collect()
}

/// Writes one capture file at `path`, synced; the error names the file.
pub fn write_file(path: &Path, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
    files::write_atomic(path, files::Durability::Synced, f).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Writes one view in each of `formats`, and `report.txt` if given.
pub fn write_view(
    dir: &Path,
    stem: &str,
    profile: &Profile,
    formats: &[Format],
    svg_opts: &svg::Options,
    report_text: Option<&str>,
) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    let mut write = |name: String, f: &dyn Fn(&mut dyn Write) -> std::io::Result<()>| {
        let path = dir.join(name);
        write_file(&path, f)?;
        written.push(path);
        Ok::<(), String>(())
    };
    // The folded file keeps every thread frame, whatever the picture
    // merges: any reader can draw it either way (capture.json says which
    // the capture drew).
    let fopts = folded::Options {
        leading: Leading::ProcessAndThread,
    };
    // Labels are pprof's alone: the other views would list a stack once
    // per goroutine.
    let unlabelled = profile.has_labels().then(|| {
        let mut p = profile.clone();
        p.drop_labels();
        p
    });
    let pprof_profile = profile;
    let profile = unlabelled.as_ref().unwrap_or(profile);
    for (format, name) in formats.iter().zip(view_files(stem, formats)) {
        match format {
            Format::Svg => write(name, &|w| svg::write(profile, svg_opts, w))?,
            Format::Folded => {
                write(name, &|w| folded::write(profile, &fopts, w))?;
                // When each stack's weight fell, for --from/--to.
                write(format!("{stem}.slices"), &|w| slices::write(profile, w))?;
            }
            Format::Pprof => write(name, &|w| pprof::write(pprof_profile, w))?,
            Format::Speedscope => write(name, &|w| speedscope::write(profile, w))?,
        }
    }
    if let Some(text) = report_text {
        write("report.txt".to_string(), &|w| w.write_all(text.as_bytes()))?;
    }
    Ok(written)
}

/// Writes `timeline.html` of `main` into `dir`; gives its path and what
/// the page's caps left out.
pub fn write_timeline(dir: &Path, main: &Profile, opts: &timeline::Options) -> Result<(PathBuf, Option<timeline::Written>), String> {
    let path = dir.join(TIMELINE);
    let mut page = None;
    write_file(&path, |w| {
        page = Some(timeline::write(main, opts, w)?);
        Ok(())
    })?;
    Ok((path, page))
}
