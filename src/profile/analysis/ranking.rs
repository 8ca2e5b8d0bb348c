//! Rankings of a profile, shared by the text and JSON reports and the diff:
//! the heaviest functions by self and total weight (recursion counted once
//! per stack), the heaviest callees of the top functions, the heaviest
//! threads.

use rustc_hash::FxHashMap;
use serde::Serialize;

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

/// Calls `visit(index, frame)` for the first occurrence of each frame in
/// each stack: recursion counts a function's time once per stack.
fn each_first_occurrence(
    profile: &Profile,
    mut visit: impl FnMut(&Stack, usize, FrameId),
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

/// Rankings of a profile: `top` rows of the heaviest functions by self and
/// by total weight, the heaviest callees of the first `callees_of`, and
/// the heaviest threads.
pub fn summarize(profile: &Profile, top: usize, callees_of: usize) -> Summary {
    let frames = profile.frames().len();
    let mut self_w = vec![0u64; frames];
    let mut total_w = vec![0u64; frames];
    let mut threads: FxHashMap<ThreadId, u64> = FxHashMap::default();
    for s in profile.stacks() {
        // An off-CPU stack ends in its state (`[sleeping]`): the function
        // that waited is the frame under it. Pseudo-frames stay the self
        // frame only of stacks that have nothing else.
        let leaf = s
            .frames
            .iter()
            .rev()
            .find(|&&f| profile.frame(f).kind != FrameKind::Pseudo)
            .or(s.frames.last());
        if let Some(&leaf) = leaf {
            self_w[leaf as usize] += s.weight;
        }
        if let Some(t) = s.thread {
            *threads.entry(t).or_default() += s.weight;
        }
    }
    each_first_occurrence(profile, |s, _, f| total_w[f as usize] += s.weight);

    let top_self = top_frames(profile, &self_w, top);
    let top_total = top_frames(profile, &total_w, top);
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
    threads.truncate(top);
    Summary {
        total: profile.total(),
        by_self,
        by_total,
        threads,
    }
}

