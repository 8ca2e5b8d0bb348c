//! `fgbpf flamegraph INPUT.folded -o OUT.svg`: re-renders folded stacks,
//! filtered like `grep` over the file's lines, in either layout, with
//! threads kept apart or merged per process.

use std::borrow::Cow;

use regex::Regex;

use super::post::{check_output_file, file_name, load_range, note_rounding, range_words, read, scheme, write_file};
use crate::format::input;
use super::CliError;
use crate::cli::FlamegraphArgs;
use crate::format::folded::read::{self as folded, kind_of, Layout, Scan};
use crate::format::folded::Leading;
use crate::format::palette::Lines;
use crate::format::{sidecar, svg};
use crate::profile::names::{group_of_frame, program_of_frame};
use crate::profile::Kind;

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

/// The lines of a folded file to draw, checked and filtered, without
/// building a profile: inferno takes the lines as they are.
struct Kept<'a> {
    /// `STACK COUNT` lines, borrowed from the file where it had them in
    /// that form.
    lines: Vec<Cow<'a, str>>,
    kept: u64,
    scan: Scan,
}

/// Checks every line and keeps those the filters pass. Filters see each
/// stack as its line in the file, thread frames too.
fn keep<'a>(
    source: &str,
    text: &'a str,
    grep: Option<&Regex>,
    exclude: Option<&Regex>,
) -> Result<Kept<'a>, String> {
    let mut lines = Vec::new();
    let mut kept = 0;
    let scan = folded::scan(source, text, |l| {
        if l.count == 0
            || grep.is_some_and(|r| !r.is_match(l.stack))
            || exclude.is_some_and(|r| r.is_match(l.stack))
        {
            return;
        }
        kept += l.count;
        lines.push(if l.canonical {
            Cow::Borrowed(l.text)
        } else {
            Cow::Owned(format!("{} {}", l.stack, l.count))
        });
    })?;
    Ok(Kept { lines, kept, scan })
}

/// `PROCESS-PID;THREAD-TID;REST COUNT` as `PROCESS-PID;REST COUNT` (or,
/// `to` [`Leading::Program`], `PROCESS;REST COUNT`), and the same under a
/// group's frame (`[GROUP];PROCESS-PID;...`).
fn merge_threads(line: &str, to: Leading) -> String {
    let (stack, count) = line.rsplit_once(' ').expect("kept lines have a count");
    let group = stack.split(';').next().and_then(group_of_frame).is_some();
    let keep = 1 + usize::from(group);
    let mut frames = stack.splitn(keep + 2, ';');
    let mut head: Vec<&str> = frames.by_ref().take(keep).collect();
    if to == Leading::Program {
        if let Some(process) = head.last_mut() {
            *process = program_of_frame(process).unwrap_or(process);
        }
    }
    let head = head.join(";");
    frames.next();
    match frames.next() {
        Some(rest) => format!("{head};{rest} {count}"),
        None => format!("{head} {count}"),
    }
}

