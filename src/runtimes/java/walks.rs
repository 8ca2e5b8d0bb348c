//! How far the Java frames of a capture could be walked and named: the
//! HotSpot JVMs found (and those fgbpf cannot read, with why), the
//! walker's own counts of Java frames it stopped at, and per JVM the
//! weight of frames left unnamed, by reason. The summary and the report
//! print it.

use crate::profile::names::sanitize;
use crate::runtimes::walks::Context;
use crate::runtimes::Found;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JavaWalks {
    /// Why the Java walker did not load, when it did not.
    pub refused: Option<String>,
    /// JVMs whose frames were walked: (pid, process, JDK feature version,
    /// whether methods inlined by the JIT were read).
    pub jvms: Vec<(u32, String, u32, bool)>,
    /// JVMs whose frames could not be walked: (pid, process, why).
    pub unreadable: Vec<(u32, String, String)>,
    /// Java frames walked, and walks that stopped at one: code the JVM's
    /// structures did not account for, a leaf in a prologue the walker
    /// does not read, a failed read of the JVM's memory.
    pub frames: u64,
    pub lost: u64,
    pub prologue: u64,
    pub fault: u64,
    /// Frames that could not be named: (pid, process, why, remedy, and the
    /// on-CPU samples and off-CPU microseconds of the stacks holding one).
    pub unnamed: Vec<(u32, String, &'static str, &'static str, u64, u64)>,
}

/// JVMs listed.
const LISTED: usize = 5;

impl JavaWalks {
    /// The JVMs a capture found, and how their Java frames were walked and
    /// named.
    pub fn of(found: &Found, ctx: &Context) -> JavaWalks {
        let st = ctx.stats;
        JavaWalks {
            refused: ctx.refused.why(crate::runtimes::BpfWalker::Java).map(str::to_string),
            jvms: found.jvms.iter().map(|&(pid, major, inlining)| (pid, ctx.process(pid), major, inlining)).collect(),
            unreadable: found.java_unsupported.iter().map(|(pid, why)| (*pid, ctx.process(*pid), why.reason.clone())).collect(),
            frames: st.java_frames,
            lost: st.java_lost,
            prologue: st.java_prologue,
            fault: st.java_fault,
            unnamed: ctx.unnamed(&found.java_unnamed),
        }
    }

    /// Lines for the summary and the report, each a complete sentence.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(why) = &self.refused {
            out.push(format!(
                "the Java frame walker did not load ({why}): a JVM's threads end at their first Java frame, [unknown] without a perf map"
            ));
        }
        for (pid, process, major, inlining) in self.jvms.iter().take(LISTED) {
            out.push(format!(
                "Java: pid {pid} ({}, HotSpot JDK {major}): Java frames walked and named from the JVM's own structures{}",
                sanitize(process),
                if *inlining {
                    ""
                } else {
                    "; methods the JIT inlined are not read on this JDK (9 to 22 and 25 only): their time is their caller's"
                }
            ));
        }
        if self.jvms.len() > LISTED {
            out.push(format!("Java: {} more JVMs", self.jvms.len() - LISTED));
        }
        if self.frames > 0 && self.lost + self.prologue + self.fault > 0 {
            let mut parts = Vec::new();
            for (n, why) in [
                (self.lost, "at code the JVM's code cache did not account for"),
                (self.prologue, "in a method's prologue the walker does not read"),
                (self.fault, "at JVM memory that could not be read"),
            ] {
                if n > 0 {
                    parts.push(format!("{n} {why}"));
                }
            }
            out.push(format!(
                "Java: of {} Java frames walked, walks stopped {}",
                self.frames,
                parts.join(", ")
            ));
        }
        for (pid, process, why, remedy, samples, us) in self.unnamed.iter().take(LISTED) {
            out.push(format!(
                "Java: pid {pid} ({}): {} in stacks with a Java frame left [unknown]: {why} ({remedy})",
                sanitize(process),
                weight(*samples, *us)
            ));
        }
        for (pid, process, why) in self.unreadable.iter().take(LISTED) {
            out.push(format!(
                "Java: pid {pid} ({}): Java frames not walked, {}; its stacks end at the first Java frame",
                sanitize(process),
                sanitize(why)
            ));
        }
        out
    }
}

/// The weight of stacks: on-CPU samples, off-CPU time, or both.
pub(crate) fn weight(samples: u64, us: u64) -> String {
    match (samples, us) {
        (n, 0) => format!("{n} samples"),
        (0, us) => format!("{:.1} ms off-CPU", us as f64 / 1e3),
        (n, us) => format!("{n} samples and {:.1} ms off-CPU", us as f64 / 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_was_walked_and_what_was_not() {
        let j = JavaWalks {
            jvms: vec![(7, "java".into(), 17, true)],
            unreadable: vec![(9, "java".into(), "JDK 8 (fgbpf reads 11 to 25)".into())],
            frames: 100,
            lost: 2,
            unnamed: vec![(7, "java".into(), "the method was freed before fgbpf read it", "none", 3, 0)],
            ..Default::default()
        };
        let text = j.lines();
        assert!(text[0].contains("pid 7 (java, HotSpot JDK 17)"), "{text:?}");
        assert!(text[1].contains("of 100 Java frames walked, walks stopped 2 at code"), "{text:?}");
        assert!(text[2].contains("3 samples in stacks") && text[2].contains("freed"), "{text:?}");
        assert!(text[3].contains("pid 9 (java): Java frames not walked, JDK 8"), "{text:?}");
    }
}
