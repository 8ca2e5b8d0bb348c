//! Lua functions in fgbpf's stacks, on the machine's LuaJIT (Debian 12's
//! `luajit2`: OpenResty's LuaJIT 2.1-20230119, `/usr/bin/luajit` linking
//! libluajit-5.1.so.2) and nginx's Lua module linking the same library,
//! started with no flag: the running lua_State's frames are walked in the
//! kernel (src/runtimes/luajit/luajit.bpf.h) and named from the live
//! process (src/runtimes/luajit/). Known answers: the scripts' own
//! functions and splits; LuaJIT's own profiler (`luajit -jp`) on the same
//! process. Each test fails with `--no-luajit` (the walk off): the
//! functions are then not in the stacks.

mod common;
#[allow(dead_code)]
#[path = "otlp/export.rs"]
mod export;
#[allow(dead_code)]
#[path = "otlp/receiver.rs"]
mod receiver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::nginx::Nginx;
use common::runtime::*;
use common::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const LUAJIT: &str = "/usr/bin/luajit";

fn script(name: &str) -> PathBuf {
    Path::new(ROOT).join("tests/workloads/luajit").join(name)
}

/// Starts `luajit [flags] SCRIPT ARGS` and returns once it says "ready".
fn start(flags: &[&str], name: &str, args: &[&str]) -> KillOnDrop {
    let mut cmd = Command::new(LUAJIT);
    cmd.args(flags).arg(script(name)).args(args);
    start_ready(&mut cmd, name, "luajit is not installed: Debian's luajit2 package")
}

/// A Lua frame is `name (file:line)_[p]`: matched by name and file (and
/// line when given).
fn lua(frame: &str, wanted: &str) -> bool {
    walked_at(frame, wanted)
}

/// `--no-luajit` when `FGBPF_TEST_NO_LUAJIT` is set: each test then must
/// fail (the walk it tests is off).
fn walk_flags() -> Vec<&'static str> {
    if std::env::var_os("FGBPF_TEST_NO_LUAJIT").is_some() {
        vec!["--no-luajit"]
    } else {
        vec![]
    }
}

/// `fgbpf KIND [-F 499] -d SECONDS -p PID -o DIR` (and `--no-luajit` when
/// asked), then the workload ended and the capture read.
fn capture(target: KillOnDrop, kind: &str, seconds: &str, test: &str) -> Captured {
    let pid = target.id();
    let dir = out_dir(test);
    let rate: &[&str] = if kind == "oncpu" { &["-F", "499"] } else { &[] };
    let out = run(fgbpf().arg(kind).args(rate).args(walk_flags()).args(["-d", seconds, "-p", &pid.to_string(), "-o"]).arg(&dir));
    drop(target);
    assert_ok(&out);
    let stacks = read_folded(&dir.join(format!("{kind}.folded")));
    Captured { pid, dir, stacks, summary: String::from_utf8_lossy(&out.stderr).into_owned() }
}

const BUSY: [&str; 3] = ["main chunk@busy.lua:", "outer@busy.lua:12", "inner@busy.lua:"];

/// main chunk → outer → inner spinning (in a trace, mostly): the chain
/// named in order for at least 95% of the samples.
#[test]
fn busy_lua_functions_are_named_in_order() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = start(&[], "busy.lua", &["30"]);
    let Captured { pid, dir, stacks, summary } = capture(target, "oncpu", "3", "luajit_busy");
    let all = total(&stacks);
    let ordered = share_in_order(&stacks, &BUSY, lua);
    eprintln!("LuaJIT: main chunk;outer;inner {ordered:.1}% of {all} samples");
    assert!(all > 300, "{all} samples\n{summary}");
    assert!(ordered >= 95.0, "{ordered:.1}% of {all} in main chunk;outer;inner\n{summary}");
    assert!(summary.contains(&format!("LuaJIT: pid {pid} (luajit")), "{summary}");
    let svg = std::fs::read_to_string(dir.join("oncpu.svg")).unwrap();
    assert!(svg.contains("inner (busy.lua:"), "the flamegraph does not name inner");
}

