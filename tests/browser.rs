//! fgbpf's SVGs in a real browser (Chromium, headless): the script inferno
//! embeds runs on what fgbpf wrote, and its search finds kernel frames by
//! the `_[k]` their tooltips keep.

mod common;

use common::browser::{bottom_frames, in_browser};
use common::*;

#[test]
fn search_finds_kernel_frames_in_a_browser() {
    let dir = out_dir("browser");
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("oncpu.folded");
    std::fs::write(
        &input,
        "app-1;app-1;main;read;ksys_read_[k];copy_page_[k] 30\napp-1;app-1;main;compute 70\n",
    )
    .unwrap();
    let svg = dir.join("oncpu.svg");
    assert_ok(&run(fgbpf().arg("flamegraph").arg(&input).arg("-o").arg(&svg)));
    let result = in_browser(
        &svg,
        r##"search("_\\[k\\]");
var n = 0; var rects = document.querySelectorAll("#frames rect");
for (var i = 0; i < rects.length; i++) if (rects[i].getAttribute("fill") == searchcolor) n++;
document.documentElement.setAttribute("data-result", document.getElementById("matched").textContent + "; highlighted " + n);"##,
    );
    assert_eq!(result, "Matched: 30.0%; highlighted 2");
}

/// A whole host's wall view, shaped as the issue's database under load:
/// 30 sessions each its own `postgres` process, their lock wait under
/// three frames, a 4-thread `nginx` and a `bash`.
fn whole_host() -> fgbpf::profile::Profile {
    use fgbpf::profile::{Frame, FrameKind, Profile, Stack, Thread, Unit};
    let mut p = Profile::new(Unit::Microseconds);
    p.meta.kind = fgbpf::profile::Kind::Wall;
    let f = |p: &mut Profile, name: &str, kind| p.intern_frame(Frame::new(name, kind));
    let main = f(&mut p, "main", FrameKind::User);
    let exec = f(&mut p, "exec_simple_query", FrameKind::User);
    let lock = f(&mut p, "LockAcquireExtended", FrameKind::User);
    let sleep = f(&mut p, "ProcSleep", FrameKind::User);
    let state = f(&mut p, "[sleeping]", FrameKind::Pseudo);
    let serve = f(&mut p, "ngx_process_events", FrameKind::User);
    let thread = |p: &mut Profile, process: &str, pid: u32, tid: u32| {
        p.intern_thread(Thread { start: 0, group: None, pid, tid, process: process.into(), name: process.into() })
    };
    for n in 0..30 {
        let t = thread(&mut p, "postgres", 472_251 + n, 472_251 + n);
        p.push(Stack { thread: Some(t), frames: vec![main, exec].into(), weight: 900 + u64::from(n), ..Default::default() });
        p.push(Stack { thread: Some(t), frames: vec![main, exec, lock, sleep, state].into(), weight: 1200, ..Default::default() });
    }
    for tid in 0..4 {
        let t = thread(&mut p, "nginx", 8000, 8000 + tid);
        p.push(Stack { thread: Some(t), frames: vec![main, serve].into(), weight: 9000, ..Default::default() });
    }
    let t = thread(&mut p, "bash", 77, 77);
    p.push(Stack { thread: Some(t), frames: vec![main].into(), weight: 12_000, ..Default::default() });
    p.coalesce();
    p
}

#[test]
fn a_whole_host_wall_svg_stands_on_its_programs() {
    use fgbpf::app::recording::Roots;
    use fgbpf::format::{capture, folded, sidecar, svg};
    let dir = out_dir("browser-programs");
    std::fs::create_dir_all(&dir).unwrap();
    let p = whole_host();
    // As a whole-host capture draws it, with the roots it picks for one.
    let drawn = Roots::of(None, true).drawn;
    let opts = capture::wall_svg("all processes", std::time::Duration::from_secs(8), 99, "now", drawn);
    let path = dir.join("wall.svg");
    svg::write(&p, &opts, &mut std::fs::File::create(&path).unwrap()).unwrap();
    let frames = bottom_frames(&path);
    eprintln!("{frames:?}");
    let names: Vec<&str> = frames.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(names, ["bash", "nginx", "postgres"]);
    // Every program's label reads whole: none is cut to `..472280`.
    for (name, label) in &frames {
        assert_eq!(label.trim(), name, "the label of {name}");
    }

    // The folded file keeps every process and thread, and fgbpf
    // flamegraph draws it as its capture did (capture.json), or per
    // process when asked.
    let fopts = folded::Options { leading: folded::Leading::ProcessAndThread };
    let mut text = Vec::new();
    folded::write(&p, &fopts, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("postgres-472280;postgres-472280;main;exec_simple_query 929\n"), "{text}");
    std::fs::write(dir.join("wall.folded"), &text).unwrap();
    let mut side = sidecar::Sidecar::default();
    side.add("wall.folded", &p, false, drawn);
    side.write(&mut std::fs::File::create(dir.join(sidecar::FILE)).unwrap()).unwrap();
    let again = dir.join("again.svg");
    assert_ok(&run(fgbpf().arg("flamegraph").arg(&dir).arg("-o").arg(&again)));
    assert_eq!(bottom_frames(&again), frames);
    let per_process = dir.join("per-process.svg");
    assert_ok(&run(fgbpf().arg("flamegraph").arg(&dir).arg("--per-process").arg("-o").arg(&per_process)));
    let towers = bottom_frames(&per_process);
    assert_eq!(towers.iter().filter(|f| f.0.starts_with("postgres-4722")).count(), 30, "{towers:?}");
    let sessions: Vec<_> = towers.iter().filter(|f| f.0.starts_with("postgres-")).collect();
    assert!(sessions.iter().all(|f| f.1.trim() != f.0), "30 towers have no room for their names: {towers:?}");
}

