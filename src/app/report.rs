//! `fgbpf report INPUT`: the text (or JSON) report of a folded file or of a
//! capture directory's main view, printed to stdout.

use super::post::{kind_name, load, load_range, load_range_of, note_rounding, print, range_words};
use super::CliError;
use crate::cli::ReportArgs;
use crate::analysis::waits::Sites;
use crate::format::breakdown::{self, Columns};
use crate::format::{folded::Leading, input, report, sidecar, wakers};
use crate::analysis::threads::has_off_cpu;
use crate::profile::Kind;

/// The offwake view's file in a capture directory.
const OFFWAKE: &str = "offwake.folded";

pub fn run(args: &ReportArgs) -> Result<(), CliError> {
    let (loaded, path) = match args.range.is_set() {
        true => load_range(&args.input, &args.range)?,
        false => {
            let path = input::main_folded(&args.input).map_err(CliError::usage)?;
            (load(&path)?, path)
        }
    };
    let profile = &loaded.profile;
    let top = usize::try_from(args.top).unwrap_or(usize::MAX);
    let leading = match sidecar::process_roots(&path) {
        true => Leading::Process,
        false => Leading::ProcessAndThread,
    };
    let opts = report::Options {
        kind: kind_name(profile.meta.kind).into(),
        top,
        callees_of: top,
        source: Some(match args.range.is_set() {
            true => format!("{}, {}", path.display(), range_words(&args.range)),
            false => path.display().to_string(),
        }),
        inlines: args.inlines,
        all_frames: args.all_frames,
        leading,
    };
    // A capture's offwake view beside its main one (--wakers): the
    // findings say who woke their waits, as the capture's report did; with
    // --from/--to, who woke those of that range.
    let beside = path.with_file_name(OFFWAKE);
    let wake = match path.file_name() != beside.file_name() && beside.is_file() {
        false => None,
        true if args.range.is_set() => Some(load_range_of(&beside, &args.range)?.0.profile),
        true => Some(load(&beside)?.profile),
    };
    let text = if args.json {
        report::render_json(profile, &opts, wake.as_ref())
    } else {
        let sites = Sites::learn(profile, opts.lens());
        let mut text = report::render_with(profile, &opts, &sites, wake.as_ref());
        if wakers::present(profile) {
            // An offwake file: its leaves are wakers, not where time went.
            text.push_str(&wakers::render(profile));
        } else if !profile.threads().is_empty() {
            // Time by thread, as in a capture's report.txt; it needs the
            // thread frames of fgbpf's own files.
            let columns = match (profile.meta.kind, has_off_cpu(profile)) {
                (Kind::Wall, _) => Columns::Both,
                (Kind::OffCpu, _) | (Kind::Other, true) => Columns::OffCpu,
                _ => Columns::OnCpu,
            };
            let table = breakdown::Options {
                rows: top,
                lens: opts.lens(),
                ..breakdown::Options::new(leading, columns)
            };
            text.push_str(&breakdown::render_with(profile, &table, &sites));
        }
        text
    };
    note_rounding(&path, loaded.rounded);
    print(&text)
}
