//! `fgbpf alloc` against real BPF, on a `gcc -O2` program that allocates
//! 50/30/20 of its bytes from three functions (tests/workloads/alloc_split.c):
//! the shares of allocated bytes against the known split and against
//! heaptrack's record of a second run; a leak from one of them in
//! `inuse_space`; the pprof file in `go tool pprof` with Go's four heap
//! sample types; a Go program's own heap profile read from outside beside
//! the one it serves. heaptrack and go are required, not skipped.

mod common;
#[allow(dead_code)]
#[path = "otlp/export.rs"]
mod export;
#[allow(dead_code)]
#[path = "otlp/receiver.rs"]
mod receiver;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::*;

const FUNCS: [&str; 3] = ["spend_a", "spend_b", "spend_c"];
const SPLIT: [f64; 3] = [50.0, 30.0, 20.0];

/// Each function's share (percent) of the three's weight in a folded file.
fn shares(stacks: &[(Vec<String>, u64)]) -> [f64; 3] {
    let w: Vec<u64> = FUNCS.iter().map(|f| weight_with(stacks, f)).collect();
    let all: u64 = w.iter().sum();
    assert!(all > 0, "no stack through {FUNCS:?}: {stacks:?}");
    [0, 1, 2].map(|i| pct(w[i], all))
}

