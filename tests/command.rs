//! `-- COMMAND` and default output directories as a user on a live server
//! meets them: the command's exit status is fgbpf's, signals sent to fgbpf
//! reach it, an empty command is refused, it can run as another user, and
//! two captures started in the same second keep both profiles.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// An empty scratch directory to run fgbpf in, for default output names.
fn scratch(test: &str) -> PathBuf {
    let dir = out_dir(test);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
}

#[test]
fn the_commands_exit_status_is_fgbpfs() {
    if !require_root() {
        return;
    }
    let dir = out_dir("exit-status");
    for (script, want) in [("exit 7", 7), ("kill -TERM $$", 128 + 15), ("exit 0", 0)] {
        let _ = std::fs::remove_dir_all(&dir);
        let out = run(fgbpf()
            .args(["oncpu", "-o"])
            .arg(&dir)
            .args(["--", "sh", "-c", script]));
        assert_eq!(out.status.code(), Some(want), "-- sh -c '{script}'");
        // The capture was still written in full.
        assert!(dir.join("oncpu.folded").exists(), "{script}: no oncpu.folded");
    }
}

#[test]
fn sigint_to_fgbpf_ends_the_command() {
    if !require_root() {
        return;
    }
    let dir = out_dir("sigint-command");
    let mut child = fgbpf()
        .args(["oncpu", "-o"])
        .arg(&dir)
        .args(["--", "sleep", "30"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command is fgbpf's child: find it once it has exec'd.
    let deadline = Instant::now() + Duration::from_secs(10);
    let sleeper = loop {
        let children = std::fs::read_to_string(format!(
            "/proc/{0}/task/{0}/children",
            child.id()
        ))
        .unwrap_or_default();
        let found = children.split_whitespace().filter_map(|p| p.parse::<u32>().ok()).find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        });
        if let Some(p) = found {
            break p;
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(500));
    // Sent by a process, as `kill -INT` or a supervisor would: the command
    // is not in the signal's path unless fgbpf passes it on.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    eprintln!("{err}");
    assert!(!alive(sleeper), "the command {sleeper} still runs after SIGINT to fgbpf");
    assert_eq!(status.code(), Some(128 + 2), "fgbpf should exit as its command did");
    assert!(err.contains("killed by signal 2"), "{err}");
    assert!(dir.join("oncpu.folded").exists());
}

#[test]
fn a_command_outliving_the_capture_is_named_or_stopped() {
    if !require_root() {
        return;
    }
    let dir = out_dir("outlives");
    let out = run(fgbpf()
        .args(["oncpu", "-d", "0.5", "-o"])
        .arg(&dir)
        // Its output must not hold fgbpf's pipes open once fgbpf exits.
        .args(["--", "sh", "-c", "exec sleep 30 >/dev/null 2>&1"]));
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let pid: u32 = err
        .split("still running as PID ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no line naming the running command: {err}"));
    assert!(alive(pid), "the command was said to run but is gone");
    // SAFETY: ending the sleep this test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };

    let _ = std::fs::remove_dir_all(&dir);
    let marker = std::env::temp_dir().join(format!("fgbpf-kill-at-end-{}", std::process::id()));
    let script = format!("sleep 30; touch {}", marker.display());
    let out = run(fgbpf()
        .args(["oncpu", "-d", "0.5", "--kill-at-end", "-o"])
        .arg(&dir)
        .args(["--", "sh", "-c", &script]));
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("stopped the command"));
    std::thread::sleep(Duration::from_millis(200));
    let running = std::process::Command::new("pgrep")
        .args(["-f", &script])
        .output()
        .unwrap();
    assert!(!running.status.success(), "--kill-at-end left the command running");
}

#[test]
fn an_empty_command_is_refused_before_anything_is_written() {
    let cwd = scratch("empty-command");
    for args in [&["oncpu", "-d", "1", "--"][..], &["offcpu", "-d", "1", "--", ""][..]] {
        let out = run(fgbpf().args(args).current_dir(&cwd));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no command after --"), "{err}");
        assert_eq!(err.lines().count(), 1, "one line, not {err}");
        assert!(entries(&cwd).is_empty(), "{args:?} wrote {:?}", entries(&cwd));
    }
}

#[test]
fn bad_numbers_get_one_clear_line() {
    let cwd = scratch("bad-numbers");
    let out = run(fgbpf().args(["oncpu", "-d", "-1"]).current_dir(&cwd));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("more than 0 seconds"));
    let out = run(fgbpf().args(["oncpu", "-p", "1, x"]).current_dir(&cwd));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'x' is not a process"));
    assert!(entries(&cwd).is_empty());
}

#[test]
fn pid_lists_may_have_spaces() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let busy = KillOnDrop(std::process::Command::new(workload("split")).arg("30").spawn().unwrap());
    let dir = out_dir("pid-spaces");
    let out = run(fgbpf()
        .args(["oncpu", "-d", "1", "-p", &format!("1, {}", busy.id()), "-o"])
        .arg(&dir));
    assert_ok(&out);
    // Both PIDs are targets: the busy one's samples are there.
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let mine = weight_with(&stacks, "work_fifty");
    assert!(mine > 0 && stacks.iter().any(|(f, _)| f[0] == format!("split-{}", busy.id())), "{stacks:?}");
}

