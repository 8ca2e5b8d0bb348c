//! The text report: the heaviest findings in plain words, hotspots by self
//! and total weight (by function, plumbing left out of "by total"), the
//! heaviest callees of the top functions, time by state, and what the
//! capture lost. The JSON report carries the same numbers for scripts; its
//! schema is `docs/report.schema.json`.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::folded::sanitize;
use super::unresolved;
use serde::Serialize;

use crate::analysis::findings::{findings, Finding};
use crate::analysis::idle::idle;
use crate::analysis::threads::{table, Table};
use crate::analysis::waits::Sites;
use crate::analysis::woken::name_wakers;
use crate::analysis::{pct, ranking, summarize, FunctionRow, Lens, Summary};
use crate::profile::names::Leading;
use crate::profile::Profile;

#[derive(Clone, Debug)]
pub struct Options {
    /// What kind of profile this is, e.g. "on-CPU".
    pub kind: String,
    /// Rows in each top list.
    pub top: usize,
    /// Functions whose callees are listed.
    pub callees_of: usize,
    /// The file the profile was read from, for reports made after the
    /// capture: such files record no duration or losses, so none are shown.
    pub source: Option<String>,
    /// `--inlines`: inlined fragments ranked as functions of their own.
    pub inlines: bool,
    /// `--all-frames`: plumbing and pass-through frames listed by total.
    pub all_frames: bool,
    /// How the JSON report's thread table groups stacks.
    pub leading: Leading,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            kind: "on-CPU".into(),
            top: 20,
            callees_of: 5,
            source: None,
            inlines: false,
            all_frames: false,
            leading: Leading::ProcessAndThread,
        }
    }
}

impl Options {
    pub fn lens(&self) -> Lens {
        Lens {
            inlines: self.inlines,
        }
    }

    fn ranking(&self) -> ranking::Options {
        ranking::Options {
            top: self.top,
            callees_of: self.callees_of,
            lens: self.lens(),
            all_frames: self.all_frames,
        }
    }
}

/// How many findings lead a report and a capture's summary.
pub const FINDINGS: usize = 3;

