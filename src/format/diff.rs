//! Comparing two profiles: differential flamegraphs (inferno) and the list
//! of functions whose share of the total moved.
//!
//! Stacks are compared by code path: fgbpf's process and thread frames are
//! reduced to the process name, because PIDs and TIDs differ between runs
//! and would keep every path of one run apart from the other's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use inferno::{differential, flamegraph};
use serde::Serialize;

use super::folded::sanitize;
use crate::analysis::Change;
use crate::profile::Profile;

/// Which profile gives the boxes their widths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Widths {
    /// What the code does now; vanished paths have no width.
    After,
    /// What it did before, so paths that vanished are visible.
    Before,
}

#[derive(Clone, Debug)]
pub struct SvgOptions {
    pub title: String,
    pub subtitle: Option<String>,
    /// Scale the other profile to the total of the one drawn.
    pub normalize: bool,
    pub widths: Widths,
}

/// Folded lines with the process name in place of fgbpf's leading frames,
/// merged and sorted.
pub fn comparable_lines(profile: &Profile) -> String {
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for s in profile.stacks() {
        let mut parts: Vec<String> = Vec::with_capacity(s.frames.len() + 1);
        if let Some(t) = s.thread {
            parts.push(sanitize(&profile.thread(t).process));
        }
        parts.extend(s.frames.iter().map(|&f| {
            let frame = profile.frame(f);
            format!("{}{}", sanitize(&frame.name), frame.kind.suffix())
        }));
        if !parts.is_empty() {
            *merged.entry(parts.join(";")).or_default() += s.weight;
        }
    }
    let mut out = String::new();
    for (stack, weight) in merged {
        let _ = writeln!(out, "{stack} {weight}");
    }
    out
}

/// Red boxes grew, blue ones shrank, in both renderings: for BEFORE widths
/// the columns are swapped and the difference negated back.
pub fn write_svg(
    before: &Profile,
    after: &Profile,
    opts: &SvgOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let (b, a) = (comparable_lines(before), comparable_lines(after));
    let (first, second) = match opts.widths {
        Widths::After => (b, a),
        Widths::Before => (a, b),
    };
    let mut merged = Vec::new();
    let dopts = differential::Options {
        normalize: opts.normalize,
        strip_hex: false,
    };
    differential::from_readers(dopts, first.as_bytes(), second.as_bytes(), &mut merged)?;
    let merged = String::from_utf8(merged).map_err(io::Error::other)?;
    let mut fopts = flamegraph::Options::default();
    fopts.title = opts.title.clone();
    fopts.subtitle = opts.subtitle.clone();
    fopts.count_name = after.unit.name().to_string();
    fopts.deterministic = true;
    fopts.negate_differentials = opts.widths == Widths::Before;
    flamegraph::from_lines(&mut fopts, merged.lines(), out)
        .map_err(|e| io::Error::other(format!("rendering differential flamegraph: {e}")))
}

/// `regressions.txt`.
pub fn render_changes(
    (before_name, before): (&str, &Profile),
    (after_name, after): (&str, &Profile),
    threshold: f64,
    changes: &[Change],
) -> String {
    let mut out = String::new();
    let unit = after.unit.name();
    let _ = writeln!(out, "fgbpf diff: share of the total by function");
    let _ = writeln!(
        out,
        "before: {}, {} {unit}",
        sanitize(before_name),
        before.total()
    );
    let _ = writeln!(
        out,
        "after:  {}, {} {unit}",
        sanitize(after_name),
        after.total()
    );
    let _ = writeln!(
        out,
        "listed: functions whose total share (stacks containing them) or self share (stacks ending in them) changed by more than {threshold:.1} points, biggest change first"
    );
    if changes.is_empty() {
        let _ = writeln!(
            out,
            "\nno function's share changed by more than {threshold:.1} points"
        );
        return out;
    }
    let groups = format!("{:7}  {:^16}  {:^16}", "", "total share", "self share");
    let _ = writeln!(out, "\n{}", groups.trim_end());
    let _ = writeln!(
        out,
        "{:>7}  {:>7} {:>8}  {:>7} {:>8}  function",
        "change", "before", "after", "before", "after"
    );
    for c in changes {
        let _ = writeln!(
            out,
            "{:>+7.1}  {:>6.1}% {:>7.1}%  {:>6.1}% {:>7.1}%  {}",
            c.points(),
            c.total.0,
            c.total.1,
            c.self_.0,
            c.self_.1,
            c.name
        );
    }
    out
}

