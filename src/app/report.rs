//! `fgbpf report INPUT`: the text (or JSON) report of a folded file or of a
//! capture directory's main view, printed to stdout.

use super::post::{kind_name, load, note_rounding, print};
use super::CliError;
use crate::cli::ReportArgs;
use crate::format::{input, sidecar};
use crate::format::{breakdown, folded::Leading, report, wakers};
use crate::profile::Kind;

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
    let profile = &loaded.profile;
    let text = if args.json {
        report::render_json(profile, &opts)
    } else {
        let mut text = report::render(profile, &opts);
        // Time split by state, as in a capture's report.txt; it needs the
        // thread frames of fgbpf's own files.
        if wakers::present(profile) {
            // An offwake file: its leaves are wakers, not where time went.
            text.push_str(&wakers::render(profile));
        } else if matches!(profile.meta.kind, Kind::OffCpu | Kind::Wall) && !profile.threads().is_empty() {
            let on_cpu = profile.meta.kind == Kind::Wall;
            let roots = match sidecar::process_roots(&path) {
                true => Leading::Process,
                false => Leading::ProcessAndThread,
            };
            text.push_str(&breakdown::render(profile, roots, on_cpu, 3));
        }
        text
    };
    note_rounding(&path, loaded.rounded);
    print(&text)
}
