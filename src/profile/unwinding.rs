//! How a capture's user stacks were walked: with unwind tables, with frame
//! pointers, and why walks stopped short. Kept with the profile so that the
//! summary and the report can say how far its stacks can be trusted, and
//! what to do about the rest.

/// How one user stack was walked (enum fg_walk of src/bpf/fgbpf.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Walk {
    /// Whole, with tables.
    Tables,
    /// Whole, with tables and frame pointers.
    Mixed,
    /// The kernel's frame-pointer walk: the process had no tables yet.
    FramePointers,
    /// Cut at the depth limit.
    Depth,
    /// Cut by a stack read that failed.
    Fault,
    /// Cut at a rule the walker does not follow.
    Unsupported,
    /// Cut at code with neither rows nor a frame pointer.
    Lost,
    /// Cut at code its process's tables held no row for at the walk, but
    /// do by their end: the binary's table was placed after (never from
    /// the BPF side: user space tells it from [`Walk::Lost`]).
    Late,
}

impl Walk {
    /// From the BPF side's number; `None` when no user stack was walked.
    pub fn from_raw(raw: u32) -> Option<Walk> {
        Some(match raw {
            1 => Walk::Tables,
            2 => Walk::Mixed,
            3 => Walk::FramePointers,
            4 => Walk::Depth,
            5 => Walk::Fault,
            6 => Walk::Unsupported,
            7 => Walk::Lost,
            _ => return None,
        })
    }

    /// Whether the stack was cut short of its root.
    pub fn is_cut(self) -> bool {
        matches!(self, Walk::Depth | Walk::Fault | Walk::Unsupported | Walk::Lost | Walk::Late)
    }
}

/// One process's stacks by how they were walked, weighted like the
/// profile (samples or microseconds).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessWalks {
    pub pid: u32,
    pub process: String,
    /// All its weight with a user stack.
    pub total: u64,
    /// Weight walked by frame pointers only (no tables yet).
    pub frame_pointers: u64,
    /// Weight cut short, by the heaviest reason first.
    pub cut: Vec<(Walk, u64)>,
    /// Where the walks cut for want of a row and a frame pointer stopped
    /// (where [`by_process`]'s `place_of` put their last frame), by weight,
    /// for [`Walk::Lost`] and [`Walk::Late`] apart.
    pub lost_at: Vec<((Walk, String), u64)>,
}

/// Counts of user stacks by how they were walked, and what the tables
/// covered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unwinding {
    /// Walked with tables to the outermost frame.
    pub tables: u64,
    /// Walked to the end with tables, and frame pointers where code had no
    /// rows (JIT code, binaries without .eh_frame).
    pub mixed: u64,
    /// Processes without tables yet: the kernel's frame-pointer walk.
    pub frame_pointers: u64,
    /// Cut at the depth limit.
    pub depth: u64,
    /// Cut by a stack read that failed (memory not resident).
    pub fault: u64,
    /// Cut at a rule the walker does not follow (e.g. signal frames).
    pub unsupported: u64,
    /// Cut at code with neither rows nor a usable frame pointer.
    pub lost: u64,
    /// Whether tables were in use at all (`--max-unwind-rows 0` turns them off).
    pub enabled: bool,
    /// Why the kernel refused the table walker, when it did.
    pub refused: Option<String>,
    /// What the runtimes say of their walkers the kernel refused (a
    /// sentence, [`crate::runtimes`]'s), when it refused any.
    pub walkers_refused: Option<String>,
    /// The runtimes' walkers, loaded once sampling had begun: what was
    /// recorded before they joined.
    pub lean: Option<Lean>,
    /// Binaries with tables, rows used and available.
    pub binaries: usize,
    pub rows: u64,
    pub capacity: u64,
    /// Milliseconds spent compiling tables.
    pub build_ms: u64,
    /// Binaries walked by frame pointers only, with why.
    pub without: Vec<(String, String)>,
    /// Processes with stacks cut short or walked by frame pointers only,
    /// the heaviest such weight first.
    pub processes: Vec<ProcessWalks>,
    /// Executable mappings beyond what the walker holds per process.
    pub mappings_dropped: u64,
    /// What the runtimes' walkers read and could not (src/runtimes/).
    pub runtimes: RuntimeWalks,
}

