//! timeline.html in a real browser (Chromium, headless): a profile built
//! through the library, written by `format::timeline`, loaded from disk
//! with a probe script that drags over the heat map with mouse events,
//! changes the thread selection and searches, and reports what the page
//! then shows.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use fgbpf::format::timeline::{self, Options};
use fgbpf::profile::{Frame, FrameKind, Profile, Span, Stack, Thread, Unit};
use serde_json::Value;

use common::*;

const HOSTILE: &str = "</script><img src=x onerror=alert(1)>";

/// Samples in 100 ms slices over 6 s, one thread with weight (`app-1000`)
/// and one without (`idle-1001`): `main;phase_a` in slices 0..25,
/// `main;phase_b` in 35..60, and `main;phase_a;sys_read_[k]` over 5..=9.
fn profile(idle_name: &str) -> Profile {
    let mut p = Profile::new(Unit::Samples);
    p.meta.slice = Some(Duration::from_millis(100));
    p.meta.duration = Duration::from_secs(6);
    let app = p.intern_thread(Thread {
        start: 0,
        group: None,
        pid: 1000,
        tid: 1000,
        process: "app".into(),
        name: "app".into(),
    });
    p.intern_thread(Thread {
        start: 0,
        group: None,
        pid: 1000,
        tid: 1001,
        process: "app".into(),
        name: idle_name.into(),
    });
    let main = p.intern_frame(Frame::new("main", FrameKind::User));
    let a = p.intern_frame(Frame::new("phase_a", FrameKind::User));
    let b = p.intern_frame(Frame::new("phase_b", FrameKind::User));
    let k = p.intern_frame(Frame::new("sys_read", FrameKind::Kernel));
    let mut push = |frames: Vec<u32>, span: Span| {
        p.push(Stack { labels: None,
            thread: Some(app),
            frames: frames.into(),
            weight: span.weight,
            spans: vec![span].into(),
        })
    };
    for s in 0..25 {
        push(vec![main, a], Span::at(s, 10));
    }
    for s in 35..60 {
        push(vec![main, b], Span::at(s, 10));
    }
    push(vec![main, a, k], Span { first: 5, last: 9, weight: 20 });
    p.coalesce();
    p
}

/// Writes `profile`'s page into the test's directory and returns it.
fn written(test: &str, profile: &Profile) -> PathBuf {
    let dir = out_dir(test);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("timeline.html");
    let mut file = std::fs::File::create(&path).unwrap();
    let opts = Options {
        title: "phases".into(),
        ..Options::default()
    };
    let w = timeline::write(profile, &opts, &mut file).unwrap();
    assert_eq!((w.left_out_stacks, w.left_out_weight, w.slices), (0, 0, 60));
    path
}

/// JavaScript helpers for probes: `drag(from, to)` presses the mouse on
/// the cell of slice `from`, moves it over every cell up to `to` and
/// releases it there, as a user's drag does; `names()` lists the drawn
/// flamegraph's frames.
const HELPERS: &str = r##"
function cell(s) { return document.querySelector('#heatmap rect[data-slice="' + s + '"]'); }
function fire(el, type) {
  var r = el.getBoundingClientRect();
  el.dispatchEvent(new MouseEvent(type, { bubbles: true, cancelable: true, view: window, button: 0,
    buttons: type === "mouseup" ? 0 : 1, clientX: r.x + r.width / 2, clientY: r.y + r.height / 2 }));
}
function drag(from, to) {
  fire(cell(from), "mousedown");
  for (var s = from + 1; s <= to; s++) fire(cell(s), "mousemove");
  fire(cell(to), "mouseup");
}
function names() { return fgbpfTimeline.frames().map(function (f) { return f.name; }); }
"##;

