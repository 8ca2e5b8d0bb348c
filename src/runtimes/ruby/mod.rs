//! Ruby VMs in profiled processes: which processes run one, how the BPF
//! walker (src/runtimes/ruby/ruby.bpf.h) finds a thread's execution context, and the
//! structure offsets of its version; naming the iseqs and method entries
//! it records is [`iseq`]. From 3.0 the context is libruby's thread-local
//! `ruby_current_ec`: the walker reads it through the thread's DTV, with
//! the module id ld.so wrote in libruby's DTPMOD64 slot for it (found in
//! the library's dynamic relocations, kept in stripped builds) and the
//! variable's offset in the module's block. Ruby 2.7 keeps no context in
//! TLS: the walker finds the thread's rb_thread_t among the VM's living
//! threads by its pthread_t ([`Context::VmThreads`]). The offsets are those of
//! Ruby's own headers, as rbspy's bindings (`rbspy-ruby-structs`) have
//! them; fgbpf knows the versions it was tested on. A process running any
//! other version keeps its native frames, and the summary says why.

pub mod walker;
pub mod iseq;
pub(crate) mod check;
mod hidden;
mod tls;

use std::fs::File;

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget};

use crate::procs::elf::{load_bias, ElfInfo};

/// Where the unwind tables say functions start (link-time addresses).
fn function_starts(file: &File) -> Vec<u64> {
    ElfInfo::read(file).map(|e| e.function_starts(file)).unwrap_or_default()
}

/// Offsets into the structures of one Ruby version, generated from the
/// version's headers by scripts/ruby-offsets.py (layouts.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// How a thread's execution context is found.
    pub context: Context,
    /// rb_execution_context_t: vm_stack, vm_stack_size, cfp, thread_ptr.
    pub ec_vm_stack: u16,
    pub ec_stack_size: u16,
    pub ec_cfp: u16,
    pub ec_thread_ptr: u16,
    /// rb_control_frame_t: its size, pc, iseq, ep.
    pub cfp_size: u16,
    pub cfp_pc: u16,
    pub cfp_iseq: u16,
    pub cfp_ep: u16,
    /// rb_iseq_t: body.
    pub iseq_body: u16,
    /// rb_iseq_constant_body: iseq_size, iseq_encoded, location
    /// (pathobj, base_label, label, first_lineno), insns_info (body,
    /// positions, size, succ_index_table).
    pub body_size: u16,
    pub body_encoded: u16,
    pub body_location: u16,
    pub body_insns_info: u16,
    /// rb_callable_method_entry_t: def, owner; rb_method_definition_t:
    /// body (an iseq method's iseq first), original_id.
    pub me_def: u16,
    pub me_owner: u16,
    pub def_body: u16,
    pub def_original_id: u16,
    /// rb_iseq_constant_body: local_iseq (a block's method's iseq).
    pub body_local_iseq: u16,
    /// sizeof(struct iseq_insn_info_entry), whose first field is line_no.
    pub insn_info_size: u16,
    /// rb_iseq_location_t's first_lineno: an int (3.2+), else a Fixnum.
    pub first_lineno_int: bool,
    /// RString: its len field (0: a heap string's is at `str_embed`, an
    /// embedded one's in the flags, as before 3.2), where an embedded
    /// string's bytes start, and a heap string's pointer.
    pub str_len: u16,
    pub str_embed: u16,
    pub str_ptr: u16,
    /// How many flag bits hold an embedded RArray's length.
    pub array_embed_len_bits: u8,
    /// Where a class keeps its path.
    pub classes: ClassPath,
    /// tLAST_OP_ID: ids above it carry their serial above 4 scope bits
    /// (168 in 2.7, 169 from 3.0).
    pub last_op_id: u64,
}

/// Where a thread's execution context is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// 3.0+: libruby's thread-local `ruby_current_ec`.
    Tls,
    /// 2.7: the global `ruby_current_execution_context_ptr` is the context
    /// of the thread holding the GVL, not of every thread: each thread's
    /// rb_thread_t is in the list of the VM (`ruby_current_vm_ptr`) at
    /// `vm_threads` (linked by its node at `th_node`), told by its
    /// `thread_id` (its pthread_t, the thread's fsbase with glibc), with
    /// its context at `th_ec`. The VM's main thread at `vm_main_thread`
    /// is what the check at attach reads.
    VmThreads { vm_threads: u16, vm_main_thread: u16, th_node: u16, th_thread_id: u16, th_ec: u16 },
}