/// The findings as report lines, then the line on idle threads, or
/// nothing.
pub fn findings_text(found: &[Finding], idle: Option<String>) -> String {
    let mut out = String::new();
    if !found.is_empty() || idle.is_some() {
        let _ = writeln!(out, "\nFindings");
        for f in found {
            let _ = writeln!(out, "  {}", f.text);
        }
        if let Some(line) = idle {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// `--group-by`: the weight under each group's root frame, heaviest
/// first; nothing when the profile is not grouped.
fn groups_text(profile: &Profile, total: u64) -> String {
    let mut by_group: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for st in profile.stacks() {
        if let Some(group) = st.thread.and_then(|t| profile.thread(t).group.as_deref()) {
            *by_group.entry(group).or_default() += st.weight;
        }
    }
    if by_group.is_empty() {
        return String::new();
    }
    let mut rows: Vec<(&str, u64)> = by_group.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut out = format!("\nBy cgroup ({} of them)\n", rows.len());
    for (group, w) in rows.iter().take(GROUP_ROWS) {
        let _ = writeln!(out, "{:>6.1}% {:>12}  {}", pct(*w, total), profile.unit.amount(*w), sanitize(group));
    }
    if rows.len() > GROUP_ROWS {
        let rest: u64 = rows[GROUP_ROWS..].iter().map(|r| r.1).sum();
        let _ = writeln!(out, "{:>6.1}% {:>12}  ({} more)", pct(rest, total), profile.unit.amount(rest), rows.len() - GROUP_ROWS);
    }
    out
}

/// Groups listed by name in the report; the rest are summed on one line.
const GROUP_ROWS: usize = 20;

pub fn render(profile: &Profile, opts: &Options) -> String {
    render_with(profile, opts, &Sites::learn(profile, opts.lens()), None)
}

/// [`render`] with the wait sites already learnt from `profile` (with
/// `opts.lens()`), for a caller that also draws the time-by-thread table;
/// `wake`, the same capture's offwake view, says who woke the waits of
/// each finding.
pub fn render_with(profile: &Profile, opts: &Options, sites: &Sites, wake: Option<&Profile>) -> String {
    let s = summarize(profile, &opts.ranking());
    let unit = profile.unit.name();
    let m = &profile.meta;
    let mut out = String::new();
    if let Some(source) = &opts.source {
        let _ = writeln!(
            out,
            "fgbpf {} profile read from {}",
            opts.kind,
            sanitize(source)
        );
    } else {
        let _ = writeln!(
            out,
            "fgbpf {} profile of {}",
            opts.kind,
            sanitize(&m.target)
        );
        let mut line = format!("duration: {:.3} s", m.duration.as_secs_f64());
        if let Some(hz) = m.frequency {
            let _ = write!(line, ", frequency: {hz} Hz");
        }
        let _ = writeln!(out, "{line}");
    }
    let idle = idle(profile, sites);
    let mut found = findings(profile, sites, &idle, FINDINGS);
    if let Some(wake) = wake {
        name_wakers(&mut found, wake, sites);
    }
    out.push_str(&findings_text(&found, idle.line()));
    let _ = writeln!(
        out,
        "\ntotal: {} {unit} in {} unique stacks",
        s.total,
        profile.stacks().len()
    );
    let lost = m.losses.total();
    // A file records no losses: "none" would be a claim it cannot make.
    let capture = opts.source.is_none();
    if capture && lost == 0 {
        let _ = writeln!(out, "lost: none");
    } else if capture {
        for l in &m.losses.entries {
            let _ = writeln!(out, "lost: {} {} ({})", l.count, l.what, l.remedy);
        }
    }
    let _ = writeln!(
        out,
        "unresolved leaf frames: {:.1}% of {unit}",
        pct(unresolved::leaf_weight(profile), s.total)
    );
    if s.total == 0 {
        let _ = writeln!(
            out,
            "\nNo samples were recorded: the target did not run during the capture."
        );
        return out;
    }
    out.push_str(&groups_text(profile, s.total));

    let table = |out: &mut String, title: &str, rows: &[FunctionRow]| {
        let _ = writeln!(out, "\n{title}");
        let _ = writeln!(
            out,
            "{:>7} {:>10} {:>7} {:>10}  function",
            "self%", "self", "total%", "total"
        );
        for r in rows {
            let _ = writeln!(
                out,
                "{:>6.1}% {:>10} {:>6.1}% {:>10}  {}",
                pct(r.self_weight, s.total),
                r.self_weight,
                pct(r.total_weight, s.total),
                r.total_weight,
                r.name
            );
        }
    };
    table(
        &mut out,
        &format!("Top functions by self {unit}"),
        &s.by_self,
    );
    let mut title = format!("Top functions by total {unit}");
    if s.collapsed > 0 {
        let _ = write!(
            title,
            " ({} runtime or pass-through frames left out; --all-frames lists them)",
            s.collapsed
        );
    }
    table(&mut out, &title, &s.by_total);

    let _ = writeln!(out, "\nHeaviest callees of the top functions by total");
    for r in s.by_total.iter().filter(|r| !r.callees.is_empty()) {
        let _ = writeln!(out, "{} ({:.1}%)", r.name, pct(r.total_weight, s.total));
        for (c, w) in &r.callees {
            let _ = writeln!(out, "  {:>6.1}% of it  {c}", pct(*w, r.total_weight));
        }
    }
    if !s.pseudo.is_empty() {
        let _ = writeln!(out, "\nTime in pseudo-frames (states and gaps, not functions)");
        for (name, w) in &s.pseudo {
            let _ = writeln!(out, "{:>6.1}% {:>10}  {name}", pct(*w, s.total), w);
        }
    }
    out
}

pub fn write(profile: &Profile, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(render(profile, opts).as_bytes())
}

/// The report as one JSON document for scripts: the [`Summary`] with the
/// unit and where the profile came from. Weights are raw counts in `unit`;
/// shares are left to the reader (`weight / total`).
/// `wake`: the same capture's offwake view, whose wakers the findings
/// name.
pub fn render_json(profile: &Profile, opts: &Options, wake: Option<&Profile>) -> String {
    #[derive(Serialize)]
    struct Document<'a> {
        kind: &'a str,
        source: Option<&'a str>,
        unit: &'a str,
        unique_stacks: usize,
        unresolved_leaf: u64,
        findings: Vec<Finding>,
        idle: Vec<crate::analysis::idle::IdleGroup>,
        #[serde(flatten)]
        summary: Summary,
        thread_table: Table,
    }
    let sites = Sites::learn(profile, opts.lens());
    let idle = idle(profile, &sites);
    let doc = Document {
        kind: &opts.kind,
        source: opts.source.as_deref(),
        unit: profile.unit.name(),
        unique_stacks: profile.stacks().len(),
        unresolved_leaf: unresolved::leaf_weight(profile),
        findings: {
            let mut found = findings(profile, &sites, &idle, FINDINGS);
            if let Some(wake) = wake {
                name_wakers(&mut found, wake, &sites);
            }
            found
        },
        idle: idle.groups,
        summary: summarize(profile, &opts.ranking()),
        thread_table: table(profile, opts.leading, &sites, opts.top, 3),
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("plain data serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Stack, Unit};

    #[test]
    fn self_total_and_callees() {
        let mut p = Profile::new(Unit::Samples);
        let main = p.intern_frame(Frame::new("main", FrameKind::User));
        let a = p.intern_frame(Frame::new("a", FrameKind::User));
        let b = p.intern_frame(Frame::new("b", FrameKind::User));
        p.push(Stack {
            thread: None,
            frames: vec![main, a].into(),
            weight: 6,
            ..Default::default()
        });
        p.push(Stack {
            thread: None,
            frames: vec![main, b].into(),
            weight: 3,
            ..Default::default()
        });
        p.push(Stack {
            thread: None,
            frames: vec![main, a, a].into(),
            weight: 1,
            ..Default::default()
        });
        p.coalesce();
        let s = summarize(&p, &ranking::Options { all_frames: true, ..Default::default() });
        assert_eq!(s.total, 10);
        assert_eq!(s.by_self[0].name, "a");
        assert_eq!(s.by_self[0].self_weight, 7);
        assert_eq!(s.by_total[0].name, "main");
        assert_eq!(s.by_total[0].total_weight, 10);
        assert_eq!(
            s.by_total[0].callees,
            vec![("a".to_string(), 7), ("b".to_string(), 3)]
        );
        let a_row = s.by_total.iter().find(|r| r.name == "a").unwrap();
        assert_eq!(a_row.total_weight, 7, "recursion counted once");
        let text = render(&p, &Options::default());
        assert!(
            text.contains("total: 10 samples in 3 unique stacks"),
            "{text}"
        );
        assert!(
            text.contains("  70.0%          7   70.0%          7  a"),
            "{text}"
        );
    }

    #[test]
    fn reports_of_files_claim_no_duration_or_losses_and_render_json() {
        let mut p = Profile::new(Unit::Samples);
        let main = p.intern_frame(Frame::new("main", FrameKind::User));
        let a = p.intern_frame(Frame::new("a", FrameKind::Kernel));
        p.push(Stack {
            thread: None,
            frames: vec![main, a].into(),
            weight: 4,
            ..Default::default()
        });
        let opts = Options {
            kind: "folded".into(),
            source: Some("x.folded".into()),
            all_frames: true,
            ..Default::default()
        };
        let text = render(&p, &opts);
        assert!(text.starts_with("fgbpf folded profile read from x.folded\n"));
        assert!(
            !text.contains("duration") && !text.contains("lost"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&render_json(&p, &opts, None)).unwrap();
        assert_eq!(v["source"], "x.folded");
        assert_eq!(v["total"], 4);
        let main_row = &v["by_total"][1];
        assert_eq!(main_row["name"], "main", "ties ordered by name");
        assert_eq!(main_row["callees"][0]["name"], "a_[k]");
        assert_eq!(main_row["callees"][0]["weight"], 4);
        assert_eq!(v["by_self"][0]["self"], 4);
        assert!(v["by_self"][0].get("callees").is_none());
    }
}
