//! The suite's own accounting: scripts/test-summary.py, which closes
//! scripts/test.sh (and so CI), counts each binary's result once, fails a
//! run in which a binary ended without a result or (as root) a test was
//! ignored, and keeps the forced-fallback rerun and the booted kernels apart.

use std::path::Path;
use std::process::Command;

/// Runs the summary over `logs` (label, text) and returns its exit status
/// and output.
fn summary(root: bool, logs: &[(&str, &str)]) -> (bool, String) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("suite");
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new("python3");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-summary.py"));
    if root {
        cmd.arg("--root");
    }
    // Tests run side by side: each log its own file.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    for (label, text) in logs {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("log-{n}-{}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        cmd.arg(format!("{label}={}", path.display()));
    }
    let out = cmd.output().expect("python3 runs scripts/test-summary.py");
    (out.status.success(), String::from_utf8(out.stdout).unwrap())
}

const OK_RUN: &str = "\
     Running unittests src/lib.rs (target/debug/deps/fgbpf-1)
running 3 tests
test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/oncpu.rs (target/debug/deps/oncpu-2)
running 2 tests
test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 3.00s

   Doc-tests fgbpf
running 0 tests
test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";

#[test]
fn each_binary_is_counted_once_and_each_run_has_its_own_line() {
    let rerun = "     Running tests/oncpu.rs (target/debug/deps/oncpu-2)\ntest result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 3.00s\n";
    let guest = "running 6 tests\ntest result: ok. 6 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 51.01s\n";
    let (ok, text) = summary(true, &[("tests", OK_RUN), ("fallback rerun (FGBPF_FORCE_FALLBACK=all)", rerun), ("kernel debian-5.10", guest)]);
    assert!(ok, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "tests: 5 passed, 0 failed, 0 ignored in 3 binaries",
            "fallback rerun (FGBPF_FORCE_FALLBACK=all): 2 passed, 0 failed, 0 ignored in 1 binaries",
            "kernel debian-5.10: 6 passed, 0 failed, 0 ignored in 1 binaries",
        ]
    );
}

#[test]
fn a_binary_that_ends_without_a_result_fails_the_run_by_name() {
    let died = format!(
        "{OK_RUN}     Running tests/flight.rs (target/debug/deps/flight-3)\nrunning 9 tests\ntest a ... ok\nerror: test failed, to rerun pass `--test flight`\n"
    );
    let (ok, text) = summary(false, &[("tests", &died)]);
    assert!(!ok, "{text}");
    assert!(text.contains("tests: 5 passed, 0 failed, 0 ignored in 4 binaries"), "{text}");
    assert!(text.contains("tests/flight.rs ended without a result"), "{text}");
}

#[test]
fn a_failed_test_an_empty_log_and_a_missing_log_fail_the_run() {
    let failed = OK_RUN.replace("2 passed; 0 failed", "1 passed; 1 failed");
    let (ok, text) = summary(false, &[("tests", &failed)]);
    assert!(!ok && text.contains("tests: 4 passed, 1 failed"), "{text}");
    let (ok, text) = summary(false, &[("kernel debian-6.1", "")]);
    assert!(!ok && text.contains("no test binary ran"), "{text}");
}

#[test]
fn an_ignored_test_fails_a_root_run_and_filtered_ones_are_said() {
    let ignored = OK_RUN.replace("2 passed; 0 failed; 0 ignored", "1 passed; 0 failed; 1 ignored");
    let (ok, text) = summary(false, &[("tests", &ignored)]);
    assert!(ok, "outside root an ignored test is said, not a failure: {text}");
    assert!(text.contains("4 passed, 0 failed, 1 ignored"), "{text}");
    let (ok, text) = summary(true, &[("tests", &ignored)]);
    assert!(!ok && text.contains("1 tests ignored in a root run"), "{text}");
    let filtered = OK_RUN.replace("0 measured; 0 filtered out; finished in 3.00s", "0 measured; 7 filtered out; finished in 3.00s");
    let (_, text) = summary(true, &[("tests", &filtered)]);
    assert!(text.contains("5 passed, 0 failed, 0 ignored, 7 filtered out in 3 binaries"), "{text}");
}
