//! `top`'s rows against hand-built profiles with known answers.

use std::time::Duration;

use super::*;
use crate::profile::time::Span;
use crate::profile::{Frame, FrameKind, Stack, Thread, Unit};

/// Two threads of process 10: tid 11 runs main;a (3 in slice 0, 1 in
/// slice 5), tid 12 runs main;b;a (2 in slice 5) and sleeps in main;nap.
fn sample() -> Profile {
    let mut p = Profile::new(Unit::Samples);
    p.meta.slice = Some(Duration::from_millis(100));
    let t = |p: &mut Profile, tid, name: &str| {
        p.intern_thread(Thread {
            start: 0,
            pid: 10,
            tid,
            process: "srv".into(),
            name: name.into(),
            group: None,
        })
    };
    let (t11, t12) = (t(&mut p, 11, "main\u{1b}"), t(&mut p, 12, "worker"));
    let f = |p: &mut Profile, n: &str, k| p.intern_frame(Frame::new(n, k));
    let main = f(&mut p, "main", FrameKind::User);
    let a = f(&mut p, "a", FrameKind::User);
    let b = f(&mut p, "b", FrameKind::User);
    let nap = f(&mut p, "nanosleep", FrameKind::User);
    let sched = f(&mut p, "do_nanosleep", FrameKind::Kernel);
    let sleeping = f(&mut p, "[sleeping]", FrameKind::Pseudo);
    let stack = |thread, frames: Vec<u32>, spans: Vec<Span>| Stack { labels: None,
        thread: Some(thread),
        frames: frames.into(),
        weight: spans.iter().map(|s| s.weight).sum(),
        spans: spans.into(),
    };
    p.push(stack(t11, vec![main, a], vec![Span::at(0, 3), Span::at(5, 1)]));
    p.push(stack(t12, vec![main, b, a], vec![Span::at(5, 2)]));
    p.push(stack(t12, vec![main, nap, sched, sleeping], vec![Span::at(5, 7)]));
    p
}

fn line<'a>(lines: &'a [Line], name: &str) -> &'a Line {
    lines.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("no {name} in {lines:?}"))
}

#[test]
fn functions_have_self_and_total_now_and_since_start() {
    let all = sample();
    let mut now = all.clone();
    now.keep_slices(5, 10);
    let lines = functions(&now, &all, Sort::SelfNow);
    let a = line(&lines, "a");
    assert_eq!((a.self_now, a.total_now, a.self_all, a.total_all), (3, 3, 6, 6));
    let b = line(&lines, "b");
    assert_eq!((b.self_now, b.total_now, b.self_all, b.total_all), (0, 2, 0, 2));
    let main = line(&lines, "main");
    assert_eq!((main.total_now, main.total_all), (10, 13));
    // Heaviest self first in the interval; kernel frames marked as in
    // folded files.
    let first: Vec<&str> = lines.iter().take(2).map(|l| l.name.as_str()).collect();
    assert_eq!(first, ["do_nanosleep_[k]", "a"]);
}

#[test]
fn sorts_each_column_heaviest_first_ties_by_name() {
    let mut lines = vec![
        Line { name: "x".into(), self_now: 1, total_now: 5, self_all: 9, total_all: 9 },
        Line { name: "y".into(), self_now: 2, total_now: 2, self_all: 1, total_all: 10 },
        Line { name: "w".into(), self_now: 2, total_now: 2, self_all: 1, total_all: 10 },
    ];
    sort_lines(&mut lines, Sort::SelfNow);
    assert_eq!(lines.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["w", "y", "x"]);
    sort_lines(&mut lines, Sort::TotalNow);
    assert_eq!(lines[0].name, "x");
    sort_lines(&mut lines, Sort::SelfAll);
    assert_eq!(lines[0].name, "x");
    sort_lines(&mut lines, Sort::TotalAll);
    assert_eq!(lines.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["w", "y", "x"]);
}

#[test]
fn waits_are_named_by_site_and_state() {
    let all = sample();
    let lines = waits(&all, &all, Sort::SelfAll);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].name, "main > nanosleep: sleep [S]");
    assert_eq!((lines[0].self_all, lines[0].total_all), (7, 7));
}

#[test]
fn tasks_list_each_process_then_its_threads_with_safe_names() {
    let all = sample();
    let listed = tasks(&all, &all, None);
    let rows: Vec<(u32, Option<u32>, &str, u64)> = listed.iter().map(|t| (t.pid, t.tid, t.name.as_str(), t.all)).collect();
    assert_eq!(rows, [(10, None, "srv", 13), (10, Some(12), "worker", 9), (10, Some(11), "main?", 4)]);
    assert_eq!(listed[1].narrow(), Narrow::Thread(12));
    assert_eq!(listed[0].narrow(), Narrow::Process(10));
    // A thread seen on the other side only is listed, with nothing here.
    let mut other = Profile::new(Unit::Samples);
    let t = other.intern_thread(Thread { pid: 10, start: 0, tid: 13, process: "srv".into(), name: "sleeper".into(), group: None });
    let f = other.intern_frame(Frame::new("nap", FrameKind::User));
    other.push(Stack { thread: Some(t), frames: [f].into(), weight: 500, ..Default::default() });
    let rows: Vec<(Option<u32>, u64)> = tasks(&all, &all, Some(&other)).iter().map(|t| (t.tid, t.all)).collect();
    assert_eq!(rows, [(None, 13), (Some(12), 9), (Some(11), 4), (Some(13), 0)]);
}

#[test]
fn narrowing_keeps_one_thread_or_process() {
    let mut p = sample();
    Narrow::Thread(11).apply(&mut p);
    assert_eq!(p.total(), 4);
    let mut p = sample();
    Narrow::Process(99).apply(&mut p);
    assert_eq!(p.total(), 0);
    let mut p = sample();
    Narrow::All.apply(&mut p);
    assert_eq!(p.total(), 13);
}

#[test]
fn flame_tree_sums_children_under_each_process() {
    let tree = flame(&sample());
    assert_eq!(tree.weight, 13);
    let srv = &tree.children[0];
    assert_eq!((srv.name.as_str(), srv.weight), ("srv-10", 13));
    let main = &srv.children[0];
    assert_eq!(main.weight, 13);
    // nanosleep (7) before a (4) before b (2).
    let kids: Vec<(&str, u64)> = main.children.iter().map(|c| (c.name.as_str(), c.weight)).collect();
    assert_eq!(kids, [("nanosleep", 7), ("a", 4), ("b", 2)]);
    assert_eq!(tree.at(&[0, 0, 2, 0]).map(|n| n.name.as_str()), Some("a"));
    assert!(tree.at(&[0, 5]).is_none());
}
