//! Generic readers of kernel maps: stacks from the stack store, every
//! entry of a hash map, per-CPU counters summed, C names.

use std::collections::HashMap;
use std::sync::Arc;

use libbpf_rs::{MapCore, MapFlags};

/// Reads stacks from the `stacks` map of `src/bpf/stacks.bpf.h`, each
/// key once, and the thread names of the keys that hold them, each
/// distinct name once (a whole host's hundreds of thousands of keys share
/// a few thousand names).
pub struct StackReader<'m, M: MapCore> {
    map: &'m M,
    known: &'m HashMap<u64, Arc<[u64]>>,
    /// Stacks read from the map, or found missing there.
    cache: HashMap<u64, Option<Arc<[u64]>>>,
    names: HashMap<Box<[i8]>, Arc<str>>,
    buf: Vec<u8>,
}

impl<'m, M: MapCore> StackReader<'m, M> {
    /// `known`: stacks already read out of the map (and deleted from it)
    /// while the capture ran.
    pub fn new(map: &'m M, known: &'m HashMap<u64, Arc<[u64]>>) -> Self {
        StackReader {
            map,
            known,
            cache: HashMap::new(),
            names: HashMap::new(),
            buf: vec![0; map.value_size() as usize],
        }
    }

    /// The instruction pointers under `key`, leaf first: empty for key 0
    /// (no stack taken), `None` for a stack that could not be stored.
    pub fn get(&mut self, key: u64) -> Option<Arc<[u64]>> {
        if key == 0 {
            return Some(Arc::default());
        }
        if let Some(ips) = self.known.get(&key) {
            return Some(ips.clone());
        }
        if let Some(ips) = self.cache.get(&key) {
            return ips.clone();
        }
        let ips = match self
            .map
            .lookup_into(&key.to_ne_bytes(), &mut self.buf, MapFlags::ANY)
        {
            Ok(true) => Some(ips_of(&self.buf).into()),
            _ => None,
        };
        self.cache.insert(key, ips.clone());
        ips
    }

    /// [`c_name`], shared with every key of the same name.
    pub fn name(&mut self, raw: &[i8]) -> Arc<str> {
        let raw = &raw[..raw.iter().position(|&c| c == 0).unwrap_or(raw.len())];
        if let Some(name) = self.names.get(raw) {
            return name.clone();
        }
        let name: Arc<str> = c_name(raw).into();
        self.names.insert(raw.into(), name.clone());
        name
    }
}

/// A stored stack's instruction pointers, up to the first 0.
pub(super) fn ips_of(buf: &[u8]) -> Vec<u64> {
    buf.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().expect("chunks of 8 bytes")))
        .take_while(|&ip| ip != 0)
        .collect()
}

/// Every entry of a hash map, read in batches where the kernel supports
/// it, else key by key.
pub fn entries<M: MapCore>(map: &M) -> Vec<(Vec<u8>, Vec<u8>)> {
    if let Some(all) = batched(map, false) {
        return all;
    }
    map.keys()
        .filter_map(|k| map.lookup(&k, MapFlags::ANY).ok().flatten().map(|v| (k, v)))
        .collect()
}

/// Every entry of a hash map, each deleted as it is read: in batches
/// where the kernel supports it, else key by key.
pub fn take_entries<M: MapCore>(map: &M) -> Vec<(Vec<u8>, Vec<u8>)> {
    if let Some(all) = batched(map, true) {
        return all;
    }
    let keys: Vec<Vec<u8>> = map.keys().collect();
    keys.into_iter()
        .filter_map(|k| {
            let v = map.lookup(&k, MapFlags::ANY).ok().flatten()?;
            let _ = map.delete(&k);
            Some((k, v))
        })
        .collect()
}

