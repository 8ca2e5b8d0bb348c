//! Process announcements from the BPF side (`struct fg_proc_event`): the
//! first sample of each process and each `execve`, so that user space can
//! read a process's mappings while it still lives.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::{MapCore, RingBuffer, RingBufferBuilder};

use super::skel::types;
use super::{bpf_error, CaptureError};
use super::drain::c_name;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcEventKind {
    New,
    Exec,
    /// A Python code object first seen in the process's stacks.
    PyCode(u64),
    /// The last thread of an announced process exited.
    Exit,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcEvent {
    pub pid: u32,
    pub kind: ProcEventKind,
    /// The process's name (its main thread's), untrusted.
    pub comm: String,
}

/// Polls the object's `proc_events` ring buffer. Drop it before the
/// skeleton that owns the map.
pub struct ProcWatcher {
    ring: RingBuffer<'static>,
    pending: Rc<RefCell<Vec<ProcEvent>>>,
}

impl ProcWatcher {
    pub(crate) fn new(map: &dyn MapCore) -> Result<Self, CaptureError> {
        let pending = Rc::new(RefCell::new(Vec::new()));
        let sink = pending.clone();
        let mut builder = RingBufferBuilder::new();
        builder
            .add(map, move |data: &[u8]| {
                let mut raw = types::fg_proc_event::default();
                if plain::copy_from_bytes(&mut raw, data).is_ok() {
                    let mut e = decode(raw.pid, raw.kind, &raw.comm);
                    if raw.kind == 3 {
                        e.kind = ProcEventKind::PyCode(raw.addr);
                    }
                    sink.borrow_mut().push(e);
                }
                0
            })
            .map_err(|e| bpf_error("setting up the process event ring buffer", e))?;
        let ring = builder
            .build()
            .map_err(|e| bpf_error("setting up the process event ring buffer", e))?;
        Ok(ProcWatcher { ring, pending })
    }

    /// Waits up to `timeout` for events and returns those that arrived.
    pub fn poll(&self, timeout: Duration) -> Vec<ProcEvent> {
        // EINTR (a signal such as Ctrl-C) is expected here; events that
        // did arrive are still returned.
        let _ = self.ring.poll(timeout);
        std::mem::take(&mut *self.pending.borrow_mut())
    }
}

fn decode(pid: u32, kind: u32, comm: &[i8]) -> ProcEvent {
    ProcEvent {
        pid,
        kind: match kind {
            2 => ProcEventKind::Exec,
            4 => ProcEventKind::Exit,
            _ => ProcEventKind::New,
        },
        comm: c_name(comm),
    }
}
