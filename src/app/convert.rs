//! `fgbpf convert INPUT.folded -o OUT`: folded stacks to pprof or
//! speedscope, chosen by OUT's extension.

use std::path::Path;

use super::post::{check_output_file, load, load_range, note_rounding, write_file};
use super::CliError;
use crate::cli::{ConvertArgs, Target};
use crate::format::folded::{self, Leading};
use crate::format::{input, pprof, speedscope};

fn target(out: &Path) -> Result<Target, CliError> {
    let name = out.file_name().unwrap_or_default().to_string_lossy();
    if name.ends_with(".folded") {
        Ok(Target::Folded)
    } else if name.ends_with(".pb.gz") {
        Ok(Target::Pprof)
    } else if name.ends_with(".json") {
        Ok(Target::Speedscope)
    } else {
        Err(CliError::usage(format!(
            "cannot tell the format from the name {}: end it in .pb.gz (pprof), .speedscope.json (speedscope) or .folded, or pass --format",
            out.display()
        )))
    }
}

pub fn run(args: &ConvertArgs) -> Result<(), CliError> {
    let target = match args.format {
        Some(t) => t,
        None => target(&args.output)?,
    };
    check_output_file(&args.output)?;
    let loaded = match args.range.is_set() {
        true => load_range(&args.input, &args.range)?.0,
        false => {
            let path = input::main_folded(&args.input).map_err(CliError::usage)?;
            // Speedscope's time order needs when each stack fell: read
            // the capture's slices when they are there.
            let timed = crate::format::slices::beside(&path);
            match target == Target::Speedscope && timed.is_file() {
                true => load_range(&path, &Default::default())?.0,
                false => load(&path)?,
            }
        }
    };
    note_rounding(&args.input, loaded.rounded);
    let profile = &loaded.profile;
    match target {
        Target::Folded => write_file(&args.output, |w| {
            folded::write(profile, &folded::Options { leading: Leading::ProcessAndThread }, w)
        }),
        Target::Pprof => write_file(&args.output, |w| pprof::write(profile, w)),
        Target::Speedscope => write_file(&args.output, |w| speedscope::write(profile, w)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_follows_the_extension() {
        assert_eq!(target(Path::new("a/x.pb.gz")).unwrap(), Target::Pprof);
        assert_eq!(
            target(Path::new("x.speedscope.json")).unwrap(),
            Target::Speedscope
        );
        assert_eq!(target(Path::new("x.json")).unwrap(), Target::Speedscope);
        for bad in ["x.pb", "x.svg", "x", "pb.gz/"] {
            let e = target(Path::new(bad));
            assert!(e.is_err_and(|e| e.code == 2), "{bad}");
        }
    }
}
