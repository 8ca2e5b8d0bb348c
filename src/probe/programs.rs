//! Which of the object's programs a capture loads and attaches. Each hook
//! has a BTF and a raw tracepoint program (src/probe/features.rs decides
//! which), each of those a variant for kernels with bpf_loop and a compat
//! one for kernels without (src/bpf/tailwalk.bpf.h), and each compat
//! program a walker that it and the walker itself tail-call through a
//! one-entry program array; the modern ones a _staged variant for the
//! first load of a staged start (src/probe/staged.rs). The choice is made here once, for loading,
//! for filling those arrays after the load, and for attaching.

use std::os::fd::{AsFd, AsRawFd};

use libbpf_rs::{MapCore, MapFlags, ProgramMut};

use crate::bpf::{FgbpfSkel, OpenFgbpfProgs};
use super::{bpf_error, CaptureError};

/// The programs a capture uses.
#[derive(Clone, Copy, Debug)]
pub(super) struct Programs {
    /// BTF tracepoints (else raw ones).
    pub btf: bool,
    /// The compat variants (no bpf_loop).
    pub compat: bool,
    /// With their table walkers (compat, and tables asked for).
    pub walkers: bool,
    pub oncpu: bool,
    pub offcpu: bool,
    pub wakers: bool,
    /// The first load of a staged start: the _staged variants
    /// (src/probe/staged.rs).
    pub staged: bool,
    /// The task iterator that reads the registers of threads blocked
    /// before an off-CPU capture (src/bpf/seeds.bpf.h).
    pub seeds: bool,
    /// The uprobe on the C library's start that gives a process not read
    /// yet its first mappings (src/bpf/files.bpf.h): walks by file.
    pub files: bool,
    /// `fgbpf events`'s programs (src/bpf/events.bpf.h).
    pub events: super::points::Uses,
    /// `fgbpf alloc`'s programs (src/bpf/alloc.bpf.h).
    pub alloc: bool,
}

impl Programs {
    /// Turns autoload off for every program the capture does not use.
    pub fn autoload(&self, p: &mut OpenFgbpfProgs<'_>) {
        let (btf, raw) = (self.btf, !self.btf);
        let (modern, compat, walk) = (!self.compat, self.compat, self.walkers);
        let (plain, staged) = (modern && !self.staged, modern && self.staged);
        p.fork_btf.set_autoload(btf);
        p.exec_btf.set_autoload(btf);
        p.exit_btf.set_autoload(btf);
        p.fork_raw.set_autoload(raw);
        p.exec_raw.set_autoload(raw);
        p.exit_raw.set_autoload(raw);
        let on = self.oncpu;
        p.do_sample.set_autoload(on && plain);
        p.do_sample_staged.set_autoload(on && staged);
        p.do_sample_compat.set_autoload(on && compat);
        p.walk_sample.set_autoload(on && walk);
        let off = self.offcpu;
        p.switch_btf.set_autoload(off && btf && plain);
        p.switch_raw.set_autoload(off && raw && plain);
        p.switch_btf_staged.set_autoload(off && btf && staged);
        p.switch_raw_staged.set_autoload(off && raw && staged);
        p.switch_btf_compat.set_autoload(off && btf && compat);
        p.switch_raw_compat.set_autoload(off && raw && compat);
        p.walk_switch_btf.set_autoload(off && btf && walk);
        p.walk_switch_raw.set_autoload(off && raw && walk);
        let wk = self.offcpu && self.wakers;
        p.waking_btf.set_autoload(wk && btf && plain);
        p.waking_raw.set_autoload(wk && raw && plain);
        p.waking_btf_staged.set_autoload(wk && btf && staged);
        p.waking_raw_staged.set_autoload(wk && raw && staged);
        p.waking_btf_compat.set_autoload(wk && btf && compat);
        p.waking_raw_compat.set_autoload(wk && raw && compat);
        p.walk_waking_btf.set_autoload(wk && btf && walk);
        p.walk_waking_raw.set_autoload(wk && raw && walk);
        p.seed_regs.set_autoload(self.seeds);
        // Not in the first load of a staged start, which leaves out maps
        // its searches use: its twin holds it.
        p.libc_start.set_autoload(self.files && !self.staged);
        self.events.autoload(p);
        p.alloc_entry.set_autoload(self.alloc);
        p.alloc_return.set_autoload(self.alloc);
        p.alloc_free_entry.set_autoload(self.alloc);
    }

    /// The second load of a staged start (src/probe/staged.rs): only the
    /// twins of the first load's programs, the plain ones.
    pub fn autoload_twins(&self, p: &mut OpenFgbpfProgs<'_>) {
        Programs { staged: false, seeds: false, ..*self }.autoload(p);
        for prog in [&mut p.fork_btf, &mut p.exec_btf, &mut p.exit_btf, &mut p.fork_raw, &mut p.exec_raw, &mut p.exit_raw] {
            prog.set_autoload(false);
        }
    }