/// fgbpf's shares of split.lua's three functions (in its capture `fg`
/// of `pid`), and the capture's summary.
fn split_shares(pid: u32, fg: &Path) -> (Vec<u64>, String) {
    let out = run(fgbpf().args(["oncpu", "-F", "499"]).args(walk_flags()).args(["-d", "6", "-p", &pid.to_string(), "-o"]).arg(fg));
    assert_ok(&out);
    let stacks = read_folded(&fg.join("oncpu.folded"));
    let ours = ["fifty", "thirty", "twenty"].iter().map(|n| weight_in_order_by(&stacks, &[&format!("{n}@split.lua:")], lua)).collect();
    (ours, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A 50/30/20 split between three functions, JIT-compiled as LuaJIT runs
/// them: each share within 5 points of the known split.
#[test]
fn a_50_30_20_split_between_jit_compiled_lua_functions_is_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = start(&[], "split.lua", &["8"]);
    let (ours, summary) = split_shares(target.id(), &out_dir("luajit_split_jit"));
    let all: u64 = ours.iter().sum();
    assert!(all > 600, "{all} samples in the functions\n{summary}");
    for (i, want) in [50.0, 30.0, 20.0].into_iter().enumerate() {
        assert!((pct(ours[i], all) - want).abs() <= 5.0, "{ours:?} against 50/30/20\n{summary}");
    }
}

/// The same split with LuaJIT's own profiler on the same process
/// (`-jp=fr`: raw sample counts by function, written at exit), the JIT
/// off (`-joff`): each share within 5 points of the known split and of the
/// profiler's. With the JIT on, `-jp` is not a reference: it takes its
/// samples where compiled code checks for them, not where the time went.
/// Measured: one CI run of 18 had it at 49.4/24.0/26.7 (859 samples, 3.8
/// sigma off on thirty) while fgbpf read 50.1/30.0/20.0 of 3,037; by hand,
/// 6 s runs gave 48.9/32.3/18.8 and 52.2/25.2/22.6 with the JIT, and
/// 48.9/31.1/20.0 and 47.3/32.0/20.7 without.
#[test]
fn a_50_30_20_split_between_lua_functions_agrees_with_luajit_jp() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("luajit_split_jp");
    std::fs::create_dir_all(&dir).unwrap();
    let jp = dir.join("jp.txt");
    let _ = std::fs::remove_file(&jp);
    let target = start(&["-joff", &format!("-jp=fr,{}", jp.display())], "split.lua", &["9"]);
    split_beside_jp(target, &jp, "luajit_split", "LuaJIT split");
}

/// fgbpf's shares of split.lua's functions in the running `target` (run
/// `-joff -jp=fr,JP`: the interpreter, LuaJIT's own profiler writing its
/// counts to `jp` at exit), each within 5 points of the known split and
/// of the profiler's.
fn split_beside_jp(mut target: KillOnDrop, jp: &Path, test: &str, what: &str) {
    let pid = target.id();
    let (ours, summary) = split_shares(pid, &out_dir(test));
    let since = Instant::now();
    while matches!(target.0.try_wait(), Ok(None)) && since.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let theirs = std::fs::read_to_string(jp).expect("luajit -jp wrote nothing");
    let names = ["fifty", "thirty", "twenty"];
    // "   41  fifty < split.lua:0": count, function (its caller after <).
    let count = |n: &str| -> u64 {
        theirs
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let c: u64 = w.next()?.parse().ok()?;
                (w.next()? == n).then_some(c)
            })
            .sum()
    };
    let jp_counts: Vec<u64> = names.iter().map(|n| count(n)).collect();
    let (ob, tb) = (ours.iter().sum::<u64>(), jp_counts.iter().sum::<u64>());
    let ours_pct: Vec<f64> = ours.iter().map(|&w| pct(w, ob)).collect();
    let jp_pct: Vec<f64> = jp_counts.iter().map(|&w| pct(w, tb)).collect();
    eprintln!("{what}: fgbpf {ours_pct:.1?} of {ob}, luajit -jp {jp_pct:.1?} of {tb}");
    assert!(ob > 600 && tb > 100, "{ob} samples in the functions, -jp {tb}\n{summary}\n{theirs}");
    for i in 0..3 {
        let want = [50.0, 30.0, 20.0][i];
        assert!((ours_pct[i] - want).abs() <= 5.0, "{ours_pct:?} against 50/30/20\n{summary}");
        assert!((ours_pct[i] - jp_pct[i]).abs() <= 5.0, "{ours_pct:?} against -jp's {jp_pct:?}\n{theirs}");
    }
}

