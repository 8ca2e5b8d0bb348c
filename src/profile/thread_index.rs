//! Finding a profile's thread by what it is (ids, names, group) without
//! keeping each thread twice: the index holds ids by a seeded hash of the
//! thread and compares with the profile's thread table on a hit. A whole
//! host's profile has tens of thousands of threads, and a map keyed by the
//! threads themselves held all their names a second time.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use super::{Thread, ThreadId};

#[derive(Clone, Debug, Default)]
pub(super) struct ThreadIndex {
    /// Seeded per process: thread names come from the target.
    hasher: ahash::RandomState,
    first: FxHashMap<u64, ThreadId>,
    /// Threads whose hash an earlier thread has (a 64-bit collision).
    more: Vec<(u64, ThreadId)>,
}

impl ThreadIndex {
    /// The id of `t` in `threads`, the table this index was built over.
    pub fn find(&self, threads: &[Thread], t: &Thread) -> Option<ThreadId> {
        let h = self.hasher.hash_one(t);
        let &id = self.first.get(&h)?;
        if threads[id as usize] == *t {
            return Some(id);
        }
        self.more
            .iter()
            .find(|&&(mh, mid)| mh == h && threads[mid as usize] == *t)
            .map(|&(_, mid)| mid)
    }

    /// Notes that `t`, not yet in the index, is `id`.
    pub fn insert(&mut self, t: &Thread, id: ThreadId) {
        let h = self.hasher.hash_one(t);
        match self.first.entry(h) {
            Entry::Occupied(_) => self.more.push((h, id)),
            Entry::Vacant(v) => {
                v.insert(id);
            }
        }
    }

    /// Forgets that `t` is `id`.
    pub fn remove(&mut self, t: &Thread, id: ThreadId) {
        let h = self.hasher.hash_one(t);
        if self.first.get(&h) == Some(&id) {
            self.first.remove(&h);
            // A thread of the same hash takes its place.
            if let Some(i) = self.more.iter().position(|&(mh, _)| mh == h) {
                let (_, other) = self.more.swap_remove(i);
                self.first.insert(h, other);
            }
        } else {
            self.more.retain(|&(mh, mid)| !(mh == h && mid == id));
        }
    }
}
