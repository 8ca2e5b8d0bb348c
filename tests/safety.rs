//! Safe on live servers: every exit path releases the BPF objects, signals
//! still write what was gathered, hostile names stay inert, outputs belong
//! to the sudo user, and bad input fails before anything is loaded.

mod common;

use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use libbpf_rs::query::ProgInfoIter;

/// The BPF programs a running process holds, from its fds' fdinfo: other
/// captures running on the machine at the same time do not count.
fn programs_of(pid: u32) -> Vec<u32> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        ids.extend(
            text.lines()
                .filter_map(|l| l.strip_prefix("prog_id:"))
                .filter_map(|v| v.trim().parse::<u32>().ok()),
        );
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn loaded_programs() -> Vec<u32> {
    ProgInfoIter::default().map(|p| p.id).collect()
}

/// Waits up to a second for the kernel to free `ids` (freeing is deferred
/// until the last reference is gone).
fn assert_released(ids: &[u32], path: &str) {
    assert!(
        !ids.is_empty(),
        "{path}: no BPF programs were seen while fgbpf ran"
    );
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let loaded = loaded_programs();
        let left: Vec<_> = ids.iter().filter(|id| loaded.contains(id)).collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after {path}, the kernel still holds fgbpf's programs {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn spawn_capture(args: &[&str], dir: &std::path::Path) -> Child {
    fgbpf()
        .args(args)
        .arg("-o")
        .arg(dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Waits until the capture has attached (its start message is printed by
/// then; a fixed pause is enough and keeps the test simple).
fn settle() {
    std::thread::sleep(Duration::from_millis(1500));
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn every_exit_path_releases_the_bpf_programs() {
    if !require_root() {
        return;
    }
    let _g = serial();

    // Normal end (duration), for each capture command.
    for cmd in ["oncpu", "offcpu", "wall"] {
        let dir = out_dir(&format!("release-{cmd}"));
        let child = spawn_capture(&[cmd, "-d", "2"], &dir);
        settle();
        let ids = programs_of(child.id());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        assert_released(&ids, &format!("a normal end of {cmd}"));
    }

    // Ctrl-C: outputs written, programs released.
    let dir = out_dir("release-running");
    let child = spawn_capture(&["wall"], &dir);
    settle();
    let ids = programs_of(child.id());
    assert!(ids.len() >= 4, "wall holds {ids:?}");
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(dir.join("wall.svg").exists() && dir.join("oncpu.folded").exists());
    assert_released(&ids, "Ctrl-C");

    // SIGTERM: the same.
    let dir = out_dir("release-term");
    let child = spawn_capture(&["oncpu"], &dir);
    settle();
    let ids = programs_of(child.id());
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(dir.join("oncpu.svg").exists());
    assert_released(&ids, "SIGTERM");

    // SIGKILL: no destructor runs; the kernel still frees everything
    // because nothing is pinned.
    let dir = out_dir("release-kill");
    let mut child = spawn_capture(&["wall"], &dir);
    settle();
    let ids = programs_of(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_released(&ids, "SIGKILL");

    // An error after the programs were loaded: the command passes the
    // pre-checks (it is an executable file) but cannot be executed. The
    // programs exist only for a moment, so watch for them from here.
    let bad = out_dir("release-error").with_extension("bin");
    std::fs::write(&bad, b"\x7fELF garbage").unwrap();
    std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let dir = out_dir("release-error");
    let before = loaded_programs();
    let child = fgbpf()
        .args(["wall", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(&bad)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut ids = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while ids.is_empty() && Instant::now() < deadline {
        ids = programs_of(pid);
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    // This message comes from the exec, which fgbpf lets happen only once
    // its programs are loaded and attached (src/app/capture.rs): they were
    // loaded, seen or not. (The checks before any load say "cannot start
    // PROGRAM: ...".)
    assert!(
        stderr_of(&out).contains("cannot start the command: Exec format error"),
        "{}",
        stderr_of(&out)
    );
    if ids.is_empty() {
        // Too quick to observe: then nothing new may remain loaded that
        // carries fgbpf's program names.
        let new: Vec<_> = ProgInfoIter::default()
            .filter(|p| !before.contains(&p.id) && p.name.to_string_lossy().starts_with("switch_"))
            .map(|p| p.id)
            .collect();
        assert!(
            new.is_empty(),
            "programs {new:?} left after a failed command start"
        );
    } else {
        assert_released(&ids, "a failed command start");
    }
}

#[test]
fn second_ctrl_c_exits_at_once_without_outputs() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = out_dir("double-ctrl-c");
    // A busy target gives fgbpf frames to name after the first Ctrl-C
    // (loading kallsyms and the binary takes tens of milliseconds), so the
    // second one surely lands while it is finishing.
    let mut target = Command::new(workload("split")).arg("20").spawn().unwrap();
    let child = fgbpf()
        .args(["wall", "-F", "999", "-p", &target.id().to_string(), "-o"])
        .arg(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    settle();
    let ids = programs_of(child.id());
    signal(&child, libc::SIGINT);
    // Two signals sent back to back would merge into one.
    std::thread::sleep(Duration::from_millis(2));
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    target.kill().ok();
    target.wait().ok();
    assert_eq!(out.status.code(), Some(130), "{}", stderr_of(&out));
    assert!(!dir.join("wall.svg").exists());
    assert_released(&ids, "a second Ctrl-C");
}

#[test]
fn outputs_belong_to_the_sudo_user() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = out_dir("sudo-owner");
    let out = run(fgbpf()
        .args(["oncpu", "-d", "0.5", "-o"])
        .arg(&dir)
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534"));
    assert_ok(&out);
    for p in [
        dir.clone(),
        dir.join("oncpu.svg"),
        dir.join("oncpu.folded"),
        dir.join("report.txt"),
    ] {
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            (65534, 65534),
            "{} is owned by {}:{}",
            p.display(),
            m.uid(),
            m.gid()
        );
    }
}

#[test]
fn hostile_symbol_names_are_escaped_in_every_svg() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = out_dir("evil-symbol");
    let out = run(fgbpf()
        .args(["wall", "-F", "499", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(workload("evil")));
    assert_ok(&out);
    for svg in ["oncpu.svg", "offcpu.svg", "wall.svg"] {
        let text = std::fs::read_to_string(dir.join(svg)).unwrap();
        assert!(
            !text.contains("<svg onload"),
            "{svg}: markup from a symbol name"
        );
        assert!(!text.contains("<script>alert"), "{svg}");
    }
    let oncpu = std::fs::read_to_string(dir.join("oncpu.svg")).unwrap();
    assert!(
        oncpu.contains("evil&lt;svg onload=alert(1)&gt;&amp;"),
        "the symbol is named and escaped"
    );
    // The folded line is still parseable: ';' inside the name is replaced.
    let stacks = read_folded(&dir.join("oncpu.folded"));
    assert!(
        stacks.iter().any(|(f, _)| f
            .iter()
            .any(|x| x.starts_with("evil<svg onload=alert(1)>&\"':x"))),
        "{stacks:?}"
    );
}

#[test]
fn without_privileges_the_error_names_what_is_missing() {
    // Needs root to drop to an unprivileged user; nothing is loaded.
    if !require_root() {
        return;
    }
    let dir = out_dir("unprivileged");
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_fgbpf"))
        .args(["oncpu", "-d", "1", "-o"])
        .arg(&dir)
        .output()
        .expect("setpriv (util-linux) is installed");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("CAP_BPF") && err.contains("CAP_PERFMON") && err.contains("sudo"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "more than one line: {err}");
    assert!(!dir.exists());
}

#[test]
fn unwritable_output_directory_is_refused_before_capture() {
    if !require_root() {
        return;
    }
    for dir in ["/proc/fgbpf-out", "/sys/fgbpf-out"] {
        let started = Instant::now();
        let out = fgbpf()
            .args(["oncpu", "-d", "1", "-o", dir])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains("output directory"),
            "{}",
            stderr_of(&out)
        );
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}

#[test]
fn a_short_system_wide_capture_stays_within_the_memory_ceiling() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = out_dir("memory");
    let out = run(fgbpf().args(["wall", "-d", "2", "-o"]).arg(&dir));
    assert_ok(&out);
    let err = stderr_of(&out);
    let line = err
        .lines()
        .find(|l| l.contains("peak memory"))
        .expect("own-use line in the summary");
    let mb: f64 = line
        .split(" s CPU, ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    // The ceiling stated in docs/safety.md, with default map sizes.
    assert!(mb < 512.0, "{mb} MB peak");
}

#[test]
fn demo_replaces_only_its_own_outputs() {
    if !require_root() {
        return;
    }
    let dir = out_dir("demo_foreign");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for round in 0..2 {
        let out = run(fgbpf().args(["demo", "-d", "1", "-o"]).arg(&dir));
        assert_ok(&out);
        assert!(dir.join("wall.svg").exists(), "round {round}: no wall.svg");
    }
    assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"mine");
    assert!(dir.join("sub").is_dir());
}

#[test]
fn links_planted_at_temporary_names_are_not_followed() {
    if !require_root() {
        return;
    }
    let dir = out_dir("planted-links");
    std::fs::create_dir_all(&dir).unwrap();
    let victim = dir.with_file_name("planted-links-victim");
    std::fs::write(&victim, b"precious").unwrap();
    // Another user's links at the names a writer could predict: the output
    // names with the next few hundred PIDs appended.
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for name in ["oncpu.svg", "oncpu.folded", "oncpu.slices", "timeline.html", "report.txt", "capture.json"] {
        for pid in last + 1..last + 300 {
            let _ = std::os::unix::fs::symlink(&victim, dir.join(format!("{name}.tmp{pid}")));
        }
    }
    let spin = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done";
    let out = run(fgbpf().args(["oncpu", "-o"]).arg(&dir).args(["--", "sh", "-c", spin]));
    assert_ok(&out);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "written through a link");
    for name in ["oncpu.svg", "oncpu.folded", "oncpu.slices", "timeline.html", "report.txt"] {
        let m = std::fs::symlink_metadata(dir.join(name)).unwrap();
        assert!(m.file_type().is_file(), "{name} is not a plain file");
    }
    // Re-rendering needs no root, and writes the same way.
    let svg = dir.join("again.svg");
    for pid in last + 1..last + 600 {
        let _ = std::os::unix::fs::symlink(&victim, dir.join(format!("again.svg.tmp{pid}")));
    }
    let out = run(fgbpf().arg("flamegraph").arg(dir.join("oncpu.folded")).arg("-o").arg(&svg));
    assert_ok(&out);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "written through a link");
    assert!(std::fs::symlink_metadata(&svg).unwrap().file_type().is_file());
}