/// Over OTLP, Lua frames go as `luajit` frames with their file and line
/// apart (`fifty` in split.lua), the native ones as `native`; pprof
/// output names them too.
#[test]
fn lua_frames_go_over_otlp_as_luajit_frames_with_file_and_line() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let received = out_dir("luajit_otlp_received");
    let (_receiver, port) = receiver::serve(&received);
    let target = start(&[], "split.lua", &["30"]);
    let pid = target.id();
    let dir = out_dir("luajit_otlp");
    let out = run(fgbpf()
        .args(["oncpu", "-F", "499", "-d", "4", "--format", "folded,pprof"])
        .args(walk_flags())
        .args(["-p", &pid.to_string()])
        .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(&dir));
    drop(target);
    assert_ok(&out);
    let mut pprof = Vec::new();
    let gz = std::fs::read(dir.join("oncpu.pb.gz")).expect("oncpu.pb.gz");
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut pprof).unwrap();
    let has = |text: &[u8]| pprof.windows(text.len()).any(|w| w == text);
    assert!(has(b"fifty") && has(b"split.lua"), "pprof output without fifty");
    let samples = receiver::decode(&received);
    let with: Vec<&receiver::Decoded> = samples.iter().filter(|s| s.frames.iter().any(|x| x == "fifty")).collect();
    let weight: i64 = with.iter().map(|s| s.value).sum();
    eprintln!("LuaJIT over OTLP: {weight} samples with fifty");
    assert!(weight > 300, "{weight} samples with fifty");
    for s in &with {
        let i = s.frames.iter().position(|x| x == "fifty").unwrap();
        assert_eq!((s.types[i].as_str(), s.files[i].as_str()), ("luajit", "split.lua"));
        assert!(s.lines[i] > 0, "fifty without its line");
        assert!(s.types.iter().any(|t| t == "native"), "native frames");
    }
}

/// Off-CPU: a sleep (nanosleep through the FFI, in nap) and a blocking
/// socket read (read through the FFI, in slow_read) each under its Lua
/// caller for at least 95% of its time.
#[test]
fn luajit_waits_land_under_their_callers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = start(&[], "waits.lua", &["30"]);
    let Captured { stacks, summary, .. } = capture(target, "offcpu", "4", "luajit_waits");
    assert_waits(stacks, &summary, "LuaJIT off-CPU");
}

/// waits.lua's two waits (those it was not blocked in when the capture
/// began), each at least 25% of the time and 95% under its Lua caller.
fn assert_waits(stacks: Folded, summary: &str, what: &str) {
    let waits_all: Folded = stacks.into_iter().filter(|(f, _)| !f.iter().any(|x| x == "[blocked before capture]")).collect();
    let all = total(&waits_all);
    for (wait, leaf, path) in [
        ("sleep", "nanosleep", ["main chunk@waits.lua:", "nap@waits.lua:"]),
        ("socket read", "read", ["main chunk@waits.lua:", "slow_read@waits.lua:"]),
    ] {
        let is_leaf = |x: &str| x.contains(leaf) && !x.ends_with("_[k]") && !x.ends_with("_[p]");
        let waits: Folded = waits_all.iter().filter(|(f, _)| f.iter().any(|x| is_leaf(x))).cloned().collect();
        let (time, under) = (total(&waits), weight_in_order_by(&waits, &path, lua));
        eprintln!("{what}: {wait}: {:.1}% of {time} µs under {}; {:.1}% of {all}", pct(under, time), path.join(";"), pct(time, all));
        assert!(pct(time, all) >= 25.0, "{wait}: {time} of {all} µs\n{summary}");
        assert!(pct(under, time) >= 95.0, "{wait}: {:.1}% of {time} µs under {}\n{summary}", pct(under, time), path.join(";"));
    }
}

/// A LuaJIT fgbpf refuses (the test hook FGBPF_TEST_LUAJIT_REFUSE, as a
/// version it does not know) is named in the summary with why, and keeps
/// its native frames.
#[test]
fn a_refused_luajit_is_named_as_not_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = start(&[], "busy.lua", &["30"]);
    let pid = target.id();
    let dir = out_dir("luajit_refused");
    let out = run(fgbpf().env("FGBPF_TEST_LUAJIT_REFUSE", "test").args(["oncpu", "-F", "499", "-d", "2", "-p", &pid.to_string(), "-o"]).arg(&dir));
    drop(target);
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    let said = "Lua frames not read, LuaJIT 2.1.0-beta3: refused by FGBPF_TEST_LUAJIT_REFUSE";
    assert!(summary.contains(said), "the summary does not say `{said}`\n{summary}");
    let stacks = read_folded(&dir.join("oncpu.folded"));
    assert!(total(&stacks) > 300, "{summary}");
    assert_eq!(weight_in_order_by(&stacks, &["inner@busy.lua:"], lua), 0, "Lua frames named from a refused VM\n{summary}");
}

