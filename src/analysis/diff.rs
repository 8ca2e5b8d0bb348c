//! What moved between two profiles: every function whose share of the
//! total (or of the self time) changed by more than a threshold, biggest
//! move first. `fgbpf diff` renders it as `regressions.txt`.

use std::collections::HashMap;

use super::functions::Lens;
use super::ranking::Options;
use super::{pct, summarize};
use crate::profile::Profile;

/// How one function's share of the total moved, in percentage points.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub name: String,
    /// Share of the stacks that contain the function, before and after.
    pub total: (f64, f64),
    /// Share of the stacks that end in it.
    pub self_: (f64, f64),
    /// After minus before, in raw weight, breaking ties between shares.
    pub weight_change: i128,
}

impl Change {
    /// The larger move of the two shares, signed.
    pub fn points(&self) -> f64 {
        let t = self.total.1 - self.total.0;
        let s = self.self_.1 - self.self_.0;
        if s.abs() > t.abs() {
            s
        } else {
            t
        }
    }
}

fn shares(profile: &Profile) -> (u64, HashMap<String, (u64, u64)>) {
    let s = summarize(profile, &Options::every_function(Lens::default()));
    let map = s
        .by_total
        .into_iter()
        .map(|r| (r.name, (r.total_weight, r.self_weight)))
        .collect();
    (s.total, map)
}

/// Every function whose total or self share moved by more than
/// `threshold` points, biggest move first. Ties are common: a caller that
/// only passes time on moves exactly as much as its callee, and since
/// shares sum to 100%, a function that got faster makes the others' shares
/// grow by as much. So on a tie the function whose self share moved more
/// comes first (it spent the time), then the one whose own weight changed
/// more (it is the one that changed).
pub fn changes(before: &Profile, after: &Profile, threshold: f64) -> Vec<Change> {
    let (bt, b) = shares(before);
    let (at, a) = shares(after);
    let mut names: Vec<&String> = b.keys().chain(a.keys()).collect();
    names.sort();
    names.dedup();
    let mut out: Vec<Change> = names
        .into_iter()
        .map(|n| {
            let (bw, bs) = b.get(n).copied().unwrap_or_default();
            let (aw, as_) = a.get(n).copied().unwrap_or_default();
            Change {
                name: n.clone(),
                total: (pct(bw, bt), pct(aw, at)),
                self_: (pct(bs, bt), pct(as_, at)),
                weight_change: aw as i128 - bw as i128,
            }
        })
        .filter(|c| {
            (c.total.1 - c.total.0).abs() > threshold || (c.self_.1 - c.self_.0).abs() > threshold
        })
        .collect();
    // Compared at the printed precision, so float noise does not decide.
    let key = |points: f64| (points.abs() * 100.0).round() as i64;
    let self_points = |c: &Change| c.self_.1 - c.self_.0;
    out.sort_by(|x, y| {
        key(y.points())
            .cmp(&key(x.points()))
            .then_with(|| key(self_points(y)).cmp(&key(self_points(x))))
            .then_with(|| y.weight_change.abs().cmp(&x.weight_change.abs()))
            .then_with(|| x.name.cmp(&y.name))
    });
    out
}

