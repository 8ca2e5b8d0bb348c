//! A goroutine's pprof labels, read from a live Go process: the BPF
//! walker gives each stack the address in `runtime.g.labels` (a pointer
//! to what `runtime/pprof.Do` made: a `map[string]string` up to Go 1.23, a
//! sorted list of key and value strings from 1.24), announced the first
//! time a process shows it; its keys and values are read here once, while
//! they live. Everything read is the target's: every count, length and
//! pointer is bounded, the text decoded lossily, and labels that do not
//! read as such are not taken for labels.

use std::collections::HashMap;
use std::sync::Arc;

use super::{LabelLayout, LabelList, LabelMap};
use crate::procs::mem::Mem;

/// One goroutine's labels, sorted by key (as pprof writes them).
pub type Labels = Arc<[(String, String)]>;

/// Labels a map may hold (pprof's are a few); longer maps are not read.
const MAX_LABELS: u64 = 64;
/// Buckets read at most: 2^4, room for 104 entries at Go's load factor.
const MAX_LOG2_BUCKETS: u8 = 4;
/// Overflow buckets followed from one bucket.
const MAX_OVERFLOW: usize = 4;
/// Bytes of one key or value kept.
const MAX_TEXT: u64 = 256;
/// A tophash byte below this marks an empty or evacuated slot.
const MIN_TOP_HASH: u8 = 5;
/// Label sets kept per process.
const MAX_KEPT: usize = 65536;

/// Why a goroutine's labels have no names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unread {
    /// The map could not be read, or did not read as a map of strings:
    /// freed (the goroutine's request over) before fgbpf read it.
    Gone,
}

/// Reads and keeps the label maps of one process.
pub struct Reader {
    mem: Option<Mem>,
    layout: LabelLayout,
    read: HashMap<u64, Result<Labels, Unread>>,
}

impl Reader {
    pub fn new(pid: u32, layout: LabelLayout) -> Reader {
        Reader { mem: Mem::open(pid).ok(), layout, read: HashMap::new() }
    }

    /// Reads the labels at `addr` (a `g.labels`), once.
    pub fn read(&mut self, addr: u64) {
        if addr == 0 || self.read.contains_key(&addr) {
            return;
        }
        // Full: begun anew (the stacks named later re-read what they hold
        // while they are drained; those that cannot are counted unread).
        if self.read.len() >= MAX_KEPT {
            self.read.clear();
        }
        let got = self
            .mem
            .as_ref()
            .and_then(|m| match &self.layout {
                LabelLayout::Map(l) => read_map(m, l, addr),
                LabelLayout::List(l) => read_list(m, l, addr),
            })
            .ok_or(Unread::Gone);
        self.read.insert(addr, got);
    }

    /// The labels read at `addr`; `None` when never read.
    pub fn labels(&self, addr: u64) -> Option<Result<Labels, Unread>> {
        self.read.get(&addr).cloned()
    }
}

