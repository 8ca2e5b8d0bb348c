//! LuaJIT in the kernel ([`crate::runtimes::interp`]'s contract): each
//! process the probe sees is checked for LuaJIT
//! ([`crate::runtimes::luajit`]); its VM's code range and offsets go into
//! `luajit_procs` for the BPF walker (src/runtimes/luajit/luajit.bpf.h);
//! the prototypes its stacks name are read when the walker announces
//! them, and named at the end: `name (file:line)`.

use std::fs::File;
use std::sync::Arc;

use crate::bpf::{types, FgbpfMaps};
use crate::procs::mem::Mem;
use crate::profile::{Evaluator, Pattern};
use crate::runtimes::interp::{address_of, Interp, Walker};
use crate::runtimes::luajit::{self, Reader, Unnamed, Vm};
use crate::runtimes::{BpfWalker, Found, Runtime, Settings};

/// FG_LUAJIT_MARKER of src/runtimes/luajit/luajit.h.
pub(crate) const MARKER: u64 = 0xffff_ffff_ffff_ff55;
/// FG_LUAJIT_TRACE: the sample is in compiled code entered in this frame.
const TRACE: u64 = 1 << 60;
/// The VM's frames, which its binary does not name: told by address.
pub(crate) const VM_FRAME: &str = "[luajit vm]";

pub(crate) struct LuaJitWalker;

pub(crate) type LuaJit = Interp<LuaJitWalker>;

/// How the summary speaks of it.
pub const LANG: super::super::walks::Lang = super::super::walks::Lang {
    name: "LuaJIT",
    whole: "with the Lua stack read whole",
    cut: "cut at the 127-frame limit (its outermost Lua frames are missing)",
    fault: "cut by VM memory that could not be read",
    not_read: "Lua frames not read",
    early: "taken before fgbpf was reading the VM (native frames only)",
    runtime: "LuaJIT",
    native: "the VM's native frames ([luajit vm])",
    outside: "outside Lua code (C code between requests, start-up, or a thread whose VM was not seen running yet)",
};

/// What the LuaJIT folder registers (crate::runtimes' one list).
pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: super::super::Plumbing::NONE,
    thread_roles: &[],
    marker: Some(MARKER),
    walker_maps: &["luajit_g"],
    id_label: None,
};

/// Its walker, when the capture reads Lua frames.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    s.walks(BpfWalker::LuaJit).then(|| Box::new(LuaJit::new(s.no_lines)) as Box<dyn Runtime>)
}

impl Walker for LuaJitWalker {
    type Found = Vm;
    type Reader = Reader;
    const MARKER: u64 = MARKER;
    const LANG: &'static super::super::walks::Lang = &LANG;
    /// The VM's assembler code, unnamed in a stripped library: its frames
    /// are told by address ([`Walker::evaluator_at`]). One native frame
    /// per call into the VM from C.
    const EVALUATOR: Evaluator = Evaluator {
        frames: &[Pattern::Is(VM_FRAME)],
        loops: &[],
        jit: &[],
        jit_callers: &[],
    };
    const ANNOUNCED: u32 = 15;

    fn procs<'a, 'obj>(maps: &'a FgbpfMaps<'obj>) -> &'a libbpf_rs::MapMut<'obj> {
        &maps.luajit_procs
    }

    fn results(found: &mut Found) -> (&mut Vec<(u32, (u32, u32), String)>, &mut Vec<(u32, String)>) {
        (&mut found.luajits, &mut found.luajit_unsupported)
    }

    fn described(vm: &Vm) -> ((u32, u32), String) {
        ((2, 1), vm.binary.clone())
    }

    fn may_be(path: &str) -> bool {
        luajit::may_be_vm(path)
    }

    fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Vm>, String> {
        luajit::find(file, path, start, offset)
    }

    fn check(mem: &Mem, vm: &Vm) -> Result<(), String> {
        let l = &vm.layout;
        if u64::from(l.g_jit_base) != u64::from(l.g_cur_l) + l.refsize() || vm.vm_end <= vm.vm_start {
            return Err(format!("LuaJIT {}: the layout's check failed", vm.release));
        }
        vm.g_hint.set(luajit::find_global(mem, l).unwrap_or(0));
        Ok(())
    }

