//! Separate debug files: where distributions and users put the DWARF and
//! symbols stripped from a binary, found by build ID or by the binary's
//! `.gnu_debuglink`, on the host and inside a container's root, and checked
//! to belong to the binary (build ID or CRC) before they are trusted.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::elf::{self, ElfInfo};

/// The directories distributions install separate debug files under.
pub const SYSTEM_DEBUG_DIRS: &[&str] = &["/usr/lib/debug", "/lib/debug"];

/// A separate debug file for a binary the process sees at `path`: by
/// build ID, then by debuglink name next to the binary and under the
/// debug directories, on the host and inside the process's root.
/// `debug_dirs`: host directories searched, in order; `is_own`: true
/// for the binary itself, which a debug link may lead back to.
pub fn find(
    debug_dirs: &[PathBuf],
    info: &ElfInfo,
    path: &str,
    root: Option<&Path>,
    is_own: &dyn Fn(&File) -> bool,
) -> Option<File> {
    let mut dirs = debug_dirs.to_vec();
    if let Some(root) = root {
        dirs.extend(
            SYSTEM_DEBUG_DIRS
                .iter()
                .map(|d| root.join(d.trim_start_matches('/'))),
        );
    }
    let mut candidates: Vec<(PathBuf, Option<u32>)> = Vec::new();
    if let Some(id) = info.build_id.as_deref().filter(|id| id.len() >= 2) {
        let hex = elf::build_id_hex(id);
        let rel = format!(".build-id/{}/{}.debug", &hex[..2], &hex[2..]);
        candidates.extend(dirs.iter().map(|d| (d.join(&rel), None)));
    }
    if let Some((link, crc)) = &info.debuglink {
        let dir = Path::new(path).parent().unwrap_or(Path::new("/"));
        let rel_dir = dir.strip_prefix("/").unwrap_or(dir);
        let base = root.map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
        candidates.push((base.join(rel_dir).join(link), Some(*crc)));
        candidates.push((base.join(rel_dir).join(".debug").join(link), Some(*crc)));
        candidates.extend(
            dirs.iter()
                .map(|d| (d.join(rel_dir).join(link), Some(*crc))),
        );
    }
    candidates.into_iter().find_map(|(p, crc)| {
        let file = File::open(&p).ok()?;
        if is_own(&file) {
            return None;
        }
        let debug = ElfInfo::read(&file)?;
        if !names(&debug) {
            return None;
        }
        let matches = match (&info.build_id, &debug.build_id, crc) {
            (Some(a), Some(b), _) => a == b,
            (_, _, Some(crc)) => elf::crc32(&file) == Some(crc),
            // Found under the binary's build ID, and carries none to
            // contradict it.
            _ => true,
        };
        matches.then_some(file)
    })
}


/// Whether a debug file's ELF holds anything to name frames with: symbols
/// or DWARF.
fn names(debug: &ElfInfo) -> bool {
    debug.has_dwarf || debug.has_symtab
}

/// Whether the file at `path` is the debug file of the binary with build
/// ID `id`, as [`find`] checks a file found by build ID: its own build ID
/// is `id`, and it holds symbols or DWARF.
pub fn belongs(path: &Path, id: &[u8]) -> bool {
    File::open(path)
        .ok()
        .and_then(|f| ElfInfo::read(&f))
        .is_some_and(|e| e.build_id.as_deref() == Some(id) && names(&e))
}
