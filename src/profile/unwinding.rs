//! How a capture's user stacks were walked: with unwind tables, with frame
//! pointers, and why walks stopped short. Kept with the profile so that the
//! summary and the report can say how far its stacks can be trusted, and
//! what to do about the rest.

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
    /// Binaries with tables, rows used and available.
    pub binaries: usize,
    pub rows: u64,
    pub capacity: u64,
    /// Milliseconds spent compiling tables.
    pub build_ms: u64,
    /// Binaries walked by frame pointers only, with why.
    pub without: Vec<(String, String)>,
}

impl Unwinding {
    pub fn total(&self) -> u64 {
        self.tables + self.mixed + self.frame_pointers + self.depth + self.fault + self.unsupported + self.lost
    }

    /// Lines for the summary and the report, each a complete sentence.
    pub fn lines(&self) -> Vec<String> {
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
                    "the kernel refused the .eh_frame walker ({why}); it needs Linux 5.17+ (bpf_loop, bpf_task_pt_regs)"
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
            (self.depth, "at the 127-frame limit"),
            (self.fault, "by a stack page not in memory"),
            (self.unsupported, "at a rule the walker does not follow (e.g. a signal frame)"),
            (self.lost, "at code with neither unwind rows nor a frame pointer (JIT code without frame pointers)"),
        ];
        for (n, why) in cut.iter().filter(|(n, _)| *n > 0) {
            out.push(format!("user stacks cut short {why}: {:.1}% ({n})", pct(*n)));
        }
        out.push(format!(
            "unwind tables: {} binaries, {} of {} rows, built in {} ms",
            self.binaries, self.rows, self.capacity, self.build_ms
        ));
        for (path, why) in &self.without {
            out.push(format!("no unwind table for {path}: {why}"));
        }
        out
    }
}