/// Runs `fgbpf alloc` on the workload with `args`; gives the output dir
/// and stderr.
fn capture(test: &str, formats: &str, sample_bytes: &str, workload_args: &[&str]) -> (std::path::PathBuf, String) {
    let dir = out_dir(test);
    let bin = plain_workload("alloc_split");
    let out = run(fgbpf().args(["alloc", "--sample-bytes", sample_bytes, "--format", formats, "-o"]).arg(&dir).arg("--").arg(&bin).args(workload_args));
    assert_ok(&out);
    (dir, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Bytes allocated under each of [`FUNCS`] in a heaptrack data file: its
/// `a SIZE TRACE` allocation infos summed over the `+ INFO` lines, each
/// trace (`t IP PARENT`) walked up through its frames' functions (`i ADDR
/// MODULE [FUNCTION FILE LINE]...`, names in `s LEN TEXT` lines).
fn heaptrack_bytes(file: &Path) -> [u64; 3] {
    let out = Command::new("zstd").arg("-dc").arg(file).output().expect("zstd (heaptrack's files are zstd)");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    let (mut strings, mut ips, mut traces, mut infos) = (vec![String::new()], vec![Vec::new()], vec![(0u64, 0u64)], Vec::new());
    let mut per_info: HashMap<u64, u64> = HashMap::new();
    for line in text.lines() {
        let mut f = line.split(' ');
        match f.next() {
            Some("s") => strings.push(line.splitn(3, ' ').nth(2).unwrap_or("").to_string()),
            Some("i") => {
                let rest: Vec<u64> = f.map(hex).collect();
                ips.push(rest.iter().skip(2).step_by(3).copied().collect::<Vec<u64>>());
            }
            Some("t") => traces.push((hex(f.next().unwrap()), hex(f.next().unwrap()))),
            Some("a") => infos.push((hex(f.next().unwrap()), hex(f.next().unwrap()))),
            Some("+") => *per_info.entry(hex(f.next().unwrap())).or_default() += 1,
            _ => {}
        }
    }
    let mut bytes = [0u64; 3];
    for (info, n) in per_info {
        let (size, mut trace) = infos[info as usize];
        let mut seen = None;
        while trace != 0 && seen.is_none() {
            let (ip, parent) = traces[trace as usize];
            seen = ips[ip as usize].iter().find_map(|&s| FUNCS.iter().position(|f| strings[s as usize] == *f));
            trace = parent;
        }
        if let Some(i) = seen {
            bytes[i] += size * n;
        }
    }
    bytes
}

#[test]
fn allocated_bytes_split_as_the_program_and_heaptrack_say() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // 256 MiB, one sample every 64 KiB on average: ~4,000 samples of
    // ~250,000 calls (each call traps: 25 us a malloc and free here).
    let (dir, stderr) = capture("alloc-split", "folded,svg", "65536", &["256"]);
    let ours = shares(&read_folded(&dir.join("alloc_space.folded")));
    // heaptrack on a second run of the same program.
    let ht = out_dir("alloc-split-heaptrack");
    std::fs::create_dir_all(&ht).unwrap();
    let bin = plain_workload("alloc_split");
    let status = Command::new("heaptrack").arg("-o").arg(ht.join("split")).arg(&bin).arg("256").status().expect("heaptrack is installed (scripts/test.sh)");
    assert!(status.success());
    let file = std::fs::read_dir(&ht).unwrap().flatten().map(|e| e.path()).find(|p| p.to_string_lossy().contains("split")).expect("heaptrack's file");
    let hb = heaptrack_bytes(&file);
    let all: u64 = hb.iter().sum();
    let theirs = [0, 1, 2].map(|i| pct(hb[i], all));
    eprintln!("fgbpf {ours:?}, heaptrack {theirs:?}, known {SPLIT:?}");
    for i in 0..3 {
        assert!((ours[i] - SPLIT[i]).abs() <= 5.0, "{}: {:.1}% of the bytes, known {}%", FUNCS[i], ours[i], SPLIT[i]);
        assert!((ours[i] - theirs[i]).abs() <= 5.0, "{}: {:.1}% of the bytes, heaptrack {:.1}%", FUNCS[i], ours[i], theirs[i]);
    }
    // Sampled, not every call.
    let line = stderr.lines().find(|l| l.starts_with("alloc: ") || l.contains("alloc: ")).unwrap_or_else(|| panic!("no alloc line: {stderr}"));
    let calls: u64 = number_between(line, "alloc: ", " allocation calls").unwrap();
    let sampled: u64 = number_between(line, "calls, ", " sampled").unwrap();
    assert!(sampled > 1000 && sampled * 20 < calls, "{line}");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let first = report.lines().next().unwrap();
    assert!(first.starts_with("Top allocating path") && first.contains("spend_a"), "{first}");
}

#[test]
fn a_leaking_function_holds_the_bytes_in_use_at_the_end() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (dir, _) = capture("alloc-leak", "folded", "65536", &["256", "leak"]);
    let inuse = read_folded(&dir.join("inuse_space.folded"));
    let of_b = weight_with(&inuse, "spend_b");
    assert!(pct(of_b, total(&inuse)) >= 90.0, "spend_b holds {:.1}% of in-use bytes: {inuse:?}", pct(of_b, total(&inuse)));
    // About its 30% of 256 MiB, and the freed ones nothing.
    let expected = 0.3 * 256.0 * 1048576.0;
    assert!((of_b as f64 - expected).abs() < 0.1 * expected, "spend_b in use: {of_b} bytes, about {expected} leaked");
    // Its allocations are still counted as allocations too.
    let allocated = shares(&read_folded(&dir.join("alloc_space.folded")));
    assert!((allocated[1] - 30.0).abs() <= 5.0, "{allocated:?}");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let second = report.lines().nth(1).unwrap();
    assert!(second.starts_with("Top retaining path") && second.contains("spend_b"), "{second}");
}

#[test]
fn pprof_has_go_heap_profile_sample_types() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // The default mean, 512 KiB.
    let (dir, _) = capture("alloc-pprof", "pprof", "524288", &["256", "leak"]);
    let file = dir.join("alloc.pb.gz");
    let raw = Command::new("go").args(["tool", "pprof", "-raw"]).arg(&file).output().expect("go is installed");
    assert!(raw.status.success(), "go tool pprof -raw: {}", String::from_utf8_lossy(&raw.stderr));
    let text = String::from_utf8_lossy(&raw.stdout);
    assert!(text.contains("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"), "{text}");
    for (index, top) in [("inuse_space", "spend_b"), ("alloc_space", "spend_a")] {
        let out = Command::new("go").args(["tool", "pprof", "-top", "-cum", "-sample_index", index]).arg(&file).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        // The heaviest of the three functions by cumulative weight.
        let first = text.lines().find(|l| FUNCS.iter().any(|f| l.ends_with(f))).unwrap_or_else(|| panic!("{text}"));
        assert!(first.ends_with(top), "-sample_index {index}: {first}\n{text}");
    }
}

