//! `fgbpf flight --max-memory`: the recorder's memory ceiling. The kept
//! past grows with the host's churn (every new process brings its own
//! stacks), and a dump needs memory on top of it to name and write it; when
//! the two together would pass the ceiling, the oldest of the past is
//! dropped before `--keep` is up. What is dropped is said: on the log when
//! it starts and ends, and in every dump that holds less than `--keep`.

use std::time::Duration;

/// What a dump needs on top of the kept past, before any dump taught
/// better: a fixed part (symbol tables read again, the views' own
/// structures) and a part per byte kept. Measured on the soak's load with
/// a 60-s window of 16 MB: 48 and 50 MB (0.6 per byte past the fixed
/// part); twice that is planned for.
const DUMP_FIXED: u64 = 40 << 20;
const DUMP_PER_BYTE: f64 = 2.0;

/// The share of the ceiling planned for: what a dump needs varies by a
/// few MB around what was learned.
const PLAN_PCT: u64 = 95;

/// The window is never cut below this: a dump still holds its last
/// seconds, and the log says the ceiling is too low.
pub(super) const MIN_WINDOW: Duration = Duration::from_secs(10);

/// The ceiling, what dumps taught of their needs, and what it dropped.
pub(super) struct Ceiling {
    max: u64,
    per_byte: f64,
    /// The capture's time the ceiling forgot up to, while it is later than
    /// what `--keep` forgets.
    pub from: Option<Duration>,
    /// Times the window was cut, the shortest it was cut to, and whether
    /// the log was told that it is short.
    cuts: u64,
    shortest: Option<Duration>,
    said: bool,
    said_floor: bool,
}

impl Ceiling {
    pub fn new(max_mb: u64) -> Self {
        Ceiling {
            max: max_mb << 20,
            per_byte: DUMP_PER_BYTE,
            from: None,
            cuts: 0,
            shortest: None,
            said: false,
            said_floor: false,
        }
    }

    /// After forgetting what `--keep` lets go: with `resident` bytes of
    /// which `held` are the kept past (`start` to `through`, capture's
    /// time), where the window must start for the ceiling to hold, when
    /// later than `start`. The window is taken as filled evenly.
    pub fn cut(&mut self, resident: u64, held: u64, start: Duration, through: Duration) -> Option<Duration> {
        let at = cut_at(self.max / 100 * PLAN_PCT, resident, held, self.per_byte, start, through)?;
        self.cuts += 1;
        let window = through.saturating_sub(at);
        self.shortest = Some(self.shortest.map_or(window, |s| s.min(window)));
        self.from = Some(at);
        Some(at)
    }

    /// A dump held `held` bytes from `before` resident and peaked at
    /// `peak`: what it needed teaches what the next will.
    pub fn learn(&mut self, before: u64, peak: u64, held: u64) {
        let needed = peak.saturating_sub(before).saturating_sub(DUMP_FIXED);
        // Below a few MB kept, the fixed part is all there is to learn.
        if held >= 4 << 20 {
            self.per_byte = self.per_byte.max(needed as f64 / held as f64);
        }
    }

    /// Whether the kept window is cut now (later than `--keep`'s start).
    pub fn cutting(&self, keep_start: Duration) -> bool {
        self.from.is_some_and(|f| f > keep_start)
    }

    /// What the log says once when the window starts being cut, once when
    /// it is whole again, and once if the ceiling leaves only the floor.
    pub fn news(&mut self, keep: Duration, window: Duration, keep_start: Duration) -> Option<String> {
        let mb = self.max >> 20;
        let cutting = self.cutting(keep_start);
        if cutting && window <= MIN_WINDOW && !self.said_floor {
            (self.said, self.said_floor) = (true, true);
            return Some(format!(
                "memory: even the last {:.0} s leave fgbpf above --max-memory {mb} MB; raise it",
                window.as_secs_f64()
            ));
        }
        match (cutting, self.said) {
            (true, false) => {
                self.said = true;
                Some(format!(
                    "memory: keeping the last {:.0} s, not {:.0} s, to stay under --max-memory {mb} MB \
                     (this host's stacks come faster than {:.0} s of them fit); dumps say so",
                    window.as_secs_f64(),
                    keep.as_secs_f64(),
                    keep.as_secs_f64()
                ))
            }
            (false, true) => {
                self.said = false;
                Some(format!("memory: the whole --keep {:.0} s is kept again", keep.as_secs_f64()))
            }
            _ => None,
        }
    }

