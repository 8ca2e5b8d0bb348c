//! How the JavaScript frames of a capture were named: the V8 (Node.js)
//! processes found (and those fgbpf cannot read, with why), the walker's
//! count of frames it named and of reads that failed, and per process the
//! weight of frames left unnamed, by reason. The summary and the report
//! print it.

use crate::profile::names::sanitize;
use crate::runtimes::java::walks::weight;
use crate::runtimes::walks::Context;
use crate::runtimes::Found;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeWalks {
    /// Why JavaScript frames were not named, when they were not.
    pub refused: Option<String>,
    /// Processes whose JavaScript frames were named: (pid, process,
    /// whether it also writes a perf map).
    pub processes: Vec<(u32, String, bool, bool)>,
    /// V8 processes whose frames could not be named: (pid, process, why).
    pub unreadable: Vec<(u32, String, String)>,
    /// JavaScript frames the walker named, and failed reads of a function.
    pub frames: u64,
    pub fault: u64,
    /// Frames that could not be named: (pid, process, why, remedy, and the
    /// on-CPU samples and off-CPU microseconds of the stacks holding one).
    pub unnamed: Vec<(u32, String, &'static str, &'static str, u64, u64)>,
}

/// Processes listed.
const LISTED: usize = 5;

impl NodeWalks {
    /// The V8 processes a capture found, and how their JavaScript frames
    /// were named.
    pub fn of(found: &Found, ctx: &Context) -> NodeWalks {
        NodeWalks {
            refused: ctx.refused.why(crate::runtimes::BpfWalker::V8).map(str::to_string),
            processes: found.v8s.iter().map(|&(pid, inlining)| (pid, ctx.process(pid), (ctx.perf_map)(pid), inlining)).collect(),
            unreadable: ctx.unreadable(&found.v8_unsupported),
            frames: ctx.stats.v8_frames,
            fault: ctx.stats.v8_fault,
            unnamed: ctx.unnamed(&found.v8_unnamed),
        }
    }

    /// Lines for the summary and the report, each a complete sentence.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(why) = &self.refused {
            out.push(format!(
                "JavaScript frames were not named ({why}): Node.js threads show V8's builtins, and its compiled code [unknown] without a perf map"
            ));
        }
        for (pid, process, perf_map, inlining) in self.processes.iter().take(LISTED) {
            out.push(format!(
                "Node.js: pid {pid} ({}): JavaScript frames named from V8's heap, by function and the line it starts on, {}{}",
                sanitize(process),
                if *inlining {
                    "with the functions V8 inlined into compiled code"
                } else {
                    "without the functions V8 inlines into optimised code, which fgbpf reads on V8 11 to 13 only (not on V8 10: their time is their caller's)"
                },
                if *perf_map {
                    "; its perf map names V8's other generated code (stubs, regular expressions), not these"
                } else {
                    ""
                }
            ));
        }
        if self.processes.len() > LISTED {
            out.push(format!("Node.js: {} more processes", self.processes.len() - LISTED));
        }
        if self.fault > 0 {
            out.push(format!(
                "Node.js: {} JavaScript frames left as native frames: their function could not be read at sample time",
                self.fault
            ));
        }
        for (pid, process, why, remedy, samples, us) in self.unnamed.iter().take(LISTED) {
            out.push(format!(
                "Node.js: pid {pid} ({}): {} in stacks with a JavaScript frame {}: {why} ({remedy})",
                sanitize(process),
                weight(*samples, *us),
                if why.starts_with("named without") { "named in part" } else { "left [unknown]" }
            ));
        }
        for (pid, process, why) in self.unreadable.iter().take(LISTED) {
            out.push(format!(
                "Node.js: pid {pid} ({}): JavaScript frames not named, {}; they show as V8's builtins or [unknown]",
                sanitize(process),
                sanitize(why)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_was_named_and_what_was_not() {
        let n = NodeWalks {
            processes: vec![(7, "node".into(), true, true)],
            unreadable: vec![(9, "node".into(), "a V8 built with pointer compression".into())],
            frames: 100,
            fault: 2,
            unnamed: vec![(7, "node".into(), "moved", "none", 3, 0)],
            ..Default::default()
        };
        let text = n.lines();
        assert!(text[0].starts_with("Node.js: pid 7 (node): JavaScript frames named"), "{text:?}");
        assert!(text[0].ends_with("its perf map names V8's other generated code (stubs, regular expressions), not these"), "{text:?}");
        assert!(text[1].contains("2 JavaScript frames left as native"), "{text:?}");
        assert!(text[2].contains("3 samples in stacks") && text[2].contains("moved"), "{text:?}");
        assert!(text[3].contains("pid 9 (node): JavaScript frames not named, a V8 built"), "{text:?}");
    }
}
