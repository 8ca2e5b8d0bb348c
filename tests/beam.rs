//! The BEAM's (Erlang's) JIT-compiled functions in fgbpf's stacks, on
//! Debian 12's Erlang/OTP 25 (`erlang-base`, with its x86-64 JIT) started
//! as users start it: named from the JIT's own code map, read from
//! outside the process, and their callers read from each Erlang process's
//! own stack (src/runtimes/beam/), without `+JPperf`. Known answer: the
//! workload's own chain (tests/workloads/erlang/busy.erl).
//! Debian 11's OTP 23 (no JIT) and Debian 13's OTP 27 run in their roots.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::roots;
use common::runtime::*;
use common::*;

/// Compiles busy.erl with `erlc` (in `root` when given, as `chroot ROOT
/// erlc`) into a directory of the test's: the directory, as the process
/// sees it.
fn compiled(root: Option<&Path>, test: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/erlang/busy.erl");
    let (inside, there) = match root {
        Some(root) => {
            let inside = roots::copy_workloads(root, "erlang");
            (inside.clone(), root.join(inside.strip_prefix("/").unwrap()))
        }
        None => {
            let dir = out_dir(test);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::copy(&src, dir.join("busy.erl")).unwrap();
            (dir.clone(), dir)
        }
    };
    let mut erlc = match root {
        Some(root) => {
            let mut c = Command::new("chroot");
            c.arg(root).arg("erlc");
            c
        }
        None => Command::new("erlc"),
    };
    let out = erlc.arg("-o").arg(&inside).arg(inside.join("busy.erl")).output().unwrap_or_else(|e| panic!("erlc: {e}: erlang-base is not installed: run scripts/test.sh, which installs it"));
    assert!(out.status.success() && there.join("busy.beam").exists(), "erlc: {out:?}");
    inside
}

/// `erl [flags] -noshell -pa DIR -s busy main SECONDS` (in `root` when
/// given), once it says "ready".
fn start(root: Option<&Path>, flags: &[&str], dir: &Path, seconds: &str) -> KillOnDrop {
    let mut cmd = match root {
        Some(root) => {
            let mut c = Command::new("chroot");
            c.arg(root).arg("erl");
            c
        }
        None => Command::new("erl"),
    };
    cmd.env("HOME", "/tmp").args(flags).args(["-noshell", "-pa"]).arg(dir).args(["-s", "busy", "main", seconds]);
    start_ready(&mut cmd, "erl busy", "erlang-base is not installed: run scripts/test.sh, which installs it")
}

/// The stacks of the normal schedulers' threads (`N_scheduler-TID` before
/// OTP 27, `erts_sched_N-TID` since) that ran an Erlang process: not
/// those of the scheduler's own loop between processes (its C frames
/// under `global::process_main`, on the scheduler's stack), whose share
/// an emulated guest's slow clock reads make larger.
fn schedulers(stacks: &Folded) -> Folded {
    let numbered = |n: &str| n.parse::<u32>().is_ok();
    let ran = of_threads(stacks, |t| {
        let name = t.rsplit_once('-').map_or(t, |(n, _)| n);
        name.strip_suffix("_scheduler").is_some_and(numbered) || name.strip_prefix("erts_sched_").is_some_and(numbered)
    });
    let (own, erlang): (Folded, Folded) = ran.into_iter().partition(|(f, _)| f.get(2).is_some_and(|x| x == "global::process_main_[j]"));
    eprintln!("the schedulers' own loop: {:.1}% of their samples", pct(total(&own), total(&own) + total(&erlang)));
    erlang
}

const SPIN: &str = "busy:spin/2 (busy.erl:";
const CHAIN: [&str; 5] = ["busy:main/1 (busy.erl:", "busy:outer/2 (busy.erl:", "busy:middle/1 (busy.erl:", "busy:inner/1 (busy.erl:", SPIN];

