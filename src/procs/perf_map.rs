//! Perf maps (`/tmp/perf-PID.map`): one `START SIZE NAME` line per piece
//! of JIT code, in hex, appended as the runtime compiles. blazesym reads
//! them too, but only through a live process's /proc entry; fgbpf reads them
//! through a descriptor kept on the process's root, after the process (and
//! its private /tmp) is gone, so it parses them itself.

#[derive(Clone, Debug)]
pub struct PerfMap {
    /// (start, end, name), sorted by start.
    entries: Vec<(u64, u64, String)>,
}

/// How far back a lookup looks for an entry still covering an
/// address past closer starts (code regions nest rarely and shallowly).
const LOOKBACK: usize = 8;

impl PerfMap {
    pub fn parse(text: &[u8]) -> PerfMap {
        let text = String::from_utf8_lossy(text);
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
        let mut entries: Vec<(u64, u64, usize, String)> = text
            .lines()
            .enumerate()
            .filter_map(|(n, line)| {
                let mut parts = line.splitn(3, ' ');
                let start = hex(parts.next()?)?;
                let size = hex(parts.next()?)?;
                let name = parts.next()?.trim();
                (!name.is_empty()).then(|| {
                    (
                        start,
                        start.saturating_add(size.max(1)),
                        n,
                        name.to_string(),
                    )
                })
            })
            .collect();
        // Code moves and address ranges get reused: for one start the
        // line written last describes what is there now.
        entries.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)));
        let mut dedup: Vec<(u64, u64, String)> = Vec::with_capacity(entries.len());
        for (start, end, _, name) in entries {
            match dedup.last_mut() {
                Some(last) if last.0 == start => *last = (start, end, name),
                _ => dedup.push((start, end, name)),
            }
        }
        PerfMap { entries: dedup }
    }

    /// A map of `(start, end, name)` pieces of code that do not overlap
    /// (a runtime's own code map).
    pub fn from_entries(mut entries: Vec<(u64, u64, String)>) -> PerfMap {
        entries.sort_by_key(|e| e.0);
        PerfMap { entries }
    }

    /// The entries that name any of `addrs`, for a process gone.
    pub fn keep_only(mut self, addrs: &[u64]) -> PerfMap {
        let mut wanted: Vec<usize> = addrs.iter().filter_map(|&a| self.index_of(a)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut i = 0;
        self.entries.retain(|_| {
            i += 1;
            wanted.binary_search(&(i - 1)).is_ok()
        });
        self
    }

    pub fn find(&self, addr: u64) -> Option<&str> {
        self.index_of(addr).map(|i| self.entries[i].2.as_str())
    }

    fn index_of(&self, addr: u64) -> Option<usize> {
        let i = self.entries.partition_point(|e| e.0 <= addr);
        (i.saturating_sub(LOOKBACK)..i).rev().find(|&j| addr < self.entries[j].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_last_line_wins_and_sizes_bound() {
        let m = PerfMap::parse(
            b"1000 100 old\n2000 10 JS:*hot /x.js:1\n1000 80 LazyCompile:new\n0x3000 0x20 py::f:/a.py\nbad line\n",
        );
        assert_eq!(m.find(0x1010), Some("LazyCompile:new"));
        assert_eq!(m.find(0x1090), None);
        assert_eq!(m.find(0x200f), Some("JS:*hot /x.js:1"));
        assert_eq!(m.find(0x2010), None);
        assert_eq!(m.find(0x3010), Some("py::f:/a.py"));
        assert_eq!(m.find(0x10), None);
        let kept = m.keep_only(&[0x2005, 0x10]);
        assert_eq!(kept.find(0x2005), Some("JS:*hot /x.js:1"));
        assert_eq!(kept.find(0x1010), None);
        assert_eq!(kept.entries.len(), 1);
    }
}
