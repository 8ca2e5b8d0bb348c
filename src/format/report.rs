//! The text report: hotspots by self and total weight, the heaviest callees
//! of the top functions, per-thread totals, and what the capture lost.

use rustc_hash::FxHashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use serde::Serialize;

use super::folded::{leading_frames, sanitize, Leading};
use super::unresolved;
use crate::profile::{FrameId, Profile, ThreadId};

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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            kind: "on-CPU".into(),
            top: 20,
            callees_of: 5,
            source: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionRow {
    pub name: String,
    #[serde(rename = "self")]
    pub self_weight: u64,
    #[serde(rename = "total")]
    pub total_weight: u64,
    /// Heaviest direct callees (name, weight), heaviest first; `(self)` is
    /// the function's own time.
    #[serde(
        serialize_with = "named_weights",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub callees: Vec<(String, u64)>,
}

/// The numbers behind the report, also usable by other writers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub total: u64,
    pub by_self: Vec<FunctionRow>,
    pub by_total: Vec<FunctionRow>,
    /// (thread frame, weight), heaviest first.
    #[serde(serialize_with = "named_weights")]
    pub threads: Vec<(String, u64)>,
}

/// `[{"name": .., "weight": ..}]` rather than bare pairs, so that scripts
/// read fields by name.
fn named_weights<S: serde::Serializer>(v: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Named<'a> {
        name: &'a str,
        weight: u64,
    }
    s.collect_seq(v.iter().map(|(name, weight)| Named {
        name,
        weight: *weight,
    }))
}

fn frame_name(profile: &Profile, id: FrameId) -> String {
    let f = profile.frame(id);
    format!("{}{}", sanitize(&f.name), f.kind.suffix())
}

/// The `n` heaviest frames, heaviest first, ties by name. Names are made
/// only for the frames that can make the cut: with a million distinct
/// frames, naming all of them inside a sort is what makes reports slow.
fn top_frames(profile: &Profile, weights: &[u64], n: usize) -> Vec<FrameId> {
    let mut ids: Vec<FrameId> = (0..weights.len())
        .filter(|&f| weights[f] > 0)
        .map(|f| f as FrameId)
        .collect();
    if n == 0 {
        return Vec::new();
    }
    if ids.len() > n {
        ids.select_nth_unstable_by(n - 1, |&a, &b| {
            weights[b as usize].cmp(&weights[a as usize])
        });
        let cut = weights[ids[n - 1] as usize];
        ids.retain(|&f| weights[f as usize] >= cut);
    }
    let mut keyed: Vec<(u64, String, FrameId)> = ids
        .into_iter()
        .map(|f| (weights[f as usize], frame_name(profile, f), f))
        .collect();
    keyed.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    keyed.truncate(n);
    keyed.into_iter().map(|(_, _, f)| f).collect()
}

/// Calls `visit(index, frame)` for the first occurrence of each frame in
/// each stack: recursion counts a function's time once per stack.
fn each_first_occurrence(
    profile: &Profile,
    mut visit: impl FnMut(&crate::profile::Stack, usize, FrameId),
) {
    // Stamps instead of a set per stack: stack n marks frame f with n + 1.
    let mut stamp = vec![0u32; profile.frames().len()];
    for (n, s) in profile.stacks().iter().enumerate() {
        let mark = n as u32 + 1;
        for (i, &f) in s.frames.iter().enumerate() {
            if stamp[f as usize] != mark {
                stamp[f as usize] = mark;
                visit(s, i, f);
            }
        }
    }
}

