//! The goroutine on a Go program's thread stacks: the user-space half of
//! src/runtimes/go/go.bpf.h. Each Go program [`super::walker`] finds gets its entry in
//! `go_procs` (where g is in a thread's TLS, the offsets of its runtime);
//! the walker ends each of its stacks with the goroutine's id and the
//! address of its pprof labels, announced the first time a process shows
//! them and read then ([`crate::runtimes::go::labels`]); when the capture
//! ends, those words leave the stack and become its labels
//! ([`crate::profile::Stack::labels`]): `goroutine` and pprof's.

use std::collections::{BTreeMap, HashMap};

use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::types;
use crate::runtimes::go::labels::{Reader, Unread};
use crate::runtimes::go::Runtime;
use crate::profile::{Labels, RawStack};

/// The label a stack's goroutine id has (the Go folder's task-id label).
pub const GOROUTINE: &str = "goroutine";

/// FG_GO_MARKER of src/runtimes/go/go.h.
pub(crate) const MARKER: u64 = 0xffff_ffff_ffff_ff53;

struct Process {
    version: String,
    /// `None` when the program has no pprof labels to read.
    reader: Option<Reader>,
}

#[derive(Default)]
pub(crate) struct GoLabels {
    processes: HashMap<u32, Process>,
    /// Go programs whose goroutines are not told on their stacks, or
    /// whose labels are not read: pid → why.
    pub unsupported: HashMap<u32, String>,
    /// Each (pid, goroutine, labels' address) made into labels once.
    named: HashMap<(u32, u64, u64), Labels>,
    /// Per process, the weight of stacks whose pprof labels could not be
    /// read (on-CPU samples, off-CPU microseconds).
    pub unread: BTreeMap<u32, (u64, u64)>,
}

impl GoLabels {
    /// Gives the walker `pid`'s entry; true when it was added.
    pub fn add<M: MapCore>(&mut self, pid: u32, rt: &Runtime, procs: &M) -> bool {
        let r = match &rt.running {
            Ok(r) => r,
            Err(why) => {
                self.unsupported.insert(pid, format!("its goroutines are not told on its stacks: {why}"));
                return false;
            }
        };
        let v = types::fg_go_proc {
            tls_g: r.tls_g,
            g_m: r.g_m,
            g_goid: r.g_goid,
            g_labels: r.g_labels,
            m_curg: r.m_curg,
        };
        // SAFETY: fg_go_proc is a plain struct of integers.
        let bytes = unsafe { plain::as_bytes(&v) };
        if procs.update(&pid.to_ne_bytes(), bytes, MapFlags::ANY).is_err() {
            self.unsupported.insert(
                pid,
                "its goroutines are not told on its stacks: the walker's table of Go programs is full (1,024)".into(),
            );
            return false;
        }
        let reader = match &r.labels {
            Ok(Some(layout)) => Some(Reader::new(pid, *layout)),
            Ok(None) => None,
            Err(why) => {
                self.unsupported.insert(pid, format!("its goroutines' pprof labels are not read: {why}"));
                None
            }
        };
        self.processes.insert(pid, Process { version: rt.version.clone(), reader });
        true
    }

    /// Reads the labels at `addr` of `pid`, announced by the walker.
    pub fn read_announced(&mut self, pid: u32, addr: u64) {
        if let Some(reader) = self.processes.get_mut(&pid).and_then(|p| p.reader.as_mut()) {
            reader.read(addr);
        }
    }

    /// Reads the labels a freshly stored stack of `pid` names, while they
    /// live (in case their announcement was lost).
    pub fn fresh(&mut self, pid: u32, user: &[u64]) {
        if let Some(at) = user.iter().position(|&w| w == MARKER) {
            if let Some(&addr) = user.get(at + 2) {
                self.read_announced(pid, addr);
            }
        }
    }

    /// Moves each stack's goroutine words out of its frames, into labels.
    pub fn name(&mut self, stacks: &mut [RawStack]) {
        // Counted anew at each read (`fgbpf top` reads again and again),
        // and made anew: a long recording meets goroutines without end.
        self.unread.clear();
        self.named.clear();
        for r in stacks {
            self.split(r);
            if let Some(w) = r.waker.as_deref_mut() {
                self.split(w);
            }
        }
    }

    fn split(&mut self, r: &mut RawStack) {
        let Some(at) = r.user.iter().position(|&w| w == MARKER) else { return };
        // The labels' word is missing when it was 0: a stored stack ends
        // at its first zero.
        let (goid, addr) = (r.user.get(at + 1).copied(), r.user.get(at + 2).copied().unwrap_or(0));
        r.user = r.user[..at].into();
        let Some(goid) = goid else { return };
        // None: no labels, or labels fgbpf does not read (said once).
        let read = match addr {
            0 => None,
            _ => self.processes.get(&r.pid).and_then(|p| p.reader.as_ref()).map(|reader| reader.labels(addr)),
        };
        let labels = match read {
            None => self.labels(r.pid, goid, 0, &[]),
            Some(Some(Ok(pprof))) => self.labels(r.pid, goid, addr, &pprof),
            // Freed before they were read, or never read (their
            // announcement lost, or the reader full and emptied since).
            Some(Some(Err(Unread::Gone)) | None) => {
                let e = self.unread.entry(r.pid).or_default();
                match r.state {
                    None => e.0 += r.weight,
                    Some(_) => e.1 += r.weight,
                }
                self.labels(r.pid, goid, 0, &[])
            }
        };
        r.more_mut().labels = Some(labels);
    }

    fn labels(&mut self, pid: u32, goid: u64, addr: u64, pprof: &[(String, String)]) -> Labels {
        self.named
            .entry((pid, goid, addr))
            .or_insert_with(|| {
                let mut all = vec![(GOROUTINE.to_string(), goid.to_string())];
                all.extend(pprof.iter().cloned());
                all.sort();
                all.into()
            })
            .clone()
    }

    /// The Go programs whose goroutines the walker tells: (pid, version).
    pub fn found(&self) -> impl Iterator<Item = (u32, &str)> {
        self.processes.iter().map(|(&pid, p)| (pid, p.version.as_str()))
    }

    /// Lets go of what was read of the processes `keep` refuses.
    pub fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        self.processes.retain(|&pid, _| keep(pid));
        self.unsupported.retain(|&pid, _| keep(pid));
        self.named.retain(|&(pid, _, _), _| keep(pid));
    }
}