/// A wall-clock timeline: two threads asleep or running, every 100 ms
/// slice of each holding 100 ms of wall time; `app-1` runs 80 ms of the
/// slices 10..20, `app-2` 30 ms of 30..35.
fn wall_timeline() -> fgbpf::profile::Profile {
    use fgbpf::profile::{Frame, FrameKind, Profile, Span, Stack, Thread, Unit};
    let mut p = Profile::new(Unit::Microseconds);
    p.meta.kind = fgbpf::profile::Kind::Wall;
    p.meta.slice = Some(std::time::Duration::from_millis(100));
    p.meta.duration = std::time::Duration::from_secs(4);
    let work = p.intern_frame(Frame::new("work", FrameKind::User));
    let wait = p.intern_frame(Frame::new("wait_for_work", FrameKind::User));
    let sleeping = p.intern_frame(Frame::new("[sleeping]", FrameKind::Pseudo));
    for (tid, busy, ran) in [(1, 10..20, 80_000), (2, 30..35, 30_000)] {
        let t = p.intern_thread(Thread { start: 0, group: None, pid: 1, tid, process: "app".into(), name: format!("app-{tid}").into() });
        for s in 0..40u32 {
            let on = if busy.contains(&s) { ran } else { 0 };
            if on > 0 {
                p.push(Stack { thread: Some(t), frames: vec![work].into(), weight: on, spans: vec![Span::at(s, on)].into(), ..Default::default() });
            }
            let off = 100_000 - on;
            p.push(Stack { thread: Some(t), frames: vec![wait, sleeping].into(), weight: off, spans: vec![Span::at(s, off)].into(), ..Default::default() });
        }
    }
    p.coalesce();
    p
}

#[test]
fn a_wall_timeline_is_coloured_by_what_varies() {
    use fgbpf::format::timeline;
    let dir = out_dir("browser-wall-timeline");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("timeline.html");
    let opts = timeline::Options { title: "wall".into(), ..Default::default() };
    timeline::write(&wall_timeline(), &opts, &mut std::fs::File::create(&page).unwrap()).unwrap();
    let probe = r##"
function cells() {
  return Array.from(document.querySelectorAll("#heatmap rect.cell")).map(function (c) {
    return [+c.getAttribute("data-weight"), c.getAttribute("fill")];
  });
}
var select = document.getElementById("measure");
var r = { shown: !document.getElementById("measure-label").hidden,
  options: Array.from(select.options).map(function (o) { return o.value; }),
  measure: fgbpfTimeline.state().measure, on: cells(), legend: document.getElementById("legend").textContent };
select.value = "off";
select.dispatchEvent(new Event("change", { bubbles: true }));
r.off = cells();
fgbpfTimeline.measure("wall");
r.wall = cells();
r.wallLegend = document.getElementById("legend").textContent;
fgbpfTimeline.measure("on");
fgbpfTimeline.threads("t:1");
r.thread2 = cells();
r.state = fgbpfTimeline.state();
return r;"##;
    let r = common::in_browser(&page, probe);
    let weights = |v: &serde_json::Value| -> Vec<u64> { v.as_array().unwrap().iter().map(|c| c[0].as_f64().unwrap() as u64).collect() };
    let fills = |v: &serde_json::Value| -> Vec<String> { v.as_array().unwrap().iter().map(|c| c[1].as_str().unwrap().to_string()).collect() };
    assert_eq!(r["shown"], true);
    assert_eq!(r["options"], serde_json::json!(["on", "off", "wall"]));
    // On-CPU by default: the cells differ where the threads ran, and only there.
    assert_eq!(r["measure"], "on");
    let on = weights(&r["on"]);
    let want: Vec<u64> = (0..40).map(|s| if (10..20).contains(&s) { 80_000 } else if (30..35).contains(&s) { 30_000 } else { 0 }).collect();
    assert_eq!(on, want);
    let on_fills = fills(&r["on"]);
    assert_ne!(on_fills[12], on_fills[32], "80 ms and 30 ms of CPU drawn alike");
    assert_ne!(on_fills[32], on_fills[0], "30 ms of CPU and none drawn alike");
    assert!(r["legend"].as_str().unwrap().contains("80.0 ms of on-CPU time"), "{}", r["legend"]);
    // Off-CPU: the complement of both threads' 200 ms.
    assert_eq!(weights(&r["off"]), want.iter().map(|w| 200_000 - w).collect::<Vec<_>>());
    // Wall: 200 ms in every cell, all one colour, as before the switch.
    assert_eq!(weights(&r["wall"]), vec![200_000; 40]);
    let wall_fills = fills(&r["wall"]);
    assert!(wall_fills.iter().all(|f| *f == wall_fills[0]), "{wall_fills:?}");
    assert!(r["wallLegend"].as_str().unwrap().contains("200.0 ms of wall time"), "{}", r["wallLegend"]);
    // The thread selection keeps the measure: app-2's on-CPU time alone.
    assert_eq!(r["state"]["threads"], "t:1");
    assert_eq!(r["state"]["measure"], "on");
    let second: Vec<u64> = (0..40).map(|s| if (30..35).contains(&s) { 30_000 } else { 0 }).collect();
    assert_eq!(weights(&r["thread2"]), second);
}

