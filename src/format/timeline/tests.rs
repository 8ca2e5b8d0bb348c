//! Tests of the page's text: hostile names stay inside the JSON, the caps
//! say what they left out, spans arrive as the profile has them. What the
//! page does in a browser is tested in tests/timeline.rs.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::*;
use crate::profile::{Frame, FrameKind, Span, Stack, Thread, Unit};

const HOSTILE: &str = "</script><img src=x onerror=alert(1)>";

fn page(profile: &Profile, opts: &Options) -> (String, Written) {
    let mut out = Vec::new();
    let w = write(profile, opts, &mut out).unwrap();
    assert_eq!(w.bytes, out.len() as u64);
    (String::from_utf8(out).unwrap(), w)
}

/// The JSON of the `<script type="application/json">` element `id`.
fn embedded(page: &str, id: &str) -> Value {
    let open = format!("<script type=\"application/json\" id=\"{id}\">");
    let at = page.find(&open).unwrap() + open.len();
    let end = at + page[at..].find("</script>").unwrap();
    serde_json::from_str(&page[at..end]).unwrap()
}

fn timed(unit: Unit) -> Profile {
    let mut p = Profile::new(unit);
    p.meta.slice = Some(Duration::from_millis(100));
    p
}

fn thread(p: &mut Profile, tid: u32, name: &str) -> u32 {
    p.intern_thread(Thread {
        start: 0,
        group: None,
        pid: 1,
        tid,
        process: "app".into(),
        name: name.into(),
    })
}

#[test]
fn hostile_names_cannot_leave_the_data() {
    let mut p = timed(Unit::Samples);
    let t = p.intern_thread(Thread {
        start: 0,
        group: None,
        pid: 7,
        tid: 8,
        process: "evil\u{2028}proc&<!--".into(),
        name: HOSTILE.into(),
    });
    let f = p.intern_frame(Frame::new("<b>x</b>\u{2029}&amp;", FrameKind::User));
    p.push(Stack { labels: None,
        thread: Some(t),
        frames: vec![f].into(),
        weight: 5,
        spans: smallvec::smallvec![Span::at(0, 5)],
    });
    let opts = Options {
        title: HOSTILE.into(),
        subtitle: Some("</SCRIPT >".into()),
        ..Options::default()
    };
    let (html, _) = page(&p, &opts);
    // The page's own five scripts end; nothing else does, and no markup
    // from a name is left.
    assert_eq!(html.to_ascii_lowercase().matches("</script").count(), 5);
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("<b>"));
    assert!(!html.contains('\u{2028}') && !html.contains('\u{2029}'));
    assert_eq!(html.matches("<!--").count(), 1, "only the licenses' comment");
    // ... and the names read back as they were.
    let data = embedded(&html, "fgbpf-data");
    let frames: Vec<&str> = data["frames"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    // Named as every output names them (names::frame_text: `;` is `:`).
    assert!(frames.contains(&"<b>x</b>\u{2029}&amp:"), "{frames:?}");
    assert!(frames.contains(&format!("{HOSTILE}-8").as_str()), "{frames:?}");
    assert!(frames.contains(&"evil\u{2028}proc&<!---7"), "{frames:?}");
    let head = embedded(&html, "fgbpf-head");
    assert_eq!(head["title"], HOSTILE);
    assert_eq!(head["subtitle"], "</SCRIPT >");
    // The pseudo-roots are the shared leading frames, in order, then the
    // thread's program frame: its process name alone, made safe as text.
    assert_eq!(data["threads"][0], serde_json::json!([7, 8, 0, 1]));
    assert_eq!(data["programs"], serde_json::json!([2]));
    assert_eq!(frames[2], "evil\u{2028}proc&<!--");
    assert_eq!(data["roots"], "thread");
    assert_eq!(data["stacks"][0][2], serde_json::json!([3]));
}

