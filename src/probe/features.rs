//! Kernel features fgbpf can do without, probed once before the object is
//! opened, and the path the loader takes for each: sched_switch's
//! `prev_state` argument (5.18) or the task's own state field; BTF
//! tracepoints (`tp_btf`, 5.5 and the kernel's own BTF) or raw ones; a ring
//! buffer (5.8) or a perf buffer for process events; the kernel's BTF or an
//! external file (`--btf`, BTFHub's convention) for CO-RE; and, from the
//! kernel's list of helpers, how user stacks are walked (in a `bpf_loop`,
//! 5.17, or by tail calls, src/bpf/tailwalk.bpf.h), how user registers
//! are found (`bpf_task_pt_regs`, 5.15, or on the task's kernel stack),
//! where off-CPU kernel stacks are read (`bpf_get_task_stack`, 5.9) and,
//! from a probe load, whether the sampler may use a hash map allocated as
//! it fills (6.1) or must have it preallocated. Each
//! decision is
//! made here, in one place, so that the loader, the summary and the tests
//! agree on it; `FGBPF_FORCE_FALLBACK` makes the loader take a fallback on
//! a kernel that has the feature, so that every path runs on any host.

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use libbpf_rs::btf::{types, Btf, BtfType};
use libbpf_rs::skel::SkelBuilder;
use libbpf_rs::{libbpf_sys, MapType, OpenObject, ReferencesType};

use crate::bpf::{FgbpfSkelBuilder, OpenFgbpfSkel};
use super::CaptureError;

/// The kernel's own BTF, where libbpf looks first.
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

pub use super::force::{Force, Taken, FORCE_ENV, FORCE_WORDS};

/// The paths the loader takes on this kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Paths {
    /// Off-CPU states read from the task, not from sched_switch's
    /// `prev_state` argument.
    pub task_state: Taken,
    /// The task's state field the kernel has: `__state` (5.14+) or `state`.
    pub state_field: &'static str,
    /// Raw tracepoints instead of BTF tracepoints.
    pub raw_tp: Taken,
    /// Why BTF tracepoints are missing, when detected.
    raw_tp_why: &'static str,
    /// Process events through a perf buffer instead of a ring buffer.
    pub perf_buffer: Taken,
    /// `--btf`: the BTF CO-RE relocations are made against.
    pub btf_file: Option<PathBuf>,
    /// The compat programs (src/bpf/tailwalk.bpf.h): no bpf_loop (5.17),
    /// so the .eh_frame walker runs by tail calls and the runtimes'
    /// walkers, which need the loop, are off.
    pub compat: Taken,
    /// User registers read from the task's kernel stack: no
    /// bpf_task_pt_regs (5.15). Only the compat walker needs it.
    pub task_regs: Taken,
    /// THREAD_SIZE, where the task's user registers are saved: 16 KiB on
    /// x86-64, twice that with KASAN.
    pub kernel_stack_size: u32,
    /// The kernel has bpf_get_task_stack (5.9), for off-CPU kernel stacks
    /// read at switch-in; without it they are taken at switch-out.
    pub task_stack: bool,
    /// The processes' unwind entries (`proc_unwind`, which the sampler
    /// reads) preallocated: before 6.1 the verifier refuses a perf_event
    /// program that uses a hash map allocated as it fills
    /// ("perf_event programs can only use preallocated hash map").
    pub prealloc: Taken,
    /// The kernel has task iterators (5.8): the registers of threads
    /// blocked before an off-CPU capture are read (src/probe/seeds.rs).
    pub task_iter: bool,
    /// The kernel has bpf_find_vma (5.17): the bpf_loop walker walks a
    /// process not read yet by the files it maps (src/bpf/files.bpf.h).
    pub find_vma: bool,
}