    fn evaluator_at(vm: &Vm, addr: u64, leaf: bool) -> bool {
        // A return address is past its call: the call may be the last
        // instruction of the range.
        let a = if leaf { addr } else { addr.wrapping_sub(1) };
        a >= vm.vm_start && a < vm.vm_end
    }

    fn map_value(vm: &Vm) -> Vec<u8> {
        let l = &vm.layout;
        let v = types::fg_luajit_proc {
            vm_start: vm.vm_start,
            vm_end: vm.vm_end,
            gg_dispatch: l.gg_dispatch,
            gg_g: l.gg_g,
            l_glref: l.l_glref,
            l_base: l.l_base,
            l_maxstack: l.l_maxstack,
            l_stack: l.l_stack,
            g_vmstate: l.g_vmstate,
            g_cur_L: l.g_cur_l,
            g_jit_base: l.g_jit_base,
            fn_ffid: l.fn_ffid,
            fn_pc: l.fn_pc,
            pt_size: l.pt_size,
            pt_sizebc: l.pt_sizebc,
            g_hint: vm.g_hint.get(),
            l_cframe: l.l_cframe,
            g_to_j: l.g_to_j,
            j_trace: l.j_trace,
            t_mcode: l.t_mcode,
            t_szmcode: l.t_szmcode,
            gc64: u16::from(l.gc64),
            fn_gct: l.gct,
            ..Default::default()
        };
        // SAFETY: fg_luajit_proc is a plain struct of integers.
        unsafe { plain::as_bytes(&v) }.to_vec()
    }

    fn reader(pid: u32, vm: &Vm) -> Reader {
        Reader::new(pid, vm.layout)
    }

    fn read_word(reader: &mut Reader, word: u64) {
        reader.read(address_of(word));
    }

    fn read_announced(reader: &mut Reader, addr: u64, _addr2: u64) {
        reader.read(addr);
    }

    fn text(_: &Vm, reader: &Reader, word: u64, no_lines: bool) -> Arc<str> {
        text(reader, word, None, no_lines).into()
    }

    const NAMED_BY_CALLER: bool = true;

    fn text_called(_: &Vm, reader: &Reader, word: u64, caller: Option<u64>, no_lines: bool) -> Arc<str> {
        text(reader, word, caller, no_lines).into()
    }
}

/// The instruction a frame word says its frame runs (index + 1 in bits
/// 44-59; 0: not known).
pub(crate) fn at(word: u64) -> Option<u32> {
    let idx = ((word >> 44) & 0xffff) as u32;
    idx.checked_sub(1)
}

/// A frame's text: `name (file:line)`, the name from its caller's call
/// (`caller`: the caller's word) when known, `<file:firstline>` else, and
/// the line the frame runs when known, its function's first else.
pub(crate) fn text(reader: &Reader, word: u64, caller: Option<u64>, no_lines: bool) -> String {
    let p = match reader.proto(address_of(word)) {
        Ok(p) => p,
        Err(Unnamed::Gone) => return "[luajit: process gone before its function was read]".into(),
        Err(Unnamed::NotProto) => return "[luajit: not a function]".into(),
        Err(Unnamed::NotAnnounced) => return "[luajit: function not announced]".into(),
    };
    let called = caller.and_then(|c| {
        let cp = reader.proto(address_of(c)).ok()?;
        cp.callees.get(&at(c)?).cloned()
    });
    let name = match called {
        Some(n) => n,
        None if p.main => "main chunk".to_string(),
        None => format!("<{}:{}>", p.file, p.firstline),
    };
    // A trace's entry frame (TRACE): its pc in the trace is not read, its
    // function's first line is given. Not marked in the text, which
    // OTLP and pprof part as `name (file:line)`.
    let line = at(word).filter(|_| word & TRACE == 0).and_then(|i| p.lines.get(i as usize).copied()).unwrap_or(p.firstline);
    if no_lines {
        format!("{name} ({})", p.file)
    } else {
        format!("{name} ({}:{line})", p.file)
    }
}
