//! `fgbpf top` without a terminal: one table per interval, tab-separated
//! (names come sanitized, control characters and so tabs made `?`),
//! under a `#` line that says what it covers, and a blank line after, so
//! that `awk`, `cut` and scripts read it; no escape codes.

use std::io::{self, Write};

use super::{share, Screen};

/// Rows of each table: the heaviest functions by the screen's sort.
pub const ROWS: usize = 30;

/// Writes the screen's function (or wait) table.
pub fn write(screen: &Screen, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "# {} | {}", screen.header(), screen.losses)?;
    writeln!(
        w,
        "%self\t%total\tself_s\ttotal_s\t%self_all\t%total_all\tself_all_s\ttotal_all_s\tfunction"
    )?;
    let shown = screen.lines.iter().filter(|l| l.total_all > 0).take(ROWS);
    for l in shown {
        writeln!(
            w,
            "{:.1}\t{:.1}\t{:.2}\t{:.2}\t{:.1}\t{:.1}\t{:.2}\t{:.2}\t{}",
            share(l.self_now, screen.total_now),
            share(l.total_now, screen.total_now),
            screen.seconds(l.self_now),
            screen.seconds(l.total_now),
            share(l.self_all, screen.total_all),
            share(l.total_all, screen.total_all),
            screen.seconds(l.self_all),
            screen.seconds(l.total_all),
            l.name,
        )?;
    }
    let more = screen.lines.iter().filter(|l| l.total_all > 0).count().saturating_sub(ROWS);
    if more > 0 {
        writeln!(w, "# {more} lighter rows not shown")?;
    }
    writeln!(w)?;
    w.flush()
}
