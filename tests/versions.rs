//! Runtime versions fgbpf recognises but does not read, run as containers
//! run them: Debian 13's PHP 8.4, in a root built by
//! scripts/fetch-roots.sh (debootstrap), each started with `chroot ROOT`
//! and no flag. fgbpf must name the runtime and its version in the summary
//! (the README's promise), never leave the process's frames unexplained.
//! Ruby 3.3, read since, is tested in tests/ruby.rs (a VM refused by its
//! layout's check there too).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// The Debian 13 root, or a panic saying how to get it.
fn trixie() -> PathBuf {
    let root = consumers_dir().join("roots/trixie");
    assert!(
        root.join(".fgbpf-complete").exists(),
        "{} is missing: scripts/fetch-roots.sh builds it (scripts/test.sh runs it)",
        root.display()
    );
    root
}

/// Copies `tests/workloads/DIR/*` into the root and starts `PROGRAM
/// SCRIPT 30` in it, once it says "ready".
fn start_in_root(root: &Path, dir: &str, program: &str, script: &str) -> KillOnDrop {
    let inside = Path::new("/tmp/fgbpf-versions").join(dir);
    let there = root.join(inside.strip_prefix("/").unwrap());
    std::fs::create_dir_all(&there).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads").join(dir);
    for entry in std::fs::read_dir(&from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, there.join(path.file_name().unwrap())).unwrap();
    }
    common::runtime::start_ready(
        Command::new("chroot").arg(root).arg(program).arg(inside.join(script)).arg("30"),
        &format!("{program} {script} in {}", root.display()),
        "chroot",
    )
}

/// `fgbpf oncpu -p PID -d 2` of `program` in the root: it has samples, and
/// its summary says `said`.
fn said_of(dir: &str, program: &str, script: &str, said: &str) {
    let root = trixie();
    let target = start_in_root(&root, dir, program, script);
    let (out, summary) = capture_pid("oncpu", target.id(), "2", &format!("versions_{program}"));
    drop(target);
    assert!(total(&read_folded(&out.join("oncpu.folded"))) > 0, "no samples of {program}\n{summary}");
    assert!(summary.contains(said), "the summary does not say `{said}`\n{summary}");
}

#[test]
fn php_8_4_in_a_debian_13_container_is_named_as_not_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    said_of("php", "php8.4", "busy.php", "PHP frames not read, PHP 8.4 (fgbpf reads 8.2)");
}
