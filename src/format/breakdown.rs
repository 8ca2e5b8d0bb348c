//! The per-thread table of the reports: each thread's (or process's) time,
//! split into on-CPU and the off-CPU states, with the heaviest sites of
//! each — the function that ran, or the wait's reason, the function that
//! blocked and the user's function above it. Computed by
//! [`crate::analysis::threads`].

use std::fmt::Write as _;

use super::folded::Leading;
use crate::analysis::threads::{table, COLUMNS};
use crate::analysis::waits::Sites;
use crate::analysis::{pct, Lens};
use crate::profile::Profile;

/// Which columns a table has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Columns {
    /// On-CPU captures: one column.
    OnCpu,
    /// Off-CPU captures: the states.
    OffCpu,
    /// Wall-clock: both.
    Both,
}

impl Columns {
    fn range(self) -> std::ops::Range<usize> {
        match self {
            Columns::OnCpu => 0..1,
            Columns::OffCpu => 1..4,
            Columns::Both => 0..4,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub leading: Leading,
    pub columns: Columns,
    /// Sites listed under each row, per column.
    pub sites: usize,
    /// Rows listed; the rest are summed in one line.
    pub rows: usize,
    pub lens: Lens,
}

impl Options {
    /// Twenty rows with three sites per column.
    pub fn new(leading: Leading, columns: Columns) -> Self {
        Options {
            leading,
            columns,
            sites: 3,
            rows: 20,
            lens: Lens::default(),
        }
    }
}

/// The table as text, in the profile's unit.
pub fn render(profile: &Profile, opts: &Options) -> String {
    // The sites tell waits apart as the findings do (learnt only when the
    // table lists sites).
    let named = match opts.sites {
        0 => Sites::plain(opts.lens),
        _ => Sites::learn(profile, opts.lens),
    };
    render_with(profile, opts, &named)
}

/// [`render`] with the sites the report learnt from `profile` (with
/// `opts.lens`), so one report learns them once.
pub fn render_with(profile: &Profile, opts: &Options, named: &Sites) -> String {
    let t = table(profile, opts.leading, named, opts.rows, opts.sites);
    let unit = profile.unit.name();
    let mut out = String::new();
    let who = if opts.leading == Leading::Process {
        "process"
    } else {
        "thread"
    };
    let _ = writeln!(out, "\nTime by {who} ({unit})");
    let cols = opts.columns.range();
    let mut header = format!("{:>12}", "total");
    for n in &COLUMNS[cols.clone()] {
        let _ = write!(header, " {:>16}", format!("{n}%"));
    }
    let _ = writeln!(out, "{header}  {who}");
    for row in &t.rows {
        let by_col = row.columns();
        let mut line = format!("{:>12}", row.total);
        for w in &by_col[cols.clone()] {
            let _ = write!(line, " {:>15.1}%", pct(*w, row.total));
        }
        let _ = writeln!(out, "{line}  {}", row.thread);
        for s in row.sites.iter().filter(|s| COLUMNS[cols.clone()].contains(&s.state)) {
            let _ = writeln!(
                out,
                "{:>12} {:>15.1}%  {}: {}",
                "",
                pct(s.weight, row.total),
                s.state,
                s.site
            );
        }
    }
    if t.more > 0 {
        let _ = writeln!(
            out,
            "{:>12}  ({} more {who}{}, {:.1}% of the total; --top N lists more)",
            t.more_weight,
            t.more,
            if t.more == 1 { "" } else { "s" },
            pct(t.more_weight, profile.total())
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Stack, Thread, Unit};

    #[test]
    fn splits_thread_time_by_state() {
        let mut p = Profile::new(Unit::Microseconds);
        let t = p.intern_thread(Thread {
            start: 0,
            group: None,
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
            frames: vec![work].into(),
            weight: 300,
            ..Default::default()
        });
        p.push(Stack {
            thread: Some(t),
            frames: vec![nap, sleeping].into(),
            weight: 700,
            ..Default::default()
        });
        let opts = Options {
            leading: Leading::ProcessAndThread,
            columns: Columns::Both,
            sites: 2,
            rows: 20,
            lens: Lens::default(),
        };
        let text = render(&p, &opts);
        assert!(text.contains("app-1 / worker-2"), "{text}");
        assert!(
            text.contains("1000            30.0%            70.0%"),
            "{text}"
        );
        assert!(text.contains("sleeping: sleeping in nap"), "{text}");
        assert!(text.contains("on-CPU: work"), "{text}");
        let one = render(&p, &Options { rows: 0, ..opts });
        assert!(one.contains("(1 more thread, 100.0% of the total"), "{one}");
    }
}
