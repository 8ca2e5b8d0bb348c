//! PHP functions in fgbpf's stacks, on the machine's PHP (Debian's
//! `php-cli` and `php-fpm`, 8.2, stripped, which scripts/test.sh installs),
//! started with no flag: the execute data chain is walked in the kernel
//! (src/runtimes/php/php.bpf.h) and named from the live process (src/runtimes/php/).
//! Known answers: the scripts' own lines and splits; PHP's own sampler,
//! the excimer extension (`php-excimer`), on the same script. PHP 8.4 is
//! Debian 13's and PHP 7.4 Debian 11's, each run in the root
//! scripts/fetch-roots.sh builds as a container runs it (`chroot ROOT
//! php8.4`), with that release's excimer.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::runtime::*;
use common::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn script(name: &str) -> PathBuf {
    Path::new(ROOT).join("tests/workloads/php").join(name)
}

/// Starts `php [ini] SCRIPT ARGS` and returns once it says "ready".
fn start(ini: &[&str], env: &[(&str, &Path)], name: &str, args: &[&str]) -> KillOnDrop {
    let mut cmd = Command::new("php");
    cmd.envs(env.iter().copied()).args(ini).arg(script(name)).args(args);
    start_ready(&mut cmd, name, "php is not installed: run scripts/test.sh, which installs php-cli")
}

/// A PHP frame is `name (file:line)_[p]`: matched by name and file.
fn php(frame: &str, wanted: &str) -> bool {
    walked_at(frame, wanted)
}

fn assert_outer_inner(stacks: &Folded, main: &str, summary: &str, label: &str) {
    let all = total(stacks);
    let ordered = share_in_order(stacks, &[main, "outer@busy_lib.php:14", "inner@busy_lib.php:"], php);
    eprintln!("{label}: {main};outer;inner {ordered:.1}% of {all} samples");
    assert!(all > 300, "{label}: {all} samples\n{summary}");
    assert!(ordered >= 95.0, "{label}: {ordered:.1}% of {all} in {main};outer;inner\n{summary}");
    assert_eq!(weight_in_order_by(stacks, &["execute_ex"], |f, w| f == w), 0, "{label}: execute_ex left in the stacks");
}

#[test]
fn busy_php_functions_are_named_in_order() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let php_cli = start(&[], &[], "busy.php", &["30"]);
    let Captured { pid, stacks, summary, .. } = capture_ended(php_cli, "oncpu", "3", "php_busy");
    assert_outer_inner(&stacks, "{main}@busy.php:8", &summary, "CLI");
    assert!(
        summary.contains(&format!("PHP: pid {pid} (php, PHP 8.2): 100.0% of its time with the PHP stack read whole")),
        "{summary}"
    );
}

/// A PHP whose binary is not called php (a container's `/app/server`, a
/// copy of Debian's php8.2): found by what its executable holds, read
/// the same, and said under its own name.
#[test]
fn a_renamed_php_binary_is_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("php_renamed");
    std::fs::create_dir_all(&dir).unwrap();
    let renamed = dir.join("app-server");
    std::fs::copy(on_path("php8.2").expect("php8.2 (scripts/test.sh installs php-cli)"), &renamed).unwrap();
    let mut cmd = Command::new(&renamed);
    cmd.arg(script("busy.php")).arg("30");
    let child = start_ready(&mut cmd, "busy.php under app-server", "copying php8.2");
    let Captured { pid, stacks, summary, .. } = capture_ended(child, "oncpu", "3", "php_renamed_capture");
    assert_outer_inner(&stacks, "{main}@busy.php:8", &summary, "renamed");
    assert!(
        summary.contains(&format!("PHP: pid {pid} (app-server, PHP 8.2): 100.0% of its time with the PHP stack read whole")),
        "{summary}"
    );
}

/// php-fpm's master and workers: killing the master alone would leave its
/// workers running, so the whole process group goes.
struct FpmGroup(KillOnDrop);

