//! The running totals of a capture: for each key drained from the kernel
//! (a `struct fg_key`'s bytes without its slices), the spans of when its
//! weight fell. A whole-host capture holds hundreds of thousands of keys,
//! so they are kept densely: entries in fixed-size chunks (a chunk is
//! never copied as the totals grow, and the end frees each one as it is
//! read out) and an index of 4-byte entry numbers by a seeded hash of the
//! key (the keys follow the profiled programs' stacks). One span stays
//! inline: most keys only ever get one.

use hashbrown::HashTable;

pub use crate::profile::Spans;

/// Entries per chunk: 4096 entries of 96 bytes, 384 KB a chunk.
const CHUNK: usize = 4096;

pub(super) struct Totals<K> {
    chunks: Vec<Vec<(K, Spans)>>,
    index: HashTable<u32>,
    hasher: ahash::RandomState,
}

impl<K: std::hash::Hash + Eq + Copy> Default for Totals<K> {
    fn default() -> Self {
        Totals {
            chunks: Vec::new(),
            index: HashTable::new(),
            hasher: ahash::RandomState::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Copy> Totals<K> {
    pub fn len(&self) -> usize {
        match self.chunks.last() {
            Some(last) => (self.chunks.len() - 1) * CHUNK + last.len(),
            None => 0,
        }
    }

    /// `key`'s spans, and whether the key is new (added empty).
    pub fn entry(&mut self, key: K) -> (&mut Spans, bool) {
        let hash = self.hasher.hash_one(key);
        let found = self.index.find(hash, |&i| key_at(&self.chunks, i) == &key).copied();
        let (i, new) = match found {
            Some(i) => (i, false),
            None => {
                let i = u32::try_from(self.len()).expect("fewer than 2^32 keys");
                if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
                    self.chunks.push(Vec::with_capacity(CHUNK));
                }
                self.chunks.last_mut().expect("a chunk with room").push((key, Spans::new()));
                let (chunks, hasher) = (&self.chunks, &self.hasher);
                self.index.insert_unique(hash, i, |&j| hasher.hash_one(key_at(chunks, j)));
                (i, true)
            }
        };
        let i = i as usize;
        (&mut self.chunks[i / CHUNK][i % CHUNK].1, new)
    }

    #[cfg(test)]
    pub fn contains(&self, key: &K) -> bool {
        let hash = self.hasher.hash_one(key);
        self.index.find(hash, |&i| key_at(&self.chunks, i) == key).is_some()
    }

    /// About how many bytes the totals hold: their chunks, index and the
    /// spans that did not fit inline.
    pub fn bytes(&self) -> usize {
        let entry = std::mem::size_of::<(K, Spans)>();
        let spilled: usize = self
            .iter()
            .filter(|(_, s)| s.spilled())
            .map(|(_, s)| s.capacity() * std::mem::size_of::<crate::profile::time::Span>())
            .sum();
        self.chunks.len() * CHUNK * entry + self.index.capacity() * 5 + spilled
    }

    pub fn iter(&self) -> impl Iterator<Item = &(K, Spans)> {
        self.chunks.iter().flatten()
    }

    pub fn spans_mut(&mut self) -> impl Iterator<Item = &mut Spans> {
        self.chunks.iter_mut().flatten().map(|(_, s)| s)
    }

    /// Every entry, each chunk freed once read; the index first.
    /// Keeps the entries `keep` says to keep (it may change their spans),
    /// in their order. The index is not hashed again: the kept entries'
    /// slots are renumbered in it.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut Spans) -> bool) {
        let mut to: Vec<u32> = Vec::with_capacity(self.len());
        let mut next = 0u32;
        for (k, spans) in self.chunks.iter_mut().flatten() {
            if keep(k, spans) {
                to.push(next);
                next += 1;
            } else {
                to.push(u32::MAX);
            }
        }
        if next as usize == to.len() {
            return;
        }
        let old = std::mem::take(&mut self.chunks);
        for (i, entry) in old.into_iter().flatten().enumerate() {
            if to[i] == u32::MAX {
                continue;
            }
            if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
                self.chunks.push(Vec::with_capacity(CHUNK));
            }
            self.chunks.last_mut().expect("a chunk with room").push(entry);
        }
        self.index.retain(|i| match to[*i as usize] {
            u32::MAX => false,
            j => {
                *i = j;
                true
            }
        });
    }

    pub fn into_entries(self) -> impl Iterator<Item = (K, Spans)> {
        drop(self.index);
        self.chunks.into_iter().flatten()
    }
}

fn key_at<K>(chunks: &[Vec<(K, Spans)>], i: u32) -> &K {
    let i = i as usize;
    &chunks[i / CHUNK][i % CHUNK].0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Span;

    #[test]
    fn retained_keys_are_found_again_and_dropped_ones_not() {
        let mut t: Totals<[u8; 8]> = Totals::default();
        let n = CHUNK as u64 * 2 + 5;
        for k in 0..n {
            t.entry(k.to_ne_bytes()).0.push(Span::at(k as u32, k));
        }
        // Every third key goes; the kept ones' spans change.
        t.retain(|k, spans| {
            spans[0].weight += 1;
            u64::from_ne_bytes(*k) % 3 != 0
        });
        assert_eq!(t.len(), (n - n.div_ceil(3)) as usize);
        for k in 0..n {
            assert_eq!(t.contains(&k.to_ne_bytes()), k % 3 != 0, "key {k}");
        }
        for k in (0..n).filter(|k| k % 3 != 0) {
            let (spans, new) = t.entry(k.to_ne_bytes());
            assert!(!new);
            assert_eq!(spans[0].weight, k + 1);
        }
        // A key dropped comes back as a new one, after the kept.
        let (spans, new) = t.entry(3u64.to_ne_bytes());
        assert!(new && spans.is_empty());
        let last = t.iter().last().expect("entries").0;
        assert_eq!(u64::from_ne_bytes(last), 3);
        t.retain(|_, _| true);
        assert_eq!(t.len(), (n - n.div_ceil(3)) as usize + 1);
    }

    #[test]
    fn keys_are_found_again_across_chunks() {
        let mut t: Totals<[u8; 8]> = Totals::default();
        let n = CHUNK as u64 * 2 + 5;
        for k in 0..n {
            let (spans, new) = t.entry(k.to_ne_bytes());
            assert!(new && spans.is_empty());
            spans.push(Span::at(k as u32, k));
        }
        assert_eq!(t.len(), n as usize);
        for k in (0..n).rev() {
            let (spans, new) = t.entry(k.to_ne_bytes());
            assert!(!new, "key {k} added twice");
            assert_eq!(spans[0].weight, k);
            spans.push(Span::at(0, 1));
            assert!(t.contains(&k.to_ne_bytes()));
        }
        assert!(!t.contains(&n.to_ne_bytes()));
        assert_eq!(t.len(), n as usize);
        let read: Vec<(u64, usize)> = t
            .into_entries()
            .map(|(k, s)| (u64::from_ne_bytes(k), s.len()))
            .collect();
        assert_eq!(read.len(), n as usize);
        assert!(read.iter().enumerate().all(|(i, &(k, spans))| k == i as u64 && spans == 2));
    }

    #[test]
    fn one_span_stays_inline() {
        let mut t: Totals<u32> = Totals::default();
        t.entry(7).0.push(Span::at(1, 1));
        assert!(!t.iter().next().expect("one").1.spilled());
        t.entry(7).0.push(Span::at(2, 1));
        assert!(t.iter().next().expect("one").1.spilled());
        assert_eq!(std::mem::size_of::<(crate::probe::counts::Key, Spans)>(), 96);
    }
}
