//! Debian roots built by scripts/fetch-roots.sh (debootstrap), in which
//! runtimes of other releases run as containers run them: `chroot ROOT
//! PROGRAM`, the process's root not the host's, its binaries read through
//! /proc/PID/root.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{consumers_dir, KillOnDrop};

/// The Debian 13 root, or a panic saying how to get it.
pub fn trixie() -> PathBuf {
    root("trixie")
}

/// The Debian 11 root, or a panic saying how to get it.
pub fn bullseye() -> PathBuf {
    root("bullseye")
}

/// The root scripts/fetch-roots.sh builds under `name`, or a panic
/// saying how to get it.
pub fn named(name: &str) -> PathBuf {
    root(name)
}

fn root(suite: &str) -> PathBuf {
    let root = consumers_dir().join("roots").join(suite);
    assert!(
        root.join(".fgbpf-complete").exists(),
        "{} is missing: scripts/fetch-roots.sh builds it (scripts/test.sh runs it)",
        root.display()
    );
    root
}

/// Copies `tests/workloads/DIR/*` into the root, under
/// /tmp/fgbpf-versions/DIR, and says where it is inside the root. A file
/// is copied only when it changed: PHP's opcache leaves a file changed in
/// the last 2 s (opcache.file_update_protection) uncached, and
/// uncompiled.
pub fn copy_workloads(root: &Path, dir: &str) -> PathBuf {
    let inside = Path::new("/tmp/fgbpf-versions").join(dir);
    let there = root.join(inside.strip_prefix("/").unwrap());
    std::fs::create_dir_all(&there).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads").join(dir);
    for entry in std::fs::read_dir(&from).unwrap() {
        let path = entry.unwrap().path();
        let to = there.join(path.file_name().unwrap());
        if std::fs::read(&to).ok() != Some(std::fs::read(&path).unwrap()) {
            std::fs::copy(&path, &to).unwrap();
        }
    }
    inside
}

/// Copies `tests/workloads/DIR/*` into the root and starts `PROGRAM
/// SCRIPT SECONDS` in it, once it says "ready".
pub fn start_in_root(root: &Path, dir: &str, program: &str, script: &str, seconds: &str) -> KillOnDrop {
    let inside = copy_workloads(root, dir);
    super::runtime::start_ready(
        Command::new("chroot").arg(root).arg(program).arg(inside.join(script)).arg(seconds),
        &format!("{program} {script} in {}", root.display()),
        "chroot",
    )
}
