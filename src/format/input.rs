//! Reading profiles back from files: folded stacks written by fgbpf or by
//! other tools (stackcollapse-perf.pl, inferno, bcc `-f`), for the commands
//! that work on profiles after capture.



use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

/// A whole input file's bytes.
pub enum Bytes {
    /// Mapped, not copied: a large folded file is read once, by parsing it.
    Mapped(Mmap),
    Read(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Read(v) => v,
        }
    }
}

/// Reads `path` whole. Regular files are mapped; pipes and other special
/// files (`/dev/stdin`, process substitution) are read.
pub fn read(path: &Path) -> Result<Bytes, String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let file = File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if meta.is_file() && meta.len() > 0 {
        // SAFETY: the map is read-only and private to this process; a file
        // truncated by another process while it is being read is the one
        // case this cannot guard against, as with any reader of a file
        // being rewritten.
        if let Ok(map) = unsafe { Mmap::map(&file) } {
            let _ = map.advise(memmap2::Advice::Sequential);
            return Ok(Bytes::Mapped(map));
        }
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut bytes).map_err(cannot)?;
    Ok(Bytes::Read(bytes))
}

/// The views a capture directory may hold, most complete first: wall-clock
/// time contains both the on-CPU and the off-CPU view.
pub const MAIN_VIEWS: [&str; 3] = ["wall.folded", "oncpu.folded", "offcpu.folded"];

/// The folded file to read for `path`: the file itself, or for a capture
/// directory its main view (see [`MAIN_VIEWS`]), else its only `*.folded`.
pub fn main_folded(path: &Path) -> Result<PathBuf, String> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    if let Some(p) = MAIN_VIEWS
        .iter()
        .map(|n| path.join(n))
        .find(|p| p.is_file())
    {
        return Ok(p);
    }
    let entries = std::fs::read_dir(path)
        .map_err(|e| format!("cannot list directory {}: {e}", path.display()))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "folded"))
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(format!(
            "{} holds no .folded file: pass a capture directory or a .folded file",
            path.display()
        )),
        _ => Err(format!(
            "{} holds no {} but several other .folded files: pass one of them",
            path.display(),
            MAIN_VIEWS.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_main_view_of_a_directory() {
        let dir = std::env::temp_dir().join(format!("fgbpf-main-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(main_folded(&dir).unwrap_err().contains("no .folded"));
        std::fs::write(dir.join("x.folded"), "a 1\n").unwrap();
        assert_eq!(main_folded(&dir).unwrap(), dir.join("x.folded"));
        std::fs::write(dir.join("y.folded"), "a 1\n").unwrap();
        assert!(main_folded(&dir).unwrap_err().contains("several"));
        for name in ["offcpu.folded", "oncpu.folded", "wall.folded"] {
            std::fs::write(dir.join(name), "a 1\n").unwrap();
            assert_eq!(main_folded(&dir).unwrap(), dir.join(name));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