/// The word at `at` in `bytes`.
fn word(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// A Go string's (pointer, length) at `at` in `bytes`.
fn string_at(bytes: &[u8], at: usize) -> Option<(u64, u64)> {
    Some((word(bytes, at)?, word(bytes, at + 8)?))
}

/// The text of a Go string, lossily, at most [`MAX_TEXT`] bytes.
fn text(mem: &Mem, (ptr, len): (u64, u64)) -> Option<String> {
    if len == 0 {
        return Some(String::new());
    }
    if len > MAX_TEXT {
        let b = mem.bytes(ptr, MAX_TEXT as usize)?;
        return Some(format!("{}…", String::from_utf8_lossy(&b)));
    }
    Some(String::from_utf8_lossy(&mem.bytes(ptr, len as usize)?).into_owned())
}

/// The entries of the map `*labels` points to, or `None` when it does not
/// read as a map of strings of the expected size.
fn read_map(mem: &Mem, l: &LabelMap, labels: u64) -> Option<Labels> {
    let hmap = mem.u64(labels).filter(|&h| h != 0)?;
    let count = mem.u64(hmap + u64::from(l.count))?;
    let log2 = mem.u8(hmap + u64::from(l.log2_buckets))?;
    if count > MAX_LABELS || log2 > MAX_LOG2_BUCKETS {
        return None;
    }
    let bucket_size = usize::from(l.overflow) + 8;
    let mut entries: Vec<(String, String)> = Vec::new();
    // A map being grown still holds entries not yet moved in its old
    // buckets (half as many); those moved are marked there.
    let tables = [
        (mem.u64(hmap + u64::from(l.buckets))?, 1u64 << log2),
        (mem.u64(hmap + u64::from(l.old_buckets))?, (1u64 << log2) / 2),
    ];
    for (buckets, n) in tables {
        if buckets == 0 || n == 0 {
            continue;
        }
        for i in 0..n {
            let mut at = buckets + i * bucket_size as u64;
            for _ in 0..=MAX_OVERFLOW {
                let b = mem.bytes(at, bucket_size)?;
                for slot in 0..8 {
                    if b[usize::from(l.top_hash) + slot] < MIN_TOP_HASH {
                        continue;
                    }
                    let key = text(mem, string_at(&b, usize::from(l.keys) + slot * 16)?)?;
                    let value = text(mem, string_at(&b, usize::from(l.values) + slot * 16)?)?;
                    if entries.len() as u64 >= MAX_LABELS {
                        return None;
                    }
                    if !entries.iter().any(|(k, _)| *k == key) {
                        entries.push((key, value));
                    }
                }
                at = word(&b, usize::from(l.overflow))?;
                if at == 0 {
                    break;
                }
            }
        }
    }
    // The count Go keeps must be what was found: a map freed and its
    // memory reused reads otherwise.
    if entries.len() as u64 != count {
        return None;
    }
    entries.sort();
    Some(entries.into())
}

/// The labels of the `labelMap` at `labels` (Go 1.24: a slice of key and
/// value strings, sorted by key), or `None` when they do not read as such.
fn read_list(mem: &Mem, l: &LabelList, labels: u64) -> Option<Labels> {
    let slice = labels + u64::from(l.list);
    let array = mem.u64(slice + u64::from(l.array))?;
    let len = mem.u64(slice + u64::from(l.len))?;
    if len > MAX_LABELS || (array == 0 && len > 0) {
        return None;
    }
    let size = usize::from(l.size);
    let bytes = if len == 0 { Vec::new() } else { mem.bytes(array, size * len as usize)? };
    let mut entries: Vec<(String, String)> = Vec::with_capacity(len as usize);
    for at in (0..len as usize).map(|i| i * size) {
        let key = text(mem, string_at(&bytes, at + usize::from(l.key))?)?;
        let value = text(mem, string_at(&bytes, at + usize::from(l.value))?)?;
        entries.push((key, value));
    }
    // pprof keeps them sorted, each key once: memory reused since reads
    // otherwise.
    if entries.windows(2).any(|w| w[0].0 >= w[1].0) {
        return None;
    }
    Some(entries.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go 1.24's layout: labelMap{LabelSet{list []label}}, label{key, value string}.
    const LIST: LabelList = LabelList { list: 0, array: 0, len: 8, key: 0, value: 16, size: 32 };

    /// A labelMap in this process's memory holding `pairs`, read back.
    fn read_back(pairs: &[(&str, &str)]) -> Option<Labels> {
        let words: Vec<u64> = pairs
            .iter()
            .flat_map(|(k, v)| [k.as_ptr() as u64, k.len() as u64, v.as_ptr() as u64, v.len() as u64])
            .collect();
        let header = [words.as_ptr() as u64, pairs.len() as u64, pairs.len() as u64];
        let mem = Mem::open(std::process::id()).unwrap();
        read_list(&mem, &LIST, header.as_ptr() as u64)
    }

    #[test]
    fn go_1_24_labels_are_read_from_their_sorted_list() {
        let got = read_back(&[("route", "/api"), ("user", "ann")]).unwrap();
        assert_eq!(&*got, &[("route".to_string(), "/api".to_string()), ("user".to_string(), "ann".to_string())]);
        assert_eq!(read_back(&[]).unwrap().len(), 0);
        // What pprof never writes is not taken for labels: unsorted keys,
        // a key twice (memory reused since).
        assert!(read_back(&[("user", "ann"), ("route", "/api")]).is_none());
        assert!(read_back(&[("route", "/a"), ("route", "/b")]).is_none());
    }
}
