//! Symbolization in the situations incidents bring: a process that exits
//! mid-capture, a binary only a private mount namespace can see, a binary
//! deleted and replaced while it runs, JavaScript compiled by Node's JIT,
//! stripped binaries with and without separate debug files. Captures run
//! the real BPF programs; the library is driven directly where no capture
//! is needed (extra debug directories, speed).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::*;
use fgbpf::profile::RawStack;
use fgbpf::profile::{Unit, UnresolvedReason};
use fgbpf::symbolize::{Options, Symbolizer};

/// Captures on two CPUs disturb each other; so would the CPU burners.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The function every `shortlived` variant spends its time in.
const BURN: &str = "shortlived_burn";

/// A fresh, empty scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("symbolize")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `fgbpf oncpu -F 499 -d SECS -- sh -c SCRIPT`, returning the folded
/// stacks and the report.
fn capture_script(test: &str, secs: &str, script: &str) -> (Vec<(Vec<String>, u64)>, String) {
    let dir = out_dir(test);
    let out = run(fgbpf()
        .args(["oncpu", "-F", "499", "-d", secs, "-o"])
        .arg(&dir)
        .args(["--", "sh", "-c", script]));
    assert_ok(&out);
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    (read_folded(&dir.join("oncpu.folded")), report)
}

/// The stacks of processes named `name` (root frame `name-PID`).
fn of_process(stacks: &[(Vec<String>, u64)], name: &str) -> Vec<(Vec<String>, u64)> {
    let prefix = format!("{name}-");
    stacks
        .iter()
        .filter(|(f, _)| {
            f[0].strip_prefix(&prefix)
                .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        })
        .cloned()
        .collect()
}

/// Most of the process's samples are in `frame`, by name.
fn assert_mostly_in(stacks: &[(Vec<String>, u64)], name: &str, frame: &str) {
    let mine = of_process(stacks, name);
    let total = total(&mine);
    let named = weight_with(&mine, frame);
    assert!(
        total >= 100,
        "too few samples of {name}: {total}\n{stacks:?}"
    );
    assert!(
        named * 10 >= total * 8,
        "{named} of {total} samples of {name} under {frame}:\n{mine:?}"
    );
}

/// Compiles `tests/workloads/shortlived.c` as `name` with extra flags.
fn build_shortlived(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let bin = dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/shortlived.c");
    let status = Command::new("clang")
        .args([
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
        ])
        .args(extra)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("clang is installed (scripts/setup.sh installs it)");
    assert!(status.success(), "compiling {}", src.display());
    bin
}

fn tool(program: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{program} (binutils) is installed: {e}"));
    assert!(status.success(), "{program} {args:?}");
}

/// Splits `bin` into a stripped `stripped` and a debug file `debug`.
fn split_debug(bin: &Path, stripped: &Path, debug: &Path) {
    tool(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            bin.as_os_str(),
            debug.as_os_str(),
        ],
    );
    tool(
        "strip",
        &[
            "--strip-all".as_ref(),
            "-o".as_ref(),
            stripped.as_os_str(),
            bin.as_os_str(),
        ],
    );
}

/// A build ID no earlier run can have left a debug file for.
fn fresh_build_id(salt: u8) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{salt:02x}{:08x}{nanos:030x}", std::process::id())
}

/// The file offset where `function` of the unstripped `bin` starts.
fn function_offset(bin: &Path, function: &str) -> u64 {
    let nm = Command::new("nm")
        .arg(bin)
        .output()
        .expect("nm (binutils) is installed");
    let nm = String::from_utf8_lossy(&nm.stdout);
    let vaddr = nm
        .lines()
        .find_map(|l| {
            let mut p = l.split_whitespace();
            let (addr, _, name) = (p.next()?, p.next()?, p.next()?);
            (name == function).then(|| u64::from_str_radix(addr, 16).unwrap())
        })
        .unwrap_or_else(|| panic!("{function} not in nm output:\n{nm}"));
    let hdrs = Command::new("readelf")
        .args(["-lW"])
        .arg(bin)
        .output()
        .unwrap();
    let hdrs = String::from_utf8_lossy(&hdrs.stdout);
    hdrs.lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .find_map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .take(4)
                .map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).unwrap())
                .collect();
            let (offset, virt, filesz) = (f[0], f[1], f[3]);
            (vaddr >= virt && vaddr < virt + filesz).then(|| vaddr - virt + offset)
        })
        .unwrap_or_else(|| panic!("no LOAD segment holds {vaddr:#x}:\n{hdrs}"))
}

