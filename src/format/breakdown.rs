//! Where each thread's time went: on-CPU versus each off-CPU state, with
//! the heaviest frames of each. Used by the off-CPU and wall-clock reports.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::folded::{leading_frames, sanitize, Leading};
use crate::profile::analysis::{category, pct};

use crate::profile::{Profile, Stack};

/// The frame that names what a stack was doing: its leaf, or for an
/// off-CPU stack the frame below the state.
fn telling_frame(profile: &Profile, stack: &Stack, cat: usize) -> Option<String> {
    let idx = if cat == 0 {
        stack.frames.len().checked_sub(1)?
    } else {
        stack.frames.len().checked_sub(2)?
    };
    let f = profile.frame(stack.frames[idx]);
    Some(format!("{}{}", sanitize(&f.name), f.kind.suffix()))
}

#[derive(Default)]
struct Row {
    by_cat: [u64; 4],
    frames: [HashMap<String, u64>; 4],
}

/// A table of time per thread (or per process), in the profile's unit,
/// split into on-CPU and the off-CPU states, with each row's top frames.
pub fn render(profile: &Profile, leading: Leading, with_on_cpu: bool, top_frames: usize) -> String {
    let mut rows: HashMap<String, Row> = HashMap::new();
    for s in profile.stacks() {
        let Some(t) = s.thread else { continue };
        let name = leading_frames(profile.thread(t), leading).join(" / ");
        let cat = category(profile, s);
        let row = rows.entry(name).or_default();
        row.by_cat[cat] += s.weight;
        if let Some(f) = telling_frame(profile, s, cat) {
            *row.frames[cat].entry(f).or_default() += s.weight;
        }
    }
    let mut rows: Vec<(String, Row)> = rows.into_iter().collect();
    rows.sort_by(|a, b| {
        b.1.by_cat
            .iter()
            .sum::<u64>()
            .cmp(&a.1.by_cat.iter().sum())
            .then(a.0.cmp(&b.0))
    });

    let unit = profile.unit.name();
    let mut out = String::new();
    let who = if leading == Leading::Process {
        "process"
    } else {
        "thread"
    };
    let _ = writeln!(out, "\nTime by {who} ({unit})");
    let first = if with_on_cpu { 0 } else { 1 };
    let names = ["on-CPU", "sleeping", "uninterruptible", "runqueue"];
    let mut header = format!("{:>12}", "total");
    for n in &names[first..] {
        let _ = write!(header, " {:>16}", format!("{n}%"));
    }
    let _ = writeln!(out, "{header}  {who}");
    for (name, row) in &rows {
        let total: u64 = row.by_cat.iter().sum();
        let mut line = format!("{total:>12}");
        for w in &row.by_cat[first..] {
            let _ = write!(line, " {:>15.1}%", pct(*w, total));
        }
        let _ = writeln!(out, "{line}  {name}");
        for (cat, label) in names.iter().enumerate().skip(first) {
            let mut top: Vec<(&String, &u64)> = row.frames[cat].iter().collect();
            top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (f, w) in top.into_iter().take(top_frames) {
                let _ = writeln!(out, "{:>12} {:>15.1}%  {label}: {f}", "", pct(*w, total));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Thread, Unit};

    #[test]
    fn splits_thread_time_by_state() {
        let mut p = Profile::new(Unit::Microseconds);
        let t = p.intern_thread(Thread {
            pid: 1,
            tid: 2,
            process: "app".into(),
            name: "worker".into(),
        });
        let work = p.intern_frame(Frame::new("work", FrameKind::User));
        let nap = p.intern_frame(Frame::new("nap", FrameKind::User));
        let sleeping = p.intern_frame(Frame::new("[sleeping]", FrameKind::Pseudo));
        p.push(Stack {
            thread: Some(t),
            frames: vec![work],
            weight: 300,
        });
        p.push(Stack {
            thread: Some(t),
            frames: vec![nap, sleeping],
            weight: 700,
        });
        let text = render(&p, Leading::ProcessAndThread, true, 2);
        assert!(text.contains("app-1 / worker-2"), "{text}");
        assert!(
            text.contains("1000            30.0%            70.0%"),
            "{text}"
        );
        assert!(text.contains("sleeping: nap"), "{text}");
        assert!(text.contains("on-CPU: work"), "{text}");
    }
}
