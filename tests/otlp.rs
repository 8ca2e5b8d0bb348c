//! OTLP profiles (`--otlp`): what fgbpf sends, as the official
//! OpenTelemetry Python classes decode it. The receiver
//! (tests/otlp/receiver.py) is opentelemetry-proto and grpcio from PyPI
//! (scripts/fetch-otlp-receiver.sh, which scripts/test.sh runs); it keeps
//! each export as it came and prints its samples, or each export whole,
//! as JSON (tests/otlp/receiver.rs reads them, tests/otlp/export.rs reads
//! an export's dictionary). The attributes' check against the semantic
//! conventions is tests/otlp/attributes.rs.

mod common;
#[path = "otlp/export.rs"]
mod export;
#[path = "otlp/receiver.rs"]
mod receiver;
#[path = "otlp/attributes.rs"]
mod attributes;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::pprof_raw::raw_samples;
use common::*;
use receiver::*;

/// `fgbpf wall --otlp` on the 50/30/20 workload and on a thread sleeping
/// in `nap_50ms`: the receiver decodes one export with the official
/// classes; on-CPU samples summed by function give 50/30/20 within 3
/// points, the sleep is under its function off-CPU, each process is a
/// resource with its pid and the service's name, every native location
/// resolves to a mapping with its binary's build ID; and the same capture's
/// pprof output (read by `go tool pprof -raw`) has the same on-CPU
/// samples, stack by stack.
#[test]
fn wall_views_sent_over_otlp_decode_with_the_official_classes() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let received = out_dir("otlp_received");
    let (_receiver, port) = serve(&received);
    let split = start(&["split", "60"]);
    let waits = start(&["waits", "60"]);
    let (split_pid, waits_pid) = (pid_of(&split), pid_of(&waits));
    let dir = out_dir("otlp_wall");
    let endpoint = format!("127.0.0.1:{port}");
    let out = run(fgbpf()
        .args(["wall", "-F", "499", "-d", "4", "-p", &split_pid.to_string(), "-p", &waits_pid.to_string()])
        .args(["--format", "folded,pprof", "--otlp", &endpoint, "--otlp-insecure", "--service", "checkout"])
        .arg("-o")
        .arg(&dir));
    drop((split, waits));
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("OTLP: sent"), "{summary}");
    let samples = decode(&received);
    assert!(!samples.is_empty(), "nothing received\n{summary}");
    assert!(samples.iter().all(|s| s.service == "checkout"), "service.name");
    let on: Vec<&Decoded> = samples.iter().filter(|s| s.profile == "samples" && s.pid == split_pid).collect();
    let all: i64 = on.iter().map(|s| s.value).sum();
    let with = |f: &str| on.iter().filter(|s| s.frames.iter().any(|x| x == f)).map(|s| s.value).sum::<i64>();
    let shares: Vec<f64> = ["work_fifty", "work_thirty", "work_twenty"].iter().map(|f| pct(with(f) as u64, all as u64)).collect();
    eprintln!("on-CPU over OTLP: {all} samples, 50/30/20 read {shares:.1?}");
    assert!(all > 1000, "{all} on-CPU samples of the split process\n{summary}");
    for (got, want) in shares.iter().zip([50.0, 30.0, 20.0]) {
        assert!((got - want).abs() <= 3.0, "{shares:?} against 50/30/20");
    }
    // Off-CPU time comes one sample type per state.
    let off: Vec<&Decoded> = samples.iter().filter(|s| s.profile.starts_with("off_cpu_") && s.pid == waits_pid).collect();
    let napper_tid = off.iter().find(|s| s.frames.iter().any(|f| f == "nap_50ms")).map(|s| s.tid.clone()).unwrap_or_default();
    let napper: Vec<&&Decoded> = off.iter().filter(|s| s.tid == napper_tid).collect();
    let napping: i64 = napper.iter().filter(|s| s.frames.iter().any(|f| f == "nap_50ms")).map(|s| s.value).sum();
    let napper_all: i64 = napper.iter().map(|s| s.value).sum();
    let sleeping: i64 = napper.iter().filter(|s| s.profile == "off_cpu_sleeping" && s.frames.iter().any(|f| f == "nap_50ms")).map(|s| s.value).sum();
    eprintln!("off-CPU over OTLP: the napper {napping} of {napper_all} ns under nap_50ms, {sleeping} as off_cpu_sleeping");
    // A nap is sleeping, then waiting for a CPU from its wakeup to its run
    // (as the kernel counts run-queue time): the second a few ms in 4 s.
    let queued: i64 = napper.iter().filter(|s| s.profile == "off_cpu_runqueue" && s.frames.iter().any(|f| f == "nap_50ms")).map(|s| s.value).sum();
    assert_eq!(sleeping + queued, napping, "a nap is sleeping or, once woken, waiting for a CPU");
    assert!(sleeping * 100 >= napping * 95, "{sleeping} of the nap's {napping} ns sleeping");
    assert!(napper_all > 2_000_000_000 && napping * 100 >= napper_all * 95, "{napping} of {napper_all} ns under nap_50ms");
    assert!(samples.iter().any(|s| s.profile == "wall"), "no wall profile");
    // Every native location resolves to a mapping with its binary's build
    // ID: the workload's own functions to the workload's.
    let binary = plain_workload("plain");
    let ours = build_id_of(&binary);
    assert!(ours.len() >= 16, "the workload has no build ID: {ours:?}");
    let (mut native, mut work) = (0, 0);
    for s in &on {
        for i in 0..s.frames.len() {
            if s.types.get(i).map(String::as_str) != Some("native") {
                continue;
            }
            native += 1;
            assert!(!s.build_ids[i].is_empty(), "{} in {:?} has no build ID", s.frames[i], s.mappings[i]);
            if s.frames[i].starts_with("work_") {
                work += 1;
                assert_eq!((s.mappings[i].as_str(), s.build_ids[i].as_str()), ("plain-O2", ours.as_str()), "{}", s.frames[i]);
            }
        }
    }
    assert!(native > 0 && work > 0, "native locations: {native}, of the workload's work_* functions: {work}");
    // Kernel locations lie in the kernel's image, with its build ID (a BPF
    // program's or trampoline's code, in none, has none).
    let mut kernel = 0;
    for s in &samples {
        for i in (0..s.frames.len()).filter(|&i| s.types[i] == "kernel") {
            kernel += 1;
            let bpf = s.frames[i].starts_with("bpf_prog_") || s.frames[i].starts_with("bpf_trampoline");
            assert!(bpf || (s.mappings[i] == "[kernel.kallsyms]" && s.build_ids[i].len() >= 32), "{} in {:?} {:?}", s.frames[i], s.mappings[i], s.build_ids[i]);
        }
    }
    assert!(kernel > 0, "no kernel location");
    // The same capture's pprof: the same on-CPU samples, stack by stack
    // (pprof's names carry fgbpf's kind suffixes, _[k] and the like).
    let go = Command::new("go").args(["tool", "pprof", "-raw"]).arg(dir.join("oncpu.pb.gz")).output().expect("go is installed (scripts/test.sh)");
    assert!(go.status.success(), "go tool pprof: {}", String::from_utf8_lossy(&go.stderr));
    let strip = |f: &str| ["_[k]", "_[i]", "_[j]", "_[0]", "_[1]", "_[p]", "_[w]"].iter().fold(f.to_string(), |f, s| f.strip_suffix(s).map(str::to_string).unwrap_or(f));
    let mut pprof: BTreeMap<(String, String, Vec<String>), i64> = BTreeMap::new();
    for s in raw_samples(&String::from_utf8_lossy(&go.stdout)) {
        let label = |k: &str| s.labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_default();
        *pprof.entry((label("pid"), label("tid"), s.funcs.iter().map(|f| strip(f)).collect())).or_default() += s.count as i64;
    }
    let mut otlp: BTreeMap<(String, String, Vec<String>), i64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.profile == "samples") {
        *otlp.entry((s.pid.to_string(), s.tid.clone(), s.frames.clone())).or_default() += s.value;
    }
    assert_eq!(otlp.len(), pprof.len(), "stacks: OTLP {} against pprof {}", otlp.len(), pprof.len());
    for (k, v) in &otlp {
        assert_eq!(pprof.get(k), Some(v), "{k:?}: OTLP {v}, pprof {:?}", pprof.get(k));
    }
}