fn default_title(kind: Kind, name: &str) -> String {
    let what = match kind {
        Kind::OnCpu => "CPU flame graph",
        Kind::OffCpu => "Off-CPU flame graph",
        Kind::Wall => "Wall-clock flame graph",
        Kind::Other => "Flame graph",
        Kind::Alloc => "Allocation flame graph",
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
    // A range is drawn from the capture's slices, as the folded lines of
    // that range; a capture directory stands for its main view.
    let (input, bytes) = match args.range.is_set() {
        true => {
            let (loaded, path) = load_range(&args.input, &args.range)?;
            let lines = crate::format::folded::lines(
                &loaded.profile,
                &crate::format::folded::Options { leading: Leading::ProcessAndThread },
            );
            (path, input::Bytes::Read(lines.join("\n").into_bytes()))
        }
        false => {
            let path = input::main_folded(&args.input).map_err(CliError::usage)?;
            let bytes = read(&path)?;
            (path, bytes)
        }
    };
    let text = folded::text_of(&bytes);
    let source = input.display().to_string();
    let Kept { lines, kept, scan } =
        keep(&source, &text, grep.as_ref(), exclude.as_ref()).map_err(CliError::usage)?;
    let mut name = file_name(&input);
    let asked = match (args.per_program, args.per_process, args.per_thread) {
        (true, _, _) => Some(("--per-program", Leading::Program)),
        (_, true, _) => Some(("--per-process", Leading::Process)),
        (_, _, true) => Some(("--per-thread", Leading::ProcessAndThread)),
        _ => None,
    };
    if let (Some((flag, _)), Layout::Foreign) = (asked, scan.layout) {
        return Err(CliError::usage(format!(
            "{flag} needs fgbpf's layout (every line starting PROCESS-PID;THREAD-TID;), which {} does not have",
            input.display()
        )));
    }
    if lines.is_empty() {
        return Err(CliError::usage(format!(
            "no stack of {} is left after --grep/--exclude",
            input.display()
        )));
    }
    // Drawn as its capture drew it unless told otherwise: a whole host's
    // by program, `--per-process` captures by process.
    let roots = match scan.layout {
        Layout::Foreign => Leading::ProcessAndThread,
        Layout::Fgbpf => asked.map(|a| a.1).or_else(|| sidecar::drawn(&input)).unwrap_or(Leading::ProcessAndThread),
    };
    let lines: Vec<Cow<str>> = match roots {
        Leading::Process | Leading::Program => lines.iter().map(|l| Cow::Owned(merge_threads(l, roots))).collect(),
        _ => lines,
    };
    let crate::format::sidecar::Measured { kind, unit, .. } = kind_of(&input);
    let unit = unit.name();
    let total = scan.total;
    if args.range.is_set() {
        name = format!("{name}, {}", range_words(&args.range));
    }
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
    match roots {
        Leading::Process => subtitle.push_str("; threads merged per process"),
        Leading::Program => subtitle.push_str("; processes merged per program"),
        _ => {}
    }
    let opts = svg::Options {
        title: args
            .title
            .clone()
            .unwrap_or_else(|| default_title(kind, &name)),
        subtitle: Some(subtitle),
        scheme: scheme(kind),
        min_width: args.min_width,
        inverted: args.inverted,
        ..Default::default()
    };
    let shape = match scan.layout {
        Layout::Fgbpf => Lines::ours(roots).grouped(scan.grouped),
        Layout::Foreign => Lines::foreign(),
    };
    note_rounding(&input, scan.rounded);
    write_file(&args.output, |w| {
        let lines: Vec<&str> = lines.iter().map(|l| l.as_ref()).collect();
        svg::render(lines, unit, shape, &opts, w)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep_lines(text: &str, grep: Option<&str>, exclude: Option<&str>) -> (Vec<String>, u64) {
        let grep = grep.map(|p| compile("--grep", p).unwrap());
        let exclude = exclude.map(|p| compile("--exclude", p).unwrap());
        let k = keep("t", text, grep.as_ref(), exclude.as_ref()).unwrap();
        (k.lines.iter().map(|l| l.to_string()).collect(), k.kept)
    }

    #[test]
    fn filters_see_the_file_line_and_processes_merge() {
        let text =
            "srv-1;a-2;main;read_[k] 3\nsrv-1;b-3;main;read_[k] 4\nsrv-1;b-3;main;compute 5\n";
        let (lines, kept) = keep_lines(text, Some("_\\[k\\]$"), None);
        assert_eq!(
            lines,
            ["srv-1;a-2;main;read_[k] 3", "srv-1;b-3;main;read_[k] 4"]
        );
        assert_eq!(kept, 7);
        let merged: Vec<String> = lines.iter().map(|l| merge_threads(l, Leading::Process)).collect();
        assert_eq!(merged, ["srv-1;main;read_[k] 3", "srv-1;main;read_[k] 4"]);
        let (lines, _) = keep_lines(text, None, Some("^srv-1;b-3;"));
        assert_eq!(lines, ["srv-1;a-2;main;read_[k] 3"]);
        assert_eq!(merge_threads("p-1;t-2 9", Leading::Process), "p-1 9");
        assert_eq!(merge_threads("[cgroup /a];p-1;t-2;f 9", Leading::Process), "[cgroup /a];p-1;f 9");
        assert_eq!(merge_threads("[container 0123abcd];p-1;t-2 9", Leading::Process), "[container 0123abcd];p-1 9");
    }

    #[test]
    fn processes_merge_per_program() {
        let program = |l: &str| merge_threads(l, Leading::Program);
        assert_eq!(program("postgres-41;postgres-41;main;PostgresMain 3"), "postgres;main;PostgresMain 3");
        assert_eq!(program("postgres-42;postgres-42;main;PostgresMain 4"), "postgres;main;PostgresMain 4");
        // Only the `-PID` its writer added comes off; a name's own dashes
        // and digits stay.
        assert_eq!(program("kworker-u4:2-7;kworker-u4:2-7;f 1"), "kworker-u4:2;f 1");
        assert_eq!(program("my-app-2-900;t-901 5"), "my-app-2 5");
        assert_eq!(program("[cgroup /a];redis-server-10;io-11;f 9"), "[cgroup /a];redis-server;f 9");
    }

    #[test]
    fn odd_lines_are_rewritten_for_inferno() {
        let (lines, kept) = keep_lines("a;b\t2\n  a;c   3.5 \na;d 0\n", None, None);
        assert_eq!(lines, ["a;b 2", "a;c 4"]);
        assert_eq!(kept, 6);
    }

    #[test]
    fn bad_regex_is_one_line() {
        let e = compile("--grep", "a(").unwrap_err();
        assert_eq!(e.code, 2);
        assert!(!e.message.contains('\n'), "{}", e.message);
        assert!(e.message.contains("unclosed group"), "{}", e.message);
    }
}
