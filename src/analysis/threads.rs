//! Where each thread's time went: its total, split into on-CPU and each
//! off-CPU state, with the heaviest sites ([`super::waits::Site`]) of each,
//! heaviest thread first. The text table, the JSON report and the findings
//! read these rows.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::waits::{Site, Sites};
use super::{category, is_off_cpu, STATES};
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

/// Time per thread (or per process with [`Leading::Process`]) of the
/// `rows` heaviest, each with its `sites` heaviest sites per column.
/// Two passes over the stacks: the sums of every row first, then the
/// sites of the rows listed only (a whole host has tens of thousands of
/// threads, each with its own stacks' sites).
pub fn table(profile: &Profile, leading: Leading, named: &Sites, rows: usize, sites: usize) -> Table {
    // The row of each thread, by its name: threads of one name (a
    // process's, with Leading::Process) share a row.
    let mut row_of: Vec<u32> = Vec::with_capacity(profile.threads().len());
    let mut names: Vec<String> = Vec::new();
    let mut index: FxHashMap<String, u32> = FxHashMap::default();
    for t in profile.threads() {
        let name = leading_frames(t, leading).join(" / ");
        let next = names.len() as u32;
        let row = *index.entry(name.clone()).or_insert_with(|| {
            names.push(name);
            next
        });
        row_of.push(row);
    }
    drop(index);
    let mut by_cat: Vec<[u64; 4]> = vec![[0; 4]; names.len()];
    for s in profile.stacks() {
        let Some(t) = s.thread else { continue };
        by_cat[row_of[t as usize] as usize][category(profile, s)] += s.weight;
    }
    let sum = |c: &[u64; 4]| c.iter().sum::<u64>();
    let mut order: Vec<u32> = (0..names.len() as u32).filter(|&r| sum(&by_cat[r as usize]) > 0).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        sum(&by_cat[b]).cmp(&sum(&by_cat[a])).then_with(|| names[a].cmp(&names[b]))
    });
    let more = order.len().saturating_sub(rows);
    let more_weight = order.iter().skip(rows).map(|&r| sum(&by_cat[r as usize])).sum();
    order.truncate(rows);
    // The sites of the rows listed.
    let mut listed: FxHashMap<u32, [FxHashMap<Site, u64>; 4]> = FxHashMap::default();
    if sites > 0 {
        for &r in &order {
            listed.insert(r, Default::default());
        }
        for s in profile.stacks() {
            let Some(t) = s.thread else { continue };
            if let Some(by_site) = listed.get_mut(&row_of[t as usize]) {
                *by_site[category(profile, s)].entry(named.site(profile, s)).or_default() += s.weight;
            }
        }
    }
    let rows = order
        .into_iter()
        .map(|r| {
            let c = by_cat[r as usize];
            let mut shares = Vec::new();
            for (cat, by_site) in listed.remove(&r).unwrap_or_default().into_iter().enumerate() {
                let mut top: Vec<(Site, u64)> = by_site.into_iter().collect();
                top.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
                shares.extend(top.into_iter().take(sites).map(|(s, w)| SiteShare {
                    state: COLUMNS[cat],
                    site: s.to_string(),
                    weight: w,
                }));
            }
            ThreadRow {
                total: sum(&c),
                on_cpu: c[0],
                sleeping: c[1],
                uninterruptible: c[2],
                runqueue: c[3],
                thread: std::mem::take(&mut names[r as usize]),
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