#[test]
fn a_whole_host_timeline_draws_its_flamegraph_by_program() {
    use fgbpf::format::timeline;
    use fgbpf::profile::names::Leading;
    use fgbpf::profile::{Frame, FrameKind, Profile, Span, Stack, Thread, Unit};
    let mut p = Profile::new(Unit::Samples);
    p.meta.slice = Some(std::time::Duration::from_millis(100));
    p.meta.duration = std::time::Duration::from_secs(1);
    let main = p.intern_frame(Frame::new("main", FrameKind::User));
    let work = p.intern_frame(Frame::new("work", FrameKind::User));
    let serve = p.intern_frame(Frame::new("serve", FrameKind::User));
    // Two postgres processes and a two-thread nginx, interned so that
    // nginx's threads come between postgres's processes.
    for (process, pid, tid, leaf, weight) in
        [("postgres", 11, 11, work, 30), ("nginx", 20, 20, serve, 10), ("nginx", 20, 21, serve, 15), ("postgres", 12, 12, work, 20)]
    {
        let t = p.intern_thread(Thread { start: 0, group: None, pid, tid, process: process.into(), name: format!("{process}-t").into() });
        p.push(Stack { thread: Some(t), frames: vec![main, leaf].into(), weight, spans: vec![Span::at(3, weight)].into(), ..Default::default() });
        p.push(Stack { thread: Some(t), frames: vec![main].into(), weight: 5, spans: vec![Span::at(4, 5)].into(), ..Default::default() });
    }
    p.coalesce();
    let dir = out_dir("browser-host-timeline");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("timeline.html");
    let opts = timeline::Options { roots: Leading::Program, ..Default::default() };
    timeline::write(&p, &opts, &mut std::fs::File::create(&page).unwrap()).unwrap();
    let probe = r##"
function frames() {
  return fgbpfTimeline.frames().map(function (f) { return f.name; }).sort();
}
var r = { select: document.getElementById("roots").value, program: frames() };
var select = document.getElementById("roots");
select.value = "process";
select.dispatchEvent(new Event("change", { bubbles: true }));
r.process = frames();
fgbpfTimeline.roots("thread");
r.thread = frames();
fgbpfTimeline.roots("program");
fgbpfTimeline.threads("p:12");
r.one = frames();
r.state = fgbpfTimeline.state();
return r;"##;
    let r = common::in_browser(&page, probe);
    eprintln!("{r:#}");
    let names = |k: &str| -> Vec<String> { r[k].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect() };
    let count = |k: &str, n: &str| names(k).iter().filter(|x| *x == n).count();
    assert_eq!(r["select"], "program");
    // By program: each program once, its processes' and threads' stacks
    // merged into one tree (one `work`, one `main` per program).
    assert_eq!(names("program"), ["all", "main", "main", "nginx", "postgres", "serve", "work"]);
    // By process: the two postgres processes apart, nginx's threads merged.
    assert_eq!((count("process", "postgres-11"), count("process", "postgres-12"), count("process", "nginx-20")), (1, 1, 1));
    assert_eq!((count("process", "work"), count("process", "serve")), (2, 1));
    // By thread: every thread its own tower.
    assert_eq!((count("thread", "nginx-t-20"), count("thread", "nginx-t-21"), count("thread", "serve")), (1, 1, 2));
    // The selection still works under a program's roots: one process.
    assert_eq!(names("one"), ["all", "main", "postgres", "work"]);
    assert_eq!(r["state"]["weight"], 25);
    assert_eq!(r["state"]["roots"], "program");
}