/// A program whose `malloc` is jemalloc's (`LD_PRELOAD`, as servers
/// deploy it): `-p` finds it in the process's maps and probes its
/// allocation functions and `free` in place of the C library's.
#[test]
fn a_process_allocating_with_jemalloc_is_probed_in_jemalloc() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
    assert!(Path::new(jemalloc).exists(), "{jemalloc} is missing: scripts/test.sh installs libjemalloc2");
    let dir = out_dir("alloc-jemalloc");
    let out = waiting_capture(Command::new(plain_workload("alloc_split")).args(["128", "wait"]).env("LD_PRELOAD", jemalloc), &dir, |_| ());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("allocations read in libjemalloc.so.2, which replaces the C library's malloc"), "{stderr}");
    let ours = shares(&read_folded(&dir.join("alloc_space.folded")));
    for i in 0..3 {
        assert!((ours[i] - SPLIT[i]).abs() <= 5.0, "{}: {:.1}% of the bytes, known {}%\n{stderr}", FUNCS[i], ours[i], SPLIT[i]);
    }
}

/// A command linking jemalloc (as Debian's redis-server does) run by
/// `fgbpf alloc -- CMD`: which allocator it maps is known only once it
/// runs, so the replacement allocators installed are probed for its
/// process too; its allocations are read in jemalloc, in the known split.
#[test]
fn a_command_linking_jemalloc_is_read_in_jemalloc() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
    assert!(Path::new(jemalloc).exists(), "{jemalloc} is missing: scripts/test.sh installs libjemalloc2");
    // The library before the source, kept though nothing names it yet.
    let bin = build("alloc_split", "alloc_split-O2-jemalloc", "gcc", &["-O2", "-pthread", "-Wl,--no-as-needed", jemalloc]);
    let dir = out_dir("alloc-jemalloc-command");
    let out = run(fgbpf().args(["alloc", "--sample-bytes", "65536", "-o"]).arg(&dir).arg("--").arg(&bin).arg("128"));
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(" in libjemalloc.so.2, which replaces the C library's malloc"), "{stderr}");
    let ours = shares(&read_folded(&dir.join("alloc_space.folded")));
    for i in 0..3 {
        assert!((ours[i] - SPLIT[i]).abs() <= 5.0, "{}: {:.1}% of the bytes, known {}%\n{stderr}", FUNCS[i], ours[i], SPLIT[i]);
    }
}