#[test]
fn escaping_keeps_the_json_and_drops_every_dangerous_byte() {
    let json = serde_json::to_vec(&serde_json::json!({"a": "<>&\u{2028}\u{2029}é"})).unwrap();
    let mut out = Vec::new();
    data::write_escaped(&json, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text, r#"{"a":"\u003c\u003e\u0026\u2028\u2029é"}"#);
    let back: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back["a"], "<>&\u{2028}\u{2029}é");
}

#[test]
fn the_cap_keeps_the_heaviest_and_reports_the_rest() {
    let mut p = timed(Unit::Microseconds);
    let t = thread(&mut p, 1, "main");
    for i in 1..=10u64 {
        let f = p.intern_frame(Frame::new(format!("f{i}"), FrameKind::User));
        p.push(Stack { labels: None,
            thread: Some(t),
            frames: vec![f].into(),
            weight: i * 10,
            spans: smallvec::smallvec![Span { first: 0, last: 3, weight: i * 10 }],
        });
    }
    let opts = Options {
        max_stacks: 3,
        ..Options::default()
    };
    let (html, w) = page(&p, &opts);
    assert_eq!(w.stacks, 3);
    assert_eq!(w.left_out_stacks, 7);
    assert_eq!(w.left_out_weight, (1..=7).map(|i| i * 10).sum::<u64>());
    assert_eq!(w.total_weight, 550);
    let data = embedded(&html, "fgbpf-data");
    let weights: Vec<u64> = data["stacks"].as_array().unwrap().iter().map(|s| s[1].as_u64().unwrap()).collect();
    assert_eq!(weights, vec![100, 90, 80]);
    assert_eq!(data["left_out"]["weight"], 280);
    assert_eq!(data["left_out"]["stacks"], 7);
    // 280 over 4 slices, each stack's share of a slice rounded as
    // Span::within rounds it (10/4 is 3, 30/4 is 8, ...): 72, not 70.
    assert_eq!(data["left_out"]["per_slice"], serde_json::json!([72, 72, 72, 72]));
    // Only the kept stacks' frames are embedded.
    assert_eq!(data["frames"].as_array().unwrap().len(), 3 + 3, "three pseudo-roots and three frames");

    // The byte cap stops early too, and says so.
    let opts = Options {
        max_data_bytes: 1,
        ..Options::default()
    };
    let (_, w) = page(&p, &opts);
    assert_eq!((w.stacks, w.left_out_stacks, w.left_out_weight), (0, 10, 550));
}

#[test]
fn spans_are_embedded_as_the_profile_has_them() {
    let mut p = timed(Unit::Samples);
    p.meta.duration = Duration::from_secs(6);
    let t = thread(&mut p, 1, "main");
    let idle = thread(&mut p, 2, "idle");
    let a = p.intern_frame(Frame::new("a", FrameKind::User));
    let k = p.intern_frame(Frame::new("read", FrameKind::Kernel));
    let spans = vec![Span::at(0, 3), Span { first: 5, last: 9, weight: 11 }, Span::at(40, 1)];
    p.push(Stack { labels: None,
        thread: Some(t),
        frames: vec![a, k].into(),
        weight: 15,
        spans: spans.clone().into(),
    });
    p.push(Stack { labels: None,
        thread: None,
        frames: vec![a].into(),
        weight: 2,
        spans: smallvec::smallvec![Span::at(59, 2)],
    });
    let (html, w) = page(&p, &Options::default());
    assert_eq!(w.slices, 60);
    let data = embedded(&html, "fgbpf-data");
    assert_eq!(data["slice_us"], 100_000);
    assert_eq!(data["rows"], 10);
    assert_eq!(data["slices"], 60);
    assert_eq!(data["unit"], "samples");
    let flat: Vec<u64> = spans
        .iter()
        .flat_map(|s| [u64::from(s.first), u64::from(s.last), s.weight])
        .collect();
    assert_eq!(data["stacks"][0], serde_json::json!([t, 15, [4, 5], flat]));
    assert_eq!(data["stacks"][1], serde_json::json!([-1, 2, [4], [59, 59, 2]]));
    assert_eq!(data["threads"].as_array().unwrap().len(), 2, "the idle thread {idle} is listed");
    let frames = data["frames"].as_array().unwrap();
    // Two threads of one program: three pseudo-roots and `app` once.
    assert_eq!(data["programs"], serde_json::json!([2, 2]));
    assert_eq!(frames[2], "app");
    assert_eq!(frames[5], "read_[k]");
    let colours = data["colours"].as_array().unwrap();
    assert_ne!(colours[4], colours[5], "kernel and user frames differ");
    // The heat map's rule: Span::within of each slice.
    let per = data::spread(spans.iter(), 60);
    for (s, w) in per.iter().enumerate() {
        let direct: u64 = spans.iter().map(|p| p.within(s as u32, s as u32 + 1)).sum();
        assert_eq!(*w, direct, "slice {s}");
    }
}

