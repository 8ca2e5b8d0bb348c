//! Stripped binaries named as distributions ship them: a `gcc -O2 -g`
//! program stripped of `.symtab` (as Debian's packages are), its debug
//! file served by a local `debuginfod` (elfutils', from apt) and found
//! through `DEBUGINFOD_URLS`; the same with the server unreachable; and a
//! program carrying `.gnu_debugdata` (MiniDebugInfo, as Fedora's do). Its
//! time is in static functions with known shares (tests/workloads/statics.c),
//! which only the symbols strip removed can name.

mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// The workload's static functions and their shares of its rounds.
const STATICS: [(&str, f64); 3] = [("parse_row", 0.5), ("hash_key", 1.0 / 3.0), ("flush_page", 1.0 / 6.0)];

/// A fresh scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("debuginfo").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tool(program: &str, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is installed (scripts/test.sh installs it): {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `statics.c` built as a distribution builds (`gcc -O2 -g`) at
/// `dir/name`, then split: the binary stripped of everything but what it
/// runs with (`strip --strip-all`), its DWARF and symbols in `debug`.
/// Returns the binary's build ID.
fn build_split(dir: &Path, name: &str, debug: &Path) -> (PathBuf, String) {
    let full = dir.join(format!("{name}.full"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/statics.c");
    let status = Command::new("gcc").args(["-O2", "-g", "-o"]).arg(&full).arg(&src).status().unwrap();
    assert!(status.success(), "compiling {}", src.display());
    let bin = dir.join(name);
    tool("objcopy", &["--only-keep-debug".as_ref(), full.as_os_str(), debug.as_os_str()]);
    tool("strip", &["--strip-all".as_ref(), "-o".as_ref(), bin.as_os_str(), full.as_os_str()]);
    let sections = tool("readelf", &["-SW".as_ref(), bin.as_os_str()]);
    assert!(!sections.contains(" .symtab") && !sections.contains(" .debug_info"), "{name} is stripped:\n{sections}");
    let notes = tool("readelf", &["-n".as_ref(), bin.as_os_str()]);
    let id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("gcc gave {name} a build ID:\n{notes}"))
        .to_string();
    (bin, id)
}

/// `fgbpf oncpu -F 499 -- BIN 3` with `env` set (and `DEBUGINFOD_URLS`
/// removed unless given): its folded stacks, report and stderr.
fn capture(test: &str, bin: &Path, env: &[(&str, &str)]) -> (Vec<(Vec<String>, u64)>, String, String) {
    let dir = out_dir(test);
    let mut cmd = fgbpf();
    cmd.env_remove("DEBUGINFOD_URLS").args(["oncpu", "-F", "499", "-o"]).arg(&dir).arg("--").arg(bin).arg("3");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out: Output = run(&mut cmd);
    assert_ok(&out);
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    (read_folded(&dir.join("oncpu.folded")), report, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The process `name`'s stacks that ran its own code: those holding `main`
/// or an unnamed frame of the binary (`name+0x…`). Others are the dynamic
/// loader's and the C library's start, before `main`.
fn own_code<'a>(stacks: &'a [(Vec<String>, u64)], name: &str) -> Vec<&'a (Vec<String>, u64)> {
    let root = format!("{name}-");
    let unnamed = format!("{name}+0x");
    stacks
        .iter()
        .filter(|(f, _)| f[0].starts_with(&root))
        .filter(|(f, _)| f.iter().any(|x| x == "main" || x.starts_with(&unnamed)))
        .collect()
}

/// ≥ 99% of the binary's own samples named to its static functions, whole
/// to `main`, in the shares the program spends (within 8 points).
fn assert_statics_named(stacks: &[(Vec<String>, u64)], name: &str) {
    let own = own_code(stacks, name);
    let all: u64 = own.iter().map(|(_, w)| w).sum();
    assert!(all >= 800, "{name} ran 3 s at 499 Hz: {all} samples of its own code\n{stacks:?}");
    let unnamed = format!("{name}+0x");
    let bare: u64 = own.iter().filter(|(f, _)| f.iter().any(|x| x.starts_with(&unnamed) || x == "[unknown]")).map(|(_, w)| w).sum();
    let mut in_statics = 0;
    for (function, share) in STATICS {
        let w: u64 = own
            .iter()
            .filter(|(f, _)| f.iter().any(|x| x == function) && f.iter().any(|x| x == "work") && f.iter().any(|x| x == "main"))
            .map(|(_, w)| w)
            .sum();
        let got = w as f64 / all as f64;
        eprintln!("{name}: {function} {:.1}% (runs {:.1}%)", got * 100.0, share * 100.0);
        assert!((got - share).abs() <= 0.08, "{function}: {:.1}% of {name}'s samples, it runs {:.1}%", got * 100.0, share * 100.0);
        in_statics += w;
    }
    assert!(bare * 100 <= all, "{bare} of {all} samples of {name} with an unnamed frame of it");
    assert!(in_statics * 100 >= all * 99, "{in_statics} of {all} samples of {name} named to its static functions, whole to main");
}

/// A port nothing listens on (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// elfutils' `debuginfod` serving the debug files under `dir`, killed when
/// dropped; started once it serves `build_id`.
struct Server {
    /// Held to kill the server when the test ends.
    _child: KillOnDrop,
    url: String,
}

impl Server {
    fn start(dir: &Path, db: &Path, build_id: &str) -> Server {
        let port = free_port();
        let child = Command::new("debuginfod")
            .args(["-p", &port.to_string(), "-d"])
            .arg(db)
            .arg("-F")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("debuginfod (elfutils) is installed: scripts/test.sh installs it");
        let server = Server { _child: KillOnDrop(child), url: format!("http://127.0.0.1:{port}") };
        let url = format!("{}/buildid/{build_id}/debuginfo", server.url);
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if agent.get(&url).call().is_ok_and(|r| r.status() == 200) {
                return server;
            }
            assert!(Instant::now() < deadline, "debuginfod did not serve {url} within 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A server that answers every request with `/bin/true` (a file that is
/// no binary's debug file but `true`'s), and the number of requests it
/// answered.
fn liar() -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let body = std::fs::read("/bin/true").unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = conn.write_all(&body);
        }
    });
    (url, asked)
}

