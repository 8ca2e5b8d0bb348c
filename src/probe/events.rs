//! Process announcements from the BPF side (`struct fg_proc_event`): the
//! first sample of each process and each `execve`, so that user space can
//! read a process's mappings while it still lives, and the runtime objects
//! (Python code, Java methods) its stacks name, to be read at once. They come through a
//! ring buffer, or a perf buffer on kernels without ring buffers (before
//! 5.8, see src/probe/features.rs); the records are the same.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::{MapCore, PerfBuffer, PerfBufferBuilder, RingBuffer, RingBufferBuilder};

use crate::bpf::types;
use super::{bpf_error, CaptureError};
use super::drain::c_name;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcEventKind {
    /// The first stack of a process, or of its new image after an exec
    /// whose announcement was lost.
    New { forked: Option<Forked> },
    Exec,
    /// The last thread of an announced process exited.
    Exit,
    /// An object a runtime's walker saw first in the process's stacks,
    /// for that runtime to read ([`crate::runtimes`]).
    Announced(crate::runtimes::Announcement),
    /// `fgbpf flight --wait-above`: a wait at least that long just ended.
    LongWait(LongWait),
}

/// A new process forked from another, neither having exec'd since, as the
/// kernel tells (targets.bpf.h: send_new): its memory is a copy of the
/// parent's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forked {
    pub parent: u32,
    /// Its size when announced, in bytes (/proc/PID/stat's vsize).
    pub size: u64,
}

/// A long wait of one thread, as the kernel saw it end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LongWait {
    pub tid: u32,
    /// Its length, unsampled.
    pub ns: u64,
    /// The capture's time slice it began in.
    pub first_slice: u32,
    /// The thread's name, untrusted.
    pub thread: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcEvent {
    pub pid: u32,
    /// With `pid`, which process: its start in clock ticks since boot
    /// (as [`crate::procs::maps::Stat::start`]); 0 for a runtime's object.
    pub start: u32,
    pub kind: ProcEventKind,
    /// The process's name (its main thread's), untrusted.
    pub comm: String,
}

/// Where the events come from.
enum Source {
    Ring(RingBuffer<'static>),
    Perf(PerfBuffer<'static>),
}

/// Polls the object's `proc_events` buffer. Drop it before the skeleton
/// that owns the map.
pub struct ProcWatcher {
    source: Source,
    pending: Rc<RefCell<Vec<ProcEvent>>>,
    /// Events the perf buffer reported lost (its records of them).
    lost: Rc<Cell<u64>>,
}

/// Pages of each CPU's perf buffer: 64 KB, room for 2,048 events.
const PERF_PAGES: usize = 16;

impl ProcWatcher {
    /// `perf`: the map is a perf event array, not a ring buffer.
    pub(crate) fn new<M: MapCore>(map: &M, perf: bool) -> Result<Self, CaptureError> {
        let pending = Rc::new(RefCell::new(Vec::new()));
        let lost = Rc::new(Cell::new(0));
        let sink = pending.clone();
        let push = move |data: &[u8]| {
            let mut raw = types::fg_proc_event::default();
            if plain::copy_from_bytes(&mut raw, data).is_ok() {
                let mut e = decode(&raw);
                match raw.kind {
                    // The runtimes' announcements (enum fg_proc_event_kind).
                    3 | 5..=11 | 13 | 14 => {
                        e.kind = ProcEventKind::Announced(crate::runtimes::Announcement {
                            kind: raw.kind,
                            addr: raw.addr,
                            addr2: raw.addr2,
                        })
                    }
                    // The name is the thread's, not its process's.
                    12 => {
                        e.kind = ProcEventKind::LongWait(LongWait {
                            tid: raw.addr2 as u32,
                            ns: raw.addr,
                            first_slice: (raw.addr2 >> 32) as u32,
                            thread: std::mem::take(&mut e.comm),
                        })
                    }
                    _ => {}
                }
                sink.borrow_mut().push(e);
            }
        };
        let source = if perf {
            let counter = lost.clone();
            let perf = PerfBufferBuilder::new(map)
                .pages(PERF_PAGES)
                .sample_cb(move |_cpu, data: &[u8]| push(data))
                .lost_cb(move |_cpu, n| counter.set(counter.get() + n))
                .build()
                .map_err(|e| bpf_error("setting up the process event perf buffer", e))?;
            Source::Perf(perf)
        } else {
            let mut builder = RingBufferBuilder::new();
            builder
                .add(map, move |data: &[u8]| {
                    push(data);
                    0
                })
                .map_err(|e| bpf_error("setting up the process event ring buffer", e))?;
            let ring = builder
                .build()
                .map_err(|e| bpf_error("setting up the process event ring buffer", e))?;
            Source::Ring(ring)
        };
        Ok(ProcWatcher {
            source,
            pending,
            lost,
        })
    }

    /// Waits up to `timeout` for events and returns those that arrived.
    pub fn poll(&self, timeout: Duration) -> Vec<ProcEvent> {
        // EINTR (a signal such as Ctrl-C) is expected here; events that
        // did arrive are still returned.
        let _ = match &self.source {
            // Events sent without waking (targets.bpf.h: send_proc_event)
            // wake no poll: taken after it, from memory.
            Source::Ring(ring) => {
                let polled = ring.poll(timeout);
                let _ = ring.consume();
                polled
            }
            Source::Perf(perf) => perf.poll(timeout),
        };
        std::mem::take(&mut *self.pending.borrow_mut())
    }

    /// Events the perf buffer reported lost (0 with a ring buffer, whose
    /// losses the BPF side counts alone).
    pub fn lost(&self) -> u64 {
        self.lost.get()
    }
}

/// The kernel's page size, which sizes memory in pages.
fn page_size() -> u64 {
    static SIZE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        // SAFETY: sysconf reads a constant of the system.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(n).unwrap_or(4096)
    })
}

fn decode(raw: &types::fg_proc_event) -> ProcEvent {
    let pid = raw.pid;
    ProcEvent {
        pid,
        // Clock ticks' low 32 bits (proc_start).
        start: raw.start as u32,
        kind: match raw.kind {
            2 => ProcEventKind::Exec,
            4 => ProcEventKind::Exit,
            // No parent is PID 0.
            _ => ProcEventKind::New {
                forked: u32::try_from(raw.addr)
                    .ok()
                    .filter(|&p| p != 0 && p != pid)
                    .map(|parent| Forked { parent, size: raw.addr2.saturating_mul(page_size()) }),
            },
        },
        comm: c_name(&raw.comm),
    }
}
