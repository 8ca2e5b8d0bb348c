//! Walks by file (src/bpf/files.bpf.h), the user-space half: the handle on
//! `file_tables` into which the unwind tables write each binary's rows
//! ([`super::unwind`]), and the mappings the walker found in processes
//! not read yet (`found_maps`), each file-backed one with the path its
//! program was exec'd by (`exec_paths`), taken every turn of the capture
//! so that the registry names those processes' frames after they are gone
//! ([`crate::procs::registry::Registry::place_found`]).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::drain::take_entries;
use crate::bpf::{types, FgbpfSkel};
use super::{bpf_error, CaptureError, Probe};
use crate::procs::registry::FoundMap;

/// An owned handle on the loaded `file_tables`.
pub(super) fn handle(skel: &FgbpfSkel<'_>) -> Result<MapHandle, CaptureError> {
    MapHandle::try_from(&skel.maps.file_tables).map_err(|e| bpf_error("opening the file tables' map", e))
}

impl Probe {
    /// The mappings the walker found since the last call, by process (PID
    /// and start), taken out of the kernel's map. Binaries found without
    /// rows have them built, for the next processes of the same program.
    pub fn found(&mut self) -> Vec<((u32, u32), Vec<FoundMap>)> {
        let mut by: HashMap<(u32, u32), Vec<FoundMap>> = HashMap::new();
        let mut paths: HashMap<(u64, u64), Option<PathBuf>> = HashMap::new();
        // In batches: key by key, three calls an entry were a fifth of a
        // flight recorder's CPU under the soak's churn.
        for (k, value) in take_entries(&self.skel.maps.found_maps) {
            let (mut key, mut v) = (types::fg_found_key::default(), types::fg_found_map::default());
            if plain::copy_from_bytes(&mut key, &k).is_err() || plain::copy_from_bytes(&mut v, &value).is_err() {
                continue;
            }
            let file = (v.dev, v.ino);
            let path = match file {
                (0, 0) => None,
                _ => paths.entry(file).or_insert_with(|| exec_path(&self.skel, file)).clone(),
            };
            by.entry((key.pid, key.start)).or_default().push(FoundMap {
                start: key.vm_start,
                end: v.vm_end,
                offset: v.offset,
                dev: v.dev,
                ino: v.ino,
                vdso: v.flags & 1 != 0, // FG_FOUND_VDSO
                path,
            });
        }
        if let Some(tables) = self.tables.as_mut() {
            for (file, path) in &paths {
                if let Some(path) = path {
                    tables.build_found(*file, path);
                }
            }
        }
        by.into_iter().collect()
    }
}

/// The path the binary (device, inode) was exec'd by, as the exec gave it.
fn exec_path(skel: &FgbpfSkel<'_>, (dev, ino): (u64, u64)) -> Option<PathBuf> {
    let key = types::fg_file_key { dev, ino };
    // SAFETY: a plain struct of integers.
    let bytes = skel.maps.exec_paths.lookup(unsafe { plain::as_bytes(&key) }, MapFlags::ANY).ok()??;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    (end > 0).then(|| PathBuf::from(OsStr::from_bytes(&bytes[..end])))
}

/// Attaches `libc_start` (src/bpf/files.bpf.h) to the C library's
/// `__libc_start_main`, fgbpf's own C library, the system's: every
/// dynamically linked program that uses it passes there once, with its
/// libraries mapped. None when it cannot be (no such C library): processes
/// not read are then walked by the one mapping a sample finds.
pub(super) fn attach_libc_start(skel: &FgbpfSkel<'_>) -> Option<libbpf_rs::Link> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let libc = maps.lines().filter_map(crate::procs::maps::parse_line).find(|m| {
        m.exec && std::path::Path::new(m.path).file_name().is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
    })?;
    let opts = libbpf_rs::UprobeOpts {
        func_name: Some("__libc_start_main".to_string()),
        ..Default::default()
    };
    skel.progs.libc_start.attach_uprobe_with_opts(-1, libc.path, 0, opts).ok()
}
