//! Creating output directories and files so that a crash never leaves a
//! half-written file under its final name, and so that files written under
//! `sudo` belong to the user who ran it.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The user a `sudo` invocation came from, if any.
fn sudo_owner() -> Option<(u32, u32)> {
    let uid = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    Some((uid, gid))
}

fn hand_over(path: &Path) {
    if let Some((uid, gid)) = sudo_owner() {
        // Best effort: a root-only directory is still usable as root.
        let _ = std::os::unix::fs::chown(path, Some(uid), Some(gid));
    }
}

/// Checks that `dir` can hold the outputs and creates it, before any
/// capture starts. An existing file, or an existing non-empty directory
/// holding any of `names`, is refused rather than overwritten.
pub fn prepare_dir(dir: &Path, names: &[&str]) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "output path {} is an existing file; pass -o a directory",
            dir.display()
        ));
    }
    if let Some(clash) = names.iter().map(|n| dir.join(n)).find(|p| p.exists()) {
        return Err(format!(
            "{} already exists; pass -o a new directory so no earlier capture is overwritten",
            clash.display()
        ));
    }
    let created = !dir.exists();
    fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create output directory {}: {e}", dir.display()))?;
    // Prove now, not after the capture, that files can be written there.
    let probe = dir.join(".fgbpf-write-test");
    fs::write(&probe, b"")
        .and_then(|_| fs::remove_file(&probe))
        .map_err(|e| format!("cannot write in output directory {}: {e}", dir.display()))?;
    if created {
        hand_over(dir);
    }
    Ok(())
}

/// Whether a written file must reach the disk before it is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// A capture's outputs: the moment they record cannot be had again.
    Synced,
    /// Files made from other files (`fgbpf flamegraph`, `convert`), which
    /// can be made again; waiting for the disk only delays them.
    Renamed,
}

/// Writes `path` through a temporary file in the same directory and a
/// rename, so the final name only ever holds a complete file.
pub fn write_atomic(
    path: &Path,
    durability: Durability,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let tmp: PathBuf = {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".tmp{}", std::process::id()));
        path.with_file_name(name)
    };
    let result = (|| {
        let mut out = io::BufWriter::new(fs::File::create(&tmp)?);
        write(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        if durability == Durability::Synced {
            file.sync_all()?;
        }
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    } else {
        hand_over(path);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_leaves_no_partial_file_on_error() {
        let dir = std::env::temp_dir().join(format!("fgbpf-files-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.txt");
        let err = write_atomic(&path, Durability::Synced, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("boom"))
        });
        assert!(err.is_err());
        assert!(!path.exists());
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            0,
            "temporary file left behind"
        );
        write_atomic(&path, Durability::Renamed, |w| w.write_all(b"whole")).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "whole");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn prepare_dir_refuses_files_and_clashes() {
        let base = std::env::temp_dir().join(format!("fgbpf-prep-{}", std::process::id()));
        fs::create_dir_all(&base).unwrap();
        let file = base.join("f");
        fs::write(&file, b"x").unwrap();
        assert!(prepare_dir(&file, &["a"])
            .unwrap_err()
            .contains("existing file"));
        let dir = base.join("d");
        prepare_dir(&dir, &["a.svg"]).unwrap();
        fs::write(dir.join("a.svg"), b"x").unwrap();
        assert!(prepare_dir(&dir, &["a.svg"])
            .unwrap_err()
            .contains("already exists"));
        fs::remove_dir_all(&base).unwrap();
    }
}
