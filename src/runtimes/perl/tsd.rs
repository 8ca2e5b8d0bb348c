//! Where glibc keeps a thread's thread-specific data (`pthread_getspecific`),
//! so that the BPF walker finds each Perl thread's own interpreter
//! (ithreads: `pthread_getspecific(PL_thr_key)`) from the thread's fsbase
//! (glibc's `struct pthread`): the offset of `specific_1stblock[0].data`,
//! which holds the first 32 keys' values 16 bytes apart. It is measured
//! in fgbpf's own process (a key set to a known value, found in its own
//! `struct pthread`), and used for a target only when the target maps the
//! very same libc file (same device and inode): another glibc may lay its
//! `struct pthread` out otherwise, and its threads are then not read.

use std::sync::OnceLock;

use crate::procs::maps;
use crate::procs::mem::Mem;

/// The keys whose values are in `struct pthread` itself.
pub const FIRST_BLOCK_KEYS: u32 = 32;

/// How far into fgbpf's own `struct pthread` the value is looked for.
const SEARCH: usize = 4096;

/// This process's libc (device, inode) and the offset of
/// `specific_1stblock[0].data` in its `struct pthread`; `None` where it
/// could not be measured.
fn own() -> Option<((u64, u64), u16)> {
    static OWN: OnceLock<Option<((u64, u64), u16)>> = OnceLock::new();
    *OWN.get_or_init(|| {
        let libc = libc_file(std::process::id())?;
        Some((libc, measure()?))
    })
}

/// Sets a fresh key to a value no pointer has and finds it in this
/// thread's `struct pthread` (read through /proc/self/mem, which fails
/// rather than faults past its end).
fn measure() -> Option<u16> {
    const VALUE: u64 = 0x5065_726c_f9b5_7e3d;
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a key of this process's own, created, set and deleted here;
    // the value is never dereferenced.
    unsafe {
        if libc::pthread_key_create(&mut key, None) != 0 {
            return None;
        }
        let set = libc::pthread_setspecific(key, VALUE as *const libc::c_void) == 0;
        let at = if set && key < FIRST_BLOCK_KEYS { find_value(libc::pthread_self() as u64, VALUE) } else { None };
        libc::pthread_key_delete(key);
        let data = at?.checked_sub(16 * key as usize)?;
        u16::try_from(data).ok()
    }
}

fn find_value(base: u64, value: u64) -> Option<usize> {
    let mem = Mem::open(std::process::id()).ok()?;
    let mut found = None;
    for chunk in (0..SEARCH).step_by(512) {
        let Some(bytes) = mem.bytes(base + chunk as u64, 512) else { break };
        for (i, w) in bytes.chunks_exact(8).enumerate() {
            if u64::from_ne_bytes(w.try_into().expect("8 bytes")) == value {
                if found.is_some() {
                    return None;
                }
                found = Some(chunk + i * 8);
            }
        }
    }
    found
}

/// The (device, inode) of the libc `pid` maps.
fn libc_file(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let m = text.lines().filter_map(maps::parse_line).find(|m| {
        let base = m.path.rsplit('/').next().unwrap_or(m.path);
        m.inode != 0 && (base == "libc.so.6" || base.starts_with("libc-2."))
    })?;
    let meta = std::fs::metadata(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end)).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The offset of `specific_1stblock[0].data` in the `struct pthread` of
/// `mem`'s process when it maps fgbpf's own libc; else `None` (its other
/// threads' interpreters are then not read).
pub fn for_process(mem: &Mem) -> Option<u16> {
    let (libc, data) = own()?;
    (libc_file(mem.pid()) == Some(libc)).then_some(data)
}

#[cfg(test)]
mod tests {
    /// On this machine's glibc (the tests run on glibc systems only), the
    /// offset is found, and a process of the same libc (this one) gets it.
    #[test]
    fn the_offset_is_measured_in_this_process() {
        let (_, data) = super::own().expect("glibc's thread-specific data measured in this process");
        assert!(data >= 16 && data < 4096 && data % 8 == 0, "{data}");
        let mem = crate::procs::mem::Mem::open(std::process::id()).unwrap();
        assert_eq!(super::for_process(&mem), Some(data));
    }
}