#[test]
fn rows_are_the_slices_in_a_second() {
    assert_eq!(data::rows(100_000), 10);
    assert_eq!(data::rows(250_000), 4);
    assert_eq!(data::rows(300_000), 3);
    assert_eq!(data::rows(1_500_000), 1);
    assert_eq!(data::rows(0), 1_000_000);
}

#[test]
fn a_profile_without_time_has_no_heat_map() {
    let mut p = Profile::new(Unit::Samples);
    let a = p.intern_frame(Frame::new("a", FrameKind::User));
    p.push(Stack {
        thread: None,
        frames: vec![a].into(),
        weight: 4,
        ..Default::default()
    });
    let (html, w) = page(&p, &Options::default());
    assert_eq!((w.slices, w.stacks), (0, 1));
    let data = embedded(&html, "fgbpf-data");
    assert_eq!(data["slice_us"], Value::Null);
    assert_eq!(data["stacks"][0], serde_json::json!([-1, 4, [0], []]));
}

#[test]
fn embedded_code_can_be_inlined() {
    for (name, code) in [("d3", D3), ("d3-flame-graph", FLAMEGRAPH), ("page.js", SCRIPT), ("page.css", STYLE)] {
        let lower = code.to_ascii_lowercase();
        assert!(!lower.contains("</script") && !lower.contains("</style"), "{name}");
        assert!(!code.contains("<!--"), "{name}");
    }
    for license in [D3_LICENSE, FLAMEGRAPH_LICENSE] {
        assert!(!license.contains("--"), "a license would end the comment");
    }
}

/// The size and time of a system-wide capture's page, for the module's
/// notes: run with `--nocapture` to read them (nothing is asserted on time).
#[test]
fn two_hundred_thousand_stacks() {
    let mut p = timed(Unit::Samples);
    p.meta.duration = Duration::from_secs(60);
    let threads: Vec<u32> = (0..10).map(|i| thread(&mut p, 100 + i, &format!("worker-{i}"))).collect();
    let names: Vec<u32> = (0..2000)
        .map(|i| {
            let kind = if i % 5 == 0 { FrameKind::Kernel } else { FrameKind::User };
            p.intern_frame(Frame::new(format!("crate::module{}::function_{i}", i % 37), kind))
        })
        .collect();
    let mut x: u64 = 0x2545f4914f6cdd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..200_000 {
        let frames: Vec<u32> = (0..12).map(|_| names[(next() % 2000) as usize]).collect();
        let spans: crate::profile::Spans = (0..3).map(|_| Span::at((next() % 600) as u32, 1 + next() % 5)).collect();
        let mut spans = spans;
        crate::profile::time::normalize(&mut spans);
        p.push(Stack { labels: None,
            thread: Some(threads[(next() % 10) as usize]),
            frames: frames.into(),
            weight: spans.iter().map(|s| s.weight).sum(),
            spans,
        });
    }
    let started = Instant::now();
    let mut out = Vec::new();
    let w = write(&p, &Options::default(), &mut out).unwrap();
    let took = started.elapsed();
    eprintln!(
        "timeline of 200,000 stacks: {:.1} MB in {:.3} s ({} stacks kept, {} left out)",
        out.len() as f64 / 1e6,
        took.as_secs_f64(),
        w.stacks,
        w.left_out_stacks
    );
    assert_eq!((w.stacks, w.left_out_stacks), (200_000, 0));
    // To time the page in a browser too.
    if let Some(path) = std::env::var_os("FGBPF_TIMELINE_BENCH") {
        std::fs::write(path, &out).unwrap();
    }
    assert!(out.len() < 60 << 20);
}

