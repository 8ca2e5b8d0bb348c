//! Walks cut at code with neither an unwind row nor a frame pointer, told
//! apart by what the tables hold when they are read: a walk whose last
//! frame a row of its process's tables covers now was taken before that
//! binary's table was placed for the process (a whole host's first
//! moments, while its tables are built), not at code no row covers. Such
//! walks are [`Walk::Late`]; the others stay [`Walk::Lost`].

use std::collections::HashMap;

use libbpf_rs::MapCore;

use super::seeds::proc_entry;
use super::unwind::Tables;
use crate::bpf::types;
use crate::procs::unwind::CfaType;
use crate::profile::build::adjusted;
use crate::profile::{RawStack, Walk};

/// Marks the lost walks of `stacks` whose last frame a row covers now
/// (`proc_unwind`: the processes' mappings, `tables`: their rows).
pub(super) fn mark<M: MapCore>(stacks: &mut [RawStack], proc_unwind: &M, tables: &Tables) {
    let mut entries: HashMap<u32, Option<Box<types::fg_proc_unwind>>> = HashMap::new();
    for s in stacks.iter_mut().filter(|s| s.walk == Some(Walk::Lost)) {
        let Some(pc) = adjusted(&s.user).last() else { continue };
        let entry = entries.entry(s.pid).or_insert_with(|| proc_entry(proc_unwind, s.pid).map(Box::new));
        let Some(e) = entry else { continue };
        let maps = &e.maps[..(e.count as usize).min(e.maps.len())];
        if covered(maps, pc, |m, pc| tables.row_for(m, pc).is_some_and(|r| r.cfa() != CfaType::None)) {
            s.walk = Some(Walk::Late);
        }
    }
}

/// Whether a row covers `pc` in the mapping of `maps` that holds it.
fn covered(maps: &[types::fg_mapping], pc: u64, row: impl Fn(&types::fg_mapping, u64) -> bool) -> bool {
    maps.iter().find(|m| pc >= m.start && pc < m.end).is_some_and(|m| row(m, pc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_that_covers_the_last_frame_now_makes_the_walk_late() {
        let m = |start, end| types::fg_mapping { start, end, ..Default::default() };
        let maps = [m(0x1000, 0x2000), m(0x5000, 0x6000)];
        // Rows for the second mapping only, from 0x5100.
        let rows = |m: &types::fg_mapping, pc: u64| m.start == 0x5000 && pc >= 0x5100;
        assert!(covered(&maps, 0x5200, rows));
        assert!(!covered(&maps, 0x5050, rows), "below the first row");
        assert!(!covered(&maps, 0x1500, rows), "a mapping without rows");
        assert!(!covered(&maps, 0x3000, rows), "no mapping");
    }
}