#[test]
fn two_captures_in_the_same_second_keep_both_profiles() {
    if !require_root() {
        return;
    }
    let cwd = scratch("same-second");
    // Names the next few seconds' default directories would take, already
    // holding someone's capture: never written into, never replaced.
    let now = |offset: i64| {
        let out = std::process::Command::new("date")
            .arg(format!("--date=@{}", unix_now() as i64 + offset))
            .arg("+%Y%m%d-%H%M%S")
            .output()
            .unwrap();
        format!("fgbpf-oncpu-{}", String::from_utf8_lossy(&out.stdout).trim())
    };
    let planted: Vec<String> = (0..6).map(now).collect();
    for name in &planted {
        std::fs::create_dir(cwd.join(name)).unwrap();
        std::fs::write(cwd.join(name).join("oncpu.folded"), b"theirs 1\n").unwrap();
    }
    let spin = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
    let start = || {
        fgbpf()
            .args(["oncpu", "-F", "499", "--", "sh", "-c", spin])
            .current_dir(&cwd)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert_ok(&out);
    }
    for name in &planted {
        assert_eq!(
            std::fs::read(cwd.join(name).join("oncpu.folded")).unwrap(),
            b"theirs 1\n",
            "{name} was written into"
        );
    }
    let made: Vec<String> = entries(&cwd).into_iter().filter(|n| !planted.contains(n)).collect();
    assert_eq!(made.len(), 2, "two captures, two new directories: {made:?}");
    for name in &made {
        let stacks = read_folded(&cwd.join(name).join("oncpu.folded"));
        assert!(total(&stacks) > 0, "{name} has no samples");
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn directories_created_under_sudo_belong_to_the_user() {
    if !require_root() {
        return;
    }
    let base = scratch("sudo-dirs");
    let dir = base.join("a/b/c");
    let out = run(fgbpf()
        .args(["oncpu", "-d", "0.3", "-o"])
        .arg(&dir)
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534"));
    assert_ok(&out);
    for p in [base.join("a"), base.join("a/b"), dir.clone(), dir.join("oncpu.folded")] {
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65534), "{} is root's", p.display());
    }
    assert_eq!(std::fs::metadata(&base).unwrap().uid(), 0, "an existing parent changed hands");
}

#[test]
fn the_command_runs_as_the_user_given() {
    if !require_root() {
        return;
    }
    let dir = out_dir("run-as");
    let out = run(fgbpf()
        .args(["oncpu", "--user", "nobody", "-o"])
        .arg(&dir)
        .args(["--", "sh", "-c", "id -u; id -g; echo $USER"]));
    assert_ok(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    let nobody = std::process::Command::new("id").args(["-g", "nobody"]).output().unwrap();
    let gid = String::from_utf8_lossy(&nobody.stdout).trim().to_string();
    assert_eq!(said.lines().collect::<Vec<_>>(), ["65534", gid.as_str(), "nobody"]);
    let out = run(fgbpf().args(["oncpu", "--user", "no-such-user-fgbpf", "--", "true"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such user"));
}

#[test]
fn fgbpfs_own_code_in_the_held_child_is_not_profiled() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = out_dir("held-child");
    // A large argument list makes the command's execve long enough for
    // several samples at 5 kHz; before its exec the child is fgbpf's.
    let big = "x".repeat(100_000);
    let spin = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done";
    let mut args = vec!["--".to_string(), "sh".into(), "-c".into(), spin.into()];
    args.extend(std::iter::repeat_n(big, 15));
    let out = run(fgbpf()
        .args(["oncpu", "-F", "5000", "-o"])
        .arg(&dir)
        .args(&args));
    assert_ok(&out);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let fgbpf_rooted: u64 = stacks
        .iter()
        .filter(|(f, _)| f.iter().take(2).any(|x| x.starts_with("fgbpf")))
        .map(|(_, w)| w)
        .sum();
    assert_eq!(fgbpf_rooted, 0, "fgbpf's own frames in the command's profile: {stacks:?}");
    assert!(total(&stacks) > 0, "the command's exec was not profiled at all");
}

#[test]
fn quiet_and_json_suit_scripts() {
    if !require_root() {
        return;
    }
    let dir = out_dir("json-summary");
    let out = run(fgbpf()
        .args(["oncpu", "--quiet", "--json", "-o"])
        .arg(&dir)
        .args(["--", "sh", "-c", "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done; exit 3"]));
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stderr.is_empty(), "--quiet printed: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(json["command_status"], 3);
    assert_eq!(json["end"], "command-exited");
    assert_eq!(json["unit"], "samples");
    assert!(json["total"].as_u64().unwrap() > 0, "{json}");
    assert!(json["lost"].is_array());
    let written: Vec<&str> = json["written"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(written.iter().any(|w| w.ends_with("oncpu.folded")), "{written:?}");
}

#[test]
fn completions_man_page_and_help_come_from_the_parser() {
    let out = run(fgbpf().args(["completions", "bash"]));
    assert_ok(&out);
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("--kill-at-end") && script.contains("flamegraph"), "{script}");
    let out = run(fgbpf().arg("man"));
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains(".TH fgbpf 1"));
    let out = run(fgbpf().arg("--help"));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("on-CPU and off-CPU profiler") && help.contains("flight"), "fgbpf --help says what fgbpf is:\n{help}");
    for (cmd, says) in [("diff", "The baseline"), ("convert", "The profile to convert"), ("oncpu", "1 to 10000")] {
        let out = run(fgbpf().args([cmd, "--help"]));
        assert!(String::from_utf8_lossy(&out.stdout).contains(says), "{cmd} --help lacks {says:?}");
    }
}

#[test]
fn an_unwritable_output_file_is_bad_input() {
    let dir = scratch("unwritable-file");
    let folded = dir.join("in.folded");
    std::fs::write(&folded, "main;work 5\n").unwrap();
    let out = run(fgbpf().arg("flamegraph").arg(&folded).args(["-o", "/proc/fgbpf-x.svg"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write /proc/fgbpf-x.svg"));
}