/// A wall-clock profile: one thread on the CPU for 60 ms of each slice
/// `on` lists and asleep the rest, so every slice holds 100 ms.
fn wall(on: &[u32]) -> Profile {
    let mut p = timed(Unit::Microseconds);
    p.meta.kind = crate::profile::Kind::Wall;
    let t = thread(&mut p, 1, "main");
    let work = p.intern_frame(Frame::new("work", FrameKind::User));
    let wait = p.intern_frame(Frame::new("wait", FrameKind::User));
    let sleeping = p.intern_frame(Frame::new("[sleeping]", FrameKind::Pseudo));
    for s in 0..10u32 {
        let ran = if on.contains(&s) { 60_000 } else { 0 };
        if ran > 0 {
            p.push(Stack { labels: None, thread: Some(t), frames: vec![work].into(), weight: ran, spans: smallvec::smallvec![Span::at(s, ran)] });
        }
        p.push(Stack {
            labels: None,
            thread: Some(t),
            frames: vec![wait, sleeping].into(),
            weight: 100_000 - ran,
            spans: smallvec::smallvec![Span::at(s, 100_000 - ran)],
        });
    }
    p.coalesce();
    p
}

#[test]
fn a_wall_profile_marks_its_off_cpu_stacks() {
    let p = wall(&[2, 3, 7]);
    let (html, _) = page(&p, &Options::default());
    let data = embedded(&html, "fgbpf-data");
    assert_eq!(data["split"], true);
    let frames = data["frames"].as_array().unwrap();
    // Off-CPU stacks (ending in their state) carry a fifth element, 1;
    // on-CPU stacks have four.
    for s in data["stacks"].as_array().unwrap() {
        let leaf = frames[s[2].as_array().unwrap().last().unwrap().as_u64().unwrap() as usize].as_str().unwrap();
        match leaf {
            "[sleeping]" => assert_eq!(s.get(4), Some(&serde_json::json!(1)), "{s}"),
            "work" => assert_eq!(s.as_array().unwrap().len(), 4, "{s}"),
            other => panic!("leaf {other}"),
        }
    }
    // What the cap leaves out is split the same way. The thread's time
    // asleep is one stack (820 ms) and outweighs its time running (180
    // ms): kept alone, it leaves the running out, which is no off-CPU time.
    let left = |p: &Profile| {
        let (html, _) = page(p, &Options { max_stacks: 1, ..Options::default() });
        let data = embedded(&html, "fgbpf-data");
        let list = |k: &str| -> Vec<u64> {
            data["left_out"][k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect()
        };
        (list("per_slice"), list("per_slice_off"))
    };
    let (all, off) = left(&p);
    let ran: Vec<u64> = (0..10).map(|s| if [2, 3, 7].contains(&s) { 60_000 } else { 0 }).collect();
    assert_eq!((all, off), (ran, vec![0; 10]));
    // Running 60 ms of every slice, the running is kept and the sleep,
    // all of it off-CPU, left out.
    let (all, off) = left(&wall(&(0..10).collect::<Vec<_>>()));
    assert_eq!((all, off), (vec![40_000; 10], vec![40_000; 10]));
    // Other kinds of profile are not split.
    let mut other = wall(&[1]);
    other.meta.kind = crate::profile::Kind::OffCpu;
    let (html, _) = page(&other, &Options::default());
    let data = embedded(&html, "fgbpf-data");
    assert_eq!(data["split"], false);
    assert!(data["stacks"].as_array().unwrap().iter().all(|s| s.as_array().unwrap().len() == 4));
}