/// With no receiver there, the capture and its files are whole, and one
/// line says the profiles were not sent.
#[test]
fn a_receiver_that_is_not_there_costs_one_line() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let split = start(&["split", "30"]);
    let dir = out_dir("otlp_nobody");
    let out = run(fgbpf()
        .args(["oncpu", "-d", "2", "-p", &pid_of(&split).to_string(), "--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(&dir));
    drop(split);
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = summary.lines().filter(|l| l.contains("OTLP")).collect();
    assert_eq!(said.len(), 1, "{summary}");
    assert!(said[0].contains("not sent") && said[0].contains("tries"), "{}", said[0]);
    assert!(dir.join("oncpu.folded").is_file());
}

/// The numbers of the end's line: `OTLP: sent S of M exports (P
/// profiles) to URL[; L lost: ...]`.
fn tally(summary: &str) -> (u64, u64, u64) {
    let line = summary.lines().find(|l| l.contains("OTLP: sent")).unwrap_or_else(|| panic!("no end line\n{summary}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |w: &str| words.iter().position(|x| *x == w).and_then(|i| words.get(i + 1)).and_then(|n| n.parse().ok());
    let sent = words.iter().position(|x| *x == "sent").and_then(|i| words[i + 1].parse().ok()).unwrap();
    let made = after("of").unwrap();
    let lost = line.split("; ").nth(1).and_then(|t| t.split_whitespace().next()).map_or(0, |n| n.parse().unwrap());
    (sent, made, lost)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `--otlp-interval 1` for 60 s with the receiver gone from 20 s to 40 s:
/// the capture is whole; what was sent before and after reached the two
/// receivers, each interval once; the intervals made while it was down
/// beyond the queue's 8 are dropped and counted, and the end's numbers add
/// up (sent + lost = made); one warning while it was down.
#[test]
fn a_stream_outlives_its_receiver_down_for_20_seconds() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let port = free_port();
    let (before, after) = (out_dir("otlp_stream_before"), out_dir("otlp_stream_after"));
    let first = serve_with(&before, &["--port", &port.to_string()]);
    let split = start(&["split", "90"]);
    let dir = out_dir("otlp_stream");
    let capture = spawn_attached(fgbpf()
        .args(["oncpu", "-F", "99", "-d", "60", "-p", &pid_of(&split).to_string(), "--otlp-interval", "1"])
        .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(&dir));
    let started = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(20).saturating_sub(started.elapsed()));
    drop(first);
    std::thread::sleep(Duration::from_secs(40).saturating_sub(started.elapsed()));
    let second = serve_with(&after, &["--port", &port.to_string()]);
    let out = capture.finish();
    drop((split, second));
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = summary.lines().filter(|l| l.contains("OTLP")).collect();
    eprintln!("{}", said.join("\n"));
    // The capture is whole: 60 s of a busy thread at 99 Hz.
    let samples = total(&read_folded(&dir.join("oncpu.folded")));
    assert!(samples >= 60 * 99 * 9 / 10, "{samples} samples in the files\n{summary}");
    let (sent, made, lost) = tally(&summary);
    assert!((60..=62).contains(&made), "{made} intervals made\n{summary}");
    assert_eq!(sent + lost, made, "{summary}");
    assert!(lost >= 5 && summary.contains("dropped from the full queue"), "{summary}");
    assert_eq!(said.len(), 2, "one warning and the end's line\n{summary}");
    // Each interval reached one receiver once; those after the receiver
    // came back, and the last, were delivered.
    let (got_before, got_after) = (decode(&before), decode(&after));
    let exports = |d: &Path| std::fs::read_dir(d).map_or(0, |d| d.count()) as u64;
    let times = |d: &[Decoded]| d.iter().map(|s| s.time).collect::<std::collections::BTreeSet<_>>();
    let (t_before, t_after) = (times(&got_before), times(&got_after));
    eprintln!("received: {} exports before, {} after; {sent} sent, {lost} lost of {made}", exports(&before), exports(&after));
    assert_eq!(exports(&before) + exports(&after), sent, "exports received against sent");
    assert!(t_before.is_disjoint(&t_after), "an interval received twice");
    assert!(exports(&before) >= 15 && exports(&after) >= 15, "{summary}");
    let first_time = *t_before.iter().next().unwrap();
    let last_time = *t_after.iter().last().unwrap();
    assert!(last_time - first_time >= 58_000_000_000, "the last interval delivered starts {} s after the first", (last_time - first_time) / 1_000_000_000);
    // What reached the receivers is what the files hold for those
    // intervals: every sample of the split process under its functions.
    let received: i64 = got_before.iter().chain(&got_after).filter(|s| s.profile == "samples").map(|s| s.value).sum();
    assert!(received as u64 <= samples && received as u64 * made >= samples * sent * 9 / 10, "{received} samples received of {samples}");
}

/// A receiver that answers late, one that refuses, and one that is
/// unavailable: each capture is whole, its exports are all counted (sent
/// or lost, with why), and at most one warning is said before the end's
/// line.
#[test]
fn slow_or_refusing_receivers_cost_counted_drops_and_one_warning() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let split = start(&["split", "60"]);
    for (name, options, want) in [
        ("slow", &["--delay", "4"][..], "still unsent at the end"),
        ("refusing", &["--fail", "INVALID_ARGUMENT"][..], "refused by the receiver"),
        ("unavailable", &["--fail", "UNAVAILABLE"][..], "still unsent at the end"),
    ] {
        let received = out_dir(&format!("otlp_{name}_received"));
        let (_receiver, port) = serve_with(&received, options);
        let dir = out_dir(&format!("otlp_{name}"));
        let out = run(fgbpf()
            .args(["oncpu", "-F", "99", "-d", "5", "-p", &pid_of(&split).to_string(), "--otlp-interval", "1"])
            .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
            .arg(&dir));
        assert_ok(&out);
        let summary = String::from_utf8_lossy(&out.stderr);
        let said: Vec<&str> = summary.lines().filter(|l| l.contains("OTLP")).collect();
        eprintln!("{name}: {}", said.join(" | "));
        assert!(total(&read_folded(&dir.join("oncpu.folded"))) >= 5 * 99 * 9 / 10, "{name}: the capture\n{summary}");
        let (sent, made, lost) = tally(&summary);
        assert_eq!(sent + lost, made, "{name}\n{summary}");
        assert!(lost > 0 && summary.contains(want), "{name}: want {want:?}\n{summary}");
        assert!(said.len() <= 2, "{name}: at most one warning\n{summary}");
        let delivered = std::fs::read_dir(&received).map_or(0, |d| d.count()) as u64;
        assert_eq!(delivered, sent, "{name}: kept by the receiver against sent");
    }
}

/// `--otlp-protocol http/protobuf`: the same export POSTed to
/// /v1development/profiles, decoded by the official classes.
#[test]
fn http_protobuf_reaches_an_otlp_http_receiver() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let received = out_dir("otlp_http_received");
    let (_receiver, port) = serve_with(&received, &["--http"]);
    let split = start(&["split", "30"]);
    let dir = out_dir("otlp_http");
    let out = run(fgbpf()
        .args(["oncpu", "-F", "499", "-d", "3", "-p", &pid_of(&split).to_string(), "--otlp-protocol", "http/protobuf"])
        .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(&dir));
    drop(split);
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert_eq!(tally(&summary), (1, 1, 0), "{summary}");
    let samples = decode(&received);
    let all: i64 = samples.iter().filter(|s| s.profile == "samples").map(|s| s.value).sum();
    let fifty: i64 = samples.iter().filter(|s| s.frames.iter().any(|f| f == "work_fifty")).map(|s| s.value).sum();
    let files = total(&read_folded(&dir.join("oncpu.folded")));
    assert_eq!(all as u64, files, "samples over HTTP against the files");
    // 3 s at 499 Hz: ~1,500 samples, σ 1.3 points at 50%, as the gRPC
    // tests hold it: within 3.
    assert!(all > 1000, "{all} samples over HTTP");
    assert!((pct(fifty as u64, all as u64) - 50.0).abs() <= 3.0, "work_fifty {fifty} of {all}");
}

/// `fgbpf flight --otlp-interval`: the recorder streams as it records
/// (a continuous profiler): on-CPU, off-CPU and wall profiles each second,
/// and no dump is needed for them.
#[test]
fn the_flight_recorder_streams_each_interval() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let received = out_dir("otlp_flight_received");
    let (_receiver, port) = serve(&received);
    // The recorder samples at 49 Hz: rounds of 200 ms, ten of its periods
    // (plain.c; its 20 ms rounds are one period, and a sampler whose
    // period is the round sees one point of it: fifty read 40.6% in CI).
    // Over 5 s, 25 rounds: a round's count of each function is the floor
    // or ceiling of its periods, and the rounds cut by the window's ends
    // move fifty by at most 10 samples of ~245, 4 points.
    let split = start(&["split", "30", "200"]);
    let dumps = out_dir("otlp_flight_dumps");
    let out = run(fgbpf()
        .args(["flight", "-p", &pid_of(&split).to_string(), "--keep", "20s", "-d", "5", "--otlp-interval", "1"])
        .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "--dumps"])
        .arg(&dumps));
    drop(split);
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    let (sent, made, lost) = tally(&summary);
    assert!(made >= 4 && sent == made && lost == 0, "{summary}");
    let samples = decode(&received);
    for kind in ["samples", "wall"] {
        let times: std::collections::BTreeSet<u64> = samples.iter().filter(|s| s.profile == kind).map(|s| s.time).collect();
        assert!(times.len() as u64 >= made - 1, "{kind}: {} intervals of {made}", times.len());
    }
    let fifty: i64 = samples.iter().filter(|s| s.profile == "samples" && s.frames.iter().any(|f| f == "work_fifty")).map(|s| s.value).sum();
    let all: i64 = samples.iter().filter(|s| s.profile == "samples").map(|s| s.value).sum();
    assert!(all > 0 && (pct(fifty as u64, all as u64) - 50.0).abs() <= 8.0, "work_fifty {fifty} of {all}");
}