    /// What a dump of `window` (shorter than `keep`) says of the ceiling.
    pub fn in_dump(&self, keep: Duration, window: Duration) -> String {
        format!(
            "this dump holds the last {:.0} s, not --keep {:.0} s: fgbpf's memory ceiling \
             (--max-memory {} MB, a dump's own needs included) dropped the older past; \
             it cut the window {} times so far, to {:.0} s at the shortest",
            window.as_secs_f64(),
            keep.as_secs_f64(),
            self.max >> 20,
            self.cuts,
            self.shortest.unwrap_or(window).as_secs_f64()
        )
    }

    /// What the recording's end says of the ceiling, when it cut.
    pub fn summary(&self) -> Option<String> {
        (self.cuts > 0).then(|| {
            format!(
                "memory: the ceiling (--max-memory {} MB) cut the kept window {} times, to {:.0} s at the shortest",
                self.max >> 20,
                self.cuts,
                self.shortest.unwrap_or_default().as_secs_f64()
            )
        })
    }
}

/// Where the window `start..through` must start for `resident` bytes, of
/// which `held` are the window's, and what a dump needs on top (a fixed
/// part and `per_byte` of each byte held) to stay under `max`; `None` when
/// it fits or is at [`MIN_WINDOW`] already.
fn cut_at(max: u64, resident: u64, held: u64, per_byte: f64, start: Duration, through: Duration) -> Option<Duration> {
    let total = resident.saturating_add(DUMP_FIXED).saturating_add((held as f64 * per_byte) as u64);
    if total <= max || held == 0 {
        return None;
    }
    // Each byte of the window dropped frees itself and a dump's part of
    // it.
    let drop = ((total - max) as f64 / (1.0 + per_byte) / held as f64).min(1.0);
    let window = through.saturating_sub(start);
    let latest = through.saturating_sub(MIN_WINDOW);
    let at = (start + window.mul_f64(drop)).min(latest);
    (at > start).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;
    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_window_that_fits_is_left_whole() {
        assert_eq!(cut_at(200 * MB, 100 * MB, 20 * MB, DUMP_PER_BYTE, S(0), S(600)), None);
    }

    #[test]
    fn the_oldest_part_goes_in_proportion() {
        // 100 MB resident of which 40 kept, a dump needs 40 + 2.5 x 40 = 140:
        // 40 MB over; each kept MB dropped frees 3.5 MB: about 11.4 MB of
        // the 40, the oldest 28.6% of the 600 s.
        let at = cut_at(200 * MB, 100 * MB, 40 * MB, 2.5, S(0), S(600)).unwrap();
        assert!((at.as_secs_f64() - 171.4).abs() < 0.5, "{at:?}");
    }

    #[test]
    fn never_below_the_floor() {
        let at = cut_at(64 * MB, 100 * MB, 40 * MB, DUMP_PER_BYTE, S(100), S(700)).unwrap();
        assert_eq!(at, S(690));
        assert_eq!(cut_at(64 * MB, 100 * MB, 40 * MB, DUMP_PER_BYTE, S(690), S(700)), None);
    }

    #[test]
    fn the_log_is_told_once_of_each_change() {
        let mut c = Ceiling::new(200);
        let keep = S(600);
        assert_eq!(c.news(keep, S(300), S(0)), None, "not cut");
        c.from = Some(S(500));
        let cut = c.news(keep, S(100), S(0)).unwrap();
        assert!(cut.starts_with("memory: keeping the last 100 s, not 600 s"), "{cut}");
        assert_eq!(c.news(keep, S(90), S(0)), None, "said already");
        let floor = c.news(keep, S(10), S(0)).unwrap();
        assert!(floor.starts_with("memory: even the last 10 s"), "{floor}");
        assert_eq!(c.news(keep, S(10), S(0)), None, "said already");
        let whole = c.news(keep, S(600), S(501)).unwrap();
        assert_eq!(whole, "memory: the whole --keep 600 s is kept again");
    }

    #[test]
    fn dumps_teach_more_not_less() {
        let mut c = Ceiling::new(200);
        c.learn(100 * MB, 150 * MB, 40 * MB);
        assert_eq!(c.per_byte, DUMP_PER_BYTE);
        c.learn(100 * MB, 300 * MB, 40 * MB);
        assert_eq!(c.per_byte, 4.0);
    }
}