impl FpmGroup {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for FpmGroup {
    fn drop(&mut self) {
        // SAFETY: a plain syscall to the group of this test's own child,
        // not yet reaped (its drop reaps it next).
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
    }
}

/// php-fpm's workers, each a process, serving requests from a local
/// loop (`cgi-fcgi`, libfcgi-bin), each request a quarter of a second of
/// outer → inner.
#[test]
fn php_fpm_workers_name_the_requests_functions() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("php_fpm");
    std::fs::create_dir_all(&dir).unwrap();
    // A free port, then the pool's configuration.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let conf = dir.join("fpm.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\nerror_log = {}\ndaemonize = no\n[www]\nlisten = 127.0.0.1:{port}\npm = static\npm.max_children = 2\n",
            dir.join("fpm.log").display()
        ),
    )
    .unwrap();
    // -R: the test runs as root; -n: no php.ini. In a process group of
    // its own, which the workers join, so that all of it goes at the end.
    let master = FpmGroup(KillOnDrop(
        Command::new("php-fpm8.2")
            .args(["-n", "-R", "-y"])
            .arg(&conf)
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("php-fpm8.2 is not installed: run scripts/test.sh, which installs php-fpm"),
    ));
    let workers = || -> Vec<u32> {
        let out = Command::new("pgrep").args(["-P", &master.id().to_string()]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while workers().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "php-fpm started no workers: {}", dir.display());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let client = {
        let stop = stop.clone();
        let request = script("request.php");
        std::thread::spawn(move || {
            let mut served = 0;
            while !stop.load(Ordering::Relaxed) {
                let ok = Command::new("cgi-fcgi")
                    .args(["-bind", "-connect", &format!("127.0.0.1:{port}")])
                    .env("SCRIPT_FILENAME", &request)
                    .env("REQUEST_METHOD", "GET")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .expect("cgi-fcgi is not installed: run scripts/test.sh, which installs libfcgi-bin")
                    .success();
                served += u32::from(ok);
            }
            served
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pids: Vec<String> = workers().iter().map(u32::to_string).collect();
    let out = run(fgbpf().args(["oncpu", "-F", "499", "-d", "3", "-p", &pids.join(","), "-o"]).arg(dir.join("capture")));
    stop.store(true, Ordering::Relaxed);
    let served = client.join().unwrap();
    drop(master);
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(served >= 8, "{served} requests served");
    let stacks = read_folded(&dir.join("capture/oncpu.folded"));
    // The request's script, not php-fpm's own work between requests.
    let requests: Folded = stacks.iter().filter(|(f, _)| f.iter().any(|x| x == "php_execute_script")).cloned().collect();
    eprintln!("{served} requests; {} of {} samples in scripts", total(&requests), total(&stacks));
    assert_outer_inner(&requests, "{main}@request.php:4", &summary, "php-fpm");
}

/// fgbpf on a 50/30/20 split of methods, with excimer sampling the same
/// script from inside at the same time: each method within 3 points of
/// the known split and within 4 of excimer's (fgbpf's ~2,000 samples in 4
/// s at 499 Hz spread by 1.1 points at 50% (σ), excimer's ~7,000 in 7 s by
/// 0.6: they differ by chance with σ 1.25, and 4 is three of them).
#[test]
fn a_50_30_20_split_between_php_methods_agrees_with_excimer() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("php_split_excimer");
    std::fs::create_dir_all(&dir).unwrap();
    let excimer = dir.join("excimer.txt");
    let prepend = format!("auto_prepend_file={}", script("excimer.php").display());
    let mut php_cli = start(&["-d", &prepend], &[("EXCIMER_OUT", &excimer)], "split.php", &["7"]);
    // excimer writes its log when the script ends; its collapsed output:
    // `/path/split.php;Worker::fifty;spin 1519`.
    let end = End::Exit { limit: Duration::from_secs(60), success: true };
    let reference = Reference::in_workload("excimer", end, reading(&excimer, read_collapsed));
    let got = capture_beside(&mut php_cli, &["oncpu", "-F", "499"], Window::Seconds("4"), "php_split", reference);
    let stacks = read_folded(&got.dir.join("oncpu.folded"));
    let fg = Side { name: "fgbpf", stacks: &stacks, is: &|f, m| php(f, &format!("{m}@split.php:")) };
    let theirs = Side { name: "excimer", stacks: &got.theirs, is: &exactly };
    let split = [("Worker::fifty", Some(50.0)), ("Worker::thirty", Some(30.0)), ("Worker::twenty", Some(20.0))];
    let cmp = compare("split.php", fg, theirs, &split, Base::All);
    cmp.assert_near_known(3.0, &got.summary);
    cmp.assert_near_reference(Within::Points(4.0), &got.summary);
}

/// The layouts fgbpf keeps (src/runtimes/php/layouts.rs) are those of
/// each version's own headers: scripts/php-layouts.sh --check fetches
/// php8.2-dev and php8.4-dev from Debian (cached outside the clone),
/// compiles scripts/php-offsets.c against each and compares. Needs no BPF.
#[test]
fn the_layouts_match_each_versions_own_headers() {
    let out = Command::new(Path::new(ROOT).join("scripts/php-layouts.sh"))
        .arg("--check")
        .output()
        .expect("running scripts/php-layouts.sh");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A script that exits before the first drain still has its functions
/// named: the walker announces each new function, read at once.
#[test]
fn a_script_of_half_a_second_keeps_its_names() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let short = script("short.php");
    let command = ["php".as_ref(), short.as_os_str()];
    short_script_keeps_names("php_short", &command, "short.php", "[php: process gone", &["{main}@short.php:12", "work@short.php:"], php);
}

/// A Debian root of scripts/fetch-roots.sh (`common::roots::trixie` or
/// `bullseye`), with tests/workloads/php copied into it: the root, and
/// where the scripts are inside it.
fn in_root(root: PathBuf) -> (PathBuf, PathBuf) {
    let inside = common::roots::copy_workloads(&root, "php");
    (root, inside)
}

/// The Debian 13 root, with the scripts: see [`in_root`].
fn trixie() -> (PathBuf, PathBuf) {
    in_root(common::roots::trixie())
}

/// Starts `chroot ROOT PROGRAM [ini] SCRIPT ARGS` (PROGRAM: a path inside
/// the root) and returns once it says "ready".
fn start_in(root: &(PathBuf, PathBuf), program: &str, ini: &[&str], env: &[(&str, &Path)], name: &str, args: &[&str]) -> KillOnDrop {
    let (root, inside) = root;
    let mut cmd = Command::new("chroot");
    cmd.arg(root).arg(program).envs(env.iter().copied()).args(ini).arg(inside.join(name)).args(args);
    start_ready(&mut cmd, &format!("{program} {name} in {}", root.display()), "chroot")
}

fn start_in_trixie(program: &str, ini: &[&str], env: &[(&str, &Path)], name: &str, args: &[&str]) -> KillOnDrop {
    start_in(&trixie(), program, ini, env, name, args)
}

#[test]
fn php_8_4_in_a_debian_13_container_names_busy_functions_in_order() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    busy_in(&trixie(), "php8.4", "php84_busy", "PHP 8.4");
}

/// busy.php run by `program` in `root`: its functions in order, and the
/// summary saying its whole PHP stack was read (`label`: `PHP X.Y`).
fn busy_in(root: &(PathBuf, PathBuf), program: &str, test: &str, label: &str) {
    let target = start_in(root, program, &[], &[], "busy.php", &["30"]);
    let Captured { pid, stacks, summary, .. } = capture_ended(target, "oncpu", "3", test);
    assert_outer_inner(&stacks, "{main}@busy.php:8", &summary, label);
    assert!(
        summary.contains(&format!("PHP: pid {pid} ({program}, {label}): 100.0% of its time with the PHP stack read whole")),
        "{summary}"
    );
}

/// PHP 8.4 with opcache's JIT compiling every function as it is loaded
/// (`opcache.jit=1205`): the compiled code runs on the frame of the
/// execute_ex that jumped to it, unnamed (PHP writes no perf map unless
/// asked), and the PHP frames take its place, under zend_execute. The JIT
/// saves a frame's op only when it calls out, so the innermost frame's
/// line may be its function's first: the line is not checked there.
#[test]
fn php_8_4_with_its_jit_names_busy_functions_in_order() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let php84 = start_in_trixie("php8.4", &jit("1205"), &[], "busy.php", &["30"]);
    let Captured { stacks, summary, .. } = capture_ended(php84, "oncpu", "3", "php84_jit");
    // The JIT's code has no unwind rows: stacks through it are walked by
    // frame pointers there (without the JIT, 100% whole with tables).
    let through_jit: f64 = summary
        .split("% with tables and frame pointers")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0);
    assert!(through_jit >= 90.0, "the JIT's code did not run ({through_jit}% of stacks through code without unwind rows):\n{summary}");
    assert_outer_inner(&stacks, "{main}@busy.php:8", &summary, "PHP 8.4 JIT");
    let under = weight_in_order_by(&stacks, &["zend_execute", "{main}@busy.php:8"], frame_is);
    assert!(pct(under, total(&stacks)) >= 95.0, "{{main}} under zend_execute in {under} of {}\n{summary}", total(&stacks));
}