/// A CPython process's frames go as `cpython` frames with their file and
/// line apart (`fifty` in split.py at its line), its interpreter's own
/// as `native`; 50/30/20 as known.
#[test]
fn python_frames_go_as_cpython_frames_with_file_and_line() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let received = out_dir("otlp_python_received");
    let (_receiver, port) = serve(&received);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/python/split.py");
    let mut child = Command::new("/usr/bin/python3.11").arg(&script).arg("30").stdout(Stdio::piped()).spawn().expect("python3.11 (scripts/test.sh)");
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    let python = KillOnDrop(child);
    let dir = out_dir("otlp_python");
    let out = run(fgbpf()
        .args(["oncpu", "-F", "499", "-d", "4", "-p", &pid_of(&python).to_string()])
        .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(&dir));
    drop(python);
    assert_ok(&out);
    let samples = decode(&received);
    let all: i64 = samples.iter().map(|s| s.value).sum();
    let mut shares = Vec::new();
    for f in ["fifty", "thirty", "twenty"] {
        let with: Vec<&Decoded> = samples.iter().filter(|s| s.frames.iter().any(|x| x == f)).collect();
        for s in &with {
            let i = s.frames.iter().position(|x| x == f).unwrap();
            assert_eq!((s.types[i].as_str(), s.files[i].as_str()), ("cpython", "split.py"), "{f}");
            assert!(s.lines[i] > 0, "{f} without its line");
            assert!(s.types.iter().any(|t| t == "native"), "the interpreter's frames");
        }
        shares.push(pct(with.iter().map(|s| s.value).sum::<i64>() as u64, all as u64));
    }
    eprintln!("CPython over OTLP: {all} samples, 50/30/20 read {shares:.1?}");
    for (got, want) in shares.iter().zip([50.0, 30.0, 20.0]) {
        assert!((got - want).abs() <= 3.0, "{shares:?} against 50/30/20");
    }
}

