//! Perl subs in fgbpf's stacks, on the machine's Perl (Debian 12's
//! `/usr/bin/perl` 5.36, threaded, linking libperl.so.5.36), started with
//! no flag: the interpreter's context stack is walked in the kernel
//! (src/runtimes/perl/perl.bpf.h) and named from the live process
//! (src/runtimes/perl/). Known answers: the scripts' own lines and
//! splits; Devel::NYTProf's inclusive times (`libdevel-nytprof-perl`,
//! which scripts/test.sh installs) on the same process.

mod common;
#[allow(dead_code)]
#[path = "otlp/export.rs"]
mod export;
#[allow(dead_code)]
#[path = "otlp/receiver.rs"]
mod receiver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::roots;
use common::runtime::*;
use common::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn script(name: &str) -> PathBuf {
    Path::new(ROOT).join("tests/workloads/perl").join(name)
}

/// Starts `/usr/bin/perl [flags] SCRIPT ARGS` and returns once it says
/// "ready".
fn start(flags: &[&str], env: &[(&str, &Path)], name: &str, args: &[&str]) -> KillOnDrop {
    let mut cmd = Command::new("/usr/bin/perl");
    cmd.envs(env.iter().copied()).args(flags).arg(script(name)).args(args);
    start_ready(&mut cmd, name, "perl is not installed: run scripts/test.sh, which installs perl")
}

/// A Perl frame is `Package::sub (file:line)_[p]`: matched by name and
/// file (and line when given).
fn perl(frame: &str, wanted: &str) -> bool {
    walked_at(frame, wanted)
}

/// The stacks of the process's main thread (`perl-PID`), which runs the
/// main interpreter.
fn main_thread(stacks: &Folded, pid: u32) -> Folded {
    let label = format!("perl-{pid}");
    of_threads(stacks, |t| t == label)
}

const BUSY: [&str; 3] = ["<main>@busy.pl:27", "Busy::outer@busy.pl:19", "Busy::inner@busy.pl:1"];

/// main → Busy::outer → Busy::inner spinning: the chain named in order,
/// with packages and the lines of the calls, and no runops frame left.
#[test]
fn busy_perl_subs_are_named_in_order() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = start(&[], &[], "busy.pl", &["30"]);
    let Captured { pid, dir, stacks, summary } = capture_ended(target, "oncpu", "3", "perl_busy");
    let main = main_thread(&stacks, pid);
    let all = total(&main);
    let ordered = share_in_order(&main, &BUSY, perl);
    eprintln!("Perl 5.36: <main>;Busy::outer;Busy::inner {ordered:.1}% of {all} samples");
    assert!(all > 300, "{all} samples\n{summary}");
    assert!(ordered >= 95.0, "{ordered:.1}% of {all} in <main>;Busy::outer;Busy::inner\n{summary}");
    let runops = weight_in_order_by(&main, &["Perl_runops_standard"], |f, w| f == w);
    assert!(pct(runops, all) < 1.0, "Perl_runops_standard left in {runops} of {all} samples\n{summary}");
    assert!(summary.contains(&format!("Perl: pid {pid} (perl, Perl 5.36): ")), "{summary}");
    let svg = std::fs::read_to_string(dir.join("oncpu.svg")).unwrap();
    assert!(svg.contains("Busy::inner (busy.pl:1"), "the flamegraph does not name Busy::inner");
}