/// Removes a file placed in a system directory, even when the test fails.
struct Placed(PathBuf);

impl Drop for Placed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[test]
fn process_exiting_mid_capture_is_named() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let bin = workload("shortlived");
    // Runs 0.5 s to 1.5 s into a 3 s capture, as a child of the command.
    let script = format!("sleep 0.5; {} 1; sleep 1.8", bin.display());
    let (stacks, _) = capture_script("exited-mid-capture", "3", &script);
    assert_mostly_in(&stacks, "shortlived", BURN);
}

#[test]
fn process_exiting_mid_system_wide_capture_is_named() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let bin = workload("shortlived");
    let dir = out_dir("exited-system-wide");
    let mut fg = fgbpf()
        .args(["oncpu", "-F", "499", "-d", "3", "-o"])
        .arg(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Start the workload once the capture records, so it exits inside it.
    let mut err = BufReader::new(fg.stderr.take().unwrap());
    let mut log = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("fgbpf ended before recording:\n{log}");
        }
        log.push_str(&line);
        if line.contains("recording") {
            break;
        }
    }
    let mut child = Command::new(&bin).arg("1").spawn().unwrap();
    child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = fg.wait().unwrap();
    assert!(status.success(), "fgbpf failed:\n{log}{rest}");
    let stacks = read_folded(&dir.join("oncpu.folded"));
    assert_mostly_in(&stacks, "shortlived", BURN);
}

#[test]
fn binary_seen_only_in_a_private_mount_namespace_is_named() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let bin = workload("shortlived");
    let mnt = scratch("private-mount");
    // The copy lives on a tmpfs mounted in the new namespace only; the
    // process and the namespace are gone when the capture ends.
    let script = format!(
        "unshare -m sh -c 'mount -t tmpfs fgbpf-test {m} && cp {b} {m}/privlived && {m}/privlived 1'; sleep 1.5",
        m = mnt.display(),
        b = bin.display()
    );
    let (stacks, _) = capture_script("private-mount", "3", &script);
    assert!(
        !mnt.join("privlived").exists(),
        "the mount leaked out of the namespace"
    );
    assert_mostly_in(&stacks, "privlived", BURN);
}

#[test]
fn binary_deleted_and_replaced_while_running_is_named_from_the_mapped_file() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let bin = workload("shortlived");
    let dir = scratch("deleted");
    let path = dir.join("dellived");
    // A deploy: the running binary is removed and another takes its path.
    let script = format!(
        "cp {b} {p}; {p} 1.2 & sleep 0.4; rm {p}; cp /bin/true {p}; wait; sleep 1",
        b = bin.display(),
        p = path.display()
    );
    let (stacks, _) = capture_script("deleted", "3", &script);
    assert_mostly_in(&stacks, "dellived", BURN);
}

#[test]
fn program_run_from_a_memory_file_is_named_not_taken_for_jit_code() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let bin = workload("shortlived");
    let dir = scratch("memfd");
    // As container runtimes re-execute themselves and self-unpacking tools
    // run: the program copied into a memfd and executed from it (its
    // mappings: "/memfd:memlived (deleted)"); the link only gives it its
    // name.
    let link = dir.join("memlived");
    std::os::unix::fs::symlink("/proc/self/fd/3", &link).unwrap();
    let script = format!(
        "python3 -c 'import os, sys; fd = os.memfd_create(\"memlived\", 0); os.write(fd, open(sys.argv[1], \"rb\").read()); fd == 3 or os.dup2(fd, 3); os.execv(sys.argv[2], [\"memlived\", \"1.2\"])' {b} {l}; sleep 1",
        b = bin.display(),
        l = link.display()
    );
    let (stacks, _) = capture_script("memfd", "3", &script);
    assert_mostly_in(&stacks, "memlived", BURN);
}

