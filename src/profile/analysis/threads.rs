//! Where each thread's time went: its total, split into on-CPU and each
//! off-CPU state, with the heaviest sites ([`super::waits::Site`]) of each,
//! heaviest thread first. The text table, the JSON report and the findings
//! read these rows.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::waits::{site, Site};
use super::{category, is_off_cpu, Lens, STATES};
use crate::profile::names::{leading_frames, Leading};
use crate::profile::Profile;

/// The column names, in [`super::category`] order.
pub const COLUMNS: [&str; 4] = ["on-CPU", STATES[0].name(), STATES[1].name(), STATES[2].name()];

#[derive(Clone, Debug, Serialize)]
pub struct SiteShare {
    /// "on-CPU" or the off-CPU state.
    pub state: &'static str,
    pub site: String,
    pub weight: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ThreadRow {
    /// `process-PID / thread-TID`, or `process-PID` for a process row.
    pub thread: String,
    pub total: u64,
    pub on_cpu: u64,
    pub sleeping: u64,
    pub uninterruptible: u64,
    pub runqueue: u64,
    /// The heaviest sites of each column, by column.
    pub sites: Vec<SiteShare>,
}

impl ThreadRow {
    /// Weight by column, in [`COLUMNS`] order.
    pub fn columns(&self) -> [u64; 4] {
        [self.on_cpu, self.sleeping, self.uninterruptible, self.runqueue]
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Table {
    pub rows: Vec<ThreadRow>,
    /// Threads (or processes) beyond the rows listed, and their weight.
    pub more: usize,
    pub more_weight: u64,
}

/// One row's sums while the stacks are read.
#[derive(Default)]
struct Acc {
    by_cat: [u64; 4],
    sites: [FxHashMap<Site, u64>; 4],
}

/// Time per thread (or per process with [`Leading::Process`]) of the
/// `rows` heaviest, each with its `sites` heaviest sites per column.
pub fn table(profile: &Profile, leading: Leading, lens: Lens, rows: usize, sites: usize) -> Table {
    let mut acc: FxHashMap<String, Acc> = FxHashMap::default();
    // Sites are the costly part: one per distinct stack, not per thread.
    for s in profile.stacks() {
        let Some(t) = s.thread else { continue };
        let name = leading_frames(profile.thread(t), leading).join(" / ");
        let cat = category(profile, s);
        let a = acc.entry(name).or_default();
        a.by_cat[cat] += s.weight;
        if sites > 0 {
            *a.sites[cat].entry(site(profile, s, lens)).or_default() += s.weight;
        }
    }
    let mut all: Vec<(String, Acc)> = acc.into_iter().collect();
    let sum = |a: &Acc| a.by_cat.iter().sum::<u64>();
    all.sort_by(|a, b| sum(&b.1).cmp(&sum(&a.1)).then_with(|| a.0.cmp(&b.0)));
    let more = all.len().saturating_sub(rows);
    let more_weight = all.iter().skip(rows).map(|(_, a)| sum(a)).sum();
    all.truncate(rows);
    let rows = all
        .into_iter()
        .map(|(thread, a)| {
            let total = sum(&a);
            let mut shares = Vec::new();
            for (cat, by_site) in a.sites.into_iter().enumerate() {
                let mut top: Vec<(Site, u64)> = by_site.into_iter().collect();
                top.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
                shares.extend(top.into_iter().take(sites).map(|(s, w)| SiteShare {
                    state: COLUMNS[cat],
                    site: s.to_string(),
                    weight: w,
                }));
            }
            ThreadRow {
                total,
                on_cpu: a.by_cat[0],
                sleeping: a.by_cat[1],
                uninterruptible: a.by_cat[2],
                runqueue: a.by_cat[3],
                thread,
                sites: shares,
            }
        })
        .collect();
    Table {
        rows,
        more,
        more_weight,
    }
}

/// Whether any stack of `profile` is off-CPU time.
pub fn has_off_cpu(profile: &Profile) -> bool {
    profile.stacks().iter().any(|s| is_off_cpu(profile, s))
}