/// Where a class's path (and a singleton class's object) is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassPath {
    /// Until 3.1: RClass points to its rb_classext_t (`ext_ptr`), whose
    /// instance-variable st_table (`iv_tbl`) holds `__classpath__` and
    /// `__attached__`.
    IvTable { ext_ptr: u16, iv_tbl: u16 },
    /// 3.2+ (object shapes): the rb_classext_t follows the RClass (`ext`
    /// bytes in), with `classpath` and `attached` (attached_object) fields.
    Field { ext: u16, classpath: u16, attached: u16 },
}

mod layouts;
pub use layouts::{LAYOUT_27, LAYOUT_31, LAYOUT_33};

/// The known layout of Ruby `version` (major, minor).
pub fn layout(version: (u32, u32)) -> Option<Layout> {
    match version {
        (2, 7) => Some(LAYOUT_27),
        (3, 1) => Some(LAYOUT_31),
        (3, 3) => Some(LAYOUT_33),
        _ => None,
    }
}

/// The versions fgbpf reads, for messages and docs/runtimes/ruby.md.
pub const SUPPORTED: &str = "2.7, 3.1 and 3.3";

/// A Ruby VM found in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreter {
    /// Major and minor version, e.g. (3, 1).
    pub version: (u32, u32),
    /// Where ld.so writes libruby's TLS module id for `ruby_current_ec`
    /// (0 for 2.7: no context in TLS).
    pub modid_at: u64,
    /// `ruby_current_ec`'s offset in the module's TLS block.
    pub tls_off: u64,
    /// 2.7: where `ruby_current_execution_context_ptr` (the GVL holder's
    /// context) and `ruby_current_vm_ptr` are in the process; else 0.
    pub ec_at: u64,
    pub vm_at: u64,
    pub layout: Layout,
    /// libruby's .data in the process (address, bytes), where Ruby's
    /// symbol table (ruby_global_symbols, not exported) is looked for.
    pub data: (u64, u64),
    /// The file it was found in (libruby or the executable), untrusted.
    pub binary: String,
    /// Where `ruby_version` and `rb_cObject` are in the process: what the
    /// check at attach reads ([`check`]).
    pub version_at: u64,
    pub object_at: u64,
    /// rb_vm_exec's addresses [start, end) in the process, when libruby
    /// does not export it (3.3): its frames are told by address.
    pub vm_exec: Option<(u64, u64)>,
}

/// Whether a mapped file may hold the VM: `libruby…so…` or `ruby…`, by
/// name, before anything is opened.
pub fn may_be_vm(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.starts_with("libruby") || base.starts_with("ruby")
}

/// R_X86_64_DTPMOD64.
pub(crate) const R_X86_64_DTPMOD64: u32 = 16;