#[test]
fn a_stripped_program_is_named_from_a_debuginfod_server_then_from_its_cache() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = scratch("served");
    let served = dir.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let (bin, id) = build_split(&dir, "dbgsrv", &served.join("dbgsrv.debug"));
    let server = Server::start(&served, &dir.join("debuginfod.sqlite"), &id);
    let cache = dir.join("cache");
    let cache_s = cache.to_str().unwrap();
    // Asked first, a server that sends a file that is not the binary's:
    // refused and said, and taken out of the cache they share, so that
    // the next server is asked.
    let (lying, asked) = liar();
    let urls = format!("{lying} {}", server.url);
    let (stacks, report, stderr) = capture("debuginfo-served", &bin, &[("DEBUGINFOD_URLS", &urls), ("DEBUGINFOD_CACHE_PATH", cache_s)]);
    assert_statics_named(&stacks, "dbgsrv");
    assert!(asked.load(Ordering::SeqCst) >= 1, "the lying server was asked");
    let refused = format!("debuginfod {lying}: files refused as not the binary's or without symbols for ");
    assert!(
        report.lines().any(|l| l.trim().starts_with(&refused) && l.contains("dbgsrv")),
        "the report says the refusal: {report}"
    );
    let said = format!("debuginfod {}: debug information for 1 binary (dbgsrv)", server.url);
    assert!(report.lines().any(|l| l.trim().starts_with(&said)), "the report names the server: {report}");
    assert!(stderr.lines().any(|l| l.starts_with(&format!("fgbpf: {said}"))), "the summary names the server: {stderr}");
    assert!(cache.join(&id).join("debuginfo").is_file(), "the file is kept in DEBUGINFOD_CACHE_PATH");

    // The server gone: the cache names it, and says so.
    drop(server);
    let (stacks, report, _) = capture("debuginfo-cached", &bin, &[("DEBUGINFOD_URLS", "http://127.0.0.1:1"), ("DEBUGINFOD_CACHE_PATH", cache_s)]);
    assert_statics_named(&stacks, "dbgsrv");
    let said = format!("debuginfod cache {cache_s}: debug information for 1 binary (dbgsrv)");
    assert!(report.contains(&said), "the report names the cache: {report}");
}

