//! Ruby VMs in the kernel ([`crate::runtimes::interp`]'s contract): each process the
//! probe sees is checked for libruby ([`crate::runtimes::ruby`]); a VM's TLS
//! slot and offsets go into `rb_procs` for the BPF walker
//! (src/runtimes/ruby/ruby.bpf.h); the iseqs and method entries its stacks name are
//! read when the walker announces them, and named at the end.

use std::fs::File;
use std::sync::Arc;

use crate::runtimes::interp::{address_of, pc_bits_of, Interp, Walker, PC_BITS};
use crate::bpf::{types, FgbpfMaps};
use crate::procs::mem::Mem;
use crate::profile::{Evaluator, Pattern};
use crate::runtimes::{Found, Runtime, Settings, BpfWalker};
use crate::runtimes::ruby::iseq::{Reader, Unnamed};
use crate::runtimes::ruby::{self as rb, Interpreter};

/// rb_vm_exec, whose native frames Ruby's runs take the place of, and the
/// VM loop it runs them in (vm_exec_core: named in a libruby with its
/// symbols, else an address in libruby), which goes with it.
pub(crate) const EVALUATOR: Evaluator = Evaluator {
    frames: &[Pattern::Is("rb_vm_exec")],
    loops: &[Pattern::Is("vm_exec_core"), Pattern::AddressIn("libruby")],
    ..Evaluator::NONE
};

/// FG_RB_MARKER and FG_RB_CFUNC of src/runtimes/ruby/ruby.h.
pub(crate) const MARKER: u64 = 0xffff_ffff_ffff_ff51;
const CFUNC: u64 = 1 << 62;

/// The frame text of a C method whose name was not found.
pub const C_METHOD: &str = "[ruby: C method, name not found]";

pub(crate) struct RubyWalker;

pub(crate) type Ruby = Interp<RubyWalker>;

/// How the summary speaks of it.
pub const LANG: super::super::walks::Lang = super::super::walks::Lang {
    name: "Ruby",
    whole: "with the Ruby stack read whole",
    cut: "cut at the 127-frame limit (its outermost Ruby frames are missing)",
    fault: "cut by interpreter memory that could not be read",
    not_read: "Ruby frames not read",
    early: "taken before fgbpf was reading the interpreter (native frames only)",
    runtime: "Ruby",
    native: "the VM's native frames (rb_vm_exec)",
    outside: "in threads not running Ruby (native threads)",
};

/// What the Ruby folder registers (crate::runtimes' one list).
pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: super::super::Plumbing::NONE,
    thread_roles: &[],
    marker: Some(MARKER),
    walker_maps: &["rb_reads"],
    id_label: None,
};

/// Its walker, when the capture reads Ruby frames.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    s.walks(BpfWalker::Ruby).then(|| Box::new(Ruby::new(s.no_lines)) as Box<dyn Runtime>)
}

impl Walker for RubyWalker {
    type Found = Interpreter;
    type Reader = Reader;
    const MARKER: u64 = MARKER;
    /// rb_vm_exec, which runs its methods in the VM loop it calls
    /// (vm_exec_core, an address in a stripped libruby).
    const EVALUATOR: Evaluator = EVALUATOR;
    const LANG: &'static super::super::walks::Lang = &LANG;
    const ANNOUNCED: u32 = 10;

    fn procs<'a, 'obj>(maps: &'a FgbpfMaps<'obj>) -> &'a libbpf_rs::MapMut<'obj> {
        &maps.rb_procs
    }

    fn results(found: &mut Found) -> (&mut Vec<(u32, (u32, u32), String)>, &mut Vec<(u32, String)>) {
        (&mut found.rubies, &mut found.rb_unsupported)
    }

    fn described(i: &Interpreter) -> ((u32, u32), String) {
        (i.version, i.binary.clone())
    }

    fn may_be(path: &str) -> bool {
        rb::may_be_vm(path)
    }

    fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Interpreter>, String> {
        rb::find(file, path, start, offset)
    }

    fn evaluator_at(vm: &Interpreter, addr: u64, leaf: bool) -> bool {
        // A return address is past its call: at most the function's end.
        vm.vm_exec.is_some_and(|(start, end)| if leaf { (start..end).contains(&addr) } else { addr > start && addr <= end })
    }

    fn note(_vm: &Interpreter, reader: &Reader) -> Option<String> {
        reader.jit().then(|| {
            "a JIT runs (YJIT or RJIT: code mapped with no file): its Ruby frames are named without lines (a compiled method saves its pc only at some calls), and its native stacks stop at the JIT's code".to_string()
        })
    }

    fn check(mem: &Mem, vm: &Interpreter) -> Result<(), String> {
        rb::check::check(mem, vm)
    }