/// Over OTLP, Perl's frames go as `perl` frames with their file and line
/// apart (`main::fifty` in split.pl), the interpreter's own as `native`;
/// 50/30/20 as known; pprof output names them too.
#[test]
fn perl_frames_go_over_otlp_as_perl_frames_with_file_and_line() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let received = out_dir("perl_otlp_received");
    let (_receiver, port) = receiver::serve(&received);
    let target = start(&[], &[], "split.pl", &["30"]);
    let pid = target.id();
    let dir = out_dir("perl_otlp");
    let out = run(fgbpf()
        .args(["oncpu", "-F", "499", "-d", "6", "--format", "svg,folded,pprof", "-p", &pid.to_string()])
        .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(&dir));
    drop(target);
    assert_ok(&out);
    // pprof's string table holds the frames' names as they are.
    let mut pprof = Vec::new();
    let gz = std::fs::read(dir.join("oncpu.pb.gz")).expect("oncpu.pb.gz");
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut pprof).unwrap();
    let has = |text: &[u8]| pprof.windows(text.len()).any(|w| w == text);
    assert!(has(b"main::fifty") && has(b"split.pl"), "pprof output without main::fifty");
    let samples = receiver::decode(&received);
    let mut shares = Vec::new();
    let mut base = 0;
    for f in ["main::fifty", "main::thirty", "main::twenty"] {
        let with: Vec<&receiver::Decoded> = samples.iter().filter(|s| s.frames.iter().any(|x| x == f)).collect();
        for s in &with {
            let i = s.frames.iter().position(|x| x == f).unwrap();
            assert_eq!((s.types[i].as_str(), s.files[i].as_str()), ("perl", "split.pl"), "{f}");
            assert!(s.lines[i] > 0, "{f} without its line");
            assert!(s.types.iter().any(|t| t == "native"), "the interpreter's frames");
        }
        let w: i64 = with.iter().map(|s| s.value).sum();
        base += w;
        shares.push(w);
    }
    let shares: Vec<f64> = shares.iter().map(|&w| pct(w as u64, base as u64)).collect();
    eprintln!("Perl over OTLP: {base} samples in the subs, 50/30/20 read {shares:.1?}");
    assert!(base > 600, "{base} samples in the subs");
    for (got, want) in shares.iter().zip([50.0, 30.0, 20.0]) {
        assert!((got - want).abs() <= 5.0, "{shares:?} against 50/30/20");
    }
}

/// A 50/30/20 split between three subs, with Devel::NYTProf profiling the
/// same process (`perl -d:NYTProf`, its profile written at exit): each
/// sub's share of the three within 5 points of the known split and of
/// NYTProf's inclusive times. NYTProf times every statement, which slows
/// each sub alike: the split holds under it. 6 s at 499 Hz on this
/// shared machine gave 1,900 to 2,900 samples in the subs, and at least
/// 600 are asked: there a 50% share spreads by 2 points (σ).
#[test]
fn a_50_30_20_split_between_perl_subs_agrees_with_nytprof() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("perl_split_nytprof");
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("nytprof.out");
    let _ = std::fs::remove_file(&profile);
    let setting = PathBuf::from(format!("file={}", profile.display()));
    let target = start(&["-d:NYTProf"], &[("NYTPROF", &setting)], "split.pl", &["9"]);
    let inclusive = move || {
        let mut cmd = Command::new("/usr/bin/perl");
        cmd.arg(script("nytprof-inclusive.pl")).arg(&profile);
        cmd
    };
    split_beside_nytprof(target, inclusive, dir.join("inclusive.txt"), "perl_split", "split.pl");
}

/// fgbpf's shares of split.pl's subs in the running `target` (run
/// `perl -d:NYTProf split.pl 9`, its profile written at exit), each
/// within 5 points of the known split and of NYTProf's inclusive times:
/// printed by the command `inclusive` returns (nytprof-inclusive.pl on
/// the profile, run once the target has exited) and kept in `kept`.
/// `test` names the capture's directory, `title` the comparison. The
/// host's perl and a root's (run by `chroot`) differ in those alone.
fn split_beside_nytprof(mut target: KillOnDrop, inclusive: impl Fn() -> Command + 'static, kept: PathBuf, test: &str, title: &str) {
    let end = End::Exit { limit: Duration::from_secs(60), success: true };
    let read = move || {
        let mut cmd = inclusive();
        let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(out.status.success(), "nytprof-inclusive.pl ({cmd:?}): {}", String::from_utf8_lossy(&out.stderr));
        std::fs::write(&kept, &out.stdout).unwrap();
        read_collapsed(&kept)
    };
    let reference = Reference::in_workload("NYTProf", end, read);
    let got = capture_beside(&mut target, &["oncpu", "-F", "499"], Window::Seconds("6"), test, reference);
    let stacks = read_folded(&got.dir.join("oncpu.folded"));
    let fg = Side { name: "fgbpf", stacks: &stacks, is: &|f, s| perl(f, &format!("{s}@split.pl:")) };
    let theirs = Side { name: "NYTProf", stacks: &got.theirs, is: &exactly };
    let split = [("main::fifty", Some(50.0)), ("main::thirty", Some(30.0)), ("main::twenty", Some(20.0))];
    let cmp = compare(title, fg, theirs, &split, Base::Compared);
    assert!(cmp.bases.0 > 600, "{} samples in the subs\n{}", cmp.bases.0, got.summary);
    cmp.assert_near_known(5.0, &got.summary);
    cmp.assert_near_reference(Within::Points(5.0), &got.summary);
}