/// As a_50_30_20_split_between_php_methods_agrees_with_excimer, on PHP 8.4
/// with Debian 13's excimer (php8.4-excimer), in the container's root.
#[test]
fn php_8_4_splits_agree_with_its_excimer() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    split_84(&[], "php84_split", "split.php on PHP 8.4");
}

/// The same with opcache's tracing JIT, which compiles the hot loops and
/// calls (`opcache.jit=tracing`, as `opcache.jit=on` chooses): excimer
/// samples through the VM's interrupt flag, which the JIT's code checks.
#[test]
fn php_8_4_splits_under_its_tracing_jit_agree_with_its_excimer() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    split_84(&jit("tracing"), "php84_split_jit", "split.php on PHP 8.4, tracing JIT");
}

/// php's settings for opcache's JIT: `opcache.jit=MODE` with `mode`
/// `1205` (every function compiled as it is loaded) or `tracing` (the hot
/// loops and calls); scripts copied in the last 2 s compiled too.
fn jit(mode: &'static str) -> [&'static str; 8] {
    let jit = match mode {
        "tracing" => "opcache.jit=tracing",
        "1205" => "opcache.jit=1205",
        other => panic!("no JIT mode {other} in these tests"),
    };
    ["-d", "opcache.enable_cli=1", "-d", jit, "-d", "opcache.jit_buffer_size=64M", "-d", "opcache.file_update_protection=0"]
}