impl Paths {
    /// Probes the kernel (and reads `--btf` or the kernel's BTF) and
    /// decides each path, forced ones included.
    pub fn probe(btf_file: Option<&Path>) -> Result<Paths, CaptureError> {
        let force = Force::from_env().map_err(CaptureError::new)?;
        let btf = load_btf(btf_file).map_err(CaptureError::new)?;
        let prev_state = sched_switch_params(&btf).is_some_and(|n| n >= 5);
        let kernel_btf = Path::new(KERNEL_BTF).exists();
        let raw_tp_why = if btf_file.is_some() {
            "--btf given: BTF tracepoints need the kernel's own BTF"
        } else if !kernel_btf {
            "the kernel has no BTF"
        } else if !has_enumerator(&btf, "bpf_attach_type", "BPF_TRACE_RAW_TP") {
            // The kernel's own enum says what it attaches; libbpf's probe
            // of the `tracing` type loads an fentry program, which some
            // kernels refuse (EPERM) while tp_btf works.
            "BTF tracepoints need Linux 5.5"
        } else {
            ""
        };
        let ringbuf = probe_map_type(libbpf_sys::BPF_MAP_TYPE_RINGBUF);
        Ok(Paths {
            task_state: Taken::of(force.task_state, !prev_state),
            state_field: if has_member(&btf, "task_struct", "__state") { "__state" } else { "state" },
            raw_tp: Taken::of(force.raw_tp, !raw_tp_why.is_empty()),
            raw_tp_why,
            perf_buffer: Taken::of(force.perf_buffer, !ringbuf),
            btf_file: btf_file.map(Path::to_path_buf),
            // The kernel's own list of helpers (enum bpf_func_id).
            compat: Taken::of(force.no_loop, !has_enumerator(&btf, "bpf_func_id", "BPF_FUNC_loop")),
            task_regs: Taken::of(
                force.no_task_regs,
                !has_enumerator(&btf, "bpf_func_id", "BPF_FUNC_task_pt_regs"),
            ),
            kernel_stack_size: if btf.type_by_name::<types::Func<'_>>("kasan_report").is_some() { 32768 } else { 16384 },
            task_stack: has_enumerator(&btf, "bpf_func_id", "BPF_FUNC_get_task_stack"),
            prealloc: Taken::of(force.prealloc, !perf_event_takes_unpreallocated_maps()),
            // The context of task iterator programs (5.8).
            task_iter: btf.type_by_name::<types::Struct<'_>>("bpf_iter__task").is_some(),
            find_vma: has_enumerator(&btf, "bpf_func_id", "BPF_FUNC_find_vma"),
        })
    }

    /// The paths of a kernel with every feature (5.18 or newer, with its
    /// own BTF): no fallback taken.
    pub fn modern() -> Paths {
        Paths {
            state_field: "__state",
            kernel_stack_size: 16384,
            task_stack: true,
            task_iter: true,
            find_vma: true,
            ..Default::default()
        }
    }

    /// Whether an object loaded for `self` is the one `other` would load:
    /// the same programs, rodata and map types.
    pub fn loads_as(&self, other: &Paths) -> bool {
        let key = |p: &Paths| {
            (
                p.task_state.taken(),
                p.raw_tp.taken(),
                p.perf_buffer.taken(),
                p.compat.taken(),
                p.task_regs.taken(),
                p.prealloc.taken(),
                p.kstack_at_switch_out(),
                p.task_iter,
                p.btf_file.clone(),
                // Read only by the registers-by-hand walker.
                p.task_regs.taken().then_some(p.kernel_stack_size),
            )
        };
        key(self) == key(other)
    }

    /// Off-CPU kernel stacks taken at switch-out rather than switch-in.
    fn kstack_at_switch_out(&self) -> bool {
        self.raw_tp.taken() || !self.task_stack
    }

    /// Why the runtimes' walkers are off on the compat path.
    pub fn no_loop_why(&self) -> String {
        self.compat.why("the kernel has no bpf_loop helper (Linux 5.17)")
    }

    /// One word per fallback taken, in the order of [`Paths::lines`]: the
    /// words of [`FORCE_ENV`] for those it can force, `no-task-stack`,
    /// `no-task-iter` and
    /// `btf-file` for the others. For scripts (`--json`'s
    /// `kernel_fallback_words`) and docs/kernels.md's table of kernels, which
    /// tests/kernels.rs holds the booted kernels to.
    pub fn words(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.btf_file.is_some() {
            out.push("btf-file");
        }
        if self.task_state.taken() {
            out.push("task-state");
        }
        if self.raw_tp.taken() {
            out.push("raw-tp");
        }
        if !self.task_stack && !self.raw_tp.taken() {
            out.push("no-task-stack");
        }
        if self.perf_buffer.taken() {
            out.push("perf-buffer");
        }
        if self.compat.taken() {
            out.push("no-loop");
            if self.task_regs.taken() {
                out.push("no-task-regs");
            }
        }
        if self.prealloc.taken() {
            out.push("prealloc");
        }
        if !self.task_iter {
            out.push("no-task-iter");
        }
        out
    }

