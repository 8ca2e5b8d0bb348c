//! Captures limited to a cgroup (`--cgroup`, `--unit`, `--container`),
//! filtered in the kernel: processes inside, and a child forked inside
//! after the capture starts, are all there; a busy process outside is not.
//! Cgroup v2 is found in /proc/mounts (here at /sys/fs/cgroup/unified,
//! beside v1 controllers); the v1 `cpu` hierarchy is tested too.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// The mount point of the first hierarchy of /proc/mounts that `pick`
/// accepts (fs type, options).
fn mount_of(pick: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/mounts").unwrap();
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        pick(f[2], f[3]).then(|| PathBuf::from(f[1]))
    })
}

fn v2_mount() -> PathBuf {
    mount_of(|kind, _| kind == "cgroup2").expect("a cgroup v2 hierarchy in /proc/mounts")
}

/// A cgroup made for one test, removed (with its processes killed) after.
struct TestCgroup {
    dir: PathBuf,
    children: Vec<Child>,
}

impl TestCgroup {
    fn new(dir: PathBuf) -> Self {
        let _ = fs::remove_dir(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("making {}: {e}", dir.display()));
        TestCgroup { dir, children: Vec::new() }
    }

    /// Starts `scoped inside SECONDS` in the cgroup (it joins before exec).
    fn start_inside(&mut self, seconds: &str) -> u32 {
        let procs = self.dir.join("cgroup.procs");
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("echo $$ > '{}' && exec \"$0\" inside {seconds}", procs.display()))
            .arg(plain_workload("scoped"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        self.children.push(child);
        pid
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Children they forked into the cgroup too.
        let procs = fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            // SAFETY: a plain syscall; the PIDs are this test's cgroup's.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // The forked child may take a moment to be reaped by init.
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn start_outside(seconds: &str) -> Child {
    Command::new(plain_workload("scoped"))
        .args(["outside", seconds])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until `pid` runs the scoped workload (it has exec'd, and so
/// handles SIGUSR1).
fn wait_exec(pid: u32) {
    for _ in 0..200 {
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.starts_with("scoped") {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("pid {pid} never ran the scoped workload");
}

/// Runs the capture `cmd` and, once it says it is attached, tells the
/// `scoped inside` process `inside` to fork its late child: the child is
/// born during the capture however long attaching takes (4 s in an
/// emulated guest). The workloads outlast the capture; callers kill them.
fn capture_then_fork(cmd: &mut Command, inside: u32) -> std::process::Output {
    wait_exec(inside);
    let capture = spawn_attached(cmd);
    // SAFETY: a plain syscall to this test's own workload.
    unsafe { libc::kill(inside as i32, libc::SIGUSR1) };
    capture.finish()
}

/// Captures `oncpu` for 3 s with `scope` flags, while `scoped inside` runs
/// in `cg` (forking its child once the capture is attached) and `scoped
/// outside` beside it; checks the profile.
fn capture_scoped(cg: &mut TestCgroup, name: &str, scope: &[&str]) {
    let inside = cg.start_inside("30");
    let mut outside = start_outside("30");
    let dir = out_dir(name);
    let out = capture_then_fork(
        fgbpf().args(["oncpu", "-F", "199", "-d", "3", "-o"]).arg(&dir).args(scope),
        inside,
    );
    let _ = outside.kill();
    let _ = outside.wait();
    assert_ok(&out);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let total: u64 = stacks.iter().map(|(_, w)| w).sum();
    let inside_w = weight_with(&stacks, "burn_inside");
    let late = weight_with(&stacks, "burn_in_late_child");
    let outside_w = weight_with(&stacks, "burn_outside");
    assert_eq!(outside_w, 0, "{name}: the process outside the cgroup was recorded");
    assert!(inside_w >= 50, "{name}: burn_inside has {inside_w} of {total} samples");
    assert!(late >= 50, "{name}: the child forked in during the capture has {late} of {total} samples");
    // Nothing but the inside process and its child.
    let roots: Vec<&str> = stacks.iter().map(|(f, _)| f[0].as_str()).collect();
    let ours = format!("-{inside}");
    assert!(
        roots.iter().all(|r| r.starts_with("scoped-O2-")),
        "{name}: processes from outside the cgroup: {roots:?}"
    );
    assert!(roots.iter().any(|r| r.ends_with(&ours)), "{name}: {roots:?}");
}

#[test]
fn a_v2_cgroup_keeps_its_processes_and_a_child_forked_in_later() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let v2 = v2_mount();
    let mut cg = TestCgroup::new(v2.join("fgbpf-test-scope"));
    // Given as /proc/PID/cgroup shows it: a path inside the v2 hierarchy.
    capture_scoped(&mut cg, "scope_v2", &["--cgroup", "/fgbpf-test-scope"]);
}

#[test]
fn a_v1_cpu_cgroup_is_read_through_the_task_s_css_set() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let cpu = mount_of(|kind, opts| kind == "cgroup" && opts.split(',').any(|o| o == "cpu"))
        .expect("this machine mounts the v1 cpu controller (see NOTES: hybrid cgroups)");
    let dir = cpu.join("fgbpf-test-scope-v1");
    let mut cg = TestCgroup::new(dir.clone());
    capture_scoped(&mut cg, "scope_v1", &["--cgroup", dir.to_str().unwrap()]);
}

#[test]
fn a_container_id_prefix_and_a_unit_name_find_their_cgroups() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let v2 = v2_mount();
    // As Docker's systemd driver names a container's cgroup.
    let id = "f9b6a0c3d2e1f9b6a0c3d2e1f9b6a0c3d2e1f9b6a0c3d2e1f9b6a0c3d2e1abcd";
    let mut cg = TestCgroup::new(v2.join(format!("docker-{id}.scope")));
    capture_scoped(&mut cg, "scope_container", &["--container", &id[..12]]);
    drop(cg);
    let slice = v2.join("fgbpf-test.slice");
    let mut cg = TestCgroup::new(slice.join("fgbpf-scope-test.service"));
    capture_scoped(&mut cg, "scope_unit", &["--unit", "fgbpf-scope-test"]);
    drop(cg);
    let _ = fs::remove_dir(&slice);
}

#[test]
fn bad_scopes_fail_before_the_capture_with_one_line() {
    if !require_root() {
        return;
    }
    let named = mount_of(|kind, opts| kind == "cgroup" && opts.contains("name="));
    let mut cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--cgroup".into(), "/no/such/cgroup".into()], "no cgroup /no/such/cgroup"),
        (vec!["--cgroup".into(), "/tmp".into()], "not in a cgroup hierarchy"),
        (vec!["--container".into(), "0123abcd".into()], "no running container"),
        (vec!["--container".into(), "xyz".into()], "not a container ID"),
        (vec!["--unit".into(), "fgbpf-no-such-unit".into()], "no systemd unit fgbpf-no-such-unit.service"),
    ];
    if let Some(n) = &named {
        cases.push((vec!["--cgroup".into(), n.display().to_string()], "named v1 hierarchy"));
    }
    for (args, says) in cases {
        let dir = out_dir("scope_bad");
        let out = run(fgbpf().args(["oncpu", "-d", "1", "-o"]).arg(&dir).args(&args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!Path::new(&dir).join("oncpu.folded").exists());
    }
}

/// The root frame `--group-by cgroup` gives the processes of `pid`'s
/// cgroup v2, from /proc/PID/cgroup.
fn group_frame_of(pid: u32) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = text.lines().find_map(|l| l.strip_prefix("0::")).expect("a cgroup v2 line");
    format!("[cgroup {path}]")
}

#[test]
fn group_by_cgroup_puts_each_container_s_stacks_under_its_own_root() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let v2 = v2_mount();
    let id = "0c1d2e3f4a5b0c1d2e3f4a5b0c1d2e3f4a5b0c1d2e3f4a5b0c1d2e3f4a5b6c7d";
    let mut cg = TestCgroup::new(v2.join(format!("docker-{id}.scope")));
    // Both outlast the capture however long attaching takes; they are
    // killed at the end.
    let inside = cg.start_inside("30");
    let mut outside = start_outside("30");
    let outside_root = group_frame_of(outside.id());
    let dir = out_dir("scope_group_by");
    // The whole system, on-CPU and off-CPU: both programs key by cgroup,
    // and waits still open at the end are named from /proc.
    let out = capture_then_fork(
        fgbpf().args(["wall", "-F", "199", "-d", "3", "--group-by", "cgroup", "-o"]).arg(&dir),
        inside,
    );
    let _ = outside.kill();
    let _ = outside.wait();
    assert_ok(&out);
    let container = "[container 0c1d2e3f4a5b]";
    for view in ["oncpu", "offcpu", "wall"] {
        let stacks = read_folded(&dir.join(format!("{view}.folded")));
        let strays: Vec<&Vec<String>> = stacks
            .iter()
            .filter(|(f, _)| !(f[0].starts_with("[cgroup /") || f[0].starts_with("[container ")))
            .map(|(f, _)| f)
            .take(3)
            .collect();
        assert!(strays.is_empty(), "{view}: stacks without a group frame: {strays:?}");
        if view == "offcpu" {
            continue;
        }
        let under = |frame: &str, root: &str| -> (u64, u64) {
            let all: u64 = stacks.iter().filter(|(f, _)| f.iter().any(|x| x == frame)).map(|(_, w)| w).sum();
            let ok: u64 = stacks
                .iter()
                .filter(|(f, _)| f[0] == root && f.iter().any(|x| x == frame))
                .map(|(_, w)| w)
                .sum();
            (ok, all)
        };
        for (frame, root) in [
            ("burn_inside", container),
            ("burn_in_late_child", container),
            ("burn_outside", outside_root.as_str()),
        ] {
            let (ok, all) = under(frame, root);
            assert!(all > 0, "{view}: no {frame} at all");
            assert_eq!(ok, all, "{view}: {frame} has {all} in all but {ok} under {root}");
        }
    }
    let report = fs::read_to_string(dir.join("report.txt")).unwrap();
    let by = report.split("By cgroup").nth(1).unwrap_or_else(|| panic!("no By cgroup table:\n{report}"));
    assert!(by.contains("container 0c1d2e3f4a5b"), "{report}");
    // timeline.html draws the group above the process, and lists the
    // process (not its group) in its selector.
    let page = in_browser(
        &dir.join("timeline.html"),
        "var t = window.fgbpfTimeline; t.whole();\n\
         return { frames: t.frames().map(function(f) { return f.name; }),\n\
                  threads: t.threads().map(function(o) { return o.text; }) };",
    );
    let listed = |part: &str, pick: &dyn Fn(&str) -> bool| page[part].as_array().unwrap().iter().any(|v| pick(v.as_str().unwrap()));
    assert!(listed("frames", &|f| f == container), "timeline.html: {page}");
    assert!(listed("frames", &|f| f == "burn_inside"), "timeline.html: {page}");
    assert!(listed("threads", &|o| o.starts_with("scoped-O2-")), "timeline.html: {page}");
    assert!(!listed("threads", &|o| o.starts_with('[')), "timeline.html: {page}");
    // Re-drawn from the file, threads merged: the group stays the root.
    let svg = dir.join("again.svg");
    assert_ok(&run(fgbpf().arg("flamegraph").arg(dir.join("wall.folded")).arg("--per-process").arg("-o").arg(&svg)));
    let drawn = fs::read_to_string(&svg).unwrap();
    assert!(drawn.contains(&format!("<title>{container} (")), "the re-drawn flamegraph has no {container} root");
}
