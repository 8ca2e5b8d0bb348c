//! PHP interpreters in the kernel ([`crate::runtimes::interp`]'s contract): each
//! process the probe sees is checked for PHP ([`crate::runtimes::php`]); an
//! interpreter's executor globals and offsets go into `php_procs` for the
//! BPF walker (src/runtimes/php/php.bpf.h); the functions its stacks name are read
//! when the walker announces them, and named at the end.

use std::fs::File;
use std::sync::Arc;

use crate::runtimes::interp::{address_of, pc_bits_of, Interp, Walker, PC_BITS};
use crate::bpf::{types, FgbpfMaps};
use crate::procs::mem::Mem;
use crate::profile::{Evaluator, Pattern};
use crate::runtimes::{Found, Runtime, Settings, BpfWalker};
use crate::runtimes::php::{self, Interpreter, Reader, Unnamed};

/// FG_PHP_MARKER of src/runtimes/php/php.h.
pub(crate) const MARKER: u64 = 0xffff_ffff_ffff_ff52;

pub(crate) struct PhpWalker;

pub(crate) type Php = Interp<PhpWalker>;

/// How the summary speaks of it.
pub const LANG: super::super::walks::Lang = super::super::walks::Lang {
    name: "PHP",
    whole: "with the PHP stack read whole",
    cut: "cut at the 127-frame limit (its outermost PHP frames are missing)",
    fault: "cut by interpreter memory that could not be read",
    not_read: "PHP frames not read",
    early: "taken before fgbpf was reading the interpreter (native frames only)",
    runtime: "PHP",
    native: "the executor's native frames (execute_ex)",
    outside: "outside PHP code (start-up, between requests)",
};

/// What the PHP folder registers (crate::runtimes' one list).
pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: super::super::Plumbing::NONE,
    thread_roles: &[],
    marker: Some(MARKER),
    walker_maps: &["php_reads"],
    id_label: None,
};

/// Its walker, when the capture reads PHP frames.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    s.walks(BpfWalker::Php).then(|| Box::new(Php::new(s.no_lines)) as Box<dyn Runtime>)
}

impl Walker for PhpWalker {
    type Found = Interpreter;
    type Reader = Reader;
    const MARKER: u64 = MARKER;
    const LANG: &'static super::super::walks::Lang = &LANG;
    /// PHP's executor. Its JIT (opcache.jit) runs a function's compiled
    /// code on the frame of the execute_ex that jumped to it: the native
    /// walk shows that code, unnamed or named by the perf map PHP writes
    /// with `opcache.jit_debug=0x10` (`JIT$function`,
    /// `TRACE-1$function$3`), called from where execute_ex is.
    const EVALUATOR: Evaluator = Evaluator {
        frames: &[Pattern::Is("execute_ex")],
        loops: &[],
        jit: &[Pattern::Is(crate::symbolize::UNKNOWN), Pattern::Prefix("JIT$"), Pattern::Prefix("TRACE-")],
        jit_callers: &[
            Pattern::Is("zend_execute"),
            Pattern::Is("zend_call_function"),
            Pattern::Is("zend_generator_resume"),
            Pattern::Is("zend_execute_scripts"),
        ],
    };
    const ANNOUNCED: u32 = 11;

    fn procs<'a, 'obj>(maps: &'a FgbpfMaps<'obj>) -> &'a libbpf_rs::MapMut<'obj> {
        &maps.php_procs
    }

    fn results(found: &mut Found) -> (&mut Vec<(u32, (u32, u32), String)>, &mut Vec<(u32, String)>) {
        (&mut found.phps, &mut found.php_unsupported)
    }

    fn described(i: &Interpreter) -> ((u32, u32), String) {
        (i.version, i.binary.clone())
    }

    fn may_be(path: &str) -> bool {
        php::may_be_interpreter(path)
    }

    fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Interpreter>, String> {
        php::find(file, path, start, offset)
    }

    fn check(mem: &Mem, i: &Interpreter) -> Result<(), String> {
        php::check(mem, i)
    }

    fn map_value(i: &Interpreter) -> Vec<u8> {
        let l = &i.layout;
        let v = types::fg_php_proc {
            current: i.current,
            ex_opline: l.ex_opline,
            ex_func: l.ex_func,
            ex_type_info: l.ex_type_info,
            ex_prev: l.ex_prev,
            ex_size: l.ex_prev + 8,
            ..Default::default()
        };
        // SAFETY: fg_php_proc is a plain struct of integers.
        unsafe { plain::as_bytes(&v) }.to_vec()
    }

    fn reader(pid: u32, i: &Interpreter) -> Reader {
        Reader::new(pid, i.layout)
    }

    fn read_word(reader: &mut Reader, word: u64) {
        reader.read(address_of(word));
    }

    fn read_announced(reader: &mut Reader, addr: u64, _: u64) {
        reader.read(addr);
    }

    fn text(i: &Interpreter, reader: &Reader, word: u64, no_lines: bool) -> Arc<str> {
        match reader.function(address_of(word)) {
            Ok(f) if f.internal => format!("{} [c function]", f.name).into(),
            Ok(f) => {
                let file = if f.file.is_empty() { "?" } else { &f.file };
                if no_lines {
                    format!("{} ({file})", f.name).into()
                } else {
                    format!("{} ({file}:{})", f.name, f.line(pc_bits_of(word), PC_BITS, i.layout.zop_size)).into()
                }
            }
            Err(Unnamed::NotFunction) => "[php: not a function]".into(),
            Err(Unnamed::Gone) => "[php: process gone before its function was read]".into(),
        }
    }
}