    /// One sentence per fallback taken, for the summary and the report.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(path) = &self.btf_file {
            out.push(format!("CO-RE relocations made against --btf {}", path.display()));
        }
        if self.task_state.taken() {
            out.push(format!(
                "off-CPU states read from task_struct.{} at each switch, not from sched_switch's prev_state ({})",
                self.state_field,
                self.task_state.why("the tracepoint has that argument from Linux 5.18")
            ));
        }
        if self.raw_tp.taken() {
            out.push(format!(
                "raw tracepoints instead of BTF tracepoints ({})",
                self.raw_tp.why(self.raw_tp_why)
            ));
        }
        if !self.task_stack && !self.raw_tp.taken() {
            out.push(
                "off-CPU kernel stacks taken at switch-out, not read at switch-in (bpf_get_task_stack needs Linux 5.9)"
                    .to_string(),
            );
        }
        if self.perf_buffer.taken() {
            out.push(format!(
                "process events through a perf buffer instead of a ring buffer ({}); no runtime frames ({}): their walkers need a ring buffer and bpf_loop (Linux 5.17)",
                self.perf_buffer.why("ring buffers need Linux 5.8"),
                crate::runtimes::walkers::Walkers::all().what()
            ));
        }
        if self.compat.taken() {
            out.push(format!(
                "user stacks walked with .eh_frame tables by tail calls, 8 frames a call, not in a bpf_loop ({}; needs Linux 5.10)",
                self.no_loop_why()
            ));
            if self.task_regs.taken() {
                out.push(format!(
                    "user registers read from the top of the task's {} KiB kernel stack ({})",
                    self.kernel_stack_size / 1024,
                    self.task_regs.why("bpf_task_pt_regs needs Linux 5.15")
                ));
            }
        }
        if self.prealloc.taken() {
            out.push(format!(
                "the processes' unwind entries preallocated ({} MiB of kernel memory from the start; {})",
                PROC_UNWIND_ENTRIES * std::mem::size_of::<crate::bpf::types::fg_proc_unwind>() >> 20,
                self.prealloc.why("before Linux 6.1 perf_event programs use only preallocated hash maps")
            ));
        }
        if !self.task_iter {
            out.push(
                "the waits of threads blocked before an off-CPU capture drawn without their user stacks (task iterators need Linux 5.8)"
                    .to_string(),
            );
        }
        out
    }
}

impl Paths {
    /// Opens the object: with `--btf`, CO-RE relocates against that file
    /// (libbpf's `btf_custom_path`) instead of the kernel's BTF.
    pub(super) fn open(
        &self,
        storage: &'static mut MaybeUninit<OpenObject>,
    ) -> libbpf_rs::Result<OpenFgbpfSkel<'static>> {
        let Some(path) = &self.btf_file else {
            return FgbpfSkelBuilder::default().open(storage);
        };
        let path = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
            libbpf_rs::Error::from(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--btf path holds a NUL byte",
            ))
        })?;
        let opts = libbpf_sys::bpf_object_open_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_object_open_opts>() as _,
            // libbpf copies the path while opening.
            btf_custom_path: path.as_ptr(),
            ..Default::default()
        };
        FgbpfSkelBuilder::default().open_opts(opts, storage)
    }

    /// Sets the object up for these paths before it loads: the rodata
    /// flags that select each path in BPF (the verifier prunes the other)
    /// and, with a perf buffer, `proc_events`' map type.
    pub(super) fn configure(&self, open: &mut OpenFgbpfSkel<'_>) -> Result<(), CaptureError> {
        let ro = crate::bpf::rodata(open);
        ro.state_from_task = self.task_state.taken();
        ro.events_perf = self.perf_buffer.taken();
        ro.kstack_at_switch_out = self.kstack_at_switch_out();
        ro.regs_by_hand = self.task_regs.taken();
        ro.kernel_stack_size = self.kernel_stack_size;
        if self.prealloc.taken() {
            open.maps
                .proc_unwind
                .set_map_flags(0)
                .map_err(|e| super::bpf_error("preallocating the unwind entries' map", e))?;
        }
        if self.perf_buffer.taken() {
            let map = &mut open.maps.proc_events;
            // As libbpf-tools' bpf_buffer: 4-byte keys and values (CPU
            // number, perf fd); 0 entries is one per possible CPU.
            map.set_type(MapType::PerfEventArray)
                .and_then(|()| map.set_key_size(4))
                .and_then(|()| map.set_value_size(4))
                .and_then(|()| map.set_max_entries(0))
                .map_err(|e| super::bpf_error("making proc_events a perf buffer", e))?;
        }
        Ok(())
    }
}