    fn map_value(vm: &Interpreter) -> Vec<u8> {
        let l = &vm.layout;
        let (vm_threads, th_node, th_thread_id, th_ec) = match l.context {
            rb::Context::VmThreads { vm_threads, th_node, th_thread_id, th_ec, .. } => (vm_threads, th_node, th_thread_id, th_ec),
            rb::Context::Tls => (0, 0, 0, 0),
        };
        let v = types::fg_rb_proc {
            modid_at: vm.modid_at,
            tls_off: vm.tls_off,
            ec_at: vm.ec_at,
            vm_at: vm.vm_at,
            ec_thread_ptr: l.ec_thread_ptr,
            vm_threads,
            th_node,
            th_thread_id,
            th_ec,
            ec_vm_stack: l.ec_vm_stack,
            ec_stack_size: l.ec_stack_size,
            ec_cfp: l.ec_cfp,
            cfp_size: l.cfp_size,
            cfp_pc: l.cfp_pc,
            cfp_iseq: l.cfp_iseq,
            cfp_ep: l.cfp_ep,
            ..Default::default()
        };
        // SAFETY: fg_rb_proc is a plain struct of integers.
        unsafe { plain::as_bytes(&v) }.to_vec()
    }

    fn reader(pid: u32, vm: &Interpreter) -> Reader {
        Reader::new(pid, vm.layout, vm.data)
    }

    fn read_word(reader: &mut Reader, word: u64) {
        reader.read(address_of(word), word & CFUNC != 0);
    }

    /// `with`: 1 for a C method's entry; else the method entry of the
    /// frame that ran the iseq (src/runtimes/ruby/ruby.bpf.h), or 0.
    fn read_announced(reader: &mut Reader, addr: u64, with: u64) {
        if with == 1 {
            reader.read(addr, true);
        } else {
            reader.read_iseq_of(addr, with);
        }
    }

    fn text(_vm: &Interpreter, reader: &Reader, word: u64, no_lines: bool) -> Arc<str> {
        let addr = address_of(word);
        if word & CFUNC != 0 {
            return match reader.method(addr) {
                Ok(name) => format!("{name} [c function]").into(),
                Err(Unnamed::NotIseq) => "[ruby: not a method entry]".into(),
                Err(Unnamed::CMethod) => C_METHOD.into(),
                Err(Unnamed::Gone) => "[ruby: process gone before its method was read]".into(),
            };
        }
        match reader.iseq(addr).and_then(|iseq| Ok((iseq, reader.label(addr)?))) {
            Ok((iseq, label)) => {
                let file = if iseq.file.is_empty() { "?" } else { &iseq.file };
                if no_lines || reader.jit() {
                    format!("{label} ({file})").into()
                } else {
                    format!("{label} ({file}:{})", iseq.line(pc_bits_of(word), PC_BITS)).into()
                }
            }
            Err(Unnamed::NotIseq | Unnamed::CMethod) => "[ruby: not an iseq]".into(),
            Err(Unnamed::Gone) => "[ruby: process gone before its iseq was read]".into(),
        }
    }

    /// The VM's own bottom frame (a top-level iseq that never ran an
    /// instruction, below the main script's) is no code the thread runs.
    fn not_running(reader: &Reader, words: &[u64]) -> usize {
        let Some(&last) = words.last().filter(|_| words.len() > 1) else { return 0 };
        if last & CFUNC != 0 {
            return 0;
        }
        let top = reader.iseq(address_of(last)).is_ok_and(|i| i.top && i.index(pc_bits_of(last), PC_BITS) == 0);
        usize::from(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procs::frame_kind::FrameKind;
    use crate::profile::build::merge_interp;
    use crate::profile::{Frame, FrameId, InterpFrame, Profile, Unit};

    /// Native frames leaf first, merged with Ruby runs leaf first; the
    /// names of the result, root first.
    fn merged(native: &[&str], ruby: &[(&str, bool)], whole: bool) -> Vec<String> {
        let mut p = Profile::new(Unit::Samples);
        let ids: Vec<Vec<FrameId>> = native.iter().map(|n| vec![p.intern_frame(Frame::new(*n, FrameKind::User))]).collect();
        let native: Vec<&[FrameId]> = ids.iter().map(Vec::as_slice).collect();
        let runs: Vec<InterpFrame> = ruby.iter().map(|&(t, entry)| InterpFrame { text: t.into(), entry }).collect();
        let mut frames = Vec::new();
        merge_interp(&native, &runs, &EVALUATOR, whole, &mut frames, &mut p);
        frames.iter().map(|&f| p.frame(f).name.clone()).collect()
    }

    #[test]
    fn ruby_runs_take_the_place_of_rb_vm_exec_and_its_loop() {
        let native = ["libruby.so+0x24ebd0", "rb_vm_exec", "ruby_run_node", "main"];
        let ruby = [("inner", false), ("outer", false), ("<main>", true)];
        assert_eq!(merged(&native, &ruby, true), ["main", "ruby_run_node", "<main>", "outer", "inner"]);
    }

    #[test]
    fn an_evaluator_call_left_without_frames_stays_native() {
        // times (a C method) called a block whose frame was popped, and
        // the VM call that ran it has yet to return: three rb_vm_exec,
        // two runs. The runs go to the outer two.
        let native = ["libruby.so+0x24ebd0", "rb_vm_exec", "rb_yield", "libruby.so+0x24ebd0", "rb_vm_exec", "main"];
        let ruby = [("times", false), ("bar", true)];
        let whole = merged(&native[..], &ruby, true);
        assert_eq!(whole, ["main", "bar", "times", "rb_yield", "rb_vm_exec", "libruby.so+0x24ebd0"]);
        // Read in part, the runs it has are the innermost.
        let cut = merged(&native[..], &ruby, false);
        assert_eq!(cut, ["main", "rb_vm_exec", "libruby.so+0x24ebd0", "rb_yield", "bar", "times"]);
    }
}
