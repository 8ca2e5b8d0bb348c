//! V8 (Node.js) processes: finding V8 in a process from its binary's own
//! metadata ([`layout`]), and naming the functions the walker's frame words
//! point at (src/bpf/v8.bpf.h) from the live heap ([`heap`]): the
//! SharedFunctionInfo's name, its script and the line it starts on. Each
//! function is read once, when the walker announces it, and checked against
//! the identity the walker saw (a hash of two of its fields), so that a
//! function the garbage collector moved, and another that took its
//! address, are never confused: such a frame is left unnamed and counted.

pub mod heap;
pub mod layout;

use std::collections::HashMap;
use std::sync::Arc;

pub use layout::{may_be_v8, Layout};

use crate::procs::mem::Mem;
use heap::Heap;

/// Bits of the identity in a frame word (fgbpf.h: FG_V8_ID_BITS).
pub const ID_BITS: u32 = 14;

/// The identity of a function, as the walker hashes it (v8.bpf.h:
/// v8_identity).
pub fn identity(name: u64, script: u64) -> u32 {
    let mut h = name ^ script.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 31;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 29;
    (h as u32) & ((1 << ID_BITS) - 1)
}

/// A frame word's parts (fgbpf.h): the SharedFunctionInfo, its identity,
/// and whether the frame ran in a binary (interpreter, builtins) or in
/// code V8 compiled.
pub fn word_parts(word: u64) -> (u64, u32, bool) {
    let sfi = (word & ((1 << 44) - 1)) << 3 | 1;
    let id = ((word >> 44) & ((1 << ID_BITS) - 1)) as u32;
    let jit = (word >> 58) & 3 == 1;
    (sfi, id, jit)
}

/// A JavaScript function, named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Its name; `(anonymous)` when V8 has none, as DevTools says.
    pub name: String,
    /// Its script's name (a path or URL), when it has one.
    pub script: Option<String>,
    /// The line it starts on, when its script's source is readable.
    pub line: Option<u32>,
}

/// Why a frame was left unnamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unnamed {
    /// Its function was never announced (the announcement was lost).
    NotAnnounced,
    /// At the read, the address held another function or none: the
    /// garbage collector moved it first.
    Moved,
    /// The function's ScopeInfo is laid out as fgbpf does not read.
    Layout,
    /// Its memory could not be read.
    Unreadable,
}

impl Unnamed {
    pub fn reason(self) -> &'static str {
        match self {
            Unnamed::NotAnnounced => "its function was not announced (the announcement was lost)",
            Unnamed::Moved => "V8's garbage collector moved its function before fgbpf read it",
            Unnamed::Layout => "its function's scope information is laid out as fgbpf does not read (another V8 version)",
            Unnamed::Unreadable => "its function could not be read from the process's memory",
        }
    }

    pub fn remedy(self) -> &'static str {
        match self {
            Unnamed::NotAnnounced => "a lower frequency (-F), or fewer processes profiled at once",
            Unnamed::Moved => "none: rare outside heavy allocation; `--perf-basic-prof` names such code",
            Unnamed::Layout => "none yet: fgbpf reads V8 10 and 11 (tested: Node.js 20); `--perf-basic-prof` names compiled code",
            Unnamed::Unreadable => "none: the process may have exited",
        }
    }
}

/// A script: its name and where its lines start.
struct Script {
    name: Option<String>,
    lines: Option<Vec<u32>>,
}

/// V8 in one process.
pub struct Isolate {
    mem: Mem,
    layout: Layout,
    /// Every function read during the capture, by (SharedFunctionInfo,
    /// identity): the words recorded while it lived are named at its end.
    functions: HashMap<(u64, u32), Result<Arc<Function>, Unnamed>>,
    /// Scripts by (address, source), read once.
    scripts: HashMap<(u64, u64), Arc<Script>>,
}