/// One side of a comparison, as the JSON names it.
pub struct Side<'a> {
    pub name: &'a str,
    pub profile: &'a Profile,
}

/// The comparison as one JSON document (schema: `docs/diff.schema.json`):
/// both totals, every function that moved by more than `threshold`, and
/// with a gate the ones that grew by more than `fail_above`.
pub fn render_json<'a>(
    before: Side<'a>,
    after: Side<'a>,
    threshold: f64,
    fail_above: Option<f64>,
    changes: &'a [Change],
    regressions: &'a [Change],
) -> String {
    #[derive(Serialize)]
    struct Total<'a> {
        name: &'a str,
        total: u64,
        unique_stacks: usize,
    }
    #[derive(Serialize)]
    struct Moved<'a> {
        name: &'a str,
        points: f64,
        total_before: f64,
        total_after: f64,
        self_before: f64,
        self_after: f64,
    }
    #[derive(Serialize)]
    struct Document<'a> {
        unit: &'a str,
        before: Total<'a>,
        after: Total<'a>,
        threshold: f64,
        fail_above: Option<f64>,
        changes: Vec<Moved<'a>>,
        regressions: Vec<Moved<'a>>,
    }
    let total = |s: &Side<'a>| Total {
        name: s.name,
        total: s.profile.total(),
        unique_stacks: s.profile.stacks().len(),
    };
    // Rounded as printed: scripts compare what people read.
    let r = |x: f64| (x * 100.0).round() / 100.0;
    let moved = |cs: &'a [Change]| -> Vec<Moved<'a>> {
        cs.iter()
            .map(|c| Moved {
                name: &c.name,
                points: r(c.points()),
                total_before: r(c.total.0),
                total_after: r(c.total.1),
                self_before: r(c.self_.0),
                self_after: r(c.self_.1),
            })
            .collect()
    };
    let doc = Document {
        unit: after.profile.unit.name(),
        before: total(&before),
        after: total(&after),
        threshold,
        fail_above,
        changes: moved(changes),
        regressions: moved(regressions),
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("plain data serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::folded::read::parse;
    use crate::analysis::changes;
    use crate::profile::Unit;

    fn profile(text: &str) -> Profile {
        parse("t", text.as_bytes(), Unit::Samples).unwrap().profile
    }

    #[test]
    fn the_function_that_changed_comes_first_on_ties() {
        // hot got twice as fast; other's share grew by exactly as much.
        let before = profile("main;work;hot 60\nmain;work;other 40\n");
        let after = profile("main;work;hot 30\nmain;work;other 40\n");
        let c = changes(&before, &after, 5.0);
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["hot", "other"]);
        assert!(c[0].points() < -17.0);
    }

    #[test]
    fn the_callee_that_spent_the_time_precedes_its_caller() {
        let before = profile("main;check;crc 50\nmain;parse 50\n");
        let after = profile("main;check;crc 25\nmain;parse 50\n");
        let c = changes(&before, &after, 5.0);
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["crc", "parse", "check"]);
    }

    #[test]
    fn threads_reduce_to_the_process() {
        let p = profile("srv-1;w-2;main 3\nsrv-1;w-3;main 4\n");
        assert_eq!(comparable_lines(&p), "srv;main 7\n");
    }

    #[test]
    fn nothing_changed_says_so() {
        let p = profile("a;b 5\n");
        let c = changes(&p, &p, 5.0);
        assert!(c.is_empty());
        let text = render_changes(("x", &p), ("y", &p), 5.0, &c);
        assert!(text.contains("no function's share changed"), "{text}");
    }
}