/// Checks before the capture: `FGBPF_FORCE_FALLBACK`'s words, and that CO-RE
/// has BTF to work from (`--btf` a readable BTF file, or the kernel's own).
pub fn preflight(btf_file: Option<&Path>) -> Result<(), String> {
    Force::from_env()?;
    if btf_file.is_none() && Path::new(KERNEL_BTF).exists() {
        // The kernel's own: read once, when the probe starts.
        return Ok(());
    }
    load_btf(btf_file).map(drop)
}

/// `--btf` when given, else the kernel's own BTF; each failure one line.
fn load_btf(btf_file: Option<&Path>) -> Result<Btf<'static>, String> {
    load_btf_at(btf_file, Path::new(KERNEL_BTF))
}

/// [`load_btf`] with the kernel's BTF at `kernel`.
fn load_btf_at(btf_file: Option<&Path>, kernel: &Path) -> Result<Btf<'static>, String> {
    // libbpf's own messages would come before fgbpf's one line.
    super::libbpf::quiet_libbpf();
    let Some(path) = btf_file else {
        let shown = kernel.display();
        if !kernel.exists() {
            return Err(format!(
                "this kernel exposes no BTF ({shown} is missing, no CONFIG_DEBUG_INFO_BTF): give fgbpf one with --btf FILE (BTFHub has files for most distribution kernels; see docs/kernels.md, 'Supported kernels')"
            ));
        }
        return Btf::from_path(kernel).map_err(|e| format!("reading the kernel's BTF ({shown}): {e}"));
    };
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("--btf {shown}: {e}: give the path of a vmlinux BTF file"))?;
    if !meta.is_file() {
        return Err(format!("--btf {shown} is not a regular file: give the path of a vmlinux BTF file"));
    }
    let btf = Btf::from_path(path)
        .map_err(|e| format!("--btf {shown} does not parse as BTF ({e}): give a vmlinux BTF file, e.g. BTFHub's for this kernel"))?;
    if btf.type_by_name::<types::Struct<'_>>("task_struct").is_none() {
        return Err(format!(
            "--btf {shown} has no struct task_struct: give the BTF of the kernel itself (vmlinux), not of a module"
        ));
    }
    Ok(btf)
}

/// Parameters of sched_switch's BTF prototype (`btf_trace_sched_switch`,
/// with the `void *` context first): 4 before Linux 5.18, 5 since it
/// passes `prev_state`. `None` when the BTF lacks it.
fn sched_switch_params(btf: &Btf<'_>) -> Option<usize> {
    let typedef: types::Typedef<'_> = btf.type_by_name("btf_trace_sched_switch")?;
    let ptr: BtfType<'_> = typedef.referenced_type().skip_mods_and_typedefs();
    let proto = types::FuncProto::try_from(ptr.next_type()?.skip_mods_and_typedefs()).ok()?;
    Some(proto.len())
}

fn has_member(btf: &Btf<'_>, strukt: &str, member: &str) -> bool {
    let Some(s) = btf.type_by_name::<types::Struct<'_>>(strukt) else {
        return false;
    };
    let found = s.iter().any(|m| m.name.is_some_and(|n| n == member));
    found
}

/// `proc_unwind`'s entries (src/bpf/tables.bpf.h).
const PROC_UNWIND_ENTRIES: usize = 4096;

/// Whether the kernel loads a perf_event program that uses a hash map
/// allocated as it fills (`BPF_F_NO_PREALLOC`): from Linux 6.1, whose
/// hash maps allocate from a pool safe in any context. Before, the
/// verifier refuses it ("perf_event programs can only use preallocated
/// hash map"). Probed by loading the smallest such program: a reference
/// to the map, then exit. False also when the probe itself cannot run.
fn perf_event_takes_unpreallocated_maps() -> bool {
    // One instruction in 8 bytes, little-endian: code, registers (dst low
    // nibble, src high), offset, immediate.
    fn insn(code: u8, regs: u8, imm: i32) -> u64 {
        u64::from(code) | u64::from(regs) << 8 | u64::from(imm as u32) << 32
    }
    let opts = libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: libbpf_sys::BPF_F_NO_PREALLOC,
        ..Default::default()
    };
    // SAFETY: plain syscall wrappers; the name may be NULL, the options
    // outlive the call.
    let map = unsafe { libbpf_sys::bpf_map_create(libbpf_sys::BPF_MAP_TYPE_HASH, std::ptr::null(), 4, 4, 1, &opts) };
    if map < 0 {
        return false;
    }
    let code: [u64; 4] = [
        // r1 = the map (ld_imm64, src BPF_PSEUDO_MAP_FD), in two words.
        insn(0x18, 1 | (libbpf_sys::BPF_PSEUDO_MAP_FD as u8) << 4, map),
        0,
        // r0 = 0; exit
        insn(0xb7, 0, 0),
        insn(0x95, 0, 0),
    ];
    // SAFETY: bpf_insn is 8 bytes laid out as above; the license is a C
    // string; no options.
    let prog = unsafe {
        libbpf_sys::bpf_prog_load(
            libbpf_sys::BPF_PROG_TYPE_PERF_EVENT,
            std::ptr::null(),
            c"GPL".as_ptr(),
            code.as_ptr().cast(),
            code.len() as _,
            std::ptr::null_mut(),
        )
    };
    // SAFETY: closing descriptors this function opened.
    unsafe {
        if prog >= 0 {
            libc::close(prog);
        }
        libc::close(map);
    }
    prog >= 0
}

