//! What long captures on busy hosts meet: threads and processes that come
//! and go by the thousand must not fill fgbpf's kernel maps, and sampled
//! off-CPU time must not be scaled where nothing was sampled.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

#[test]
fn seventy_thousand_exited_threads_leave_the_tracer_working() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // More short threads than the blocked-thread map holds (65536): each
    // one's last switch-out, at its exit, has no switch-in.
    let dir = out_dir("churn_threads");
    let out = run(fgbpf()
        .args(["offcpu", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(plain_workload("churn"))
        .args(["threads", "70000", "2"]));
    assert_ok(&out);
    assert_nothing_lost_by_fgbpf(&String::from_utf8_lossy(&out.stderr));
    let stacks = read_folded(&dir.join("offcpu.folded"));
    let napping = weight_with(&stacks, "nap") as f64;
    assert!(
        napping >= 0.9 * 2_000_000.0,
        "only {napping} us of the 2 s nap after the threads were recorded"
    );
}

#[test]
fn a_command_forking_nine_thousand_children_still_has_the_next_followed() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // More short children than the target map holds (8192), then one
    // that burns CPU.
    let dir = out_dir("churn_forks");
    let out = run(fgbpf()
        .args(["oncpu", "-F", "999", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(plain_workload("churn"))
        .args(["forks", "9000", "1"]));
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lost: none"), "{stderr}");
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let burning = weight_with(&stacks, "burn_in_child");
    assert!(burning >= 500, "burn_in_child got {burning} samples of ~999");
}

#[test]
fn sampling_switches_does_not_scale_a_block_from_before_the_capture() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let dir = out_dir("sample_preexisting");
    let out = run(fgbpf()
        .args(["offcpu", "--sample", "10", "-d", "2", "-p", &sleeper.id().to_string(), "-o"])
        .arg(&dir));
    sleeper.kill().ok();
    sleeper.wait().ok();
    assert_ok(&out);
    let stacks = read_folded(&dir.join("offcpu.folded"));
    let blocked = weight_with(&stacks, "[blocked before capture]") as f64;
    let window = window_us(&dir);
    assert!(
        (blocked - window).abs() <= 0.1 * window,
        "{blocked} us blocked in a {window} us window"
    );
}

#[test]
fn more_distinct_stacks_than_the_stack_map_holds_are_all_kept() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // 500 short `sleep` processes from Debian's coreutils, one after
    // another: each has its own addresses (ASLR), so its stacks are new.
    // Over the capture they are several times what --max-stacks 200
    // holds, but fewer per second: moved out of the kernel as the capture
    // runs, none is lost.
    let dir = out_dir("stack_churn");
    let out = run(fgbpf()
        .args(["offcpu", "--max-stacks", "200", "-o"])
        .arg(&dir)
        .args(["--", "sh", "-c", "for i in $(seq 500); do sleep 0.01; done"]));
    assert_ok(&out);
    assert_nothing_lost_by_fgbpf(&String::from_utf8_lossy(&out.stderr));
    let stacks = read_folded(&dir.join("offcpu.folded"));
    assert!(stacks.len() > 600, "only {} distinct stacks", stacks.len());
    let sleeps = stacks
        .iter()
        .filter(|(f, _)| f[0].starts_with("sleep-") && f.iter().any(|x| x.contains("nanosleep")))
        .count();
    assert!(sleeps >= 450, "{sleeps} of 500 sleep processes' waits");
}

#[test]
fn exited_processes_are_let_go_of_and_still_named() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // 1,000 short children one after another (gcc -O2, no frame
    // pointers), each sleeping 2 ms in nap_in_child through libc's usleep:
    // each is announced, read and exits. What the registry holds at the
    // end must not grow with them, and every child's wait must still be
    // named after it was let go of, walked whole from its first stack
    // with the tables it shares with its parent. Not read either: a child
    // forked and not exec'd takes what was read of its parent.
    // The shell sleeps 3 s after them: two drains, for the last ones to
    // be let go of too.
    let children = 1000;
    let dir = out_dir("retired_children");
    // Then 200 runs of /bin/true: each forked shell is announced, execs
    // and exits, and must be let go of as well.
    let script = format!(
        "{} naps {children} 0.002; for i in $(seq 200); do /bin/true; done; sleep 3",
        plain_workload("churn").display()
    );
    let out = run(fgbpf()
        .args(["offcpu", "--json", "-o"])
        .arg(&dir)
        .args(["--", "sh", "-c", &script]));
    assert_ok(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let held = &json["registry"];
    let retired = held["retired"].as_u64().unwrap_or(0);
    let processes = held["processes"].as_u64().unwrap_or(u64::MAX);
    assert!(
        retired >= children * 9 / 10,
        "{retired} of {children} exited children let go of: {held}"
    );
    // The shell and its sleep; nothing of the children.
    assert!(processes <= 5, "{processes} processes still held: {held}");
    let inherited = held["inherited"].as_u64().unwrap_or(0);
    assert!(
        inherited >= children * 9 / 10,
        "{inherited} of {children} children took their parent's maps: {held}"
    );
    let stacks = read_folded(&dir.join("offcpu.folded"));
    let mut named: Vec<&str> = stacks
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x == "nap_in_child"))
        .map(|(f, _)| f[0].as_str())
        .collect();
    named.sort_unstable();
    named.dedup();
    assert!(
        named.len() as u64 >= children * 9 / 10,
        "only {} of {children} children have nap_in_child named",
        named.len()
    );
    let unnamed: u64 = stacks
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x == "[unknown]"))
        .map(|(_, w)| w)
        .sum();
    let total: u64 = stacks.iter().map(|(_, w)| w).sum();
    assert!(
        unnamed * 100 <= total,
        "{unnamed} of {total} us under [unknown] frames"
    );
}