/// libbpf's batch reads of a hash map, to the map's end: `None` when the
/// kernel refuses them (before Linux 5.6) before anything was read.
///
/// The kernel returns whole buckets, so a batch may come back with fewer
/// entries than asked while more follow (a bucket that did not fit), and
/// only ENOENT says the map's end; a bucket larger than the batch is
/// refused with ENOSPC and nothing read. libbpf-rs's batch iterator
/// (0.27) takes a short batch for the last one and stops there: in a
/// storm of new keys that left most of a drained map behind, and the end
/// of the capture never read it (tests/storms.rs).
fn batched<M: MapCore>(map: &M, delete: bool) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    use libbpf_rs::libbpf_sys;
    use std::os::fd::AsRawFd;

    let (ks, vs) = (map.key_size() as usize, map.value_size() as usize);
    // Small at first, doubled while batches come back full: a map read
    // every turn is mostly near empty, and zeroing room for 4,096 entries
    // each time was most of the cost of reading it.
    let mut room = 64usize;
    let (mut keys, mut values) = (vec![0u8; ks * room], vec![0u8; vs * room]);
    // The position token is the kernel's (a bucket number for a hash map):
    // at least as large as a key, as libbpf asks.
    let mut at: Option<Vec<u8>> = None;
    let mut next = vec![0u8; ks.max(8)];
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let fd = map.as_fd().as_raw_fd();
    let mut out = Vec::new();
    loop {
        let mut count = room as u32;
        let from = at.as_mut().map_or(std::ptr::null_mut(), |a| a.as_mut_ptr().cast());
        // SAFETY: keys and values hold `room` entries of the map's key and
        // value sizes, `count` says so; the tokens are at least a key long.
        let ret = unsafe {
            let call = if delete {
                libbpf_sys::bpf_map_lookup_and_delete_batch
            } else {
                libbpf_sys::bpf_map_lookup_batch
            };
            call(
                fd,
                from,
                next.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let err = if ret < 0 { -ret } else { 0 };
        // The count is what was read for any outcome but EFAULT.
        if err != libc::EFAULT {
            let n = (count as usize).min(room);
            out.extend(keys[..n * ks].chunks_exact(ks).zip(values[..n * vs].chunks_exact(vs)).map(|(k, v)| (k.to_vec(), v.to_vec())));
        }
        match err {
            0 => {
                at = Some(next.clone());
                if count as usize >= room && room < 4096 {
                    room *= 2;
                    keys.resize(ks * room, 0);
                    values.resize(vs * room, 0);
                }
            }
            libc::ENOENT => return Some(out),
            libc::EINTR => {}
            libc::ENOSPC if count == 0 && room < 1 << 20 => {
                room *= 2;
                keys.resize(ks * room, 0);
                values.resize(vs * room, 0);
            }
            _ if out.is_empty() => return None,
            _ => return Some(out),
        }
    }
}

/// Sums entry 0 of a per-CPU array of `u64` counters over CPUs, into the
/// counters' struct as the skeleton generated it.
pub fn sum_per_cpu<M: MapCore, T: plain::Plain + Default>(map: &M) -> T {
    let mut sum = vec![0u64; std::mem::size_of::<T>() / 8];
    if let Ok(Some(per_cpu)) = map.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY) {
        for bytes in per_cpu {
            for (s, c) in sum.iter_mut().zip(bytes.chunks_exact(8)) {
                *s += u64::from_ne_bytes(c.try_into().expect("chunks of 8 bytes"));
            }
        }
    }
    let bytes: Vec<u8> = sum.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let mut out = T::default();
    // Cannot fail: `bytes` is exactly as long as `T` when T is all u64s.
    let _ = plain::copy_from_bytes(&mut out, &bytes);
    out
}

/// A C `char[N]` name as a string, up to its first NUL.
pub fn c_name(raw: &[i8]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .map(|&c| c as u8)
        .take_while(|&c| c != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_name_stops_at_nul_and_tolerates_bad_utf8() {
        let raw: Vec<i8> = b"ab\xffc\0zz".iter().map(|&b| b as i8).collect();
        assert_eq!(c_name(&raw), "ab\u{fffd}c");
        assert_eq!(c_name(&[]), "");
    }
}