/// alloc_split.c run by `cmd` with `wait`: once it says ready (and
/// `check(pid)` passed), `fgbpf alloc -p` is attached into `dir`, then the
/// program is let allocate, and the capture ended once it is done; its
/// output, checked.
fn waiting_capture(cmd: &mut Command, dir: &Path, check: impl FnOnce(u32)) -> std::process::Output {
    use std::io::{BufRead, BufReader, Write};
    let mut child = cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    let workload = KillOnDrop(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    check(workload.id());
    let capture = spawn_attached(fgbpf().args(["alloc", "--sample-bytes", "65536", "-p", &workload.id().to_string(), "-o"]).arg(dir));
    writeln!(stdin, "go").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap(); // the bytes line
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done");
    writeln!(stdin, "end").unwrap();
    let out = capture.finish_by(std::time::Instant::now(), std::time::Duration::from_secs(60));
    assert_ok(&out);
    out
}

/// `--otlp`: the four views go as four profiles of Go's heap sample
/// types, decoded by the official OpenTelemetry classes
/// (tests/otlp/receiver.py), each summing to its folded file.
#[test]
fn over_otlp_the_four_views_go_as_their_sample_types() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let received = out_dir("alloc-otlp-received");
    let (_receiver, port) = receiver::serve(&received);
    let dir = out_dir("alloc-otlp");
    let bin = plain_workload("alloc_split");
    let out = run(fgbpf()
        .args(["alloc", "--sample-bytes", "65536", "--format", "folded", "--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(&bin)
        .args(["256", "leak"]));
    assert_ok(&out);
    let samples = receiver::decode(&received);
    for stem in ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"] {
        let sent: Vec<&receiver::Decoded> = samples.iter().filter(|s| s.profile == stem).collect();
        let sum: i64 = sent.iter().map(|s| s.value).sum();
        let folded = read_folded(&dir.join(format!("{stem}.folded")));
        assert!(sum > 0, "no {stem} profile received: {:?}", samples.iter().map(|s| &s.profile).collect::<std::collections::BTreeSet<_>>());
        assert_eq!(sum as u64, total(&folded), "{stem}: sent against its folded file");
        // The leak's function holds what is in use there too.
        if stem == "inuse_space" {
            let b: i64 = sent.iter().filter(|s| s.frames.iter().any(|f| f == "spend_b")).map(|s| s.value).sum();
            assert!(pct(b as u64, sum as u64) >= 90.0, "spend_b holds {b} of {sum} in-use bytes sent");
        }
    }
}

/// A process in its own root with its own copy of the C library (another
/// file: the host's uprobes would not fire in it), as in a container:
/// `-p` probes the library it maps, found through /proc/PID/map_files.
#[test]
fn a_process_in_its_own_root_is_probed_in_its_own_c_library() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let root = out_dir("alloc-root");
    for (from, to) in [("/lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/libc.so.6"), ("/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2")] {
        let to = root.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap();
    }
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy(plain_workload("alloc_split"), root.join("bin/split")).unwrap();
    let dir = out_dir("alloc-root-capture");
    waiting_capture(Command::new("chroot").arg(&root).args(["/bin/split", "256", "leak", "wait"]), &dir, |pid| {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        assert!(maps.contains(&format!("{}/lib/x86_64-linux-gnu/libc.so.6", root.display())), "{maps}");
    });
    let ours = shares(&read_folded(&dir.join("alloc_space.folded")));
    for i in 0..3 {
        assert!((ours[i] - SPLIT[i]).abs() <= 5.0, "{}: {:.1}% of the bytes, known {}%", FUNCS[i], ours[i], SPLIT[i]);
    }
    let inuse = read_folded(&dir.join("inuse_space.folded"));
    assert!(pct(weight_with(&inuse, "spend_b"), total(&inuse)) >= 90.0, "{inuse:?}");
}

/// A live map too small for what stays in use: the sampled allocations it
/// could not keep (their frees cannot be matched) are told, with the
/// option that raises it.
#[test]
fn allocations_the_live_map_cannot_keep_are_told() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("alloc-live-full");
    let bin = plain_workload("alloc_split");
    let out = run(fgbpf().args(["alloc", "--max-live", "64", "--sample-bytes", "65536", "--format", "folded", "-o"]).arg(&dir).arg("--").arg(&bin).args(["256", "leak"]));
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().find(|l| l.contains("live map full")).unwrap_or_else(|| panic!("no loss told: {stderr}"));
    let lost: u64 = number_between(line, "fgbpf: lost ", " ").unwrap();
    assert!(lost > 100 && line.contains("--max-live"), "{line}");
}

/// spend_c through anonymous mmap/munmap, then through aligned_alloc(16)
/// (glibc's memalign, which jumps to malloc for such alignments): each
/// call counted once, at the function the program called, and freed.
#[test]
fn mmap_and_nested_allocators_count_once_at_the_function_called() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    for (mode, leaf) in [("mmap", "mmap"), ("aligned", "memalign")] {
        let (dir, stderr) = capture(&format!("alloc-{mode}"), "folded", "65536", &["256", mode]);
        let stacks = read_folded(&dir.join("alloc_space.folded"));
        let ours = shares(&stacks);
        for i in 0..3 {
            assert!((ours[i] - SPLIT[i]).abs() <= 5.0, "{mode}: {}: {:.1}% of the bytes, known {}%", FUNCS[i], ours[i], SPLIT[i]);
        }
        let of_c: Vec<&String> = stacks.iter().filter(|(f, _)| f.iter().any(|x| x == "spend_c")).map(|(f, _)| f.last().unwrap()).collect();
        assert!(of_c.iter().all(|l| l.contains(leaf)), "{mode}: spend_c's leaves {of_c:?}");
        let inuse = read_folded(&dir.join("inuse_space.folded"));
        assert!(total(&inuse) < 1 << 20, "{mode}: everything was freed, yet {inuse:?}");
        assert!(stderr.contains("lost: none"), "{mode}: {stderr}");
    }
}

