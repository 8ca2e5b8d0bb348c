//! An address named: its frames, the binary it lies in, and why it could
//! not be named when it could not.

use crate::procs::frame_kind::FrameKind;

/// Why an address could not be named.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnresolvedReason {
    /// The file holding the code has no symbol for it, and no separate
    /// debug file was found (a stripped binary).
    NoSymbols { module: String },
    /// The file holding the code could not be opened.
    Unreadable { module: String },
    /// Code in anonymous memory (JIT-compiled) of a process that writes no
    /// perf map.
    JitWithoutPerfMap,
    /// JIT code that the process's perf map does not list.
    NotInPerfMap,
    /// The process exited before its memory map could be read.
    ProcessGone,
    /// Outside every mapping read while the process lived: mapped later.
    Unmapped,
    /// A kernel address with no kallsyms entry.
    Kernel,
    /// A frame of a managed runtime (a Java method) that its runtime's
    /// memory could not name: why, and the remedy.
    Runtime { why: &'static str, remedy: &'static str },
}

/// One address, named: its frames root first (the function, then those
/// inlined into it at that address), and why it could not be named when it
/// could not (its frames then say what is known, e.g. `libfoo.so+0x1230`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Named {
    pub frames: Vec<(String, FrameKind)>,
    pub unresolved: Option<UnresolvedReason>,
    /// The binary the address lies in, when it lies in one.
    pub module: Option<std::sync::Arc<Module>>,
    /// The address in that binary as it is linked (its ELF virtual
    /// address, what symbol tables, DWARF and `addr2line` take); 0 when
    /// not known (kernel, JIT and runtime frames, code outside a binary).
    pub address: u64,
}

/// A binary code was named in: its file name and GNU build ID, and where
/// its code lies in it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Module {
    pub name: String,
    pub build_id: Option<Vec<u8>>,
    /// Its executable loadable segments (none when not known: the
    /// kernel's images, a file that is not an ELF file fgbpf reads).
    pub code: Vec<crate::procs::elf::ExecSegment>,
}

impl Module {
    /// A binary known by its name and build ID alone.
    pub fn named(name: impl Into<String>, build_id: Option<Vec<u8>>) -> Self {
        Module { name: name.into(), build_id, code: Vec::new() }
    }

    /// The executable segment (an index into `code`) holding the linked
    /// address `address`.
    pub fn segment_of(&self, address: u64) -> Option<usize> {
        self.code.iter().position(|s| address >= s.vaddr && address - s.vaddr < s.size)
    }
}

impl Named {
    pub fn known(frames: Vec<(String, FrameKind)>) -> Self {
        Named {
            frames,
            unresolved: None,
            module: None,
            address: 0,
        }
    }

    pub fn unknown(name: String, kind: FrameKind, why: UnresolvedReason) -> Self {
        Named {
            frames: vec![(name, kind)],
            unresolved: Some(why),
            module: None,
            address: 0,
        }
    }
}
