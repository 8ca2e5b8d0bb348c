//! Creating output directories and files as root without ever destroying
//! what fgbpf did not write: a crash never leaves a half-written file under
//! its final name, no symbolic link is followed at an output or temporary
//! name (another user may plant one in a shared directory), a capture never
//! replaces an existing file, and whatever is created under `sudo` belongs
//! to the user who ran it.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The user a `sudo` invocation came from, if any.
pub fn sudo_owner() -> Option<(u32, u32)> {
    let uid = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    Some((uid, gid))
}

/// Gives a directory fgbpf created to the sudo user; `lchown` never
/// follows a link that might have replaced it.
fn hand_over_dir(path: &Path) {
    if let Some((uid, gid)) = sudo_owner() {
        // Best effort: a root-owned directory is still usable as root.
        let _ = std::os::unix::fs::lchown(path, Some(uid), Some(gid));
    }
}

/// Gives a file fgbpf is writing to the sudo user, through its open
/// descriptor, before it gets its final name.
fn hand_over_file(file: &fs::File) {
    if let Some((uid, gid)) = sudo_owner() {
        let _ = std::os::unix::fs::fchown(file, Some(uid), Some(gid));
    }
}

fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Creates `dir` and each missing parent one by one, so that every
/// directory fgbpf creates is handed to the sudo user, and an entry that
/// appears meanwhile (a link planted by someone else) makes it fail
/// instead of being followed.
fn create_dirs(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = dir;
    while fs::symlink_metadata(at).is_err() {
        missing.push(at);
        match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => at = p,
            _ => break,
        }
    }
    for d in missing.into_iter().rev() {
        fs::create_dir(d)?;
        hand_over_dir(d);
    }
    Ok(())
}

/// Where a capture's outputs go.
pub enum OutDir<'a> {
    /// `-o DIR`: may exist, as long as it holds none of the outputs.
    Given(&'a Path),
    /// A default name: a new directory is always created, with `-2`, `-3`…
    /// appended when the name is taken, so two captures started in the
    /// same second keep both profiles.
    Fresh(&'a Path),
}

/// Checks that the outputs can be written and creates their directory,
/// before any capture starts; returns the directory. An existing file, a
/// symbolic link, or a directory already holding any of `names` is
/// refused rather than written into.
pub fn prepare_dir(dir: OutDir, names: &[&str]) -> Result<PathBuf, String> {
    let dir = match dir {
        OutDir::Given(dir) => {
            given_dir(dir, names)?;
            dir.to_path_buf()
        }
        OutDir::Fresh(base) => fresh_dir(base)?,
    };
    // Prove now, not after the capture, that files can be written there;
    // an unnamed temporary file leaves nothing to delete.
    tempfile::tempfile_in(&dir)
        .map_err(|e| format!("cannot write in output directory {}: {e}", dir.display()))?;
    Ok(dir)
}

fn given_dir(dir: &Path, names: &[&str]) -> Result<(), String> {
    if is_link(dir) {
        return Err(format!(
            "output directory {} is a symbolic link; pass -o the directory it points to (fgbpf does not write through links)",
            dir.display()
        ));
    }
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "output path {} is an existing file; pass -o a directory",
            dir.display()
        ));
    }
    let taken = |p: &PathBuf| fs::symlink_metadata(p).is_ok();
    if let Some(clash) = names.iter().map(|n| dir.join(n)).find(taken) {
        return Err(format!(
            "{} already exists; pass -o a new directory so no earlier capture is overwritten",
            clash.display()
        ));
    }
    create_dirs(dir).map_err(|e| format!("cannot create output directory {}: {e}", dir.display()))
}

fn fresh_dir(base: &Path) -> Result<PathBuf, String> {
    if let Some(parent) = base.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dirs(parent)
            .map_err(|e| format!("cannot create directory {}: {e}", parent.display()))?;
    }
    let mut name = base.to_path_buf();
    for n in 2..1000 {
        // create_dir fails on any existing entry: the name is ours alone.
        match fs::create_dir(&name) {
            Ok(()) => {
                hand_over_dir(&name);
                return Ok(name);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let mut s = base.as_os_str().to_os_string();
                s.push(format!("-{n}"));
                name = PathBuf::from(s);
            }
            Err(e) => {
                return Err(format!(
                    "cannot create output directory {}: {e}",
                    name.display()
                ))
            }
        }
    }
    Err(format!(
        "{}-2 … -999 all exist; pass -o DIR",
        base.display()
    ))
}