fn split_84(ini: &[&str], test: &str, title: &str) {
    split_in(&trixie(), "php8.4", ini, test, title);
}

/// split.php run by `program` in `root` beside that release's excimer.
fn split_in(root: &(PathBuf, PathBuf), program: &str, ini: &[&str], test: &str, title: &str) {
    let excimer = root.1.join("excimer.txt");
    let seen = root.0.join(excimer.strip_prefix("/").unwrap());
    let _ = std::fs::remove_file(&seen);
    let prepend = format!("auto_prepend_file={}", root.1.join("excimer.php").display());
    let ini: Vec<&str> = ini.iter().copied().chain(["-d", &prepend]).collect();
    let mut target = start_in(root, program, &ini, &[("EXCIMER_OUT", &excimer)], "split.php", &["7"]);
    // Complete once its log is written, at the script's end: Debian 13's
    // excimer (1.2.3) sometimes aborts after that, in PHP's shutdown
    // (`pthread_mutex_lock(): Invalid argument`, once in six runs here,
    // after fgbpf's capture had ended), which says nothing of its samples.
    let end = End::File { path: seen.clone(), limit: Duration::from_secs(60), settle: Duration::from_millis(500) };
    let reference = Reference::in_workload("excimer", end, reading(&seen, read_collapsed));
    let got = capture_beside(&mut target, &["oncpu", "-F", "499"], Window::Seconds("4"), test, reference);
    let stacks = read_folded(&got.dir.join("oncpu.folded"));
    let fg = Side { name: "fgbpf", stacks: &stacks, is: &|f, m| php(f, &format!("{m}@split.php:")) };
    let theirs = Side { name: "excimer", stacks: &got.theirs, is: &exactly };
    let split = [("Worker::fifty", Some(50.0)), ("Worker::thirty", Some(30.0)), ("Worker::twenty", Some(20.0))];
    let cmp = compare(title, fg, theirs, &split, Base::All);
    cmp.assert_near_known(3.0, &got.summary);
    cmp.assert_near_reference(Within::Points(4.0), &got.summary);
}

/// PHP 8.4 waiting: outer alternates a sleep (nap: usleep) and a blocking
/// read (listen: fread on a socket no one writes to), 20 ms each; each
/// wait's off-CPU time must be under its PHP caller.
#[test]
fn php_8_4_waits_are_under_their_callers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    waits_in(&trixie(), "php8.4", "php84_waits", "PHP 8.4");
}

fn waits_in(root: &(PathBuf, PathBuf), program: &str, test: &str, label: &str) {
    let target = start_in(root, program, &[], &[], "waits.php", &["30"]);
    let Captured { stacks, summary, .. } = capture_ended(target, "offcpu", "3", test);
    let all = total(&stacks);
    let main = "{main}@waits.php:25";
    let nap = weight_in_order_by(&stacks, &[main, "outer@waits.php:", "nap@waits.php:7", "usleep [c function]_[p]"], frame_is);
    let listen = weight_in_order_by(&stacks, &[main, "outer@waits.php:", "listen@waits.php:11", "fread [c function]_[p]"], frame_is);
    let (nap_pct, listen_pct) = (pct(nap, all), pct(listen, all));
    eprintln!("{label} off-CPU: nap;usleep {nap_pct:.1}%, listen;fread {listen_pct:.1}% of {all} us");
    assert!(all > 2_000_000, "{all} us off-CPU\n{summary}");
    assert!(nap_pct + listen_pct >= 95.0, "{:.1}% of the off-CPU time under its caller\n{summary}", nap_pct + listen_pct);
    assert!(nap_pct >= 30.0 && listen_pct >= 30.0, "nap {nap_pct:.1}%, listen {listen_pct:.1}%\n{summary}");
}