/// A file in the cache under the binary's build ID that is not its debug
/// information, put there by someone else (here, the test): fgbpf keeps
/// it byte for byte, does not ask the servers (their client would answer
/// from the cache), and says which file it is and what to do.
#[test]
fn someone_elses_wrong_file_in_the_debuginfod_cache_is_kept_and_said() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = scratch("foreign");
    let (bin, id) = build_split(&dir, "dbgforeign", &dir.join("dbgforeign.debug"));
    let cache = dir.join("cache");
    let planted = cache.join(&id).join("debuginfo");
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    let body = std::fs::read("/bin/true").unwrap();
    std::fs::write(&planted, &body).unwrap();
    let (lying, asked) = liar();
    let (stacks, report, stderr) = capture("debuginfo-foreign", &bin, &[("DEBUGINFOD_URLS", &lying), ("DEBUGINFOD_CACHE_PATH", cache.to_str().unwrap())]);
    assert_eq!(std::fs::read(&planted).unwrap(), body, "the file fgbpf did not write is kept as it was");
    assert_eq!(asked.load(Ordering::SeqCst), 0, "the servers are not asked for what the cache answers");
    let said = format!(
        "debuginfod cache {}: {} is not the debug information of its build ID, and fgbpf did not write it: kept; remove it and the servers are asked again",
        cache.display(),
        planted.display()
    );
    assert!(report.contains(&said), "the report says the file and the remedy: {report}");
    assert!(stderr.contains(&said), "the summary says the file and the remedy: {stderr}");
    // Named by address, never from the wrong file.
    let own = own_code(&stacks, "dbgforeign");
    assert!(!own.is_empty(), "{stacks:?}");
    assert!(own.iter().all(|(f, _)| f.iter().any(|x| x.starts_with("dbgforeign+0x"))), "{own:?}");
}

#[test]
fn an_unreachable_debuginfod_server_is_one_line_and_addresses_are_kept() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = scratch("unreachable");
    let (bin, _) = build_split(&dir, "dbgnone", &dir.join("dbgnone.debug"));
    let url = format!("http://127.0.0.1:{}", free_port());
    let cache = dir.join("cache");
    let (stacks, _, stderr) = capture("debuginfo-unreachable", &bin, &[("DEBUGINFOD_URLS", &url), ("DEBUGINFOD_CACHE_PATH", cache.to_str().unwrap())]);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("fgbpf: debuginfod")).collect();
    assert_eq!(lines.len(), 1, "one line about the server: {stderr}");
    let said = format!("fgbpf: debuginfod {url}: could not be reached (");
    assert!(lines[0].starts_with(&said) && lines[0].ends_with("): 1 binary named by address only"), "{lines:?}");
    // The functions stay one frame each, named by where they start.
    let own = own_code(&stacks, "dbgnone");
    let all: u64 = own.iter().map(|(_, w)| w).sum();
    let kept: u64 = own.iter().filter(|(f, _)| f.iter().any(|x| x.starts_with("dbgnone+0x"))).map(|(_, w)| w).sum();
    assert!(all >= 800 && kept * 100 >= all * 99, "{kept} of {all} samples with the binary's addresses kept");
    assert!(!own.iter().any(|(f, _)| f.iter().any(|x| x == "[unknown]")), "{own:?}");
}

#[test]
fn a_program_carrying_minidebuginfo_is_named_from_it() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = scratch("minidebuginfo");
    let debug = dir.join("dbgmini.debug");
    let (bin, _) = build_split(&dir, "dbgmini", &debug);
    // gdb's recipe (its manual, "MiniDebugInfo"): the function symbols the
    // dynamic table lacks, from the debug file, xz-compressed into the
    // stripped binary's .gnu_debugdata.
    let full = dir.join("dbgmini.full");
    let names = |args: &[&std::ffi::OsStr]| -> std::collections::BTreeSet<String> {
        tool("nm", args).lines().filter_map(|l| {
            let mut p = l.split_whitespace();
            let (name, kind) = (p.next()?, p.next()?);
            matches!(kind, "T" | "t").then(|| name.to_string())
        }).collect()
    };
    let dynamic = names(&["-D".as_ref(), "--format=posix".as_ref(), "--defined-only".as_ref(), full.as_os_str()]);
    let functions = names(&["--format=posix".as_ref(), "--defined-only".as_ref(), full.as_os_str()]);
    let keep = dir.join("keep");
    let list: Vec<&String> = functions.difference(&dynamic).collect();
    assert!(list.iter().any(|n| *n == "parse_row"), "{list:?}");
    std::fs::write(&keep, list.iter().map(|n| format!("{n}\n")).collect::<String>()).unwrap();
    let mini = dir.join("mini");
    tool("objcopy", &["-S".as_ref(), "--remove-section".as_ref(), ".comment".as_ref(), format!("--keep-symbols={}", keep.display()).as_ref(), debug.as_os_str(), mini.as_os_str()]);
    tool("xz", &["-f".as_ref(), mini.as_os_str()]);
    tool("objcopy", &[format!("--add-section=.gnu_debugdata={}.xz", mini.display()).as_ref(), bin.as_os_str()]);
    let sections = tool("readelf", &["-SW".as_ref(), bin.as_os_str()]);
    assert!(sections.contains(".gnu_debugdata") && !sections.contains(" .symtab"), "{sections}");
    let (stacks, report, _) = capture("debuginfo-mini", &bin, &[]);
    assert_statics_named(&stacks, "dbgmini");
    assert!(!report.contains("debuginfod"), "nothing fetched: {report}");
}
