//! Reading the `wakers` map of `src/bpf/wakers.bpf.h` (`--wakers`): a
//! counted wait's waker key becomes the waker's thread and stacks, read
//! once per key, with the stacks from the same stack store as every other.

use std::collections::HashMap;

use libbpf_rs::{MapCore, MapFlags};

use super::drain::StackReader;
use crate::bpf::types;
use crate::profile::RawStack;

pub(super) struct WakerReader<'m, M: MapCore> {
    map: Option<&'m M>,
    cache: HashMap<u64, Option<Box<RawStack>>>,
    /// Waits whose waker key was recorded but could not be read back.
    pub missing: u64,
}

impl<'m, M: MapCore> WakerReader<'m, M> {
    /// `map` is `None` when the capture did not record wakers.
    pub fn new(map: Option<&'m M>) -> Self {
        WakerReader {
            map,
            cache: HashMap::new(),
            missing: 0,
        }
    }

    /// The waker under `key` (0: none recorded), its stacks read through
    /// `stacks`.
    pub fn get<S: MapCore>(&mut self, key: u64, stacks: &mut StackReader<'_, S>) -> Option<Box<RawStack>> {
        let map = self.map?;
        if key == 0 {
            return None;
        }
        if let Some(w) = self.cache.get(&key) {
            return w.clone();
        }
        let w = lookup(map, key).map(|raw| {
            Box::new(RawStack {
                pid: raw.pid,
                // Clock ticks' low 32 bits (proc_start).
                start: raw.start as u32,
                tid: raw.tid,
                comm: stacks.name(&raw.comm),
                user: stacks.get(raw.user_stack).unwrap_or_default(),
                kernel: stacks.get(raw.kern_stack).unwrap_or_default(),
                ..Default::default()
            })
        });
        if w.is_none() {
            self.missing += 1;
        }
        self.cache.insert(key, w.clone());
        w
    }
}

/// The waker recorded under `key` (0: none) in the `wakers` map.
pub(super) fn lookup<M: MapCore>(map: &M, key: u64) -> Option<types::fg_waker> {
    if key == 0 {
        return None;
    }
    let bytes = map.lookup(&key.to_ne_bytes(), MapFlags::ANY).ok()??;
    let mut raw = types::fg_waker::default();
    plain::copy_from_bytes(&mut raw, &bytes).ok()?;
    Some(raw)
}