#[test]
fn node_javascript_functions_are_named_from_the_perf_map() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "this test needs Node.js (`node` on PATH)"
    );
    let dir = scratch("node");
    let script = dir.join("hot.js");
    std::fs::write(
        &script,
        r#"
function fibonacciHotspot(n) {
  return n < 2 ? n : fibonacciHotspot(n - 1) + fibonacciHotspot(n - 2);
}
function stringChurnHotspot(k) {
  let s = 0;
  for (let i = 0; i < k; i++) s += String(i * 7).length;
  return s;
}
const until = Date.now() + 2500;
let sink = 0;
while (Date.now() < until) {
  sink += fibonacciHotspot(22);
  sink += stringChurnHotspot(20000);
}
if (sink === 0) console.log(sink);
"#,
    )
    .unwrap();
    let out = out_dir("node");
    // Node writes V8 logs (isolate-*.log) into its working directory.
    let res = run(fgbpf()
        .current_dir(&dir)
        .args(["oncpu", "-F", "499", "-d", "5", "-o"])
        .arg(&out)
        .args(["--", "node", "--perf-basic-prof"])
        .arg(&script));
    let stacks = read_folded(&out.join("oncpu.folded"));
    // Node leaves its perf map behind.
    for (frames, _) in stacks.iter().take(1) {
        if let Some(pid) = frames[0].strip_prefix("node-") {
            let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
        }
    }
    assert_ok(&res);
    let node = of_process(&stacks, "node");
    let total = total(&node);
    let jit = |name: &str| -> u64 {
        node.iter()
            .filter(|(f, _)| f.iter().any(|x| x.contains(name) && x.ends_with("_[j]")))
            .map(|(_, w)| w)
            .sum()
    };
    let (fib, churn) = (jit("fibonacciHotspot"), jit("stringChurnHotspot"));
    assert!(
        fib * 5 >= total && churn * 20 >= total,
        "fibonacciHotspot in {fib}, stringChurnHotspot in {churn} of {total} samples:\n{node:?}"
    );
    let svg = std::fs::read_to_string(out.join("oncpu.svg")).unwrap();
    assert!(svg.contains("fibonacciHotspot"), "not in the flamegraph");
}

#[test]
fn stripped_binaries_use_debug_files_or_show_module_offsets() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = scratch("stripped");

    // Found by build ID under /usr/lib/debug/.build-id.
    let id = fresh_build_id(1);
    let full = build_shortlived(&dir, "full-buildid", &[&format!("-Wl,--build-id=0x{id}")]);
    let by_id = dir.join("strip-buildid");
    let placed = Path::new("/usr/lib/debug/.build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(placed.parent().unwrap()).unwrap();
    let _placed = Placed(placed.clone());
    split_debug(&full, &by_id, &placed);

    // Found by .gnu_debuglink next to the binary.
    let full = build_shortlived(
        &dir,
        "full-dlink",
        &[&format!("-Wl,--build-id=0x{}", fresh_build_id(2))],
    );
    let by_link = dir.join("strip-dlink");
    let debug = dir.join("strip-dlink.debug");
    split_debug(&full, &by_link, &debug);
    tool(
        "objcopy",
        &[
            format!("--add-gnu-debuglink={}", debug.display()).as_ref(),
            by_link.as_os_str(),
        ],
    );

    // No debug file anywhere.
    let full = build_shortlived(
        &dir,
        "full-none",
        &[&format!("-Wl,--build-id=0x{}", fresh_build_id(3))],
    );
    let bare = dir.join("strip-none");
    split_debug(&full, &bare, &dir.join("unused.debug"));
    let burn_offset = function_offset(&full, BURN);

    let script = format!(
        "{} 0.7; {} 0.7; {} 0.7; sleep 0.6",
        by_id.display(),
        by_link.display(),
        bare.display()
    );
    let (stacks, report) = capture_script("stripped", "4", &script);
    assert_mostly_in(&stacks, "strip-buildid", BURN);
    assert_mostly_in(&stacks, "strip-dlink", BURN);
    // One frame per function, named by where it starts, never [unknown].
    assert_mostly_in(
        &stacks,
        "strip-none",
        &format!("strip-none+{burn_offset:#x}"),
    );
    // The stacks running the binary's own code. Others carry the shell's
    // frames (a sample while it was still exec'ing it) or the dynamic
    // loader's, whose outermost frame has no frame pointer to follow.
    let bare_stacks: Vec<_> = of_process(&stacks, "strip-none")
        .into_iter()
        .filter(|(f, _)| f.iter().any(|x| x.starts_with("strip-none+0x")))
        .collect();
    assert!(!bare_stacks.is_empty());
    assert!(
        bare_stacks
            .iter()
            .all(|(f, _)| !f.iter().any(|x| x == "[unknown]")),
        "{bare_stacks:?}"
    );
    assert!(!report.is_empty());
}

