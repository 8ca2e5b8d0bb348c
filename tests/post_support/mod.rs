//! What tests/post.rs and tests/post_reports.rs share: the real fgbpf
//! binary run from the repository root, golden files, and the consumers
//! of the exports (scripts/test.sh installs them into target/consumers/).
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_fgbpf");
pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs fgbpf from the repository root, so fixture paths stay relative and
/// outputs that name their input are the same on every machine.
pub fn fgbpf(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(ROOT)
        .env_remove("SUDO_UID")
        .output()
        .expect("run fgbpf")
}

pub fn ok(args: &[&str]) -> Output {
    let out = fgbpf(args);
    assert!(
        out.status.success(),
        "fgbpf {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("post-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Compares `actual` with tests/fixtures/golden/NAME, or rewrites it when
/// FGBPF_BLESS=1.
pub fn golden(name: &str, actual: &[u8]) {
    let path = Path::new(ROOT).join("tests/fixtures/golden").join(name);
    if std::env::var("FGBPF_BLESS").is_ok_and(|v| v == "1") {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, actual).unwrap();
        return;
    }
    let expected = fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; create it with FGBPF_BLESS=1 cargo test --test post",
            path.display()
        )
    });
    if expected != actual {
        let seen = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("golden-actual")
            .join(name);
        fs::create_dir_all(seen.parent().unwrap()).unwrap();
        fs::write(&seen, actual).unwrap();
        panic!(
            "{} differs from this run's output, saved as {}; if the change is intended, re-run with FGBPF_BLESS=1",
            path.display(),
            seen.display()
        );
    }
}

/// Bad input: exit code 2, one `fgbpf: error:` line containing `want`.
pub fn refused(args: &[&str], want: &str) {
    let out = fgbpf(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "fgbpf {args:?}: {err}");
    assert_eq!(
        err.lines().count(),
        1,
        "fgbpf {args:?}: not one line: {err}"
    );
    assert!(err.starts_with("fgbpf: error: "), "{err}");
    assert!(err.contains(want), "fgbpf {args:?}: {err:?} lacks {want:?}");
    assert!(out.stdout.is_empty(), "fgbpf {args:?} printed to stdout");
}

/// A consumer that scripts/test.sh installs: found, or a failure that says
/// how to get it (a test that skips would pass without checking).
pub fn consumer(what: &str, found: Option<PathBuf>) -> PathBuf {
    found.unwrap_or_else(|| panic!("{what} is not installed: run scripts/test.sh, which installs it"))
}

pub fn consumers_dir() -> PathBuf {
    std::env::var_os("FGBPF_CONSUMERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join("target/consumers"))
}

pub fn go() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("go"))
            .find(|p| p.is_file())
    });
    let found =
        on_path.or_else(|| Some(PathBuf::from("/usr/lib/go/bin/go")).filter(|p| p.is_file()));
    consumer("go (for `go tool pprof`)", found)
}

/// `go tool pprof -top` over `file`, with extra flags.
pub fn pprof_top(go: &Path, file: &Path, flags: &[&str]) -> String {
    let out = Command::new(go)
        .args(["tool", "pprof", "-top"])
        .args(flags)
        .arg(file)
        .output()
        .expect("run go tool pprof");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "go tool pprof refused {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The `flat` and `cum` columns of one function in `-top` output.
pub fn top_row<'a>(top: &'a str, function: &str) -> Option<(&'a str, &'a str)> {
    top.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.len() == 6 && cols[5] == function).then(|| (cols[0], cols[3]))
    })
}

pub fn validate_speedscope(file: &Path) {
    let dir = consumers_dir();
    let schema = dir.join("speedscope/file-format-schema.json");
    let ajv = dir.join("node_modules/.bin/ajv");
    let found = (schema.is_file() && ajv.is_file()).then(|| ajv.clone());
    let ajv = consumer("speedscope's schema with ajv-cli", found);
    let out = Command::new(&ajv)
        .args(["validate", "-s", s(&schema), "-d", s(file)])
        .output()
        .expect("run ajv");
    assert!(
        out.status.success(),
        "speedscope's schema rejects {}: {}{}",
        file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
