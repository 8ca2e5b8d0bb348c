//! PHP functions in fgbpf's stacks, on the machine's PHP (Debian's
//! `php-cli` and `php-fpm`, 8.2, stripped, which scripts/test.sh installs),
//! started with no flag: the execute data chain is walked in the kernel
//! (src/runtimes/php/php.bpf.h) and named from the live process (src/runtimes/php/).
//! Known answers: the scripts' own lines and splits; PHP's own sampler,
//! the excimer extension (`php-excimer`), on the same script.

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

/// The offsets fgbpf keeps for PHP 8.2 are those of PHP's own headers:
/// tests/workloads/php/offsets.c, compiled against php8.2-dev, prints
/// them. Needs no BPF.
#[test]
fn the_offset_table_matches_phps_own_headers() {
    let includes = Command::new("php-config")
        .arg("--includes")
        .output()
        .expect("php-config is not installed: run scripts/test.sh, which installs php8.2-dev");
    let includes = String::from_utf8_lossy(&includes.stdout).to_string();
    let dir = out_dir("php_offsets");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("offsets");
    let built = Command::new("gcc")
        .args(includes.split_whitespace())
        .arg(script("offsets.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let out = String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap();
    let got: std::collections::HashMap<&str, u64> =
        out.lines().filter_map(|l| l.split_once(' ')).map(|(k, v)| (k, v.parse().unwrap())).collect();
    let l = fgbpf::runtimes::php::LAYOUT_82;
    let ours: [(&str, u64); 17] = [
        ("eg_size", l.eg_size),
        ("eg_current_execute_data", l.eg_current_execute_data.into()),
        ("ex_opline", l.ex_opline.into()),
        ("ex_func", l.ex_func.into()),
        ("ex_type_info", l.ex_type_info.into()),
        ("ex_prev", l.ex_prev.into()),
        ("fn_name", l.fn_name.into()),
        ("fn_scope", l.fn_scope.into()),
        ("op_last", l.op_last.into()),
        ("op_opcodes", l.op_opcodes.into()),
        ("op_filename", l.op_filename.into()),
        ("op_line_start", l.op_line_start.into()),
        ("zop_lineno", l.zop_lineno.into()),
        ("zop_size", l.zop_size.into()),
        ("ce_name", l.ce_name.into()),
        ("str_len", l.str_len.into()),
        ("str_val", l.str_val.into()),
    ];
    for (name, value) in ours {
        assert_eq!(got.get(name), Some(&value), "{name}: the headers say {:?}", got.get(name));
    }
    // FG_PHP_CALL_TOP of src/bpf/fgbpf.h.
    assert_eq!(got.get("call_top"), Some(&(1 << 17)));
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