/// Plain text only when asked for: an http:// endpoint without
/// --otlp-insecure is refused before anything is captured.
#[test]
fn plain_text_needs_otlp_insecure() {
    let out = run(fgbpf().args(["oncpu", "-d", "1", "--otlp", "http://127.0.0.1:4317", "-o", "/nonexistent/otlp"]));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--otlp-insecure"), "{err}");
}

#[test]
fn raw_samples_read_go_tool_pprof_s_text() {
    let text = "PeriodType: cpu nanoseconds\nSamples:\nsamples/count cpu/nanoseconds\n        197 1999999980: 1 2 \n                process:[labels] route:[/api] thread:[labels]\n                goroutine:[18] pid:[7470] tid:[7470]\n          2   20202020: 3 \nLocations\n     1: 0x0 M=1 main.burn :0 s=0\n     2: 0x4a1 M=1 main.main.func1 /x.go:3 s=0\n             runtime/pprof.Do /y.go:4 s=0\n     3: 0x0 retake_[k] :0 s=0\nMappings\n1: 0x0/0x0/0x0   \n";
    let s = raw_samples(text);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].count, 197);
    assert_eq!(s[0].funcs, ["main.burn", "main.main.func1", "runtime/pprof.Do"]);
    assert!(s[0].labels.contains(&("route".into(), "/api".into())));
    assert!(s[0].labels.contains(&("goroutine".into(), "18".into())));
    assert_eq!((s[1].count, s[1].funcs.as_slice(), s[1].labels.len()), (2, &["retake_[k]".to_string()][..], 0));
}