pub fn summarize(profile: &Profile, opts: &Options) -> Summary {
    let frames = profile.frames().len();
    let mut self_w = vec![0u64; frames];
    let mut total_w = vec![0u64; frames];
    let mut threads: FxHashMap<ThreadId, u64> = FxHashMap::default();
    for s in profile.stacks() {
        if let Some(&leaf) = s.frames.last() {
            self_w[leaf as usize] += s.weight;
        }
        if let Some(t) = s.thread {
            *threads.entry(t).or_default() += s.weight;
        }
    }
    each_first_occurrence(profile, |s, _, f| total_w[f as usize] += s.weight);

    let top_self = top_frames(profile, &self_w, opts.top);
    let top_total = top_frames(profile, &total_w, opts.top);
    // Callees only for the functions that list them: a second pass.
    let listed: FxHashMap<FrameId, usize> = top_total
        .iter()
        .take(opts.callees_of)
        .enumerate()
        .map(|(k, &f)| (f, k))
        .collect();
    let mut callees: Vec<FxHashMap<Option<FrameId>, u64>> =
        vec![FxHashMap::default(); listed.len()];
    if !listed.is_empty() {
        each_first_occurrence(profile, |s, i, f| {
            if let Some(&k) = listed.get(&f) {
                *callees[k].entry(s.frames.get(i + 1).copied()).or_default() += s.weight;
            }
        });
    }
    let row = |f: FrameId| {
        let mut cs: Vec<(String, u64)> = listed
            .get(&f)
            .map(|&k| {
                callees[k]
                    .iter()
                    .map(|(c, &w)| {
                        (
                            c.map_or_else(|| "(self)".to_string(), |c| frame_name(profile, c)),
                            w,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        cs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        cs.truncate(5);
        FunctionRow {
            name: frame_name(profile, f),
            self_weight: self_w[f as usize],
            total_weight: total_w[f as usize],
            callees: cs,
        }
    };
    let by_self = top_self
        .into_iter()
        .map(|f| FunctionRow {
            callees: Vec::new(),
            ..row(f)
        })
        .collect();
    let by_total = top_total.into_iter().map(row).collect();
    let mut threads: Vec<(String, u64)> = threads
        .into_iter()
        .map(|(t, w)| {
            (
                leading_frames(profile.thread(t), Leading::ProcessAndThread).join(" / "),
                w,
            )
        })
        .collect();
    threads.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    threads.truncate(opts.top);
    Summary {
        total: profile.total(),
        by_self,
        by_total,
        threads,
    }
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

pub fn render(profile: &Profile, opts: &Options) -> String {
    let s = summarize(profile, opts);
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
        let mut line = format!("duration: {:.2} s", m.duration.as_secs_f64());
        if let Some(hz) = m.frequency {
            let _ = write!(line, ", frequency: {hz} Hz");
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "total: {} {unit} in {} unique stacks",
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
    table(
        &mut out,
        &format!("Top functions by total {unit}"),
        &s.by_total,
    );

    let _ = writeln!(out, "\nHeaviest callees of the top functions by total");
    for r in s.by_total.iter().filter(|r| !r.callees.is_empty()) {
        let _ = writeln!(out, "{} ({:.1}%)", r.name, pct(r.total_weight, s.total));
        for (c, w) in &r.callees {
            let _ = writeln!(out, "  {:>6.1}% of it  {c}", pct(*w, r.total_weight));
        }
    }
    if !s.threads.is_empty() {
        let _ = writeln!(out, "\nThreads");
        for (t, w) in &s.threads {
            let _ = writeln!(out, "{:>6.1}% {:>10}  {t}", pct(*w, s.total), w);
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
pub fn render_json(profile: &Profile, opts: &Options) -> String {
    #[derive(Serialize)]
    struct Document<'a> {
        kind: &'a str,
        source: Option<&'a str>,
        unit: &'a str,
        unique_stacks: usize,
        unresolved_leaf: u64,
        #[serde(flatten)]
        summary: Summary,
    }
    let doc = Document {
        kind: &opts.kind,
        source: opts.source.as_deref(),
        unit: profile.unit.name(),
        unique_stacks: profile.stacks().len(),
        unresolved_leaf: unresolved::leaf_weight(profile),
        summary: summarize(profile, opts),
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
            frames: vec![main, a],
            weight: 6,
        });
        p.push(Stack {
            thread: None,
            frames: vec![main, b],
            weight: 3,
        });
        p.push(Stack {
            thread: None,
            frames: vec![main, a, a],
            weight: 1,
        });
        p.coalesce();
        let s = summarize(&p, &Options::default());
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
            frames: vec![main, a],
            weight: 4,
        });
        let opts = Options {
            kind: "folded".into(),
            source: Some("x.folded".into()),
            ..Default::default()
        };
        let text = render(&p, &opts);
        assert!(text.starts_with("fgbpf folded profile read from x.folded\n"));
        assert!(
            !text.contains("duration") && !text.contains("lost"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&render_json(&p, &opts)).unwrap();
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