/// Without a flag (no perf map is written, no frame pointers kept): the
/// chain main → outer → middle → inner → spin named from the JIT's own
/// code map and walked on the Erlang process's own stack, in order;
/// `--no-beam` leaves it unnamed and unwalked.
#[test]
fn erlang_functions_are_walked_and_named_without_flags() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = compiled(None, "beam_busy_src");
    let target = start(None, &[], &dir, "120");
    let pid = target.id();
    assert!(!Path::new(&format!("/tmp/perf-{pid}.map")).exists(), "the node wrote a perf map");
    let (_, out) = capture_for(&["oncpu", "-F", "499"], pid, "3", "beam_busy");
    let summary = String::from_utf8_lossy(&out.stderr).to_string();
    let (no_dir, _) = capture_for(&["oncpu", "-F", "499", "--no-beam"], pid, "2", "beam_busy_off");
    drop(target);
    let stacks = schedulers(&read_folded(&out_dir_of("beam_busy").join("oncpu.folded")));
    let all = total(&stacks);
    let ordered = share_in_order(&stacks, &CHAIN, prefixed);
    eprintln!("OTP 25 without flags: main;outer;middle;inner;spin {ordered:.1}% of {all} samples");
    assert!(all > 600, "{all} samples\n{summary}");
    assert!(ordered >= 95.0, "{ordered:.1}% of {all} samples in order\n{stacks:?}\n{summary}");
    let line = format!("Erlang: pid {pid} (beam.smp, OTP 25, erts ");
    assert!(summary.contains(&line) && summary.contains("callers read from each Erlang process's own stack"), "{summary}");
    let off = schedulers(&read_folded(&no_dir.join("oncpu.folded")));
    assert_eq!(weight_in_order_prefixed(&off, &["busy:"]), 0, "--no-beam still names Erlang functions: {off:?}");
    assert!(total(&off) > 300);
}

/// With `+JPperf true` (frame pointers kept, a perf map written): the
/// same chain from the Erlang stack, named from the code map with lines
/// (the perf map names them `$busy:…`, without lines). A walk by the
/// frame pointers would skip `inner` whenever `spin`, which calls itself
/// in tail position, has popped its frame before the jump (5.7% of the
/// samples, measured before the Erlang stack was read).
#[test]
fn with_frame_pointers_the_erlang_chain_is_named_in_order() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = compiled(None, "beam_chain_src");
    let target = start(None, &["+JPperf", "true"], &dir, "120");
    let Captured { pid, stacks, summary, .. } = capture_ended(target, "oncpu", "3", "beam_chain");
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    let _ = std::fs::remove_file(format!("/tmp/jit-{pid}.dump"));
    let stacks = schedulers(&stacks);
    let all = total(&stacks);
    let ordered = share_in_order(&stacks, &CHAIN, prefixed);
    eprintln!("OTP 25 with +JPperf true: main;outer;middle;inner;spin {ordered:.1}% of {all} samples");
    assert!(all > 600, "{all} samples\n{summary}");
    assert!(ordered >= 95.0, "{ordered:.1}% of {all} samples in order\n{stacks:?}\n{summary}");
}

/// Debian 13's OTP 27 in its root, named from its code map; Debian 11's
/// OTP 23, an interpreter without the JIT, named in the summary as not
/// read, with why.
#[test]
fn debian_11_and_13_erlangs_in_containers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let trixie = roots::named("trixie-erlang");
    let dir = compiled(Some(&trixie), "beam_27_src");
    let target = start(Some(&trixie), &[], &dir, "120");
    let Captured { pid, stacks, summary, .. } = capture_ended(target, "oncpu", "3", "beam_27");
    let stacks = schedulers(&stacks);
    let all = total(&stacks);
    let ordered = share_in_order(&stacks, &CHAIN, prefixed);
    eprintln!("OTP 27 (Debian 13): main;outer;middle;inner;spin {ordered:.1}% of {all} samples");
    assert!(ordered >= 95.0 && all > 600, "{ordered:.1}% of {all}\n{stacks:?}\n{summary}");
    assert!(summary.contains(&format!("Erlang: pid {pid} (beam.smp, OTP 27, ")), "{summary}");

    let bullseye = roots::named("bullseye-erlang");
    let dir = compiled(Some(&bullseye), "beam_23_src");
    let target = start(Some(&bullseye), &[], &dir, "120");
    let Captured { pid, summary, .. } = capture_ended(target, "oncpu", "2", "beam_23");
    assert!(
        summary.contains(&format!("Erlang: pid {pid} (beam.smp): not read: ")) && summary.contains("OTP 23's emulator without the JIT"),
        "{summary}"
    );
}
