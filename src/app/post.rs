//! Steps shared by the commands that work on profiles after capture
//! (`report`, `flamegraph`, `diff`, `convert`): reading folded files and
//! writing outputs, so that bad input fails with one line, exit code 2 and
//! nothing written.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::CliError;
use crate::cli::RangeArgs;
use crate::format::slices;
use crate::format::folded::read::{self as folded, Loaded};
use crate::format::input;
use crate::format::{
    files,
    palette::{Heat, Scheme},
};
use crate::profile::Kind;

/// Reads and checks a folded file; a file that cannot be read or parsed is
/// bad input.
pub fn load(path: &Path) -> Result<Loaded, CliError> {
    folded::from_bytes(path, &read(path)?).map_err(CliError::usage)
}

/// The profile of `path` (a capture directory, a `.folded` or a `.slices`
/// file) for the seconds `range` names, from the `.slices` file beside the
/// view's folded file; returns it and the folded file it stands for.
pub fn load_range(path: &Path, range: &RangeArgs) -> Result<(Loaded, PathBuf), CliError> {
    let (loaded, folded) = load_range_of(path, range)?;
    if loaded.profile.stacks().is_empty() {
        return Err(CliError::usage(format!(
            "nothing was recorded from {} s to {} in {}",
            range.from.unwrap_or(0.0),
            range.to.map_or("the end".into(), |t| format!("{t} s")),
            slices::beside(&folded).display()
        )));
    }
    Ok((loaded, folded))
}

/// [`load_range`], empty when nothing fell in the range.
pub fn load_range_of(path: &Path, range: &RangeArgs) -> Result<(Loaded, PathBuf), CliError> {
    let folded = match path.extension().is_some_and(|e| e == "slices") {
        true => path.with_extension("folded"),
        false => input::main_folded(path).map_err(CliError::usage)?,
    };
    if let (Some(from), Some(to)) = (range.from, range.to) {
        if from >= to {
            return Err(CliError::usage(format!("--from {from} is not before --to {to}")));
        }
    }
    let source = slices::beside(&folded);
    if !source.is_file() {
        return Err(CliError::usage(format!(
            "--from/--to need {}, which fgbpf writes beside {} (captures with the folded format); it is not there",
            source.display(),
            folded.display()
        )));
    }
    let mut loaded = slices::read(&source, &folded).map_err(CliError::usage)?;
    let p = &mut loaded.profile;
    let length = p.meta.duration.as_secs_f64();
    let from = range.from.unwrap_or(0.0);
    if from >= length {
        return Err(CliError::usage(format!(
            "--from {from} is past the end of the capture ({length:.1} s of {})",
            source.display()
        )));
    }
    let (first, end) = p.slices_for(from, range.to);
    p.keep_slices(first, end);
    Ok((loaded, folded))
}

/// Words for a range in titles: "from 1.5 s to 3 s".
pub fn range_words(range: &RangeArgs) -> String {
    match (range.from, range.to) {
        (Some(f), Some(t)) => format!("from {f} s to {t} s"),
        (Some(f), None) => format!("from {f} s to the end"),
        (None, Some(t)) => format!("from the start to {t} s"),
        (None, None) => "the whole capture".into(),
    }
}

/// The bytes of an input file; one that cannot be read is bad input.
pub fn read(path: &Path) -> Result<input::Bytes, CliError> {
    if path.is_dir() {
        return Err(CliError::usage(format!(
            "{} is a directory; pass a .folded file",
            path.display()
        )));
    }
    input::read(path).map_err(CliError::usage)
}

/// Says that counts were rounded; called once the command cannot fail on
/// bad input any more, so that an error stays the only line.
pub fn note_rounding(path: &Path, rounded: usize) {
    if rounded > 0 {
        let lines = if rounded == 1 { "line" } else { "lines" };
        eprintln!(
            "fgbpf: {}: rounded the fractional counts of {} {lines} to whole numbers",
            path.display(),
            rounded
        );
    }
}

/// Refuses, before any work, an output file that could not be written.
pub fn check_output_file(path: &Path) -> Result<(), CliError> {
    if path.is_dir() {
        return Err(CliError::usage(format!(
            "output path {} is a directory; pass a file name",
            path.display()
        )));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(CliError::usage(format!(
            "cannot write {}: directory {} does not exist",
            path.display(),
            parent.display()
        )));
    }
    // Prove it can be written before any work (an unnamed file: nothing
    // is left behind).
    tempfile::tempfile_in(parent).map_err(|e| {
        CliError::usage(format!(
            "cannot write {}: {e}; pick a writable directory",
            path.display()
        ))
    })?;
    Ok(())
}

/// Writes a whole file or nothing.
pub fn write_file(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), CliError> {
    files::write_atomic(path, files::Durability::Renamed, write)
        .map_err(|e| CliError::failed(format!("writing {}: {e}", path.display())))?;
    super::summary::say(format_args!("wrote {}", path.display()));
    Ok(())
}

/// Prints to stdout; a reader that went away (`| head`) is not an error.
pub fn print(text: &str) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(CliError::failed(format!("writing to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

/// The words reports and titles use for a kind of profile.
pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::OnCpu => "on-CPU",
        Kind::OffCpu => "off-CPU",
        Kind::Wall => "wall-clock",
        Kind::Other => "folded",
        Kind::Alloc => "allocation",
    }
}

/// Files are coloured like at capture time: off-CPU cool, wall-clock by
/// each frame's majority (its state frames tell waiting from running).
pub fn scheme(kind: Kind) -> Scheme {
    match kind {
        Kind::OffCpu => Scheme::Heat(Heat::OffCpu),
        Kind::Wall => Scheme::Majority,
        _ => Scheme::Heat(Heat::OnCpu),
    }
}

/// The name of an input in titles: the file name, not the path, so the
/// same file renders the same from any directory.
pub fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}
