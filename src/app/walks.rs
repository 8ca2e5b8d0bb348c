//! What the runtimes' walkers found, as the model says it: the probe's
//! record of JVMs and V8 processes turned into the summary's and the
//! report's Java and Node.js sections (profile/java.rs, profile/node.rs),
//! with each process named.

use crate::probe::{Recorded, RuntimeUnnamed};
use crate::profile::java::JavaWalks;
use crate::profile::node::NodeWalks;

type Unnamed = Vec<(u32, String, &'static str, &'static str, u64, u64)>;

fn unnamed(weights: &RuntimeUnnamed, name_of: &impl Fn(u32) -> String) -> Unnamed {
    weights
        .iter()
        .map(|(&(pid, why, remedy), &(samples, us))| (pid, name_of(pid), why, remedy, samples, us))
        .collect()
}

/// The JVMs found, and how their Java frames were walked and named.
pub fn java(rec: &Recorded, name_of: impl Fn(u32) -> String) -> JavaWalks {
    let st = &rec.stats;
    JavaWalks {
        refused: rec.java_refused.clone(),
        jvms: rec.jvms.iter().map(|&(pid, major, inlining)| (pid, name_of(pid), major, inlining)).collect(),
        unreadable: rec
            .java_unsupported
            .iter()
            .map(|(pid, why)| (*pid, name_of(*pid), why.reason.clone()))
            .collect(),
        frames: st.java_frames,
        lost: st.java_lost,
        prologue: st.java_prologue,
        fault: st.java_fault,
        unnamed: unnamed(&rec.java_unnamed, &name_of),
    }
}

/// The V8 processes found, and how their JavaScript frames were named;
/// `perf_map`: whether a process writes a perf map.
pub fn node(rec: &Recorded, name_of: impl Fn(u32) -> String, perf_map: impl Fn(u32) -> bool) -> NodeWalks {
    NodeWalks {
        refused: rec.node_refused.clone(),
        processes: rec.v8s.iter().map(|&(pid, inlining)| (pid, name_of(pid), perf_map(pid), inlining)).collect(),
        unreadable: rec.v8_unsupported.iter().map(|(pid, why)| (*pid, name_of(*pid), why.clone())).collect(),
        frames: rec.stats.v8_frames,
        fault: rec.stats.v8_fault,
        unnamed: unnamed(&rec.v8_unnamed, &name_of),
    }
}