/// Off-CPU: a sleep (Time::HiRes::sleep in Waits::nap) and a blocking
/// socket read (sysread in Waits::slow_read) each under its Perl caller
/// for at least 95% of its time. The wait the capture began in is drawn
/// from the registers the kernel saved (`[blocked before capture]`, native
/// frames only, as it says) and is left out.
#[test]
fn perl_waits_land_under_their_callers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = start(&[], &[], "waits.pl", &["30"]);
    let Captured { pid, stacks, summary, .. } = capture_ended(target, "offcpu", "4", "perl_waits");
    let main: Folded = main_thread(&stacks, pid).into_iter().filter(|(f, _)| !f.iter().any(|x| x == "[blocked before capture]")).collect();
    let all = total(&main);
    for (wait, leaf, path) in [
        ("sleep", "__GI___clock_nanosleep", ["<main>@waits.pl:35", "Waits::nap@waits.pl:12"]),
        ("socket read", "__GI___libc_read", ["<main>@waits.pl:36", "Waits::slow_read@waits.pl:17"]),
    ] {
        let waits: Folded = main.iter().filter(|(f, _)| f.iter().any(|x| x == leaf)).cloned().collect();
        let (time, under) = (total(&waits), weight_in_order_by(&waits, &path, perl));
        eprintln!("Perl 5.36 off-CPU: {wait}: {:.1}% of {time} µs under {}; {:.1}% of the thread's {all}", pct(under, time), path.join(";"), pct(time, all));
        assert!(pct(time, all) >= 25.0, "{wait}: {time} of {all} µs\n{summary}");
        assert!(pct(under, time) >= 95.0, "{wait}: {:.1}% of {time} µs under {}\n{summary}", pct(under, time), path.join(";"));
    }
}

/// A Perl whose layout does not check out at attach is not read, and the
/// summary and report.txt name it with its version and why; its native
/// frames are kept. The test hook FGBPF_TEST_PERL_MAIN_SI makes the check
/// expect a type of bottom stack info no interpreter has.
#[test]
fn a_perl_refused_by_its_layout_check_is_named_as_not_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = start(&[], &[], "busy.pl", &["30"]);
    let pid = target.id();
    let dir = out_dir("perl_refused");
    let out = run(fgbpf()
        .env("FGBPF_TEST_PERL_MAIN_SI", "5")
        .args(["oncpu", "-F", "499", "-d", "2", "-p", &pid.to_string(), "-o"])
        .arg(&dir));
    drop(target);
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let said = format!(
        "Perl: pid {pid} (perl): Perl frames not read, Perl 5.36.0: the layout's check failed (its bottom stack info's type is 1, not 5 (PERLSI_MAIN))"
    );
    assert!(summary.contains(&said), "the summary does not say `{said}`\n{summary}");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("Perl 5.36.0: the layout's check failed"), "report.txt does not say why\n{report}");
    let native = weight_in_order_by(&stacks, &["perl_run", "Perl_runops_standard"], |f, w| f == w);
    assert!(total(&stacks) > 300 && pct(native, total(&stacks)) >= 95.0, "native frames: {native} of {}\n{summary}", total(&stacks));
    assert_eq!(weight_in_order_by(&stacks, &["Busy::inner@busy.pl:"], perl), 0, "Perl frames named from a refused layout\n{summary}");
}

