//! `fgbpf report INPUT`: the text (or JSON) report of a folded file or of a
//! capture directory's main view, printed to stdout.

use super::post::{kind_name, load, note_rounding, print};
use super::CliError;
use crate::cli::ReportArgs;
use crate::input;
use crate::output::report;

pub fn run(args: &ReportArgs) -> Result<(), CliError> {
    let path = input::main_folded(&args.input).map_err(CliError::usage)?;
    let loaded = load(&path)?;
    let top = usize::try_from(args.top).unwrap_or(usize::MAX);
    let opts = report::Options {
        kind: kind_name(loaded.profile.meta.kind).into(),
        top,
        callees_of: top,
        source: Some(path.display().to_string()),
    };
    let text = if args.json {
        report::render_json(&loaded.profile, &opts)
    } else {
        report::render(&loaded.profile, &opts)
    };
    note_rounding(&path, &loaded);
    print(&text)
}
