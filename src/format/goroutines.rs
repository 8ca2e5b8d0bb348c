//! The report's goroutine section: for each Go process, its goroutines at
//! the capture's last read of them, counted by state and wait reason, and
//! their most common stacks with how many goroutines had each, as Go's own
//! goroutine profile (`/debug/pprof/goroutine?debug=1`) lists them; the
//! first thing to read when goroutines pile up. Each snapshot is a
//! profile whose weights are goroutine counts and whose stacks end in the
//! state's pseudo-frame.

use std::collections::BTreeMap;

use crate::profile::names::printable;
use crate::profile::{FrameKind, Profile};

/// Stacks listed per process at most.
const TOP: usize = 20;

/// One Go process's goroutines as last read.
pub struct Snapshot<'a> {
    pub process: &'a str,
    pub pid: u32,
    pub version: &'a str,
    pub reads: u64,
    pub at_secs: f64,
    pub not_read: usize,
    /// Counts by stack (thread 0 of the process), stacks ending in the
    /// state's pseudo-frame.
    pub profile: &'a Profile,
}

pub fn render(snapshots: &[Snapshot<'_>]) -> String {
    snapshots.iter().map(render_one).collect()
}

fn render_one(s: &Snapshot<'_>) -> String {
    let p = s.profile;
    let total: u64 = p.total();
    let mut out = format!(
        "\nGoroutines of {} (pid {}): {total} at the last read ({:.1} s into the capture; {}, read {} times)\n",
        printable(s.process),
        s.pid,
        s.at_secs,
        printable(s.version),
        s.reads
    );
    if s.not_read > 0 {
        out.push_str(&format!("  {} more could not be read (freed or moved while read)\n", s.not_read));
    }
    // (stack text without the state, state) → count.
    let mut by_state: BTreeMap<&str, u64> = BTreeMap::new();
    let mut stacks: Vec<(u64, String)> = Vec::new();
    for st in p.stacks() {
        let frames: Vec<&crate::profile::Frame> = st.frames.iter().map(|&f| p.frame(f)).collect();
        let state = frames
            .last()
            .filter(|f| f.kind == FrameKind::Pseudo)
            .map_or("[unknown]", |f| f.name.as_str());
        *by_state.entry(state.trim_start_matches('[').trim_end_matches(']')).or_default() += st.weight;
        let body: Vec<String> = frames[..frames.len().saturating_sub(1)]
            .iter()
            .map(|f| printable(&f.name))
            .collect();
        stacks.push((st.weight, format!("{} {state}", body.join(";"))));
    }
    let mut states: Vec<(&str, u64)> = by_state.into_iter().collect();
    states.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let states: Vec<String> = states.iter().map(|(s, n)| format!("{n} {s}")).collect();
    out.push_str(&format!("  by state: {}\n", states.join(", ")));
    stacks.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    out.push_str("  top stacks by count:\n");
    let width = stacks.first().map_or(1, |(n, _)| n.to_string().len());
    for (n, text) in stacks.iter().take(TOP) {
        out.push_str(&format!("  {n:>width$}  {text}\n"));
    }
    if stacks.len() > TOP {
        out.push_str(&format!("  ({} more stacks in goroutines.folded)\n", stacks.len() - TOP));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, Stack, Thread, Unit};

    #[test]
    fn counts_by_state_and_top_stacks_read_as_go_lists_them() {
        let mut p = Profile::new(Unit::Samples);
        let t = p.intern_thread(Thread {
            start: 0,
            pid: 7,
            tid: 0,
            process: "app".into(),
            name: "goroutines".into(),
            group: None,
        });
        let push = |p: &mut Profile, names: &[&str], state: &str, n: u64| {
            let mut frames: Vec<_> = names.iter().map(|f| p.intern_frame(Frame::new(*f, FrameKind::User))).collect();
            frames.push(p.intern_frame(Frame::new(state, FrameKind::Pseudo)));
            p.push(Stack { labels: None,
                thread: Some(t),
                frames: frames.into(),
                weight: n,
                spans: Default::default(),
            });
        };
        push(&mut p, &["main.main", "main.waiter", "runtime.gopark"], "[chan receive]", 4);
        push(&mut p, &["main.napper", "time.Sleep"], "[sleep]", 2);
        push(&mut p, &["main.spinner"], "[running]", 1);
        let s = Snapshot {
            process: "app",
            pid: 7,
            version: "go1.19.8",
            reads: 30,
            at_secs: 3.0,
            not_read: 0,
            profile: &p,
        };
        let text = render(&[s]);
        assert!(text.contains("Goroutines of app (pid 7): 7 at the last read (3.0 s into the capture; go1.19.8, read 30 times)"), "{text}");
        assert!(text.contains("  by state: 4 chan receive, 2 sleep, 1 running\n"), "{text}");
        assert!(text.contains("  4  main.main;main.waiter;runtime.gopark [chan receive]\n"), "{text}");
        assert!(text.contains("  1  main.spinner [running]\n"), "{text}");
    }
}