/// What the runtimes' walkers read and could not, as each runtime says it
/// (src/runtimes/).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeWalks {
    /// Processes whose runtime frames were read, with their runtime as
    /// OpenTelemetry names it (`cpython`, `jvm`, `v8js`…).
    pub processes: Vec<(u32, &'static str)>,
    /// Lines for the summary and the report, each a complete sentence.
    pub lines: Vec<String>,
}

/// A staged start: the runtimes' walkers joined `after_ms` after sampling
/// began; `samples` of `all_samples` (and `switches` of `all_switches`
/// switch-outs) were recorded before, with native frames only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lean {
    pub after_ms: u64,
    pub samples: u64,
    pub all_samples: u64,
    pub switches: u64,
    pub all_switches: u64,
}

impl Lean {
    /// The summary's sentence, when the capture had runtime frames to read
    /// and something was recorded before the walkers joined.
    fn line(&self) -> Option<String> {
        let share = |n: u64, of: u64| n as f64 * 100.0 / of.max(1) as f64;
        let mut parts = Vec::new();
        if self.samples > 0 {
            parts.push(format!("{:.1}% of samples ({})", share(self.samples, self.all_samples), self.samples));
        }
        if self.switches > 0 {
            parts.push(format!("{:.1}% of switch-outs ({})", share(self.switches, self.all_switches), self.switches));
        }
        (!parts.is_empty()).then(|| {
            format!(
                "runtime frames: their walkers joined {} ms after the capture began (loaded second, so as not to delay it); {} before then show the runtimes' native frames only",
                self.after_ms,
                parts.join(" and ")
            )
        })
    }
}

/// Binaries without a table listed by [`Unwinding::lines`].
const LISTED_BINARIES: usize = 10;

/// Processes listed by [`Unwinding::lines`].
const LISTED_PROCESSES: usize = 5;

fn why(walk: Walk) -> &'static str {
    match walk {
        Walk::Depth => "at the 127-frame limit",
        Walk::Fault => "by a read of the stack that failed (a page not in memory, or not mapped)",
        Walk::Unsupported => {
            "at an unwind rule the walker does not follow (a CFA computed by a DWARF expression or from a register other than rsp and rbp, as gcc's stack-realigning prologues write)"
        }
        Walk::Lost => "at code with neither an unwind row nor a frame pointer",
        Walk::Late => "at code whose unwind table was placed after the walk (the tables were still being built)",
        _ => "",
    }
}

