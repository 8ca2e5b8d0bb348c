//! Which tasks a capture records, and how that reaches the kernel's
//! `target_pids` / `target_tids` maps (see `src/bpf/targets.bpf.h`).

use libbpf_rs::{MapCore, MapFlags};

use super::{bpf_error, CaptureError};

/// Empty `pids` and `tids` mean the whole system.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets {
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
    /// Also record processes the targets fork (for `-- COMMAND`).
    pub follow_children: bool,
}

impl Targets {
    pub fn whole_system(&self) -> bool {
        self.pids.is_empty() && self.tids.is_empty()
    }

    /// Writes the targets into a loaded program's maps.
    pub(crate) fn fill(
        &self,
        pid_map: &dyn MapCore,
        tid_map: &dyn MapCore,
    ) -> Result<(), CaptureError> {
        for (ids, map) in [(&self.pids, pid_map), (&self.tids, tid_map)] {
            for id in ids {
                map.update(&id.to_ne_bytes(), &[1u8], MapFlags::ANY)
                    .map_err(|e| bpf_error(&format!("adding target {id}"), e))?;
            }
        }
        Ok(())
    }

    /// Adds one process after load (the `-- COMMAND` child).
    pub(crate) fn add_pid(pid: u32, pid_map: &dyn MapCore) -> Result<(), CaptureError> {
        pid_map
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(|e| bpf_error(&format!("adding target {pid}"), e))
    }
}
