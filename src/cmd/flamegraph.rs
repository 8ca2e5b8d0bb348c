//! `fgbpf flamegraph INPUT.folded -o OUT.svg`: re-renders folded stacks,
//! filtered like `grep` over the file's lines, in either layout, with
//! threads kept apart or merged per process.

use regex::Regex;
use rustc_hash::FxHashMap;

use super::post::{check_output_file, file_name, heat, load, note_rounding, write_file};
use super::CliError;
use crate::cli::FlamegraphArgs;
use crate::input::folded::Layout;
use crate::output::folded::{self, Leading};
use crate::output::svg;
use crate::profile::{Kind, Profile};

/// A regex for `--grep`/`--exclude`, with the parser's multi-line message
/// cut to its last line so the error stays one line.
fn compile(option: &str, pattern: &str) -> Result<Regex, CliError> {
    Regex::new(pattern).map_err(|e| {
        let text = e.to_string();
        let why = text.lines().last().unwrap_or("").trim();
        let why = why.strip_prefix("error: ").unwrap_or(why);
        CliError::usage(format!("{option} `{pattern}` is not a valid regex: {why}"))
    })
}

/// Stacks kept by the filters, merged by their rendered line, sorted (the
/// order inferno draws them in anyway, and a stable one for tests).
fn filtered_lines(
    profile: &Profile,
    leading: Leading,
    grep: Option<&Regex>,
    exclude: Option<&Regex>,
) -> (Vec<String>, u64) {
    // Filters see each stack as its line in the file, thread frames too.
    let as_read = folded::Options {
        leading: Leading::ProcessAndThread,
    };
    let shown = folded::Options { leading };
    let read = folded::Folder::new(profile, &as_read);
    let show = folded::Folder::new(profile, &shown);
    let filtering = grep.is_some() || exclude.is_some();
    let mut merged: FxHashMap<String, u64> = FxHashMap::default();
    for s in profile.stacks() {
        if filtering {
            let line = read.stack(s);
            if grep.is_some_and(|r| !r.is_match(&line))
                || exclude.is_some_and(|r| r.is_match(&line))
            {
                continue;
            }
        }
        *merged.entry(show.stack(s)).or_default() += s.weight;
    }
    let kept = merged.values().sum();
    let mut lines: Vec<String> = merged
        .into_iter()
        .filter(|(stack, _)| !stack.is_empty())
        .map(|(stack, w)| format!("{stack} {w}"))
        .collect();
    lines.sort_unstable();
    (lines, kept)
}

fn default_title(kind: Kind, name: &str) -> String {
    let what = match kind {
        Kind::OnCpu => "CPU flame graph",
        Kind::OffCpu => "Off-CPU flame graph",
        Kind::Wall => "Wall-clock flame graph",
        Kind::Other => "Flame graph",
    };
    format!("{what}: {name}")
}

pub fn run(args: &FlamegraphArgs) -> Result<(), CliError> {
    let grep = args
        .grep
        .as_deref()
        .map(|p| compile("--grep", p))
        .transpose()?;
    let exclude = args
        .exclude
        .as_deref()
        .map(|p| compile("--exclude", p))
        .transpose()?;
    check_output_file(&args.output)?;
    let loaded = load(&args.input)?;
    let name = file_name(&args.input);
    if (args.per_thread || args.per_process) && loaded.layout == Layout::Foreign {
        let flag = if args.per_process {
            "--per-process"
        } else {
            "--per-thread"
        };
        return Err(CliError::usage(format!(
            "{flag} needs fgbpf's layout (every line starting PROCESS-PID;THREAD-TID;), which {} does not have",
            args.input.display()
        )));
    }
    let profile = &loaded.profile;
    let leading = if args.per_process {
        Leading::Process
    } else {
        Leading::ProcessAndThread
    };
    let (lines, kept) = filtered_lines(profile, leading, grep.as_ref(), exclude.as_ref());
    if lines.is_empty() {
        return Err(CliError::usage(format!(
            "no stack of {} is left after --grep/--exclude",
            args.input.display()
        )));
    }
    let unit = profile.unit.name();
    let total = profile.total();
    let mut subtitle = if kept == total {
        format!("{total} {unit} from {name}")
    } else {
        format!(
            "{kept} of {total} {unit} ({:.1}%) from {name}",
            kept as f64 * 100.0 / total as f64
        )
    };
    if let Some(p) = &args.grep {
        subtitle.push_str(&format!("; stacks matching /{p}/"));
    }
    if let Some(p) = &args.exclude {
        subtitle.push_str(&format!("; without stacks matching /{p}/"));
    }
    if args.per_process {
        subtitle.push_str("; threads merged per process");
    }
    let opts = svg::Options {
        title: args
            .title
            .clone()
            .unwrap_or_else(|| default_title(profile.meta.kind, &name)),
        subtitle: Some(subtitle),
        leading,
        heat: heat(profile.meta.kind),
        min_width: args.min_width,
        inverted: args.inverted,
        ..Default::default()
    };
    note_rounding(&args.input, &loaded);
    // Wall-clock files get the capture's warm/cool split, which their state
    // frames (read back as pseudo-frames) make possible.
    let mut palette = match profile.meta.kind {
        Kind::Wall => svg::wall_palette(profile, leading),
        _ => svg::palette_for(profile, leading, opts.heat),
    };
    write_file(&args.output, |w| {
        svg::write_lines(&lines, unit, &opts, &mut palette, w)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::folded::parse;
    use crate::profile::Unit;

    #[test]
    fn filters_see_the_file_line_and_processes_merge() {
        let p = parse(
            "t",
            b"srv-1;a-2;main;read_[k] 3\nsrv-1;b-3;main;read_[k] 4\nsrv-1;b-3;main;compute 5\n",
            Unit::Samples,
        )
        .unwrap()
        .profile;
        let grep = compile("--grep", "_\\[k\\]$").unwrap();
        let (lines, kept) = filtered_lines(&p, Leading::Process, Some(&grep), None);
        assert_eq!(lines, ["srv-1;main;read_[k] 7"]);
        assert_eq!(kept, 7);
        let exclude = compile("--exclude", "^srv-1;b-3;").unwrap();
        let (lines, _) = filtered_lines(&p, Leading::ProcessAndThread, None, Some(&exclude));
        assert_eq!(lines, ["srv-1;a-2;main;read_[k] 3"]);
    }

    #[test]
    fn bad_regex_is_one_line() {
        let e = compile("--grep", "a(").unwrap_err();
        assert_eq!(e.code, 2);
        assert!(!e.message.contains('\n'), "{}", e.message);
        assert!(e.message.contains("unclosed group"), "{}", e.message);
    }
}