/// nginx with `content_by_lua_block` (Debian's nginx and
/// libnginx-mod-http-lua, on the same libluajit, unpacked by
/// scripts/fetch-nginx.sh) under a local load generator: the handler's
/// functions named, in order, under the worker's request path (the
/// native walk of compiled code begun at the VM's frame).
#[test]
fn nginx_lua_handlers_are_named_under_the_workers_request_path() {
    if !require_root() {
        return;
    }
    let nginx = consumers_dir().join("nginx");
    let (bin, modules) = (nginx.join("nginx"), nginx.join("modules"));
    assert!(
        bin.exists() && modules.join("ngx_http_lua_module.so").exists(),
        "nginx and its Lua module are missing from {}: scripts/fetch-nginx.sh fetches them (scripts/test.sh runs it)",
        nginx.display()
    );
    let _serial = serial();
    let dir = out_dir("luajit_nginx_prefix");
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let lua_dir = nginx.join("lua");
    let (d, m, l) = (dir.display(), modules.display(), lua_dir.display());
    let conf = format!(
        "load_module {m}/ndk_http_module.so;\nload_module {m}/ngx_http_lua_module.so;\n\
         daemon off;\nmaster_process on;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\n\
         http {{\naccess_log off;\nlua_package_path \"{l}/?.lua;;\";\nclient_body_temp_path {d}/cb;\nproxy_temp_path {d}/px;\nfastcgi_temp_path {d}/fc;\nuwsgi_temp_path {d}/uw;\nscgi_temp_path {d}/sc;\n\
         init_by_lua_block {{\n  function work(n) local x = 0 for i = 1, n do x = (x + i) % 1000003 end return x end\n  function handle() return work(200000) end\n}}\n\
         server {{ listen 127.0.0.1:{port};\n location / {{ content_by_lua_block {{ ngx.say(handle()) }} }} }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    // Stopped by SIGTERM, on which its worker exits too (common::nginx).
    let master = Nginx(KillOnDrop(
        Command::new(&bin)
            .args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf"), "-e", &format!("{d}/error.log")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nginx"),
    ));
    let url = format!("http://127.0.0.1:{port}/");
    let since = Instant::now();
    while Command::new("curl").args(["-sf", "-o", "/dev/null", &url]).status().map_or(true, |s| !s.success()) {
        assert!(since.elapsed() < Duration::from_secs(10), "nginx did not answer\n{}", std::fs::read_to_string(dir.join("error.log")).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(100));
    }
    // The load: a client asking again and again, on its own thread.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                    let _ = s.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n");
                    let _ = s.read_to_end(&mut Vec::new());
                }
            }
        })
    };
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", master.0.id())).unwrap();
    let worker = children.split_whitespace().next().expect("an nginx worker").to_string();
    let fg = out_dir("luajit_nginx");
    let out = run(fgbpf().args(["oncpu", "-F", "499"]).args(walk_flags()).args(["-d", "4", "-p", &worker, "-o"]).arg(&fg));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = load.join();
    drop(master);
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    let stacks = read_folded(&fg.join("oncpu.folded"));
    // The worker's request path, then the handler's chunk and handle (work
    // is inlined in handle's trace, mostly: not on the Lua stack).
    let path = ["ngx_http_core_content_phase", "ngx_http_lua_run_thread", "lua:main chunk@=content_by_lua", "lua:handle@=init_by_lua"];
    let is = |f: &str, w: &str| match w.strip_prefix("lua:") {
        Some(w) => lua(f, w),
        None => f.starts_with(w),
    };
    let in_lua = weight_in_order_by(&stacks, &["ngx_http_lua_run_thread"], is);
    let named = weight_in_order_by(&stacks, &path, is);
    eprintln!("nginx + Lua: {named} of {in_lua} samples under ngx_http_lua_run_thread name main chunk;handle under the request path; {} in all", total(&stacks));
    assert!(in_lua > 100, "{in_lua} samples in the Lua handler\n{summary}");
    assert!(pct(named, in_lua) >= 90.0, "{named} of {in_lua} name main chunk;handle under the request path\n{summary}");
}

