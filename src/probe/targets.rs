//! Which tasks a capture records, and how that reaches the kernel's
//! `target_pids` / `target_tids` maps (see `src/bpf/targets.bpf.h`).

use libbpf_rs::{MapCore, MapFlags};

use super::{bpf_error, CaptureError};

/// `enum fg_target` in `src/bpf/fgbpf.h`.
const FG_TARGET: u8 = 1;
const FG_TARGET_HELD: u8 = 2;
const FG_TARGET_AT_ENTRY: u8 = 3;

/// Empty `pids` and `tids` mean the whole system.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets {
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
    /// The `-- COMMAND` child fgbpf holds before its `execve`: recorded
    /// from its exec on, so fgbpf's own code in it is never profiled.
    pub held: Option<u32>,
    /// Also record processes the targets fork (for `-- COMMAND`).
    pub follow_children: bool,
    /// Only processes in this cgroup or its descendants (`--cgroup`,
    /// `--unit`, `--container`), as well as any of the above.
    pub scope: Option<crate::procs::cgroup::Scope>,
}

impl Targets {
    pub fn whole_system(&self) -> bool {
        self.pids.is_empty() && self.tids.is_empty() && self.held.is_none()
    }

    /// The one process a probe set in user code may be limited to (a
    /// uprobe then traps in it only), else -1: every process, which the
    /// programs' target filter narrows.
    pub fn only_pid(&self) -> i32 {
        match (&self.pids[..], &self.tids[..], self.held, self.follow_children, &self.scope) {
            ([pid], [], None, false, None) => *pid as i32,
            _ => -1,
        }
    }

    /// Whether `target_pids` filters: named processes or a held command.
    pub fn by_pid(&self) -> bool {
        !self.pids.is_empty() || self.held.is_some()
    }

    /// Writes the targets into a loaded program's maps.
    pub(crate) fn fill(
        &self,
        pid_map: &dyn MapCore,
        tid_map: &dyn MapCore,
    ) -> Result<(), CaptureError> {
        for (ids, map) in [(&self.pids, pid_map), (&self.tids, tid_map)] {
            for id in ids {
                map.update(&id.to_ne_bytes(), &[FG_TARGET], MapFlags::ANY)
                    .map_err(|e| bpf_error(&format!("adding target {id}"), e))?;
            }
        }
        if let Some(pid) = self.held {
            pid_map
                .update(&pid.to_ne_bytes(), &[FG_TARGET_HELD], MapFlags::ANY)
                .map_err(|e| bpf_error(&format!("adding the command {pid}"), e))?;
        }
        Ok(())
    }

    /// The held command becomes a target at its program's entry point,
    /// where fgbpf stops it (src/app/session/entry.rs), not at its exec.
    pub(crate) fn hold_until_entry(pid_map: &dyn MapCore, pid: u32) -> Result<(), CaptureError> {
        pid_map
            .update(&pid.to_ne_bytes(), &[FG_TARGET_AT_ENTRY], MapFlags::EXIST)
            .map_err(|e| bpf_error(&format!("holding the command {pid} until its entry point"), e))
    }

    /// The held command, at its entry point: a target from here on.
    pub(crate) fn entered(pid_map: &dyn MapCore, pid: u32) -> Result<(), CaptureError> {
        pid_map
            .update(&pid.to_ne_bytes(), &[FG_TARGET], MapFlags::EXIST)
            .map_err(|e| bpf_error(&format!("making the command {pid} a target"), e))
    }
}
