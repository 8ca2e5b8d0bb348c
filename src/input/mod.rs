//! Reading profiles back from files: folded stacks written by fgbpf or by
//! other tools (stackcollapse-perf.pl, inferno, bcc `-f`), for the commands
//! that work on profiles after capture.

pub mod folded;

use std::path::{Path, PathBuf};

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