#[test]
fn dragging_over_the_heat_map_draws_that_range() {
    let page = written("timeline", &profile("idle"));
    let probe = format!(
        r##"{HELPERS}
var r = {{}};
var cells = document.querySelectorAll("#heatmap rect.cell");
var columns = new Set(), nonzero = [];
cells.forEach(function (c) {{
  columns.add(c.getAttribute("data-col"));
  if (+c.getAttribute("data-weight") > 0) nonzero.push(+c.getAttribute("data-slice"));
}});
r.cells = cells.length; r.columns = columns.size; r.nonzero = nonzero;
r.weight5 = +cell(5).getAttribute("data-weight");
r.tip5 = cell(5).querySelector("title").textContent;
r.initial = {{ state: fgbpfTimeline.state(), names: names() }};
drag(0, 19);
r.first = {{ state: fgbpfTimeline.state(), names: names(), selected: document.querySelectorAll("#heatmap rect.sel").length }};
drag(35, 49);
r.second = {{ state: fgbpfTimeline.state(), names: names(), range: document.getElementById("range").textContent }};
document.getElementById("whole").click();
var input = document.getElementById("search");
input.value = "sys_read";
input.dispatchEvent(new Event("input", {{ bubbles: true }}));
r.highlighted = Array.from(document.querySelectorAll("#chart g.frame"))
  .filter(function (g) {{ return g.querySelector("rect").getAttribute("fill") === "#e600e6"; }})
  .map(function (g) {{ return g.getAttribute("name"); }});
r.matched = document.getElementById("matched").textContent;
r.hook = fgbpfTimeline.search("phase_");
fgbpfTimeline.search("");
var a = Array.from(document.querySelectorAll("#chart g.frame")).filter(function (g) {{ return g.getAttribute("name") === "phase_a"; }})[0];
a.dispatchEvent(new MouseEvent("click", {{ bubbles: true }}));
r.zoomed = names();
document.getElementById("reset").click();
r.reset = names();
r.hookRange = fgbpfTimeline.select(35, 50);
return r;"##
    );
    let r = in_browser(&page, &probe);
    eprintln!("{r:#}");
    let names = |v: &Value| -> Vec<String> {
        v["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
    };
    let has = |v: &Value, n: &str| names(v).iter().any(|x| x == n);

    // (3) Six columns of ten 100 ms cells; weight exactly where the spans are.
    assert_eq!(r["cells"], 60);
    assert_eq!(r["columns"], 6);
    let expected: Vec<u64> = (0..25).chain(35..60).collect();
    assert_eq!(r["nonzero"], serde_json::json!(expected));
    assert_eq!(r["weight5"], 14, "10 samples and a fifth of the kernel frame's 20");
    assert!(r["tip5"].as_str().unwrap().contains("14 samples"), "{}", r["tip5"]);

    // The whole capture on load, both phases and the pseudo-roots.
    assert_eq!(r["initial"]["state"]["weight"], 25 * 10 + 25 * 10 + 20);
    for n in ["app-1000", "phase_a", "phase_b", "sys_read_[k]"] {
        assert!(has(&r["initial"], n), "{n} in {}", r["initial"]);
    }

    // (1) Seconds 0-2, dragged: phase_a and its kernel frame, no phase_b.
    let first = &r["first"];
    assert_eq!((first["state"]["from"].as_u64(), first["state"]["to"].as_u64()), (Some(0), Some(20)));
    assert_eq!(first["selected"], 20);
    assert_eq!(first["state"]["weight"], 20 * 10 + 20);
    assert!(has(first, "phase_a") && has(first, "sys_read_[k]") && !has(first, "phase_b"), "{first}");

    // (2) Seconds 3.5-5: the opposite.
    let second = &r["second"];
    assert_eq!((second["state"]["from"].as_u64(), second["state"]["to"].as_u64()), (Some(35), Some(50)));
    assert_eq!(second["state"]["weight"], 15 * 10);
    assert!(has(second, "phase_b") && !has(second, "phase_a"), "{second}");
    assert!(second["range"].as_str().unwrap().contains("3.5\u{2013}5 s"), "{}", second["range"]);

    // (4) Search highlights the matching frames, and only them.
    assert_eq!(r["highlighted"], serde_json::json!(["sys_read_[k]"]));
    assert!(r["matched"].as_str().unwrap().starts_with("Matched: 1 frames"), "{}", r["matched"]);
    let mut hook: Vec<&str> = r["hook"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    hook.sort();
    assert_eq!(hook, ["phase_a", "phase_b"]);

    // Click to zoom hides phase_b; reset brings it back.
    let zoomed: Vec<&str> = r["zoomed"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(zoomed.contains(&"phase_a") && !zoomed.contains(&"phase_b"), "{zoomed:?}");
    let reset: Vec<&str> = r["reset"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(reset.contains(&"phase_b"), "{reset:?}");

    // The test hook selects like a drag.
    assert_eq!(r["hookRange"], serde_json::json!({ "from": 35, "to": 50, "weight": 150 }));
}

#[test]
fn a_thread_without_weight_draws_nothing_and_says_so() {
    let page = written("timeline-idle", &profile(HOSTILE));
    let probe = r##"
var select = document.getElementById("threads");
var options = Array.from(select.options).map(function (o) { return [o.value, o.text]; });
select.value = "t:1";
select.dispatchEvent(new Event("change", { bubbles: true }));
var weights = Array.from(document.querySelectorAll("#heatmap rect.cell")).map(function (c) { return +c.getAttribute("data-weight"); });
var empty = document.getElementById("empty");
return { options: options, state: fgbpfTimeline.state(), frames: fgbpfTimeline.frames(),
  empty: empty.hidden ? "" : empty.textContent, chartHidden: document.getElementById("chart").hidden,
  heat: weights.reduce(function (a, b) { return a + b; }, 0),
  images: document.querySelectorAll("img").length };"##;
    let r = in_browser(&page, probe);
    eprintln!("{r:#}");
    assert_eq!(r["state"]["threads"], "t:1");
    assert_eq!(r["state"]["empty"], true);
    assert_eq!(r["frames"], serde_json::json!([]));
    assert_eq!(r["chartHidden"], true);
    assert!(r["empty"].as_str().unwrap().contains("no weight"), "{}", r["empty"]);
    assert_eq!(r["heat"], 0);
    // The hostile thread name is an option's text, not markup.
    assert_eq!(r["images"], 0);
    let texts: Vec<&str> = r["options"].as_array().unwrap().iter().map(|o| o[1].as_str().unwrap()).collect();
    assert!(
        texts.iter().any(|t| t.contains(&format!("{HOSTILE}-1001"))),
        "{texts:?}"
    );
}

/// One thread, one frame, one sample in every slice of `seconds` seconds
/// of `slice_ms` slices.
fn even(slice_ms: u64, seconds: u64) -> Profile {
    let mut p = Profile::new(Unit::Samples);
    p.meta.slice = Some(Duration::from_millis(slice_ms));
    p.meta.duration = Duration::from_secs(seconds);
    let t = p.intern_thread(Thread {
        start: 0,
        group: None,
        pid: 1,
        tid: 1,
        process: "app".into(),
        name: "app".into(),
    });
    let f = p.intern_frame(Frame::new("work", FrameKind::User));
    let slices = (seconds * 1000).div_ceil(slice_ms) as u32;
    p.push(Stack { labels: None,
        thread: Some(t),
        frames: vec![f].into(),
        weight: u64::from(slices),
        spans: vec![Span { first: 0, last: slices - 1, weight: u64::from(slices) }].into(),
    });
    p
}

#[test]
fn slices_that_do_not_make_a_second_still_make_columns() {
    let probe = r##"
var cells = document.querySelectorAll("#heatmap rect.cell");
var columns = new Set(); cells.forEach(function (c) { columns.add(c.getAttribute("data-col")); });
return { cells: cells.length, columns: columns.size, state: fgbpfTimeline.state(),
  about: document.getElementById("map-about").textContent, weight: +cells[cells.length - 1].getAttribute("data-weight") };"##;
    // 250 ms: four rows a second.
    let dir = out_dir("timeline-250ms");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("timeline.html");
    timeline::write(&even(250, 10), &Options::default(), &mut std::fs::File::create(&page).unwrap()).unwrap();
    let r = in_browser(&page, probe);
    assert_eq!((r["cells"].as_u64(), r["columns"].as_u64()), (Some(40), Some(10)), "{r}");
    assert_eq!(r["state"]["rows"], 4);
    assert_eq!(r["weight"], 1);
    assert!(r["about"].as_str().unwrap().starts_with("Each column is 1 s"), "{}", r["about"]);
    // 1500 ms: a column of one slice, 1.5 s wide.
    let dir = out_dir("timeline-1500ms");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("timeline.html");
    timeline::write(&even(1500, 9), &Options::default(), &mut std::fs::File::create(&page).unwrap()).unwrap();
    let r = in_browser(&page, probe);
    assert_eq!((r["cells"].as_u64(), r["columns"].as_u64()), (Some(6), Some(6)), "{r}");
    assert_eq!(r["state"]["rows"], 1);
    assert!(r["about"].as_str().unwrap().starts_with("Each column is 1.5 s"), "{}", r["about"]);
}