/// Per process, how its stacks were walked, from the raw stacks and the
/// weight each stands for (samples, or in a wall-clock capture the
/// microseconds of both views, so that one long wait walked by frame
/// pointers weighs what it weighs in the picture): only processes with
/// stacks cut short or walked by frame pointers alone. `place_of` says
/// where a walk cut for want of a row and a frame pointer stopped (its
/// last frame: JIT code, a binary's code no row covers).
pub fn by_process<'a>(
    raw: impl IntoIterator<Item = (&'a super::RawStack, u64)>,
    name_of: impl Fn(u32, u32, &str) -> String,
    place_of: impl Fn(&super::RawStack) -> String,
) -> Vec<ProcessWalks> {
    use std::collections::BTreeMap;
    #[derive(Default)]
    struct Per {
        process: String,
        total: u64,
        frame_pointers: u64,
        cut: BTreeMap<Walk, u64>,
        lost_at: BTreeMap<(Walk, String), u64>,
    }
    let mut per: BTreeMap<(u32, u32), Per> = BTreeMap::new();
    for (r, weight) in raw {
        let Some(walk) = r.walk else { continue };
        let e = per.entry((r.pid, r.start)).or_insert_with(|| Per {
            process: name_of(r.pid, r.start, &r.comm),
            ..Per::default()
        });
        e.total += weight;
        if walk == Walk::FramePointers {
            e.frame_pointers += weight;
        } else if walk.is_cut() {
            *e.cut.entry(walk).or_default() += weight;
            if matches!(walk, Walk::Lost | Walk::Late) {
                *e.lost_at.entry((walk, place_of(r))).or_default() += weight;
            }
        }
    }
    fn heaviest_first<K>(m: BTreeMap<K, u64>) -> Vec<(K, u64)> {
        let mut v: Vec<(K, u64)> = m.into_iter().collect();
        v.sort_by_key(|c| std::cmp::Reverse(c.1));
        v
    }
    let mut out: Vec<ProcessWalks> = per
        .into_iter()
        .filter(|(_, p)| p.total > 0 && (p.frame_pointers > 0 || !p.cut.is_empty()))
        .map(|((pid, _), p)| ProcessWalks {
            pid,
            process: p.process,
            total: p.total,
            frame_pointers: p.frame_pointers,
            cut: heaviest_first(p.cut),
            lost_at: heaviest_first(p.lost_at),
        })
        .collect();
    // Heaviest trouble first: the weight of the picture a process's short
    // walks leave wrong, then its share of its own weight. By share alone,
    // a whole host's one-sample processes (100% walked by frame pointers
    // before their tables were placed) pushed the processes that matter
    // out of the listed few.
    let trouble = |p: &ProcessWalks| p.frame_pointers + p.cut.iter().map(|c| c.1).sum::<u64>();
    let share = |p: &ProcessWalks| trouble(p) as f64 / p.total as f64;
    out.sort_by(|a, b| {
        trouble(b).cmp(&trouble(a)).then(share(b).total_cmp(&share(a))).then(a.pid.cmp(&b.pid))
    });
    out
}

impl Unwinding {
    pub fn total(&self) -> u64 {
        self.tables + self.mixed + self.frame_pointers + self.depth + self.fault + self.unsupported + self.lost
    }

    /// Lines for the summary and the report, each a complete sentence.
    pub fn lines(&self) -> Vec<String> {
        let mut out = self.walk_lines();
        out.extend(self.walkers_refused.iter().cloned());
        if let Some(line) = self.lean.filter(|_| !self.runtimes.processes.is_empty()).and_then(|l| l.line()) {
            out.push(line);
        }
        out.extend(self.runtimes.lines.iter().cloned());
        out
    }