fn probe_map_type(map_type: libbpf_sys::bpf_map_type) -> bool {
    // SAFETY: libbpf's probe loads a tiny map with no options (NULL allowed).
    unsafe { libbpf_sys::libbpf_probe_bpf_map_type(map_type, std::ptr::null()) == 1 }
}

fn has_enumerator(btf: &Btf<'_>, name: &str, value: &str) -> bool {
    let Some(e) = btf.type_by_name::<types::Enum<'_>>(name) else {
        return false;
    };
    let found = e.iter().any(|m| m.name.is_some_and(|n| n == value));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the running kernel's own BTF: the prototype is found and has
    /// one of the two known shapes, and the task has one of the two state
    /// fields.
    #[test]
    fn the_kernels_btf_answers_each_question() {
        // Not a skip: every kernel fgbpf's tests run on has its own BTF.
        assert!(Path::new(KERNEL_BTF).exists(), "{KERNEL_BTF} is missing: the tests need a kernel with BTF");
        let btf = Btf::from_path(KERNEL_BTF).unwrap();
        let params = sched_switch_params(&btf);
        assert!(matches!(params, Some(4 | 5)), "{params:?}");
        assert!(has_member(&btf, "task_struct", "__state") || has_member(&btf, "task_struct", "state"));
        assert!(!has_member(&btf, "task_struct", "no_such_field"));
        assert!(has_enumerator(&btf, "bpf_func_id", "BPF_FUNC_get_stack"));
        assert!(!has_enumerator(&btf, "bpf_func_id", "BPF_FUNC_no_such_helper"));
    }

    #[test]
    fn a_kernel_without_btf_is_told_to_use_btf_file() {
        let err = load_btf_at(None, Path::new("/nonexistent/btf/vmlinux")).err().unwrap();
        assert!(err.contains("--btf FILE") && err.contains("/nonexistent/btf/vmlinux is missing"), "{err}");
        assert_eq!(err.lines().count(), 1);
    }

    #[test]
    fn lines_name_each_path_and_why() {
        let paths = Paths {
            task_state: Taken::Forced,
            state_field: "__state",
            raw_tp: Taken::Detected,
            raw_tp_why: "the kernel has no BTF",
            perf_buffer: Taken::No,
            btf_file: None,
            compat: Taken::Detected,
            task_regs: Taken::Forced,
            kernel_stack_size: 16384,
            task_stack: true,
            prealloc: Taken::No,
            task_iter: false,
            find_vma: false,
        };
        let lines = paths.lines();
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert!(lines[0].contains("task_struct.__state") && lines[0].contains("forced by FGBPF_FORCE_FALLBACK"));
        assert!(lines[1].contains("raw tracepoints") && lines[1].contains("the kernel has no BTF"));
        assert!(lines[2].contains("tail calls") && lines[2].contains("no bpf_loop helper (Linux 5.17)"));
        assert!(lines[3].contains("16 KiB kernel stack") && lines[3].contains("forced by FGBPF_FORCE_FALLBACK"));
        assert!(lines[4].contains("without their user stacks") && lines[4].contains("Linux 5.8"));
        assert_eq!(paths.words(), ["task-state", "raw-tp", "no-loop", "no-task-regs", "no-task-iter"]);
        let native = Paths {
            task_stack: true,
            task_iter: true,
            ..Default::default()
        };
        assert!(native.lines().is_empty() && native.words().is_empty());
    }
}