/// Looks for the VM in a file mapped executable at `start` from file
/// offset `offset`: `Ok(None)` when the file has neither `ruby_current_ec`
/// nor a defined `ruby_version` (not the VM: the `ruby` launcher of a
/// shared build, a gem's extension).
/// `Err`: it is one, but one fgbpf cannot read, and why.
pub fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Interpreter>, String> {
    let Some(data) = crate::procs::elf::map(file) else {
        return Ok(None);
    };
    let Ok(obj) = object::File::parse(&*data) else {
        return Ok(None);
    };
    let Some(table) = obj.dynamic_symbol_table() else {
        return Ok(None);
    };
    // The VM defines ruby_version (the launcher of a shared build and a
    // gem's extension only refer to it). Ruby 3.3 no longer exports
    // ruby_current_ec: such a VM is still one, and said to be one.
    let defined = |name: &str| table.symbols().find(|s| s.name() == Ok(name) && s.address() != 0);
    let ec = table.symbols().find(|s| s.name() == Ok("ruby_current_ec"));
    let at_version = defined("ruby_version");
    if ec.is_none() && at_version.is_none() {
        return Ok(None);
    }
    let version_addr = at_version.as_ref().map(|s| s.address());
    let version = version_addr.and_then(|a| read_at(&obj, &data, a, 16)).and_then(parse_version);
    let Some(version) = version else {
        return Err("its version could not be read (no ruby_version)".into());
    };
    let Some(layout) = layout(version) else {
        return Err(format!("Ruby {}.{} (fgbpf reads {SUPPORTED})", version.0, version.1));
    };
    // The slot ld.so fills with libruby's module id for ruby_current_ec:
    // a relocation to the exported symbol (3.1), else the TLS pair that
    // rb_thread_current's code reads (3.3, where it is local). An
    // executable with the VM linked in reads it by a fixed offset instead
    // (initial-exec TLS), which fgbpf does not follow yet.
    let mut globals = (0, 0);
    let (slot, tls_off) = match ec {
        // 2.7: the VM's globals, exported.
        _ if matches!(layout.context, Context::VmThreads { .. }) => {
            let at = |name: &str| defined(name).map(|s| s.address()).ok_or_else(|| format!("Ruby {}.{}: no {name}", version.0, version.1));
            globals = (at("ruby_current_execution_context_ptr")?, at("ruby_current_vm_ptr")?);
            (0, 0)
        }
        Some(ec) => {
            let slot = obj.dynamic_relocations().and_then(|mut relocs| {
                relocs.find_map(|(at, r)| {
                    let is_modid = matches!(r.flags(), RelocationFlags::Elf { r_type } if r_type == R_X86_64_DTPMOD64);
                    let to_ec = matches!(r.target(), RelocationTarget::Symbol(i) if i == ec.index());
                    (is_modid && to_ec).then_some(at)
                })
            });
            let Some(slot) = slot else {
                return Err("its ruby_current_ec is not reached through a module id (a static build of Ruby)".into());
            };
            (slot, ec.address())
        }
        None => tls::current_ec(&obj, &data, layout.ec_thread_ptr)
            .map_err(|why| format!("Ruby {}.{}: ruby_current_ec not found ({why})", version.0, version.1))?,
    };
    let Some(bias) = load_bias(&data, start, offset) else {
        return Err("its load address could not be worked out".into());
    };
    let vm_exec = hidden::vm_exec(&obj, &data, || function_starts(file))
        .map(|(a, b)| (a.wrapping_add(bias), b.wrapping_add(bias)));
    let data = obj
        .section_by_name(".data")
        .map_or((0, 0), |s| (s.address().wrapping_add(bias), s.size()));
    let in_process = |a: u64| if a == 0 { 0 } else { a.wrapping_add(bias) };
    Ok(Some(Interpreter {
        version,
        modid_at: in_process(slot),
        tls_off,
        ec_at: in_process(globals.0),
        vm_at: in_process(globals.1),
        version_at: version_addr.map_or(0, |a| a.wrapping_add(bias)),
        object_at: defined("rb_cObject").map_or(0, |s| s.address().wrapping_add(bias)),
        vm_exec,
        layout,
        data,
        binary: path.to_string(),
    }))
}

pub(crate) fn read_at<'d>(obj: &object::File<'_>, data: &'d [u8], vaddr: u64, len: usize) -> Option<&'d [u8]> {
    use object::ObjectSegment;
    let off = obj.segments().find_map(|s| {
        let (off, size) = s.file_range();
        (vaddr >= s.address() && vaddr - s.address() < size).then(|| vaddr - s.address() + off)
    })?;
    let end = (off as usize).checked_add(len)?.min(data.len());
    data.get(off as usize..end)
}