    fn walk_lines(&self) -> Vec<String> {
        let total = self.total();
        if total == 0 {
            return Vec::new();
        }
        let pct = |n: u64| n as f64 * 100.0 / total as f64;
        let mut out = Vec::new();
        if !self.enabled {
            out.push(format!(
                "user stacks unwound by frame pointers only ({total}); code built without them loses callers"
            ));
            if let Some(why) = &self.refused {
                out.push(format!(
                    "the .eh_frame walker did not load ({why}); it needs Linux 5.10+ (tail calls from programs with function calls; 5.17+ walks in a bpf_loop)"
                ));
            }
            return out;
        }
        out.push(format!(
            "user stacks unwound: {:.1}% whole with .eh_frame tables, {:.1}% with tables and frame pointers, {:.1}% by frame pointers only (tables not built yet)",
            pct(self.tables),
            pct(self.mixed),
            pct(self.frame_pointers)
        ));
        let cut = [
            (self.depth, Walk::Depth),
            (self.fault, Walk::Fault),
            (self.unsupported, Walk::Unsupported),
            (self.lost, Walk::Lost),
        ];
        for (n, walk) in cut.iter().filter(|(n, _)| *n > 0) {
            out.push(format!("user stacks cut short {}: {:.1}% ({n})", why(*walk), pct(*n)));
        }
        for p in self.processes.iter().take(LISTED_PROCESSES) {
            let share = |w: u64| w as f64 * 100.0 / p.total as f64;
            let mut parts = Vec::new();
            if p.frame_pointers > 0 {
                parts.push(format!(
                    "{:.1}% by frame pointers only (its tables were not built yet)",
                    share(p.frame_pointers)
                ));
            }
            for (walk, w) in &p.cut {
                let mut part = format!("{:.1}% cut short {}", share(*w), why(*walk));
                if matches!(walk, Walk::Lost | Walk::Late) {
                    let at: Vec<String> = p
                        .lost_at
                        .iter()
                        .filter(|((w, _), _)| w == walk)
                        .take(3)
                        .map(|((_, place), n)| format!("{place}: {:.1}%", share(*n)))
                        .collect();
                    part.push_str(&format!(" ({})", at.join(", ")));
                }
                parts.push(part);
            }
            out.push(format!(
                "pid {} ({}): {}",
                p.pid,
                crate::profile::names::sanitize(&p.process),
                parts.join("; ")
            ));
        }
        if self.processes.len() > LISTED_PROCESSES {
            out.push(format!(
                "{} more processes with stacks cut short or walked by frame pointers",
                self.processes.len() - LISTED_PROCESSES
            ));
        }
        out.push(format!(
            "unwind tables: {} binaries, {} of {} rows, built in {} ms",
            self.binaries, self.rows, self.capacity, self.build_ms
        ));
        for (path, why) in self.without.iter().take(LISTED_BINARIES) {
            out.push(format!(
                "no unwind table for {}: {why}",
                crate::profile::names::sanitize(path)
            ));
        }
        if self.without.len() > LISTED_BINARIES {
            out.push(format!(
                "{} more binaries without an unwind table",
                self.without.len() - LISTED_BINARIES
            ));
        }
        if self.mappings_dropped > 0 {
            out.push(format!(
                "{} executable mappings past the walker's 96 per process are walked by frame pointers",
                self.mappings_dropped
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::RawStack;

    fn raw(pid: u32, walk: Option<Walk>, weight: u64) -> RawStack {
        RawStack {
            pid,
            tid: pid,
            comm: format!("p{pid}").into(),
            weight,
            walk,
            ..Default::default()
        }
    }

    #[test]
    fn processes_are_listed_by_the_weight_of_their_trouble() {
        let stacks = [
            raw(1, Some(Walk::Tables), 90),
            raw(1, Some(Walk::Lost), 10),
            raw(1, Some(Walk::Late), 4),
            raw(2, Some(Walk::FramePointers), 5),
            raw(2, Some(Walk::Mixed), 5),
            raw(3, Some(Walk::Tables), 100),
            raw(4, None, 100),
            // One sample, all of it walked by frame pointers: 100% of the
            // process, 1 of the picture.
            raw(5, Some(Walk::FramePointers), 1),
            raw(6, Some(Walk::FramePointers), 1),
            raw(6, Some(Walk::Tables), 1),
        ];
        let place = |r: &RawStack| match r.walk {
            Some(Walk::Late) => "in code of libc.so.6".to_string(),
            _ => "in JIT code".to_string(),
        };
        let p = by_process(stacks.iter().map(|r| (r, r.weight)), |pid, _, _| format!("proc{pid}"), place);
        let pids: Vec<u32> = p.iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![1, 2, 5, 6], "{p:?}");
        assert_eq!(p[0].cut, vec![(Walk::Lost, 10), (Walk::Late, 4)]);
        let u = Unwinding {
            tables: 191,
            frame_pointers: 2,
            lost: 10,
            enabled: true,
            processes: p,
            ..Default::default()
        };
        let lines = u.lines().join("\n");
        assert!(lines.contains("pid 2 (proc2): 50.0% by frame pointers only"), "{lines}");
        assert!(lines.contains("pid 1 (proc1): 9.6% cut short at code with neither an unwind row nor a frame pointer (in JIT code: 9.6%)"), "{lines}");
        assert!(
            lines.contains("; 3.8% cut short at code whose unwind table was placed after the walk (the tables were still being built) (in code of libc.so.6: 3.8%)"),
            "{lines}"
        );
        assert!(!lines.contains("pid 3"), "{lines}");
    }
}