/// `fgbpf wall --otlp` on the 50/30/20 workload and the sleepers: one
/// export whose dictionary holds each string, function, mapping,
/// location, stack and attribute once, however many views and processes
/// use it (the on-CPU, off-CPU and wall views of one frame are one
/// location); each view's samples add up, stack by stack and thread by
/// thread, to the capture's own folded file of it; each profile has its
/// own 16-byte ID, its time range, and (on-CPU) its period.
#[test]
fn a_wall_export_is_one_dictionary_without_duplicates() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let received = out_dir("otlp_dictionary_received");
    let (_receiver, port) = serve(&received);
    let split = start(&["split", "30"]);
    let waits = start(&["waits", "30"]);
    let dir = out_dir("otlp_dictionary");
    let before = std::time::SystemTime::now();
    let out = run(fgbpf()
        .args(["wall", "-F", "499", "-d", "3", "-p", &pid_of(&split).to_string(), "-p", &pid_of(&waits).to_string()])
        .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(&dir));
    drop((split, waits));
    assert_ok(&out);
    let exports = dump(&received);
    assert_eq!(exports.len(), 1, "one export of the capture");
    let e = &exports[0];
    for table in export::TABLES {
        let entries = e.table(table);
        let dupes = e.duplicates(table);
        eprintln!("{table}: {} entries, {} duplicates", entries.len(), dupes.len());
        assert!(entries.len() > 1, "{table} is empty");
        assert!(entries[0] == "" || entries[0] == serde_json::json!({}), "{table}[0] is not the zero value: {}", entries[0]);
        let shown: Vec<String> = dupes.iter().take(5).map(|&(i, was)| format!("[{i}] = [{was}]: {}", entries[i])).collect();
        assert!(dupes.is_empty(), "{table}: {} of {} entries held twice, e.g.\n{}", dupes.len(), entries.len(), shown.join("\n"));
    }
    // The same stacks and weights as the files, view by view (the views
    // in microseconds are sent in nanoseconds).
    let samples = e.samples();
    for (file, scale, kinds) in [("oncpu.folded", 1, &["samples"][..]), ("offcpu.folded", 1000, &["off_cpu_sleeping", "off_cpu_uninterruptible", "off_cpu_runqueue", "off_cpu"]), ("wall.folded", 1000, &["wall"])] {
        let files = export::folded_stacks(&dir.join(file), scale);
        let mut sent: BTreeMap<(u64, u64, Vec<String>), u64> = BTreeMap::new();
        for s in samples.iter().filter(|s| kinds.contains(&s.kind.as_str())) {
            *sent.entry((s.pid, s.tid, s.frames.clone())).or_default() += s.value;
        }
        assert!(!files.is_empty(), "{file} is empty");
        assert_eq!(sent.len(), files.len(), "{file}: {} stacks sent against {} in the file", sent.len(), files.len());
        for (k, v) in &files {
            assert_eq!(sent.get(k), Some(v), "{file}: {k:?}");
        }
    }
    // Each profile: its own ID, the capture's time, the period of its
    // samples where they have one.
    let mut ids = std::collections::BTreeSet::new();
    let started = before.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    for (_, p) in e.profiles() {
        let kind = e.string(&p["sample_type"]["type_strindex"]).to_string();
        let id = p["profile_id"].as_str().unwrap_or_default().to_string();
        assert!(!id.is_empty() && id.trim_end_matches('=').chars().any(|c| c != 'A'), "{kind}: profile_id {id:?}");
        assert!(ids.insert(id.clone()), "{kind}: profile_id {id} given twice");
        let (time, duration) = (export::num(&p["time_unix_nano"]), export::num(&p["duration_nano"]));
        assert!(time + 1_000_000_000 >= started && time <= started + 5_000_000_000, "{kind}: starts at {time}, the capture at {started}");
        assert!((2_500_000_000..=4_000_000_000).contains(&duration), "{kind}: {duration} ns long, the capture 3 s");
        if kind == "samples" {
            let period_type = (e.string(&p["period_type"]["type_strindex"]), e.string(&p["period_type"]["unit_strindex"]));
            assert_eq!((period_type, export::num(&p["period"])), (("cpu", "nanoseconds"), 1_000_000_000 / 499), "on-CPU period");
        }
    }
    assert!(ids.len() >= 3, "{} profiles", ids.len());
}