/// Spawns `bin SECONDS addr` and returns it with the address it prints.
fn spawn_with_address(bin: &Path, seconds: &str) -> (Child, u64) {
    let mut child = Command::new(bin)
        .args([seconds, "addr"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let line = first_line(&mut child);
    let addr = u64::from_str_radix(line.trim().trim_start_matches("0x"), 16)
        .unwrap_or_else(|_| panic!("bad address line {line:?}"));
    (child, addr)
}

/// The leaf frame's name of a one-address profile of `pid`.
fn leaf_name(s: &mut Symbolizer, pid: u32, addr: u64) -> (String, Vec<(UnresolvedReason, u64)>) {
    let raw = RawStack {
        pid,
        tid: pid,
        comm: "t".into(),
        user: vec![addr].into(),
        weight: 1,
        ..Default::default()
    };
    let p = fgbpf::profile::build::from_raw(vec![raw], Unit::Samples, s);
    let leaf = *p.stacks()[0].frames.last().unwrap();
    let reasons = p
        .unresolved
        .first()
        .map(|u| u.reasons.clone())
        .unwrap_or_default();
    (p.frame(leaf).to_string(), reasons)
}

#[test]
fn extra_debug_dirs_name_a_stripped_binary_after_it_exits() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = scratch("debug-dir");
    let id = fresh_build_id(4);
    let full = build_shortlived(&dir, "full", &[&format!("-Wl,--build-id=0x{id}")]);
    let stripped = dir.join("dd-stripped");
    let debug_dir = dir.join("debug");
    let debug = debug_dir
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    split_debug(&full, &stripped, &debug);

    let (mut child, addr) = spawn_with_address(&stripped, "0.3");
    let pid = child.id();
    let mut with = Symbolizer::new(&Options {
        debug_dirs: vec![debug_dir],
        ..Options::default()
    });
    let mut without = Symbolizer::new(&Options::default());
    with.remember(pid, 0, "dd-stripped");
    without.remember(pid, 0, "dd-stripped");
    child.wait().unwrap();

    let (name, reasons) = leaf_name(&mut with, pid, addr);
    assert_eq!(name, BURN);
    assert!(reasons.is_empty(), "{reasons:?}");
    let (name, reasons) = leaf_name(&mut without, pid, addr);
    assert_eq!(
        name,
        format!("dd-stripped+{:#x}", function_offset(&full, BURN))
    );
    assert_eq!(
        reasons,
        vec![(
            UnresolvedReason::NoSymbols {
                module: "dd-stripped".into()
            },
            1
        )]
    );
}

#[test]
fn library_loaded_after_first_sight_is_named_after_exit_when_refreshed() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let mut child = Command::new(workload("latelib"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut refreshed = Symbolizer::new(&Options::default());
    let mut stale = Symbolizer::new(&Options::default());
    refreshed.remember(pid, 0, "latelib");
    stale.remember(pid, 0, "latelib");
    // As the capture window does, until the process is gone.
    while child.try_wait().unwrap().is_none() {
        refreshed.refresh();
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = u64::from_str_radix(line.trim().trim_start_matches("0x"), 16).unwrap();

    let (name, reasons) = leaf_name(&mut refreshed, pid, addr);
    assert!(name.contains("cos"), "{name} {reasons:?}");
    let (name, reasons) = leaf_name(&mut stale, pid, addr);
    assert_eq!(name, "[unknown]");
    assert_eq!(reasons, vec![(UnresolvedReason::Unmapped, 1)]);
}
