//! `fgbpf diff BEFORE AFTER -o DIR`: what changed between two profiles of
//! the same workload, as two differential flamegraphs and a list of the
//! functions whose share moved (see [`crate::format::diff`]); with
//! `--fail-above PCT`, a CI gate that exits 1 on a regression and 2 when
//! the two cannot be compared.

use std::path::Path;

use super::post::{file_name, kind_name, load, note_rounding, print, write_file};
use super::CliError;
use crate::cli::DiffArgs;
use crate::format::diff::{render_changes, render_json, write_svg, Side, SvgOptions, Widths};
use crate::format::{files, input};
use crate::analysis::{changes, Change};
use crate::profile::names::sanitize;
use crate::profile::{Kind, Profile, Unit};

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

/// What kind of profile a file holds, in words, when it is known.
fn kind_words(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Other => None,
        k => Some(kind_name(k)),
    }
}

/// Refuses (exit 2) two profiles whose shares cannot be compared.
fn comparable(b: (&Path, &Profile), a: (&Path, &Profile)) -> Result<(), CliError> {
    if b.1.unit != a.1.unit {
        return Err(CliError::usage(format!(
            "{} counts {} but {} counts {}: compare profiles of the same kind",
            b.0.display(),
            unit_words(b.1.unit),
            a.0.display(),
            unit_words(a.1.unit)
        )));
    }
    if let (Some(kb), Some(ka)) = (kind_words(b.1.meta.kind), kind_words(a.1.meta.kind)) {
        if kb != ka {
            return Err(CliError::usage(format!(
                "{} is a {kb} profile but {} is a {ka} profile: compare profiles of the same kind",
                b.0.display(),
                a.0.display()
            )));
        }
    }
    for (path, p) in [b, a] {
        if p.total() == 0 {
            return Err(CliError::usage(format!(
                "{} has no samples: there is nothing to compare",
                path.display()
            )));
        }
    }
    Ok(())
}

/// The functions whose total or self share grew by more than `limit`.
fn grown(before: &Profile, after: &Profile, limit: f64) -> Vec<Change> {
    changes(before, after, limit)
        .into_iter()
        .filter(|c| c.total.1 - c.total.0 > limit || c.self_.1 - c.self_.0 > limit)
        .collect()
}

pub fn run(args: &DiffArgs) -> Result<(), CliError> {
    if args.output.is_none() && args.fail_above.is_none() && !args.json {
        return Err(CliError::usage(
            "say what to write: -o DIR for the flamegraphs and regressions.txt, --fail-above PCT for a CI gate, or --json",
        ));
    }
    let before_path = input::main_folded(&args.before).map_err(CliError::usage)?;
    let after_path = input::main_folded(&args.after).map_err(CliError::usage)?;
    let before_file = load(&before_path)?;
    let after_file = load(&after_path)?;
    let (before, after) = (&before_file.profile, &after_file.profile);
    comparable((&before_path, before), (&after_path, after))?;
    let b = file_name(&before_path);
    let a = file_name(&after_path);
    // Two inputs with the same file name (run1/oncpu.folded, run2/...)
    // would be indistinguishable in titles.
    let (b, a) = if a == b {
        (
            before_path.display().to_string(),
            after_path.display().to_string(),
        )
    } else {
        (b, a)
    };
    let moved = changes(before, after, args.threshold);
    let regressions = args
        .fail_above
        .map(|limit| grown(before, after, limit))
        .unwrap_or_default();
    if let Some(dir) = &args.output {
        let after_svg = render_svg((&b, before), (&a, after), args.normalize, Widths::After)?;
        let before_svg = render_svg((&b, before), (&a, after), args.normalize, Widths::Before)?;
        let text = render_changes((&b, before), (&a, after), args.threshold, &moved);
        files::prepare_dir(files::OutDir::Given(dir), &OUTPUTS).map_err(CliError::usage)?;
        let out = |name: &str| Path::new(dir).join(name);
        write_file(&out(OUTPUTS[0]), |w| w.write_all(&after_svg))?;
        write_file(&out(OUTPUTS[1]), |w| w.write_all(&before_svg))?;
        write_file(&out(OUTPUTS[2]), |w| w.write_all(text.as_bytes()))?;
    }
    note_rounding(&before_path, before_file.rounded);
    note_rounding(&after_path, after_file.rounded);
    if args.json {
        let side = |name, profile| Side { name, profile };
        print(&render_json(
            side(&b, before),
            side(&a, after),
            args.threshold,
            args.fail_above,
            &moved,
            &regressions,
        ))?;
    }
    match args.fail_above {
        Some(limit) if !regressions.is_empty() => {
            for c in &regressions {
                eprintln!(
                    "fgbpf: grew {:+.1} points: {} (total {:.1}% -> {:.1}%, self {:.1}% -> {:.1}%)",
                    c.points(),
                    sanitize(&c.name),
                    c.total.0,
                    c.total.1,
                    c.self_.0,
                    c.self_.1
                );
            }
            Err(CliError::verdict(format!(
                "{} function{} grew by more than {limit:.1} points of the total (--fail-above {limit})",
                regressions.len(),
                if regressions.len() == 1 { "" } else { "s" }
            )))
        }
        _ => Ok(()),
    }
}