/// A running process whose allocation calls would cost more than
/// --max-overhead is refused before the capture, and captured with --force.
#[test]
fn a_target_allocating_too_often_is_refused_unless_forced() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(plain_workload("alloc_split"))
        .args(["100000000", "wait"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    let workload = KillOnDrop(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    writeln!(stdin, "go").unwrap();
    let pid = workload.id().to_string();
    let dir = out_dir("alloc-refused");
    let refused = run(fgbpf().args(["alloc", "-p", &pid, "--max-overhead", "1", "-d", "2", "-o"]).arg(&dir));
    assert!(!refused.status.success(), "a target allocating all the time was not refused");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("above --max-overhead 1") && stderr.contains("--force"), "{stderr}");
    assert!(!dir.join("report.txt").exists());
    let forced = run(fgbpf().args(["alloc", "-p", &pid, "--max-overhead", "1", "--force", "-d", "1", "--format", "folded", "-o"]).arg(&dir));
    assert_ok(&forced);
    assert!(weight_with(&read_folded(&dir.join("alloc_space.folded")), "spend_a") > 0);
}

/// Go's own heap profile (`/debug/pprof/heap?debug=1`): each of
/// tests/workloads/go/heap.go's three functions' allocated bytes, scaled
/// as Go's pprof writer scales them (a record of n objects of `size`
/// bytes sampled every `rate` bytes stands for n·size / (1 - e^(-size/rate))
/// bytes; the text form is unscaled, its header gives 2·rate).
fn go_allocated(text: &str) -> [f64; 3] {
    let rate = text
        .lines()
        .next()
        .and_then(|l| l.rsplit_once("@ heap/"))
        .and_then(|(_, r)| r.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no heap/RATE in Go's header: {:?}", text.lines().next()))
        / 2.0;
    let mut bytes = [0.0; 3];
    let mut record: Option<(f64, f64)> = None;
    for line in text.lines() {
        if line.starts_with("heap profile:") {
            continue;
        }
        // `INUSE_N: INUSE_B [ALLOC_N: ALLOC_B] @ PCS`
        if let Some((_, counts)) = line.split_once('[') {
            let (n, b) = counts.split_once(']').and_then(|(c, _)| c.split_once(": ")).unwrap_or(("0", "0"));
            record = Some((n.trim().parse().unwrap_or(0.0), b.trim().parse().unwrap_or(0.0)));
            continue;
        }
        // `#\tPC\tFUNCTION+OFF\tFILE:LINE`: the record's first of ours.
        let Some(func) = line.strip_prefix('#').and_then(|l| l.split_whitespace().nth(1)) else {
            if line.trim().is_empty() {
                record = None;
            }
            continue;
        };
        let func = func.split('+').next().unwrap_or("");
        if let (Some((n, b)), Some(i)) = (record, GO_FUNCS.iter().position(|f| *f == func)) {
            if n > 0.0 {
                bytes[i] += b / -(-(b / n) / rate).exp_m1();
            }
            record = None;
        }
    }
    bytes
}

const GO_FUNCS: [&str; 3] = ["main.fifty", "main.thirty", "main.twenty"];

/// A Go program's own sampled heap profile is read from outside (no
/// uprobe sees Go's allocator): its three functions' shares of the bytes
/// allocated in the window against the known split and against Go's own
/// profile fetched during the capture. Debian's Go links the C library
/// (net uses cgo): the runtime's mappings through it are its heap's pages,
/// left out and said.
#[test]
fn a_go_program_s_heap_profile_splits_as_go_s_own_says() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let stderr = go_heap_split(&common::go::go_build("heap", &[]), "alloc-go");
    assert!(stderr.contains("the C library's mmap gave the Go runtime left out"), "{stderr}");
}

/// The same program built by Go 1.24 (Debian 13's, fetched by
/// scripts/fetch-go.sh): its runtime's buckets read alike.
#[test]
fn a_go_1_24_program_s_heap_profile_splits_as_go_s_own_says() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let go = common::go::go_1_24();
    let bin = common::go::go_build_by(&go, &common::go::go_dir().join("go1.24"), "heap", &[]);
    go_heap_split(&bin, "alloc-go124");
}