/// What a written file is, which decides how it reaches its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// A capture's outputs: the moment they record cannot be had again, so
    /// they reach the disk before they are named, and never replace an
    /// existing file.
    Synced,
    /// Files made from other files (`fgbpf flamegraph -o`, `convert`),
    /// which can be made again: the user named the file, so it replaces
    /// one of that name (never a link's target: the link itself is
    /// replaced); waiting for the disk only delays them.
    Renamed,
}

/// Writes `path` through a new temporary file in the same directory
/// (created exclusively, under a random name) and a rename, so the final
/// name only ever holds a complete file.
pub fn write_atomic(
    path: &Path,
    durability: Durability,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(path.file_name().unwrap_or_default());
    prefix.push(".");
    // Dropped on error, the temporary file is removed by its own handle.
    let tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)?;
    let mut out = io::BufWriter::new(tmp);
    write(&mut out)?;
    let tmp = out.into_inner().map_err(|e| e.into_error())?;
    hand_over_file(tmp.as_file());
    match durability {
        Durability::Synced => {
            tmp.as_file().sync_all()?;
            tmp.persist_noclobber(path).map_err(|e| {
                if e.error.kind() == io::ErrorKind::AlreadyExists {
                    io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "a file of that name appeared during the capture; it was left alone",
                    )
                } else {
                    e.error
                }
            })?;
        }
        Durability::Renamed => {
            tmp.persist(path).map_err(|e| e.error)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fgbpf-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn atomic_write_leaves_no_partial_file_on_error() {
        let dir = scratch("files");
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
    fn links_are_never_written_through() {
        let dir = scratch("links");
        let victim = dir.join("victim");
        fs::write(&victim, b"precious").unwrap();
        // Links at the names earlier versions used for temporaries, and at
        // the output names themselves.
        for name in [
            format!("out.txt.tmp{}", std::process::id()),
            "capture.txt".into(),
            "derived.txt".into(),
        ] {
            std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
        }
        let out = dir.join("out.txt");
        write_atomic(&out, Durability::Synced, |w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "new");
        // A capture's output never replaces what is there, link or not.
        let err = write_atomic(&dir.join("capture.txt"), Durability::Synced, |w| {
            w.write_all(b"new")
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        // A named output replaces the link itself, not its target.
        let derived = dir.join("derived.txt");
        write_atomic(&derived, Durability::Renamed, |w| w.write_all(b"new")).unwrap();
        assert!(!is_link(&derived));
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn prepare_dir_refuses_files_links_and_clashes() {
        let base = scratch("prep");
        let file = base.join("f");
        fs::write(&file, b"x").unwrap();
        let err = prepare_dir(OutDir::Given(&file), &["a"]).unwrap_err();
        assert!(err.contains("existing file"), "{err}");
        let dir = base.join("d");
        prepare_dir(OutDir::Given(&dir), &["a.svg"]).unwrap();
        fs::write(dir.join("a.svg"), b"x").unwrap();
        let err = prepare_dir(OutDir::Given(&dir), &["a.svg"]).unwrap_err();
        assert!(err.contains("already exists"), "{err}");
        // A dangling link at an output name is a clash too.
        std::os::unix::fs::symlink(base.join("nowhere"), dir.join("b.svg")).unwrap();
        let err = prepare_dir(OutDir::Given(&dir), &["b.svg"]).unwrap_err();
        assert!(err.contains("already exists"), "{err}");
        let link = base.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let err = prepare_dir(OutDir::Given(&link), &["c.svg"]).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 2, "nothing written in the test");
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn fresh_dirs_never_share_a_name() {
        let base = scratch("fresh");
        let name = base.join("fgbpf-oncpu-20260101-000000");
        let first = prepare_dir(OutDir::Fresh(&name), &[]).unwrap();
        fs::write(first.join("theirs"), b"x").unwrap();
        let second = prepare_dir(OutDir::Fresh(&name), &[]).unwrap();
        assert_eq!(first, name);
        assert_ne!(first, second);
        assert!(second.to_string_lossy().ends_with("-2"), "{}", second.display());
        // Missing parents are created one by one.
        let deep = base.join("a/b/c");
        assert_eq!(prepare_dir(OutDir::Given(&deep), &[]).unwrap(), deep);
        fs::remove_dir_all(&base).unwrap();
    }
}