/// A stripped `gcc -O2` program, run twice: once with its debug file in
/// `--debug-dir`, so that fgbpf names its functions, and once (another
/// build ID) with none, so that fgbpf names them by where they start
/// (`otlp-bare+0x1230`). Each native location in the program has an
/// address inside its mapping, and `addr2line -f` on the unstripped copy,
/// at the virtual address of the file offset (address − mapping start +
/// mapping file offset), names the function fgbpf named, or the one that
/// starts where fgbpf's name says: main, work_fifty and spin among them.
#[test]
fn stripped_native_frames_carry_addresses_addr2line_names_alike() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("otlp_addresses_build");
    std::fs::create_dir_all(&dir).unwrap();
    let (named_full, named) = export::stripped_plain(&dir, "otlp-named", 1);
    let (bare_full, bare) = export::stripped_plain(&dir, "otlp-bare", 2);
    let debug_dir = dir.join("debug");
    let id = build_id_of(&named);
    let debug = debug_dir.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    assert!(Command::new("objcopy").arg("--only-keep-debug").arg(&named_full).arg(&debug).status().unwrap().success());
    let received = out_dir("otlp_addresses_received");
    let (_receiver, port) = serve(&received);
    let a = KillOnDrop(Command::new(&named).args(["split", "30"]).spawn().unwrap());
    let b = KillOnDrop(Command::new(&bare).args(["split", "30"]).spawn().unwrap());
    let out = run(fgbpf()
        .env_remove("DEBUGINFOD_URLS")
        .args(["oncpu", "-F", "499", "-d", "3", "-p", &pid_of(&a).to_string(), "-p", &pid_of(&b).to_string()])
        .arg("--debug-dir")
        .arg(&debug_dir)
        .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(out_dir("otlp_addresses")));
    drop((a, b));
    assert_ok(&out);
    let exports = dump(&received);
    assert_eq!(exports.len(), 1);
    let e = &exports[0];
    for (name, full) in [("otlp-named", &named_full), ("otlp-bare", &bare_full)] {
        // The virtual address of each native location's file offset.
        let segments = export::load_segments(full);
        let (mut addrs, mut fgbpf_names) = (Vec::new(), Vec::new());
        for l in e.native_locations_in(name) {
            assert!(l.address != 0 && l.start <= l.address && l.address < l.limit, "{name}: {l:?}");
            let offset = l.address - l.start + l.offset;
            addrs.push(export::file_to_virt(&segments, offset).unwrap_or_else(|| panic!("{name}: {l:?}: file offset {offset:#x} in no segment")));
            fgbpf_names.push(l.name);
        }
        let said = export::addr2line(full, &addrs);
        let symbols = export::symbols(full);
        let mut agreed = Vec::new();
        for ((ours, chain), addr) in fgbpf_names.iter().zip(&said).zip(&addrs) {
            if ours.ends_with("@plt") {
                continue;
            }
            // The function whose symbol holds the address: the last of
            // the chain (`now`, inlined into main, comes before main).
            let theirs = chain.last().map_or("??", String::as_str);
            match ours.strip_prefix(&format!("{name}+0x")) {
                // Unnamed: fgbpf's name is the offset its function starts at.
                Some(start) => {
                    let at = symbols.get(theirs).and_then(|&v| export::virt_to_file(&segments, v));
                    assert_eq!(at, u64::from_str_radix(start, 16).ok(), "{ours} at {addr:#x}: addr2line says {chain:?}");
                }
                None => assert!(chain.iter().any(|f| f == ours), "{name} at {addr:#x}: fgbpf {ours}, addr2line {chain:?}"),
            }
            agreed.push(theirs.to_string());
        }
        eprintln!("{name}: {} native locations, addr2line agrees on {agreed:?}", addrs.len());
        for f in ["main", "work_fifty", "spin"] {
            assert!(agreed.iter().any(|a| a == f), "{name}: no location of {f} checked: {agreed:?}");
        }
    }
}