    /// After the second load of a staged start: each program of the first
    /// load gets its twin in its program array (src/bpf/staged.bpf.h).
    pub fn fill_twins(&self, first: &FgbpfSkel<'_>, twin: &FgbpfSkel<'_>) -> Result<(), CaptureError> {
        let (m, p) = (&first.maps, &twin.progs);
        let mut slots = Vec::new();
        if self.oncpu {
            slots.push((&m.full_sample, &p.do_sample));
        }
        if self.offcpu {
            slots.push((&m.full_switch, if self.btf { &p.switch_btf } else { &p.switch_raw }));
        }
        if self.offcpu && self.wakers {
            slots.push((&m.full_waking, if self.btf { &p.waking_btf } else { &p.waking_raw }));
        }
        fill(&slots, "joining the runtimes' walkers")
    }

    /// After the load: puts each walker in its program array.
    pub fn fill_walkers(&self, skel: &FgbpfSkel<'_>) -> Result<(), CaptureError> {
        if !self.walkers {
            return Ok(());
        }
        let (m, p) = (&skel.maps, &skel.progs);
        let mut slots = Vec::new();
        if self.oncpu {
            slots.push((&m.sample_walks, &p.walk_sample));
        }
        if self.offcpu {
            slots.push((&m.switch_walks, if self.btf { &p.walk_switch_btf } else { &p.walk_switch_raw }));
        }
        if self.offcpu && self.wakers {
            slots.push((&m.waking_walks, if self.btf { &p.walk_waking_btf } else { &p.walk_waking_raw }));
        }
        fill(&slots, "installing the stack walker")
    }

    /// The sampler to attach to each CPU's perf event.
    pub fn sampler<'a>(&self, skel: &'a FgbpfSkel<'_>) -> &'a ProgramMut<'a> {
        match (self.compat, self.staged) {
            (true, _) => &skel.progs.do_sample_compat,
            (false, true) => &skel.progs.do_sample_staged,
            (false, false) => &skel.progs.do_sample,
        }
    }

    /// The programs to attach, with the tracepoint each one is for.
    pub fn tracepoints<'a>(&self, skel: &'a FgbpfSkel<'_>) -> Vec<(&'a ProgramMut<'a>, &'static str)> {
        let p = &skel.progs;
        let pick = |btf, raw, btf_staged, raw_staged, btf_compat, raw_compat| match (self.btf, self.compat, self.staged) {
            (true, false, false) => btf,
            (false, false, false) => raw,
            (true, false, true) => btf_staged,
            (false, false, true) => raw_staged,
            (true, true, _) => btf_compat,
            (false, true, _) => raw_compat,
        };
        let mut out = vec![
            (if self.btf { &p.fork_btf } else { &p.fork_raw }, "sched_process_fork"),
            (if self.btf { &p.exec_btf } else { &p.exec_raw }, "sched_process_exec"),
            (if self.btf { &p.exit_btf } else { &p.exit_raw }, "sched_process_exit"),
        ];
        if self.offcpu {
            let switch = pick(
                &p.switch_btf,
                &p.switch_raw,
                &p.switch_btf_staged,
                &p.switch_raw_staged,
                &p.switch_btf_compat,
                &p.switch_raw_compat,
            );
            out.push((switch, "sched_switch"));
        }
        if self.offcpu && self.wakers {
            let waking = pick(
                &p.waking_btf,
                &p.waking_raw,
                &p.waking_btf_staged,
                &p.waking_raw_staged,
                &p.waking_btf_compat,
                &p.waking_raw_compat,
            );
            out.push((waking, "sched_waking"));
        }
        out
    }
}

/// Puts each program in its one-entry program array.
fn fill<M: MapCore, P: AsFd>(slots: &[(&M, &P)], what: &str) -> Result<(), CaptureError> {
    for (map, prog) in slots {
        let fd = prog.as_fd().as_raw_fd();
        map.update(&0u32.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| bpf_error(what, e))?;
    }
    Ok(())
}

/// How many times the kernel skipped the program behind `fd` (its
/// `recursion_misses`, as `bpftool prog show` prints them): a tracepoint
/// program is skipped when it is already running on the CPU. `None` when
/// the kernel does not say (before Linux 5.12).
pub(super) fn recursion_misses(fd: std::os::fd::BorrowedFd<'_>) -> Option<u64> {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a bpf_prog_info of len bytes; the kernel fills at
    // most len bytes of it and writes the length it filled back.
    let rc = unsafe {
        libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len)
    };
    let end = std::mem::offset_of!(libbpf_rs::libbpf_sys::bpf_prog_info, recursion_misses) + 8;
    (rc == 0 && len as usize >= end).then_some(info.recursion_misses)
}