impl Isolate {
    pub fn new(pid: u32, layout: Layout) -> std::io::Result<Isolate> {
        Ok(Isolate {
            mem: Mem::open(pid)?,
            layout,
            functions: HashMap::new(),
            scripts: HashMap::new(),
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Reads an announced function now, while it is where the walker saw
    /// it; a second announcement of the same pair reads nothing.
    pub fn read_function(&mut self, sfi: u64, id: u32) {
        let key = (sfi, id & ((1 << ID_BITS) - 1));
        if self.functions.contains_key(&key) {
            return;
        }
        let f = self.function(key.0, key.1).map(Arc::new);
        self.functions.insert(key, f);
    }

    fn function(&mut self, sfi: u64, id: u32) -> Result<Function, Unnamed> {
        let heap = Heap {
            mem: &self.mem,
            l: &self.layout,
        };
        let l = &self.layout;
        let t = heap.type_of(sfi).ok_or(Unnamed::Unreadable)?;
        if t != l.type_sfi {
            return Err(Unnamed::Moved);
        }
        let name_or_scope = heap.u64(sfi, l.sfi_name).ok_or(Unnamed::Unreadable)?;
        let script = heap.u64(sfi, l.sfi_script).ok_or(Unnamed::Unreadable)?;
        if identity(name_or_scope, script) != id {
            return Err(Unnamed::Moved);
        }
        let (mut name, mut start) = (None, None);
        match heap.type_of(name_or_scope) {
            Some(t) if t < l.first_nonstring => {
                name = Some(heap.string(name_or_scope, heap::MAX_NAME).ok_or(Unnamed::Unreadable)?);
            }
            Some(t) if t == l.type_scope_info => {
                let scope = heap.scope(name_or_scope).ok_or(Unnamed::Layout)?;
                start = scope.start;
                name = scope.name.filter(|n| !n.is_empty()).or(scope.inferred);
            }
            // A Smi (no name), or another object: no name.
            _ => {}
        }
        let name = match name {
            Some(n) if !n.is_empty() => n,
            _ => "(anonymous)".to_string(),
        };
        let script = self.script(script);
        let line = match (start, script.as_ref().and_then(|s| s.lines.as_ref())) {
            (Some(pos), Some(lines)) => Some(heap::line_of(lines, pos)),
            _ => None,
        };
        Ok(Function {
            name,
            script: script.and_then(|s| s.name.clone()),
            line,
        })
    }

    fn script(&mut self, script: u64) -> Option<Arc<Script>> {
        let heap = Heap {
            mem: &self.mem,
            l: &self.layout,
        };
        let l = &self.layout;
        if heap.type_of(script)? != l.type_script {
            return None;
        }
        let source = heap.u64(script, l.script_source)?;
        if let Some(s) = self.scripts.get(&(script, source)) {
            return Some(s.clone());
        }
        let name = heap
            .u64(script, l.script_name)
            .filter(|&n| heap.is_string(n))
            .and_then(|n| heap.string(n, heap::MAX_NAME))
            .filter(|n| !n.is_empty());
        let lines = heap
            .is_string(source)
            .then(|| heap.string(source, heap::MAX_SOURCE))
            .flatten()
            .map(|text| heap::line_starts(&text));
        let s = Arc::new(Script { name, lines });
        self.scripts.insert((script, source), s.clone());
        Some(s)
    }

    /// The function a frame word names.
    pub fn name(&self, word: u64) -> Result<Arc<Function>, Unnamed> {
        let (sfi, id, _) = word_parts(word);
        self.functions.get(&(sfi, id)).cloned().unwrap_or(Err(Unnamed::NotAnnounced))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_give_back_what_the_walker_put() {
        let sfi = 0x1be2_89ea_2d81u64;
        let id = identity(0x1be2_89ea_3939, 0x1be2_89ea_2b09);
        let word = (2u64 << 62) | (1 << 60) | (1 << 58) | ((id as u64) << 44) | ((sfi >> 3) & ((1 << 44) - 1));
        assert_eq!(word_parts(word), (sfi, id, true));
        assert!(id < 1 << ID_BITS);
        assert_ne!(identity(1, 2), identity(2, 1));
    }
}
