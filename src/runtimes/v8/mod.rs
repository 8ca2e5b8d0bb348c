//! V8 (Node.js) processes: finding V8 in a process from its binary's own
//! metadata ([`layout`]), and naming the functions the walker's frame words
//! point at (src/runtimes/v8/v8.bpf.h) from the live heap ([`heap`]): the
//! SharedFunctionInfo's name, its script and the line it starts on, and
//! for compiled code the functions inlined at the pc ([`code`]). What a
//! word names is read when the walker announces it and checked against the
//! identity the walker saw (a hash of the function's address and two of
//! its fields), so that a function the garbage collector moved, and
//! another that took its address, are never confused: such a frame is
//! left unnamed and counted.

pub mod walker;
pub mod walks;
pub mod code;
pub mod heap;
pub mod layout;
pub mod threads;

use std::collections::HashMap;
use std::sync::Arc;

pub use layout::{may_be_v8, Layout};

use crate::procs::mem::Mem;
use heap::Heap;

/// Bits of the identity in a frame word (src/runtimes/v8/v8.h: FG_V8_ID_BITS).
pub const ID_BITS: u32 = 14;

/// Bits of the identity in a compiled frame's word (FG_V8_JIT_ID_BITS).
pub const JIT_ID_BITS: u32 = 10;

/// The identity of a function, as the walker hashes it (v8.bpf.h:
/// v8_identity).
pub fn identity(sfi: u64, name: u64, script: u64) -> u32 {
    let mut h = (sfi ^ name) ^ script.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 31;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 29;
    (h as u32) & ((1 << ID_BITS) - 1)
}

/// A frame word's parts (src/runtimes/v8/v8.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    /// In V8's interpreter or builtins: the SharedFunctionInfo, its
    /// identity.
    Interpreted { sfi: u64, id: u32 },
    /// In compiled code: the pc, whether innermost, the identity's low
    /// JIT_ID_BITS.
    Compiled { pc: u64, leaf: bool, id: u32 },
}

pub fn word_parts(word: u64) -> Word {
    if (word >> 58) & 3 == 1 {
        Word::Compiled {
            pc: word & ((1 << 47) - 1),
            leaf: word >> 47 & 1 == 1,
            id: ((word >> 48) & ((1 << JIT_ID_BITS) - 1)) as u32,
        }
    } else {
        Word::Interpreted {
            sfi: (word & ((1 << 44) - 1)) << 3 | 1,
            id: ((word >> 44) & ((1 << ID_BITS) - 1)) as u32,
        }
    }
}

/// A word's functions, outermost first, and where each ran.
pub type Frames = Vec<(Arc<Function>, Tier)>;

/// Where a named frame ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    Interpreted,
    Compiled,
    /// Inlined into the compiled code of the frame before it.
    Inlined,
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
    /// The code at the pc was replaced by other code during the capture:
    /// which one ran is unknown.
    Replaced,
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
            Unnamed::Replaced => "V8 replaced the compiled code at its address during the capture",
        }
    }

    pub fn remedy(self) -> &'static str {
        match self {
            Unnamed::NotAnnounced => "a lower frequency (-F), or fewer processes profiled at once",
            Unnamed::Moved => "none: rare outside heavy allocation; `--perf-basic-prof` names such code",
            Unnamed::Layout => "none yet: fgbpf reads V8 10 to 13 (tested: Node.js 20, 22 and 24); `--perf-basic-prof` names compiled code",
            Unnamed::Unreadable => "none: the process may have exited",
            Unnamed::Replaced => "none: rare outside code that is deoptimised and compiled again",
        }
    }
}

/// A script: its name and where its lines start.
struct Script {
    name: Option<String>,
    lines: Option<Vec<u32>>,
}

/// A pc of compiled code as announced: the frame's function and the code
/// found there, once per second or so (`None`: no code found).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Announced {
    sfi: u64,
    id: u32,
    code: Option<Arc<code::JitCode>>,
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
    /// Each pc of compiled code announced, as each announcement found it
    /// (different ones: the code there was replaced).
    pcs: HashMap<u64, Vec<Announced>>,
    /// Code read, by (Code, InstructionStream, start): shared by its pcs.
    codes: HashMap<(u64, u64, u64), Arc<code::JitCode>>,
    /// The InstructionStream map, once known.
    stream_map: code::StreamMap,
}