/// Debian 11's luajit (LuaJIT's own 2.1.0-beta3, not GC64: references
/// of 32 bits, frames of one slot), in a root of its own as a container
/// runs it: the busy chain in order (mostly in a trace), the split beside
/// its own `-jp`, and the waits under their callers.
#[test]
fn debian_11s_luajit_beta3_is_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let root = common::roots::named("bullseye-luajit");
    let target = common::roots::start_in_root(&root, "luajit", "luajit", "busy.lua", "30");
    let Captured { pid, stacks, summary, .. } = capture(target, "oncpu", "3", "luajit_bullseye");
    let all = total(&stacks);
    let ordered = share_in_order(&stacks, &BUSY, lua);
    eprintln!("LuaJIT 2.1.0-beta3 (Debian 11): main chunk;outer;inner {ordered:.1}% of {all} samples");
    assert!(all > 300 && ordered >= 95.0, "{ordered:.1}% of {all}\n{summary}");
    assert!(summary.contains(&format!("LuaJIT: pid {pid} (luajit, LuaJIT 2.1)")), "{summary}");

    let inside = common::roots::copy_workloads(&root, "luajit");
    let there = root.join(inside.strip_prefix("/").unwrap());
    let _ = std::fs::remove_file(there.join("jp.txt"));
    let mut cmd = Command::new("chroot");
    cmd.arg(&root).args(["luajit", "-joff", &format!("-jp=fr,{}", inside.join("jp.txt").display())]).arg(inside.join("split.lua")).arg("9");
    let target = start_ready(&mut cmd, "luajit -jp split.lua in Debian 11's root", "chroot");
    split_beside_jp(target, &there.join("jp.txt"), "luajit_bullseye_split", "LuaJIT 2.1.0-beta3 split");

    let target = common::roots::start_in_root(&root, "luajit", "luajit", "waits.lua", "30");
    let Captured { stacks, summary, .. } = capture(target, "offcpu", "4", "luajit_bullseye_waits");
    assert_waits(stacks, &summary, "LuaJIT 2.1.0-beta3 off-CPU");
}

/// A LuaJIT of a version fgbpf has no layout for is named, with its
/// version, and keeps its native frames: Debian 11's `luajit` (LuaJIT
/// linked in) copied with its banner (`LuaJIT 2.1.0-beta3` in its
/// read-only data, which fgbpf reads the version from) patched to say
/// beta4, run in the root.
#[test]
fn a_luajit_of_an_unknown_version_is_named_as_not_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let root = common::roots::named("bullseye-luajit");
    let inside = common::roots::copy_workloads(&root, "luajit");
    let there = root.join(inside.strip_prefix("/").unwrap());
    let mut bytes = std::fs::read(root.join("usr/bin/luajit")).unwrap();
    let banner = b"LuaJIT 2.1.0-beta3";
    let at = bytes.windows(banner.len()).position(|w| w == banner).expect("the banner in Debian 11's luajit");
    bytes[at + banner.len() - 1] = b'4';
    std::fs::write(there.join("luajit"), &bytes).unwrap();
    std::fs::set_permissions(there.join("luajit"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cmd = Command::new("chroot");
    cmd.arg(&root).arg(inside.join("luajit")).arg(inside.join("busy.lua")).arg("30");
    let target = start_ready(&mut cmd, "a patched luajit busy.lua", "chroot");
    let Captured { pid, stacks, summary, .. } = capture(target, "oncpu", "2", "luajit_unknown");
    let said = format!("LuaJIT: pid {pid} (luajit): Lua frames not read, LuaJIT 2.1.0-beta4, neither OpenResty's branch (lua_setexdata2) nor 2.1.0-beta3");
    assert!(summary.contains(&said), "the summary does not say `{said}`\n{summary}");
    assert!(total(&stacks) > 300, "{summary}");
    assert_eq!(weight_in_order_by(&stacks, &["inner@busy.lua:"], lua), 0, "Lua frames named from a LuaJIT not read\n{summary}");
}

/// Debian 13's luajit (OpenResty's 2.1.0+openresty20250117), in a root of
/// its own, as a container runs it: the busy chain named in order. Its
/// jit_State's layout is not known (no source of that date here): the
/// native callers of its compiled code are not recovered, the Lua frames
/// are.
#[test]
fn debian_13s_luajit_names_the_busy_chain() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let root = common::roots::named("trixie-luajit");
    let target = common::roots::start_in_root(&root, "luajit", "luajit", "busy.lua", "30");
    let Captured { pid, stacks, summary, .. } = capture(target, "oncpu", "3", "luajit_trixie");
    let all = total(&stacks);
    let ordered = share_in_order(&stacks, &BUSY, lua);
    eprintln!("LuaJIT (Debian 13): main chunk;outer;inner {ordered:.1}% of {all} samples");
    assert!(all > 300 && ordered >= 95.0, "{ordered:.1}% of {all}\n{summary}");
    assert!(summary.contains(&format!("LuaJIT: pid {pid} (luajit, LuaJIT 2.1)")), "{summary}");
}
