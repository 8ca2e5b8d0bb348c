//! Rankings of a profile, shared by the text and JSON reports and the diff:
//! the heaviest functions by self and total weight (recursion counted once
//! per stack), the heaviest callees of the top functions, the heaviest
//! threads, and the time of each pseudo-frame (`[sleeping]`, ...), which is
//! not a function. Functions are counted through a [`Lens`]: by default an
//! inlined fragment's time is its containing function's, and "by total"
//! leaves out runtime plumbing and frames that only pass their time on.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::functions::{is_plumbing, Lens};
use crate::profile::names::{frame_text, leading_frames, Leading};
use crate::profile::{FrameId, FrameKind, Profile, Stack, ThreadId};

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
    /// The weight of stacks by the pseudo-frame they end in (`[sleeping]`,
    /// `[lost stack]`, ...), heaviest first; stacks that end in code are
    /// not listed.
    #[serde(serialize_with = "named_weights")]
    pub pseudo: Vec<(String, u64)>,
    /// Functions left out of `by_total` as plumbing or pass-through.
    pub collapsed: usize,
}

/// What [`summarize`] ranks and how.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Rows in each list.
    pub top: usize,
    /// Functions of `by_total` whose callees are listed.
    pub callees_of: usize,
    pub lens: Lens,
    /// List plumbing and pass-through frames in `by_total` too.
    pub all_frames: bool,
}

impl Options {
    /// `top` rows of everything, no callees: for comparing profiles.
    pub fn every_function(lens: Lens) -> Self {
        Options {
            top: usize::MAX,
            callees_of: 0,
            lens,
            all_frames: true,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            top: 20,
            callees_of: 5,
            lens: Lens::default(),
            all_frames: false,
        }
    }
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
    frame_text(profile.frame(id))
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

/// Calls `visit(stack, frame, callee)` for the first occurrence of each
/// function in each stack, with the function it calls (`None` where the
/// stack ends in it): recursion counts a function's time once per stack.
fn each_first_occurrence(
    profile: &Profile,
    lens: Lens,
    mut visit: impl FnMut(&Stack, FrameId, Option<FrameId>),
) {
    // Stamps instead of a set per stack: stack n marks frame f with n + 1.
    let mut stamp = vec![0u32; profile.frames().len()];
    let mut functions = Vec::new();
    for (n, s) in profile.stacks().iter().enumerate() {
        let mark = n as u32 + 1;
        functions.clear();
        functions.extend(lens.positions(profile, s).map(|i| s.frames[i]));
        for (i, &f) in functions.iter().enumerate() {
            if stamp[f as usize] != mark {
                stamp[f as usize] = mark;
                visit(s, f, functions.get(i + 1).copied());
            }
        }
    }
}

/// A function's callees as seen so far: none, one, or several.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Callees {
    None,
    One(FrameId),
    Several,
}

/// Rankings of a profile: the heaviest functions by self and by total
/// weight, the heaviest callees of the first of them, the heaviest threads
/// and the pseudo-frames' time.
pub fn summarize(profile: &Profile, opts: &Options) -> Summary {
    let (top, callees_of, lens) = (opts.top, opts.callees_of, opts.lens);
    let frames = profile.frames().len();
    let mut self_w = vec![0u64; frames];
    let mut total_w = vec![0u64; frames];
    let mut threads: FxHashMap<ThreadId, u64> = FxHashMap::default();
    let mut pseudo: FxHashMap<FrameId, u64> = FxHashMap::default();
    for s in profile.stacks() {
        // An off-CPU stack ends in its state (`[sleeping]`): the function
        // that waited is the one under it.
        if let Some(leaf) = lens.leaf(profile, s) {
            self_w[leaf as usize] += s.weight;
        }
        if let Some(&last) = s.frames.last() {
            if profile.frame(last).kind == FrameKind::Pseudo {
                *pseudo.entry(last).or_default() += s.weight;
            }
        }
        if let Some(t) = s.thread {
            *threads.entry(t).or_default() += s.weight;
        }
    }
    let mut callees_seen = vec![Callees::None; frames];
    each_first_occurrence(profile, lens, |s, f, callee| {
        total_w[f as usize] += s.weight;
        let seen = &mut callees_seen[f as usize];
        *seen = match (*seen, callee) {
            (Callees::None, Some(c)) => Callees::One(c),
            (Callees::One(a), Some(c)) if a == c => Callees::One(a),
            _ => Callees::Several,
        };
    });

    let top_self = top_frames(profile, &self_w, top);
    // "By total" starts at the user's code: plumbing, and functions that
    // pass all their time to one callee whose total is theirs, are left
    // out unless asked for.
    let mut collapsed = 0;
    let mut listed_total = total_w.clone();
    if !opts.all_frames {
        for (f, w) in listed_total.iter_mut().enumerate() {
            if *w == 0 {
                continue;
            }
            // Only where the callee's row says the same: a callee also
            // reached from elsewhere makes this caller's share news.
            let pass_through = self_w[f] == 0
                && matches!(callees_seen[f], Callees::One(c) if total_w[c as usize] == *w);
            if pass_through || is_plumbing(&profile.frame(f as FrameId).name) {
                *w = 0;
                collapsed += 1;
            }
        }
    }
    let top_total = top_frames(profile, &listed_total, top);
    // Callees only for the functions that list them: a second pass.
    let listed: FxHashMap<FrameId, usize> = top_total
        .iter()
        .take(callees_of)
        .enumerate()
        .map(|(k, &f)| (f, k))
        .collect();
    let mut callees: Vec<FxHashMap<Option<FrameId>, u64>> =
        vec![FxHashMap::default(); listed.len()];
    if !listed.is_empty() {
        each_first_occurrence(profile, lens, |s, f, callee| {
            if let Some(&k) = listed.get(&f) {
                *callees[k].entry(callee).or_default() += s.weight;
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
    threads.truncate(top);
    let mut pseudo: Vec<(String, u64)> = pseudo
        .into_iter()
        .map(|(f, w)| (frame_name(profile, f), w))
        .collect();
    pseudo.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Summary {
        total: profile.total(),
        by_self,
        by_total,
        threads,
        pseudo,
        collapsed,
    }
}