/// A Perl of a version fgbpf has no layout for is named, with its version,
/// and keeps its native frames: Debian's perl copied with the version
/// libperl says of itself (`PL_version`, a byte of its read-only data)
/// patched from 36 to 38, which runs as before (the interpreter's own
/// code uses its compiled-in version).
#[test]
fn a_perl_of_an_unknown_version_is_named_as_not_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("perl_unknown_version_bin");
    std::fs::create_dir_all(&dir).unwrap();
    let nm = Command::new("nm").args(["-D", "/usr/bin/perl"]).output().expect("nm (binutils)");
    let symbols = String::from_utf8_lossy(&nm.stdout);
    let at = symbols.lines().find(|l| l.ends_with(" PL_version")).and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok()).expect("PL_version in /usr/bin/perl");
    let mut binary = std::fs::read("/usr/bin/perl").unwrap();
    // Its read-only segment is mapped at its file offset (readelf -l).
    assert_eq!(binary[at as usize], 36, "PL_version is not 36 at its file offset");
    binary[at as usize] = 38;
    let program = dir.join("perl");
    std::fs::write(&program, &binary).unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let target = start_ready(Command::new(&program).arg(script("busy.pl")).arg("30"), "busy.pl", "perl");
    let Captured { pid, dir, stacks, summary } = capture_ended(target, "oncpu", "2", "perl_unknown_version");
    let said = format!("Perl: pid {pid} (perl): Perl frames not read, Perl 5.38.0 (fgbpf reads 5.32, 5.36 and 5.40 (threaded))");
    assert!(summary.contains(&said), "the summary does not say `{said}`\n{summary}");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("Perl 5.38.0 (fgbpf reads 5.32, 5.36 and 5.40"), "report.txt does not say why\n{report}");
    let native = weight_in_order_by(&stacks, &["perl_run", "Perl_runops_standard"], |f, w| f == w);
    assert!(total(&stacks) > 300 && pct(native, total(&stacks)) >= 95.0, "native frames: {native} of {}\n{summary}", total(&stacks));
    assert_eq!(weight_in_order_by(&stacks, &["Busy::inner@busy.pl:"], perl), 0, "Perl frames named for an unknown version\n{summary}");
}

/// ithreads: each Perl thread runs an interpreter of its own, found as
/// the thread's value of PL_thr_key in glibc's thread-specific data
/// (src/runtimes/perl/tsd.rs). The main thread's stack is read from the
/// main interpreter, the other's from its own, which starts at the sub
/// the thread was created with: neither is given the other's frames.
#[test]
fn each_perl_thread_is_read_from_its_own_interpreter() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = start(&[], &[], "threads.pl", &["30"]);
    let Captured { pid, stacks, summary, .. } = capture_ended(target, "oncpu", "3", "perl_threads");
    let main = main_thread(&stacks, pid);
    let main_label = format!("perl-{pid}");
    let worker = of_threads(&stacks, |t| t != main_label);
    let named = share_in_order(&main, &["<main>@threads.pl:34", "Busy::outer@threads.pl:26", "Busy::inner@threads.pl:2"], perl);
    let work = share_in_order(&worker, &["Worker::work@threads.pl:1"], perl);
    let crossed = weight_in_order_by(&worker, &["Busy::inner@threads.pl:"], perl) + weight_in_order_by(&worker, &["<main>@threads.pl:"], perl);
    let (m_all, w_all) = (total(&main), total(&worker));
    eprintln!("Perl 5.36 ithreads: main thread {named:.1}% of {m_all} in <main>;Busy::outer;Busy::inner, the other {work:.1}% of {w_all} in Worker::work, {crossed} with the main thread's frames");
    assert!(m_all > 150 && w_all > 150, "main {m_all} and other {w_all} samples\n{summary}");
    assert!(named >= 95.0, "{named:.1}% of the main thread's samples in <main>;Busy::outer;Busy::inner\n{summary}");
    assert!(work >= 95.0, "{work:.1}% of the other thread's samples in Worker::work\n{summary}");
    assert_eq!(crossed, 0, "the other thread given the main thread's frames\n{summary}");
}

/// Debian 11's Perl 5.32 (threaded, `libperl.so.5.32`) and Debian 13's
/// 5.40 (its `/usr/bin/perl`, libperl linked in), each
/// run by `chroot` in its release's root as a container runs it: the busy
/// chain in order, the known split, and waits under their callers (by
/// the Perl frames: the roots' libcs are not the host's).
#[test]
fn debian_11_and_13_perls_in_containers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    perl_in_root(&roots::bullseye(), "5.32", false);
    // The root with `perl` whole (`perl-base` alone has no Time::HiRes)
    // and NYTProf.
    perl_in_root(&roots::named("trixie-perl"), "5.40", true);
}

