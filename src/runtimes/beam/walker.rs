//! The BEAM in a capture: each process the probe reads is checked for the
//! emulator ([`super::find`]); the JIT's code map of those found is read
//! at each drain for the modules loaded since, and once more when
//! recording stops, and handed to the symbolizer, which names the JIT's
//! code from it before any perf map.

use std::collections::HashMap;

use super::codemap::CodeMap;
use super::{may_be_beam, Node};
use crate::bpf::FgbpfSkel;
use crate::procs::mem::Mem;
use crate::procs::perf_map::PerfMap;
use crate::profile::RawStack;
use crate::runtimes::shared::{by_pid, runtime_binary};
use crate::runtimes::{Found, Runtime, Settings};

struct Process {
    node: Node,
    mem: Mem,
    map: CodeMap,
}

pub(crate) struct Beam {
    procs: HashMap<u32, Process>,
    found_at: HashMap<u32, (u64, u64)>,
    unsupported: HashMap<u32, String>,
    no_lines: bool,
}

/// What the summary says of one BEAM found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found1 {
    pub pid: u32,
    pub otp: String,
    pub erts: String,
    pub modules: usize,
    /// Whether the node keeps frame pointers (`+JPperf true`): its
    /// functions' Erlang callers are walked.
    pub frame_pointers: bool,
}

pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: crate::runtimes::Plumbing {
        exact: &["global::process_main", "process_main", "sched_thread_func", "thr_wrapper"],
        prefixes: &["global::", "erts_beamasm:"],
        libraries: &[],
    },
    thread_roles: &[],
    marker: None,
    walker_maps: &[],
    id_label: None,
};

/// Its reader, for every capture that walks user stacks.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    s.beam.then(|| {
        Box::new(Beam { procs: HashMap::new(), found_at: HashMap::new(), unsupported: HashMap::new(), no_lines: s.no_lines }) as Box<dyn Runtime>
    })
}

impl Beam {
    fn read(&mut self, pid: u32) {
        let Some(p) = self.procs.get_mut(&pid) else { return };
        if let Err(why) = p.map.update(&p.mem, p.node.descriptor) {
            self.unsupported.insert(pid, why);
            self.procs.remove(&pid);
        }
    }
}

impl Runtime for Beam {
    fn track(&mut self, _skel: &mut FgbpfSkel<'_>, pid: u32, text: &str) {
        let Some((m, file)) = runtime_binary(pid, text, may_be_beam, None, &mut self.found_at) else { return };
        match super::find(&file, m.path, m.start, m.offset) {
            Ok(Some(node)) => match Mem::open(pid) {
                Ok(mem) => {
                    self.procs.insert(pid, Process { node, mem, map: CodeMap::default() });
                    self.read(pid);
                }
                Err(e) => {
                    self.unsupported.insert(pid, format!("/proc/{pid}/mem: {e}"));
                }
            },
            Ok(None) => {}
            Err(why) => {
                self.unsupported.insert(pid, why);
            }
        }
    }

    fn refresh(&mut self, _skel: &FgbpfSkel<'_>) {
        let pids: Vec<u32> = self.procs.keys().copied().collect();
        for pid in pids {
            self.read(pid);
        }
    }

    fn stopped(&mut self) {
        self.refresh_all();
    }

    fn finish(&mut self, _stacks: &mut [RawStack], found: &mut Found) {
        for (&pid, p) in &self.procs {
            let (frame_pointers, _) = p.map.emulator.unwrap_or((false, 0));
            found.beams.push(Found1 { pid, otp: p.node.otp.clone(), erts: p.node.erts.clone(), modules: p.map.modules, frame_pointers });
            found.code_maps.push((pid, PerfMap::from_entries(p.map.pieces(!self.no_lines))));
        }
        found.beams.sort_by_key(|b| b.pid);
        found.beam_unsupported = by_pid(&self.unsupported);
    }

    fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        self.procs.retain(|&pid, _| keep(pid));
        self.found_at.retain(|&pid, _| keep(pid));
        self.unsupported.retain(|&pid, _| keep(pid));
    }

    fn knows(&self, pid: u32) -> bool {
        self.procs.contains_key(&pid) || self.unsupported.contains_key(&pid)
    }
}

impl Beam {
    fn refresh_all(&mut self) {
        let pids: Vec<u32> = self.procs.keys().copied().collect();
        for pid in pids {
            self.read(pid);
        }
    }
}

/// What the summary and the report say of the BEAMs found.
pub fn lines(found: &Found, ctx: &crate::runtimes::walks::Context) -> Vec<String> {
    use crate::profile::names::printable;
    let mut out = Vec::new();
    for b in &found.beams {
        let callers = if b.frame_pointers {
            "their Erlang callers walked by the frame pointers the node keeps (+JPperf true)"
        } else {
            "their Erlang callers not walked: the node keeps no frame pointers (start it with +JPperf true), and fgbpf does not read the Erlang process's own stack yet"
        };
        out.push(format!(
            "Erlang: pid {} ({}, OTP {}, erts {}): JIT-compiled functions named from the JIT's own code map ({} modules); {callers}",
            b.pid,
            printable(&ctx.process(b.pid)),
            printable(&b.otp),
            printable(&b.erts),
            b.modules
        ));
    }
    for (pid, why) in &found.beam_unsupported {
        out.push(format!(
            "Erlang: pid {pid} ({}): not read: {}; its stacks show the emulator's C frames (process_main) and JIT code unnamed",
            printable(&ctx.process(*pid)),
            printable(why)
        ));
    }
    out
}