/// A PHP frame matched by `name@file:line` ([`php`]), or any frame equal to
/// `wanted` (a C function's `usleep [c function]_[p]`).
fn frame_is(frame: &str, wanted: &str) -> bool {
    frame == wanted || php(frame, wanted)
}

/// A PHP fgbpf has no layout for is named, with why, and keeps its native
/// frames: Debian 13's php8.4 with its build id patched to say module
/// API 20240925, which no PHP release has (the same length, so that the
/// binary runs: `-n` loads no extension, which would check the API). The
/// binary's version says 8.4, but its API is not 8.4's: the check before
/// the layout is trusted refuses it.
#[test]
fn a_php_whose_build_fgbpf_does_not_know_is_named_as_not_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (root, inside) = trixie();
    let mut binary = std::fs::read(root.join("usr/bin/php8.4")).unwrap();
    let (from, to) = (b"API20240924,NTS", b"API20240925,NTS");
    let mut patched = 0;
    let mut at = 0;
    while let Some(i) = binary[at..].windows(from.len()).position(|w| w == from) {
        binary[at + i..at + i + from.len()].copy_from_slice(to);
        at += i + from.len();
        patched += 1;
    }
    assert!(patched >= 1, "no build id API20240924,NTS in php8.4");
    let program = inside.join("php8.4-unknown");
    let there = root.join(program.strip_prefix("/").unwrap());
    std::fs::write(&there, &binary).unwrap();
    std::fs::set_permissions(&there, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let target = start_in_trixie(program.to_str().unwrap(), &["-n"], &[], "busy.php", &["30"]);
    let Captured { pid, dir, stacks, summary } = capture_ended(target, "oncpu", "2", "php_unknown_build");
    let said = format!("PHP: pid {pid} (php8.4-unknown): PHP frames not read, PHP 8.4.27, whose module API is 20240925, not PHP 8.4's 20240924");
    assert!(summary.contains(&said), "the summary does not say `{said}`\n{summary}");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("module API is 20240925"), "report.txt does not say why\n{report}");
    let native = weight_in_order_by(&stacks, &["zend_execute", "execute_ex"], |f, w| f == w);
    assert!(total(&stacks) > 300 && pct(native, total(&stacks)) >= 95.0, "native frames: {native} of {}\n{summary}", total(&stacks));
    assert_eq!(weight_in_order_by(&stacks, &["{main}@busy.php:"], php), 0, "PHP frames named from a refused layout\n{summary}");
}

/// A PHP whose name carries no version (`php`, as official images install
/// it) is read by what the binary says of itself: Debian 13's php8.4
/// copied as `php` into the root.
#[test]
fn a_php_named_without_its_version_is_read_by_what_the_binary_says() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (root, inside) = trixie();
    let program = inside.join("bin/php");
    let there = root.join(program.strip_prefix("/").unwrap());
    std::fs::create_dir_all(there.parent().unwrap()).unwrap();
    let binary = std::fs::read(root.join("usr/bin/php8.4")).unwrap();
    if std::fs::read(&there).ok() != Some(binary.clone()) {
        std::fs::write(&there, &binary).unwrap();
    }
    std::fs::set_permissions(&there, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let target = start_in_trixie(program.to_str().unwrap(), &[], &[], "busy.php", &["30"]);
    let Captured { pid, stacks, summary, .. } = capture_ended(target, "oncpu", "3", "php_unversioned");
    assert_outer_inner(&stacks, "{main}@busy.php:8", &summary, "php (8.4)");
    assert!(
        summary.contains(&format!("PHP: pid {pid} (php, PHP 8.4): 100.0% of its time with the PHP stack read whole")),
        "{summary}"
    );
}

/// Debian 11's PHP 7.4, in a bullseye root as a container runs it, read
/// by the layout its own headers give (php7.4-dev): busy.php's functions
/// in order under the executor's entry, none of execute_ex left.
#[test]
fn php_7_4_in_a_debian_11_container_names_busy_functions_in_order() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    busy_in(&bullseye(), "php7.4", "php74_busy", "PHP 7.4");
}

/// As a_50_30_20_split_between_php_methods_agrees_with_excimer, on PHP 7.4
/// with Debian 11's excimer (php-excimer), in the container's root.
#[test]
fn php_7_4_splits_agree_with_its_excimer() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    split_in(&bullseye(), "php7.4", &[], "php74_split", "split.php on PHP 7.4");
}

#[test]
fn php_7_4_waits_are_under_their_callers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    waits_in(&bullseye(), "php7.4", "php74_waits", "PHP 7.4");
}

/// The Debian 11 root, with the scripts: see [`in_root`].
fn bullseye() -> (PathBuf, PathBuf) {
    in_root(common::roots::bullseye())
}
