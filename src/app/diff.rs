//! `fgbpf diff BEFORE.folded AFTER.folded -o DIR`: what changed between two
//! profiles of the same workload, as two differential flamegraphs and a
//! list of the functions whose share moved (see [`crate::format::diff`]).

use std::path::Path;

use super::post::{file_name, load, note_rounding, write_file};
use super::CliError;
use crate::cli::DiffArgs;
use crate::format::diff::{render_changes, write_svg, SvgOptions, Widths};
use crate::profile::analysis::changes;
use crate::format::files;
use crate::profile::{Profile, Unit};

/// The files `diff` writes into its directory.
pub const OUTPUTS: [&str; 3] = ["diff.svg", "diff-before.svg", "regressions.txt"];

fn render_svg(
    before: (&str, &Profile),
    after: (&str, &Profile),
    normalize: bool,
    widths: Widths,
) -> Result<Vec<u8>, CliError> {
    let unit = after.1.unit.name();
    let (drawn, other) = match widths {
        Widths::After => (after, before),
        Widths::Before => (before, after),
    };
    let mut subtitle = format!(
        "widths: {} ({} {unit}); red: grew, blue: shrank",
        drawn.0,
        drawn.1.total()
    );
    if widths == Widths::Before {
        subtitle.push_str("; paths that vanished are visible here");
    }
    if normalize {
        subtitle.push_str(&format!("; {} scaled to the same total", other.0));
    }
    let opts = SvgOptions {
        title: format!("Differential flame graph: {} -> {}", before.0, after.0),
        subtitle: Some(subtitle),
        normalize,
        widths,
    };
    let mut out = Vec::new();
    write_svg(before.1, after.1, &opts, &mut out).map_err(|e| CliError::failed(e.to_string()))?;
    Ok(out)
}

fn unit_words(unit: Unit) -> &'static str {
    match unit {
        Unit::Samples => "samples",
        Unit::Microseconds => "microseconds",
    }
}

pub fn run(args: &DiffArgs) -> Result<(), CliError> {
    let before_file = load(&args.before)?;
    let after_file = load(&args.after)?;
    let (before, after) = (&before_file.profile, &after_file.profile);
    if before.unit != after.unit {
        return Err(CliError::usage(format!(
            "{} counts {} but {} counts {}: compare profiles of the same kind",
            args.before.display(),
            unit_words(before.unit),
            args.after.display(),
            unit_words(after.unit)
        )));
    }
    let b = file_name(&args.before);
    let a = file_name(&args.after);
    // Two inputs with the same file name (run1/oncpu.folded, run2/...)
    // would be indistinguishable in titles.
    let (b, a) = if a == b {
        (
            args.before.display().to_string(),
            args.after.display().to_string(),
        )
    } else {
        (b, a)
    };
    let after_svg = render_svg((&b, before), (&a, after), args.normalize, Widths::After)?;
    let before_svg = render_svg((&b, before), (&a, after), args.normalize, Widths::Before)?;
    let moved = changes(before, after, args.threshold);
    let text = render_changes((&b, before), (&a, after), args.threshold, &moved);
    files::prepare_dir(files::OutDir::Given(&args.output), &OUTPUTS).map_err(CliError::usage)?;
    note_rounding(&args.before, before_file.rounded);
    note_rounding(&args.after, after_file.rounded);
    let out = |name: &str| Path::new(&args.output).join(name);
    write_file(&out(OUTPUTS[0]), |w| w.write_all(&after_svg))?;
    write_file(&out(OUTPUTS[1]), |w| w.write_all(&before_svg))?;
    write_file(&out(OUTPUTS[2]), |w| w.write_all(text.as_bytes()))?;
    Ok(())
}