impl Isolate {
    pub fn new(pid: u32, layout: Layout) -> std::io::Result<Isolate> {
        Ok(Isolate {
            mem: Mem::open(pid)?,
            layout,
            functions: HashMap::new(),
            scripts: HashMap::new(),
            pcs: HashMap::new(),
            codes: HashMap::new(),
            stream_map: None,
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

    /// Reads an announced pc of compiled code: the code holding it (and
    /// the functions it inlined), and the frame's function.
    pub fn read_code(&mut self, pc: u64, sfi: u64, id: u32) {
        let id = id & ((1 << ID_BITS) - 1);
        self.read_function(sfi, id);
        // A pc in code already read: checked, not scanned for; a pc no
        // code was found for is not scanned for again.
        let last = self.pcs.get(&pc).and_then(|v| v.last());
        if last.is_some_and(|a| a.code.is_none() && a.sfi == sfi && a.id == id) {
            return;
        }
        let known = last.and_then(|a| a.code.clone()).filter(|c| self.still(c));
        let code = known.or_else(|| {
            let heap = Heap {
                mem: &self.mem,
                l: &self.layout,
            };
            let c = heap.code_at(pc, &mut self.stream_map)?;
            let c = self.codes.entry((c.key.0, c.key.1, c.start)).or_insert_with(|| Arc::new(c)).clone();
            for &(f, _) in &c.inlined {
                self.read_inlined(f);
            }
            Some(c)
        });
        let a = Announced { sfi, id, code };
        let seen = self.pcs.entry(pc).or_default();
        if !seen.contains(&a) {
            seen.push(a);
        }
    }

    /// Whether code read earlier is still where it was.
    fn still(&self, c: &code::JitCode) -> bool {
        let (code, stream) = c.key;
        self.mem.u64(stream - 1 + 8) == Some(code)
            && self.mem.u64(code - 1 + self.layout.code_start as u64) == Some(c.start)
    }

    /// Reads a function inlined into code, with the identity it has now.
    fn read_inlined(&mut self, sfi: u64) {
        let heap = Heap {
            mem: &self.mem,
            l: &self.layout,
        };
        let (Some(name), Some(script)) = (heap.u64(sfi, self.layout.sfi_name), heap.u64(sfi, self.layout.sfi_script)) else {
            return;
        };
        self.read_function(sfi, identity(sfi, name, script));
    }

    /// The function inlined at `sfi`, as read with the code.
    fn inlined(&self, sfi: u64) -> Option<Arc<Function>> {
        self.functions.iter().find(|((s, _), f)| *s == sfi && f.is_ok()).and_then(|(_, f)| f.clone().ok())
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
        if identity(sfi, name_or_scope, script) != id {
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

    /// The functions a frame word names, outermost first (more than one:
    /// functions inlined into compiled code), and whether the inlining at
    /// a compiled frame could not be read.
    pub fn name(&self, word: u64) -> Result<(Frames, bool), Unnamed> {
        let get = |sfi: u64, id: u32| self.functions.get(&(sfi, id)).cloned().unwrap_or(Err(Unnamed::NotAnnounced));
        match word_parts(word) {
            Word::Interpreted { sfi, id } => Ok((vec![(get(sfi, id)?, Tier::Interpreted)], false)),
            Word::Compiled { pc, leaf, id } => {
                let mask = (1 << JIT_ID_BITS) - 1;
                let seen: Vec<&Announced> =
                    self.pcs.get(&pc).into_iter().flatten().filter(|a| a.id & mask == id).collect();
                let first = seen.first().ok_or(Unnamed::NotAnnounced)?;
                if seen.iter().any(|a| a.sfi != first.sfi || a.id != first.id) {
                    return Err(Unnamed::Moved);
                }
                let mut frames = vec![(get(first.sfi, first.id)?, Tier::Compiled)];
                // Named only when every code found at pc names the same.
                let codes: Vec<_> = seen.iter().map(|a| a.code.as_deref()).collect();
                let (more, in_part) = agreed(&codes, first.sfi, pc, leaf, &|f| self.inlined(f))?;
                frames.extend(more);
                // Where inlining is not read, no compiled frame is whole.
                Ok((frames, in_part || !self.layout.reads_inlining()))
            }
        }
    }

}

/// The functions inlined at `pc` by the code objects announced there (of
/// the function `sfi`), named by `name_of`, when every one names the same:
/// the same code read twice can differ by address alone (a compacting
/// collection moves a Code and keeps its instructions), and code compiled
/// anew at that address names other functions, or the same ones. With
/// whether some could not be named (their caller's frame stands for them).
fn agreed(
    codes: &[Option<&code::JitCode>],
    sfi: u64,
    pc: u64,
    leaf: bool,
    name_of: &dyn Fn(u64) -> Option<Arc<Function>>,
) -> Result<(Frames, bool), Unnamed> {
    let names = |code: Option<&code::JitCode>| {
        let Some(code) = code else { return (Vec::new(), true) };
        if code.function.is_some_and(|f| f != sfi) {
            return (Vec::new(), true);
        }
        let mut frames = Vec::new();
        for f in code.inlined_at(pc, leaf) {
            match name_of(f) {
                Some(func) => frames.push((func, Tier::Inlined)),
                None => return (frames, true),
            }
        }
        (frames, false)
    };
    let first = names(codes.first().copied().flatten());
    match codes.iter().skip(1).all(|c| names(*c) == first) {
        true => Ok(first),
        false => Err(Unnamed::Replaced),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_give_back_what_the_walker_put() {
        let sfi = 0x1be2_89ea_2d81u64;
        let id = identity(sfi, 0x1be2_89ea_3939, 0x1be2_89ea_2b09);
        let word = (2u64 << 62) | (1 << 60) | ((id as u64) << 44) | ((sfi >> 3) & ((1 << 44) - 1));
        assert_eq!(word_parts(word), Word::Interpreted { sfi, id });
        assert!(id < 1 << ID_BITS);
        assert_ne!(identity(0, 1, 2), identity(0, 2, 1));
        let pc = 0x7fe0_667c_7c39u64;
        let jid = id & ((1 << JIT_ID_BITS) - 1);
        let word = (2u64 << 62) | (1 << 60) | (1 << 58) | ((jid as u64) << 48) | (1 << 47) | pc;
        assert_eq!(word_parts(word), Word::Compiled { pc, leaf: true, id: jid });
    }

    fn jit(code: u64, stream: u64, inlined: u64) -> code::JitCode {
        code::JitCode {
            key: (code, stream),
            start: 0x1000,
            size: 0x100,
            function: Some(0x51),
            // From offset 0x10: inlining 0, the function at `inlined`.
            positions: vec![(0, -1), (0x10, 0)],
            inlined: vec![(inlined, -1)],
        }
    }

    #[test]
    fn code_read_again_at_another_address_names_its_inlined_functions_and_code_compiled_anew_does_not() {
        let named = |sfi: u64| {
            let name = match sfi {
                0x71 => "round",
                0x81 => "churn",
                _ => return None,
            };
            Some(Arc::new(Function { name: name.into(), script: Some("churn.js".into()), line: Some(23) }))
        };
        let pc = 0x1020;
        // One Code, then the same instructions under a Code a compaction moved.
        let (before, moved) = (jit(0xa1, 0xb1, 0x71), jit(0xc1, 0xb1, 0x71));
        let (frames, in_part) = agreed(&[Some(&before), Some(&moved)], 0x51, pc, true, &named).unwrap();
        assert_eq!(frames.iter().map(|(f, _)| f.name.as_str()).collect::<Vec<_>>(), ["round"]);
        assert!(!in_part);
        // Code compiled anew at the same place, inlining another function.
        let anew = jit(0xd1, 0xb1, 0x81);
        assert_eq!(agreed(&[Some(&before), Some(&anew)], 0x51, pc, true, &named), Err(Unnamed::Replaced));
        // A read that failed cannot say the code was the same.
        assert_eq!(agreed(&[Some(&before), None], 0x51, pc, true, &named), Err(Unnamed::Replaced));
        assert_eq!(agreed(&[None], 0x51, pc, true, &named), Ok((Vec::new(), true)));
    }
}