/// [`debian_11_and_13_perls_in_containers`]'s checks on the perl of
/// `root`, Perl `version`; the split beside NYTProf in the root when it
/// has it (`nytprof`), else against the known answer.
fn perl_in_root(root: &Path, version: &str, nytprof: bool) {
    let target = roots::start_in_root(root, "perl", "perl", "busy.pl", "30");
    let Captured { pid, stacks, summary, .. } = capture_ended(target, "oncpu", "3", &format!("perl{}_busy", version.replace('.', "")));
    let main = main_thread(&stacks, pid);
    let (all, ordered) = (total(&main), share_in_order(&main, &BUSY, perl));
    eprintln!("Perl {version}: <main>;Busy::outer;Busy::inner {ordered:.1}% of {all} samples");
    assert!(all > 300 && ordered >= 95.0, "{ordered:.1}% of {all} in <main>;Busy::outer;Busy::inner\n{summary}");
    assert!(summary.contains(&format!("Perl: pid {pid} (perl, Perl {version}): ")), "{summary}");

    if nytprof {
        split_beside_nytprof_in(root, version);
    } else {
        split_known_in(root, version);
    }

    let target = roots::start_in_root(root, "perl", "perl", "waits.pl", "30");
    let Captured { pid, stacks, summary, .. } = capture_ended(target, "offcpu", "4", &format!("perl{}_waits", version.replace('.', "")));
    let main: Folded = main_thread(&stacks, pid).into_iter().filter(|(f, _)| !f.iter().any(|x| x == "[blocked before capture]")).collect();
    let all = total(&main);
    let nap = weight_in_order_by(&main, &["<main>@waits.pl:35", "Waits::nap@waits.pl:12"], perl);
    let read = weight_in_order_by(&main, &["<main>@waits.pl:36", "Waits::slow_read@waits.pl:17"], perl);
    eprintln!("Perl {version} off-CPU: {:.1}% under Waits::nap, {:.1}% under Waits::slow_read of {all} µs", pct(nap, all), pct(read, all));
    assert!(pct(nap, all) >= 25.0 && pct(read, all) >= 25.0, "nap {nap}, read {read} of {all} µs\n{summary}");
    assert!(pct(nap + read, all) >= 95.0, "{:.1}% of {all} µs under the two callers\n{summary}", pct(nap + read, all));
}

/// As [`a_50_30_20_split_between_perl_subs_agrees_with_nytprof`], with
/// the perl and NYTProf of `root`.
fn split_beside_nytprof_in(root: &Path, version: &str) {
    let inside = roots::copy_workloads(root, "perl");
    let there = root.join(inside.strip_prefix("/").unwrap());
    let profile = inside.join("nytprof.out");
    let _ = std::fs::remove_file(there.join("nytprof.out"));
    let mut cmd = Command::new("chroot");
    cmd.arg(root).args(["perl", "-d:NYTProf"]).arg(inside.join("split.pl")).arg("9").env("NYTPROF", format!("file={}", profile.display()));
    let target = start_ready(&mut cmd, &format!("perl -d:NYTProf split.pl in {}", root.display()), "chroot");
    let inclusive = {
        let root = root.to_path_buf();
        move || {
            let mut cmd = Command::new("chroot");
            cmd.arg(&root).arg("perl").arg(inside.join("nytprof-inclusive.pl")).arg(&profile);
            cmd
        }
    };
    let test = format!("perl{}_split", version.replace('.', ""));
    split_beside_nytprof(target, inclusive, there.join("inclusive.txt"), &test, &format!("Perl {version}'s split.pl"));
}

/// The split of the perl of `root` against the known answer.
fn split_known_in(root: &Path, version: &str) {
    let target = roots::start_in_root(root, "perl", "perl", "split.pl", "30");
    let Captured { stacks, summary, .. } = capture_ended(target, "oncpu", "6", &format!("perl{}_split", version.replace('.', "")));
    let split = [("main::fifty", 50.0), ("main::thirty", 30.0), ("main::twenty", 20.0)];
    let weights: Vec<u64> = split.iter().map(|(s, _)| weight_in_order_by(&stacks, &[&format!("{s}@split.pl:")], perl)).collect();
    let base: u64 = weights.iter().sum();
    assert!(base > 600, "{base} samples in the subs\n{summary}");
    for ((sub, known), w) in split.iter().zip(&weights) {
        eprintln!("Perl {version} split: {sub} {:.1}% (known {known}%)", pct(*w, base));
        assert!((pct(*w, base) - known).abs() <= 5.0, "{sub}: {:.1}% of {base}, known {known}%\n{summary}", pct(*w, base));
    }
}