/// The same program linked by Go alone (`CGO_ENABLED=0`, as container
/// images often are): no C library to probe, its heap profile read.
#[test]
fn a_static_go_program_s_heap_profile_is_read_without_uprobes() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go");
    let bin = dir.join("heap-static");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/go/heap.go");
    let out = common::go::go_command(&dir.join("cache")).env("CGO_ENABLED", "0").arg("build").arg("-o").arg(&bin).arg(&src).output().expect(common::go::NEEDS_GO);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = go_heap_split(&bin, "alloc-go-static");
    assert!(stderr.contains("alloc: the target maps no C library (a Go program linked without it): no uprobe placed"), "{stderr}");
}

/// Runs tests/workloads/go/heap.go built as `bin` under `fgbpf alloc -p`,
/// fetches Go's own heap profile mid-capture and checks the shares;
/// gives fgbpf's stderr.
fn go_heap_split(bin: &Path, test: &str) -> String {
    let (go, (pid, port)) = common::runtime::start_until(Command::new(bin).stdout(std::process::Stdio::piped()), "heap.go", "starting heap.go", std::time::Duration::from_secs(30), |line| {
        let mut w = line.strip_prefix("ready ")?.split_whitespace().map(|w| w.parse::<u32>().ok());
        Some((w.next()??, w.next()??))
    });
    assert_eq!(pid, go.id());
    let dir = out_dir(test);
    let capture = std::thread::spawn({
        let dir = dir.clone();
        move || run(fgbpf().args(["alloc", "-d", "4", "--format", "folded,pprof", "-p", &pid.to_string(), "-o"]).arg(&dir))
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    let text = common::go::http_get(&format!("http://127.0.0.1:{port}"), "/debug/pprof/heap?debug=1");
    let out = capture.join().unwrap();
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let name = bin.file_name().unwrap().to_string_lossy();
    assert!(stderr.contains(&format!("Go: pid {pid} ({name}): its own heap profile read")), "{stderr}");
    let go_bytes = go_allocated(&text);
    let go_all: f64 = go_bytes.iter().sum();
    assert!(go_all > 0.0, "none of {GO_FUNCS:?} in Go's heap profile:\n{text}");
    let stacks = read_folded(&dir.join("alloc_space.folded"));
    let ours: Vec<u64> = GO_FUNCS.iter().map(|f| weight_with(&stacks, f)).collect();
    let all: u64 = ours.iter().sum();
    assert!(all > 0, "no stack through {GO_FUNCS:?}: {stacks:?}\n{stderr}");
    // Go's own runtime and net/http allocate a little besides.
    assert!(pct(all, total(&stacks)) >= 95.0, "{stacks:?}");
    for i in 0..3 {
        let (share, go_share) = (pct(ours[i], all), go_bytes[i] * 100.0 / go_all);
        eprintln!("{}: fgbpf {share:.1}%, Go's profile {go_share:.1}%, known {}%", GO_FUNCS[i], SPLIT[i]);
        assert!((share - SPLIT[i]).abs() <= 5.0, "{}: {share:.1}% of the bytes, known {}%", GO_FUNCS[i], SPLIT[i]);
        assert!((share - go_share).abs() <= 5.0, "{}: {share:.1}% of the bytes, Go's own profile {go_share:.1}%", GO_FUNCS[i]);
    }
    // block(), inlined into twenty(), is named under it once: Go lists
    // the inlined call as a frame of its own (its inline mark's address),
    // left out for the function's own address named from DWARF.
    let inlined: Vec<_> = stacks.iter().filter(|(f, _)| f.iter().any(|f| f == "main.twenty")).collect();
    assert!(inlined.iter().all(|(f, _)| f.ends_with(&["main.twenty".to_string(), "main.block_[i]".to_string()]) && f.iter().filter(|f| *f == "main.twenty").count() == 1), "{inlined:?}");
    // In use: the last 512 blocks the three keep, Go's account.
    let inuse = read_folded(&dir.join("inuse_space.folded"));
    for f in GO_FUNCS {
        assert!(weight_with(&inuse, f) > 0, "{f} holds nothing in use: {inuse:?}");
    }
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.lines().next().is_some_and(|l| l.contains("main.fifty")), "{report}");
    assert!(report.contains("a Go program's, its runtime's own account at its last GC"), "{report}");
    stderr
}
