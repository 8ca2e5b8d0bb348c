//! `fgbpf top`'s screens: [`Screen`] holds what one refresh shows, as
//! [`crate::analysis::top`] computed it and the keys chose it;
//! [`tui`] draws it on a terminal, [`plain`] writes it as one text table
//! per interval when stdout is not a terminal.

pub mod plain;
pub mod tui;

use crate::analysis::top::{Line, Node, Side, Sort, Task};
use crate::profile::Unit;

/// Which table the terminal shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Functions,
    Tasks,
    Flame,
}

/// What one refresh shows.
pub struct Screen<'a> {
    /// What is profiled, e.g. "pid plain (1234)".
    pub target: &'a str,
    pub side: Side,
    pub mode: Mode,
    pub sort: Sort,
    /// The capture's time at the refresh, and the interval before it.
    pub elapsed_s: f64,
    pub interval_s: f64,
    pub paused: bool,
    /// The process or thread narrowed to, said as "thread 1235 (worker)".
    pub narrowed: Option<String>,
    /// The shown side's unit, and the sampling rate for on-CPU time.
    pub unit: Unit,
    pub frequency: u64,
    /// The shown side's weight in the interval and since the start.
    pub total_now: u64,
    pub total_all: u64,
    pub lines: &'a [Line],
    pub tasks: &'a [Task],
    /// The highlighted row of the table shown.
    pub selected: usize,
    pub flame: &'a Node,
    /// Child indexes from the flame's root to the frame zoomed into, and
    /// to the frame highlighted (which starts with `zoom`).
    pub zoom: &'a [usize],
    pub highlighted: &'a [usize],
    /// What could not be recorded, in one line ("none lost" when so).
    pub losses: String,
    /// The last message: a capture written, a key refused.
    pub status: &'a str,
}

impl Screen<'_> {
    /// A weight of the shown side as seconds.
    pub fn seconds(&self, weight: u64) -> f64 {
        match self.unit {
            Unit::Samples => weight as f64 / self.frequency.max(1) as f64,
            Unit::Microseconds => weight as f64 / 1e6,
        }
    }

    fn side_name(&self) -> &'static str {
        match self.side {
            Side::OnCpu => "on-CPU",
            Side::OffCpu => "off-CPU",
        }
    }

    /// The line above every table: paused or not, the narrowing, the
    /// side, how much, and (last, as the least needed in 80 columns) what
    /// is profiled.
    pub fn header(&self) -> String {
        let amount = |w: u64| match self.unit {
            Unit::Samples => format!("{w} samples"),
            Unit::Microseconds => format!("{:.2} thread-s", w as f64 / 1e6),
        };
        let mut parts = Vec::new();
        if self.paused {
            parts.push("PAUSED".to_string());
        }
        if let Some(n) = &self.narrowed {
            parts.push(format!("{n} only"));
        }
        parts.push(self.side_name().to_string());
        parts.push(format!("{:.0} s", self.elapsed_s));
        parts.push(format!("last {:.0} s: {}", self.interval_s, amount(self.total_now)));
        parts.push(format!("since start: {}", amount(self.total_all)));
        // Process names in it are the target's: one line, whatever they hold.
        parts.push(crate::profile::names::sanitize(self.target));
        format!("fgbpf top: {}", parts.join(" | "))
    }
}

/// `part` of `total` in percent.
pub fn share(part: u64, total: u64) -> f64 {
    crate::analysis::pct(part, total)
}