/// (major, minor) from `ruby_version`'s NUL-terminated "3.1.2".
pub(crate) fn parse_version(b: &[u8]) -> Option<(u32, u32)> {
    let text = b.split(|&c| c == 0).next()?;
    let text = std::str::from_utf8(text).ok()?;
    let mut parts = text.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// src/runtimes/ruby/ruby.bpf.h masks its offsets into what it reads instead of
    /// checking them (the execution context's first 32 bytes, a control
    /// frame of at most 64): each must be inside.
    #[test]
    fn the_walkers_offsets_are_inside_what_it_reads() {
        for l in [LAYOUT_27, LAYOUT_31, LAYOUT_33] {
            for off in [l.ec_vm_stack, l.ec_stack_size, l.ec_cfp] {
                assert!(off + 8 <= 32, "execution context offset {off} past the 32 bytes read");
            }
            assert!(l.cfp_size <= 64);
            for off in [l.cfp_pc, l.cfp_iseq, l.cfp_ep] {
                assert!(off + 8 <= l.cfp_size, "control frame offset {off} past its {} bytes", l.cfp_size);
            }
        }
    }

    /// scripts/ruby-offsets.py's output for 3.1 is the layout fgbpf read
    /// 3.1 with before it, pinned by hand from the same bindings.
    #[test]
    fn the_generated_3_1_layout_is_the_one_pinned_before() {
        let l = LAYOUT_31;
        let hand = [0, 8, 16, 64, 0, 16, 32, 16, 4, 8, 64, 120, 16, 32, 8, 32, 176, 12];
        let generated = [
            l.ec_vm_stack, l.ec_stack_size, l.ec_cfp, l.cfp_size, l.cfp_pc, l.cfp_iseq, l.cfp_ep, l.iseq_body, l.body_size,
            l.body_encoded, l.body_location, l.body_insns_info, l.me_def, l.me_owner, l.def_body, l.def_original_id,
            l.body_local_iseq, l.insn_info_size,
        ];
        assert_eq!(generated, hand);
        assert_eq!(l.classes, ClassPath::IvTable { ext_ptr: 24, iv_tbl: 8 });
        assert!(!l.first_lineno_int && l.str_len == 0 && l.array_embed_len_bits == 2);
    }

    /// scripts/ruby-offsets.py's output for 2.7 is what gcc's offsetof
    /// says over Ruby 2.7.4's own structures (Debian 11's ruby2.7-dev,
    /// rb_mjit_min_header-2.7.4.h), which the bindings only translate.
    #[test]
    fn the_generated_2_7_layout_is_the_headers() {
        let l = LAYOUT_27;
        let from_header = [0, 8, 16, 56, 56, 0, 16, 32, 16, 4, 8, 64, 120, 16, 32, 8, 32, 176, 8, 16, 24];
        let generated = [
            l.ec_vm_stack, l.ec_stack_size, l.ec_cfp, l.ec_thread_ptr, l.cfp_size, l.cfp_pc, l.cfp_iseq, l.cfp_ep, l.iseq_body,
            l.body_size, l.body_encoded, l.body_location, l.body_insns_info, l.me_def, l.me_owner, l.def_body,
            l.def_original_id, l.body_local_iseq, l.insn_info_size, l.str_embed, l.str_ptr,
        ];
        assert_eq!(generated, from_header);
        let threads = Context::VmThreads { vm_threads: 312, vm_main_thread: 192, th_node: 0, th_thread_id: 72, th_ec: 32 };
        assert_eq!(l.context, threads);
        assert_eq!(l.classes, ClassPath::IvTable { ext_ptr: 24, iv_tbl: 8 });
        assert!(!l.first_lineno_int && l.str_len == 0 && l.array_embed_len_bits == 2 && l.last_op_id == 168);
        assert_eq!((LAYOUT_31.context, LAYOUT_31.last_op_id), (Context::Tls, 169));
    }

    #[test]
    fn versions_read_from_ruby_version() {
        assert_eq!(parse_version(b"3.1.2\0junk"), Some((3, 1)));
        assert_eq!(parse_version(b"x.1\0"), None);
        assert!(layout((2, 7)).is_some());
        assert!(layout((2, 6)).is_none(), "2.6 is not tested: not read");
        assert!(layout((3, 1)).is_some());
        assert!(layout((3, 3)).is_some());
        assert!(layout((3, 2)).is_none(), "3.2 is not tested: not read");
        assert!(layout((3, 4)).is_none());
        assert!(may_be_vm("/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1.2"));
        assert!(!may_be_vm("/usr/lib/libc.so.6"));
    }
}
