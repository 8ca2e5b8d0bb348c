//! HotSpot JVMs in profiled processes, user space's half of the Java
//! frame walker (src/runtimes/java/java.bpf.h): [`find`] recognizes libjvm.so in a
//! process and reads the JVM's own description of its structures
//! ([`vmstructs`]) into what the walker needs ([`Layout`], `struct
//! fg_java_proc`); a [`Jvm`] then reads the objects the walker announces
//! (nmethods, `Method*`s, stubs) while they live, and names the tagged
//! frame words ([`word`]) the walker wrote, expanding an nmethod's inlined
//! methods from its debug data ([`stream`]) into Java frames
//! ([`names`] says how they are spelled).
//!
//! JDK 9 and later have the code heaps this reads (JDK 17 is what the
//! tests run); JDK 8 is refused. Inlined frames are expanded where
//! nmethods keep `CompiledMethod::_scopes_data_begin` (JDK 9 to 22), or
//! their debug data in immutable and mutable data as VMStructs places it
//! (JDK 25); on other JDKs an nmethod names its own method only.

pub mod walker;
pub mod walks;
pub mod layout;
pub mod methods;
pub mod names;
pub mod stream;
pub mod vmstructs;
pub mod word;

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::sync::Arc;

use object::{Object, ObjectSymbol};

pub use layout::Layout;
pub use names::MethodInfo;
pub use word::{blob_at, word_blob};

use crate::procs::elf::load_bias;
use crate::procs::frame_kind::FrameKind;
use crate::procs::mem::Mem;
use layout::{find_name_nmethod, read_live, Offsets};
use methods::{Method, Methods};
use stream::{pc_desc_for, pc_descs, scope_chain, Coding, PcDesc};
use word::Word;

/// HotSpot's thread start and the C++ that calls Java (names with their
/// signatures), the call stub's code blob (`StubRoutines (1)`); Java's
/// class library and HotSpot's C++ between it and the kernel.
pub const PLUMBING: super::Plumbing = super::Plumbing {
    exact: &["JavaMain", "ThreadJavaMain", "thread_native_entry", "jni_CallStaticVoidMethod"],
    prefixes: &[
        "JavaCalls::call",
        "jni_invoke_",
        "Thread::call_run",
        "JavaThread::thread_main_inner",
        "JavaThread::run",
        "thread_entry(",
        "StubRoutines (",
    ],
    libraries: &[
        "java.", "javax.", "jdk.", "sun.", "com.sun.", "JVM_", "Java_", "Unsafe_", "JavaThread::",
        "os::", "Parker::", "ObjectMonitor::", "ObjectSynchronizer::", "Monitor::", "Mutex::",
    ],
};

/// A JVM fgbpf cannot read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    pub reason: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// One Java frame of a word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub name: String,
    /// [`FrameKind::Interpreted`]; [`FrameKind::C1`] compiled by C1 (tiers
    /// 1 to 3); [`FrameKind::Jit`] compiled by C2 or of a tier not known,
    /// or a native method's frame (its wrapper nmethod, or the
    /// interpreter's); [`FrameKind::Inlined`] into the frame before it;
    /// [`FrameKind::User`] not Java code (a stub, an adapter, the
    /// interpreter's own code: the JVM's generated code, named as its
    /// native code is).
    pub kind: FrameKind,
    pub line: Option<u32>,
}

/// Why a word has no name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unnamed {
    /// Not a HotSpot word.
    BadWord,
    /// Its object was never announced (or the announcement was lost).
    NotAnnounced,
    /// The blob was announced with another compile id: freed and reused.
    Freed,
    /// Announced, but reading it failed (gone, or not what it should be).
    Unreadable,
    /// The JVM's code cache has not been read yet.
    NotReady,
    /// Two methods were seen at its `Method*` during the capture (a class
    /// unloaded, another loaded in its place): which one ran is unknown.
    Reused,
}

impl Unnamed {
    /// Why, as the summary says it.
    pub fn reason(self) -> &'static str {
        match self {
            Unnamed::BadWord => "not a HotSpot frame word",
            Unnamed::NotAnnounced => "its code was not announced (the announcement was lost)",
            Unnamed::Freed => "its compiled method was freed before fgbpf read it",
            Unnamed::Unreadable => "its method could not be read from the JVM",
            Unnamed::NotReady => "the JVM had not set up its code cache when fgbpf read it",
            Unnamed::Reused => "its Method* held two methods during the capture (classes unloaded)",
        }
    }

    /// What the user can do about it.
    pub fn remedy(self) -> &'static str {
        match self {
            Unnamed::BadWord | Unnamed::Unreadable => "none: please report it, with the JDK's version",
            Unnamed::NotAnnounced => "a lower frequency (-F), or fewer processes profiled at once",
            Unnamed::Freed => "none: the JVM freed the code between the sample and fgbpf's read; rare outside class churn",
            Unnamed::Reused => "none: classes were unloaded and their methods' memory reused while sampled",
            Unnamed::NotReady => "start the capture after the JVM's first second",
        }
    }
}

impl fmt::Display for Unnamed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

/// Whether a mapping's path is HotSpot's VM library.
pub fn may_be_jvm(path: &str) -> bool {
    path.ends_with("/libjvm.so")
}

/// An nmethod as read when announced.
#[derive(Debug)]
struct Nmethod {
    level: Option<i32>,
    method: Method,
    /// code_begin - the CodeBlob: PcDesc offsets are from code_begin.
    code_off: u64,
    pcs: Vec<PcDesc>,
    /// Scope chains by decode offset, innermost first: method and bci.
    chains: HashMap<u32, Vec<(Method, i32)>>,
}

/// A JVM found in a process.
#[derive(Debug)]
pub struct Jvm {
    mem: Mem,
    major: u32,
    coding: Coding,
    offsets: Offsets,
    live: std::cell::Cell<Option<Layout>>,
    /// By CodeBlob address and compile id (its low 19 bits, as in the
    /// words): every nmethod read during the capture, the ones freed since
    /// too, since the words recorded while they ran are named at its end.
    nmethods: HashMap<(u64, u32), Nmethod>,
    /// Announced nmethods that were gone when read.
    freed: std::collections::HashSet<(u64, u32)>,
    methods: Methods,
    stubs: HashMap<u64, Option<String>>,
    /// Native method wrappers among the stubs, by blob.
    natives: HashMap<u64, Arc<MethodInfo>>,
}

/// Looks for HotSpot in `file`, mapped executable by `pid` at `start` from
/// file offset `offset` (as in /proc/PID/maps; `path` is that line's path).
/// `Ok(None)`: not a libjvm (not ELF, or another library of that name
/// without any HotSpot symbol).
pub fn find(pid: u32, file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Jvm>, Unsupported> {
    let unsupported = |reason: String| Unsupported { reason };
    let Some(data) = crate::procs::elf::map(file) else {
        return Ok(None);
    };
    let Ok(obj) = object::File::parse(&*data) else {
        return Ok(None);
    };
    let syms: HashMap<&str, u64> = obj
        .dynamic_symbols()
        .filter(|s| s.address() != 0)
        .filter_map(|s| Some((s.name().ok()?, s.address())))
        .filter(|(n, _)| n.starts_with("gHotSpotVM"))
        .collect();
    if syms.is_empty() {
        return Err(unsupported(format!("{path} exports no gHotSpotVMStructs")));
    }
    let Some(bias) = load_bias(&data, start, offset) else {
        return Err(unsupported(format!("{path}: its load address could not be worked out")));
    };
    let mem = Mem::open(pid).map_err(|e| unsupported(format!("/proc/{pid}/mem: {e}")))?;
    let sym = |name: &str| syms.get(name).map(|a| a.wrapping_add(bias));
    let vm = vmstructs::VmStructs::read(&mem, &sym).map_err(unsupported)?;
    let major = vm
        .address("Abstract_VM_Version", "_vm_major_version")
        .and_then(|a| mem.i32(a))
        .ok_or_else(|| unsupported("the JVM's version could not be read".into()))?;
    if !(9..=30).contains(&major) {
        return Err(unsupported(format!("JDK {major} layout not known")));
    }
    let major = major as u32;
    let offsets = layout::offsets(&vm, major).map_err(unsupported)?;
    Ok(Some(Jvm {
        mem,
        major,
        coding: Coding::for_major(major),
        offsets,
        live: std::cell::Cell::new(None),
        nmethods: HashMap::new(),
        freed: Default::default(),
        methods: Methods::default(),
        stubs: HashMap::new(),
        natives: HashMap::new(),
    }))
}

/// Stub names read at most.
const MAX_STUB_NAME: usize = 128;
/// Bytes of an nmethod's metadata, scopes or PcDescs read at most.
const MAX_DEBUG: u64 = 4 << 20;

impl Jvm {
    /// The JDK's feature version (17 for 17.0.15).
    pub fn major(&self) -> u32 {
        self.major
    }

    pub fn pid(&self) -> u32 {
        self.mem.pid()
    }

    /// Whether methods inlined into compiled ones are read (JDK 9 to 22, 25):
    /// else a compiled frame is named by its own method, which holds the
    /// time of those inlined into it.
    pub fn reads_inlining(&self) -> bool {
        self.offsets.nm.debug.is_some()
    }

    /// The walker's view of this JVM, read afresh: `code_lo` is 0 (and
    /// `nheaps` 0) until the JVM has set up its code cache, and
    /// `name_nmethod` 0 until the first nmethod exists (on JDK 25, which
    /// tells blobs apart by their kind, it stays 0).
    pub fn layout(&self) -> Layout {
        let Some(mut l) = read_live(&self.mem, &self.offsets) else {
            return self.offsets.base;
        };
        if l.flags & layout::FLAG_HAS_KIND == 0 {
            let known = self.live.get().map_or(0, |p| p.name_nmethod);
            l.name_nmethod = if known != 0 {
                known
            } else {
                find_name_nmethod(&self.mem, &self.offsets, &l)
            };
        }
        self.live.set(Some(l));
        l
    }

    /// The live layout as last read, else read now.
    fn live(&self) -> Option<Layout> {
        match self.live.get() {
            Some(l) => Some(l),
            None => {
                let l = self.layout();
                (l.nheaps > 0).then_some(l)
            }
        }
    }

    /// The method at `addr` now (never a name kept from an earlier read:
    /// see [`methods`]).
    fn method(&mut self, addr: u64) -> Method {
        let (mem, o) = (&self.mem, &self.offsets.methods);
        self.methods.read_now(addr, |a| names::read_method(mem, o, a))
    }

    /// On FG_PROC_JAVA_METHOD: reads a Method* now. The walker announces
    /// a method again each second it is seen: a method that differs from
    /// the one read before at that address marks the address reused, and
    /// none of its interpreted frames is named (which ran when is not
    /// known).
    pub fn read_method(&mut self, method: u64) {
        self.method(method);
    }

    /// On FG_PROC_JAVA_STUB: reads a code blob's name now. A native
    /// method's wrapper is an nmethod named "native nmethod" (not
    /// "nmethod", so the walker takes it for a stub): its method is read
    /// too, and names it.
    pub fn read_stub(&mut self, blob: u64) {
        let name = self
            .mem
            .u64(blob + self.offsets.base.cb_name as u64)
            .filter(|&p| p != 0)
            .and_then(|p| self.mem.cstr(p, MAX_STUB_NAME));
        self.natives.remove(&blob);
        if name.as_deref() == Some("native nmethod") {
            let method = self.mem.u64(blob + self.offsets.nm.method).unwrap_or(0);
            if let Some(m) = self.method(method) {
                self.natives.insert(blob, m);
            }
        }
        self.stubs.insert(blob, name);
    }

    /// On FG_PROC_JAVA_NMETHOD: reads an nmethod's method, its inlining
    /// (PcDescs and scopes) and every method they name, now, before the
    /// code cache frees it. Kept with those an earlier nmethod at the
    /// same address left: each is told apart by its compile id.
    pub fn read_nmethod(&mut self, blob: u64, compile_id: u32) {
        let key = (blob, compile_id & word::ID_MASK);
        if self.nmethods.contains_key(&key) {
            return;
        }
        let o = self.offsets;
        let b = &o.base;
        let id = self.mem.u32(blob + b.nm_compile_id as u64);
        if id != Some(compile_id) {
            // Already freed, or another nmethod there.
            self.freed.insert(key);
            return;
        }
        let method_ptr = self.mem.u64(blob + o.nm.method).unwrap_or(0);
        let level = o.nm.comp_level.and_then(|at| self.mem.i32(blob + at));
        // Each method it names read once, now (not from an earlier read).
        let mut read: HashMap<u64, Method> = HashMap::new();
        let mut method_at = |jvm: &mut Jvm, at: u64| read.entry(at).or_insert_with(|| jvm.method(at)).clone();
        let method = method_at(self, method_ptr);
        let mut nm = Nmethod {
            level,
            method,
            code_off: 0,
            pcs: Vec::new(),
            chains: HashMap::new(),
        };
        let debug = o.nm.debug.and_then(|d| match d {
            layout::Debug::InBlob(d) => self.read_debug(blob, &d),
            layout::Debug::Split(d) => self.read_split_debug(blob, &d),
        });
        // Every pc's outermost scope is the nmethod's own method: debug data
        // read from the wrong place, or a metadata array read off by one,
        // does not check out, and the nmethod is named by its own method.
        // Each distinct scope decoded once, for the check and the names.
        let debug = debug.and_then(|(code_off, pcs, metadata, scopes)| {
            let mut decoded: HashMap<u32, Vec<stream::Scope>> = HashMap::new();
            for pc in &pcs {
                decoded.entry(pc.scope).or_insert_with(|| scope_chain(&scopes, pc.scope, self.coding));
            }
            let own = decoded.values().all(|chain| {
                chain.last().is_none_or(|s| s.method_index > 0 && metadata.get(s.method_index as usize - 1) == Some(&method_ptr))
            });
            own.then_some((code_off, pcs, metadata, decoded))
        });
        if let Some((code_off, pcs, metadata, decoded)) = debug {
            nm.code_off = code_off;
            for (scope, chain) in decoded {
                let chain = chain
                    .into_iter()
                    .map(|s| {
                        let m = match s.method_index {
                            0 => None,
                            i => metadata.get(i as usize - 1).copied(),
                        };
                        (m.and_then(|m| method_at(self, m)), s.bci)
                    })
                    .collect();
                nm.chains.insert(scope, chain);
            }
            nm.pcs = pcs;
        }
        self.nmethods.insert(key, nm);
    }

    /// [`Self::read_debug`] of JDK 25's nmethods: PcDescs and scopes in
    /// the immutable data, metadata after the relocations in the mutable
    /// data.
    #[allow(clippy::type_complexity)]
    fn read_split_debug(&self, blob: u64, d: &layout::SplitOffsets) -> Option<(u64, Vec<PcDesc>, Vec<u64>, Vec<u8>)> {
        let mem = &self.mem;
        let int = |o: u64| mem.i32(blob + o).and_then(|v| u64::try_from(v).ok());
        let code_off = int(d.code_offset)?;
        let (mutable, mutable_size, relocations) = (mem.u64(blob + d.mutable_data)?, int(d.mutable_data_size)?, int(d.relocation_size)?);
        let (immutable, immutable_size) = (mem.u64(blob + d.immutable_data)?, int(d.immutable_data_size)?);
        let (pcs, scopes) = (int(d.scopes_pcs)?, int(d.scopes_data)?);
        if relocations > mutable_size || pcs > scopes || scopes > immutable_size || immutable_size > MAX_DEBUG || mutable_size > MAX_DEBUG {
            return None;
        }
        let pc_bytes = mem.bytes(immutable + pcs, (scopes - pcs) as usize)?;
        let descs = pc_descs(&pc_bytes, d.pc_size as usize, d.pc_pc as usize, d.pc_scope as usize);
        let meta = mem.bytes(mutable + relocations, ((mutable_size - relocations) / 8 * 8) as usize)?;
        let meta = meta.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        let scopes = mem.bytes(immutable + scopes, (immutable_size - scopes) as usize)?;
        Some((code_off, descs, meta, scopes))
    }

    /// An nmethod's code offset, PcDescs, metadata and scopes data.
    #[allow(clippy::type_complexity)]
    fn read_debug(&self, blob: u64, d: &layout::DebugOffsets) -> Option<(u64, Vec<PcDesc>, Vec<u64>, Vec<u8>)> {
        let mem = &self.mem;
        let at = |o: u64| mem.i32(blob + o).filter(|&v| v >= 0).map(|v| blob + v as u64);
        let code_begin = mem.u64(blob + d.code_begin)?;
        let metadata = at(d.metadata)?;
        let scopes = mem.u64(blob + d.scopes_data_begin)?;
        let pcs = at(d.scopes_pcs)?;
        let pcs_end = at(d.dependencies)?;
        if code_begin < blob
            || !(metadata <= scopes && scopes <= pcs && pcs <= pcs_end)
            || pcs_end - metadata > MAX_DEBUG
        {
            return None;
        }
        let pc_bytes = mem.bytes(pcs, (pcs_end - pcs) as usize)?;
        let descs = pc_descs(&pc_bytes, d.pc_size as usize, d.pc_pc as usize, d.pc_scope as usize);
        let meta = mem.bytes(metadata, ((scopes - metadata) / 8 * 8) as usize)?;
        let meta = meta
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let scopes = mem.bytes(scopes, (pcs - scopes) as usize)?;
        Some((code_begin - blob, descs, meta, scopes))
    }

    /// The Java frames of one word, outermost first (an nmethod's own
    /// method, then the methods inlined into it down to the pc's).
    pub fn name(&self, word: u64) -> Result<Vec<Frame>, Unnamed> {
        match word::decode(word).ok_or(Unnamed::BadWord)? {
            Word::Interpreted { method, bci } => {
                let m = self.methods.named(method)?;
                // A native method's frame is JIT code, as its wrapper's is.
                let kind = if m.native {
                    FrameKind::Jit
                } else {
                    FrameKind::Interpreted
                };
                Ok(vec![self.frame(m, kind, bci.map(|b| b as i32))])
            }
            Word::Blob {
                kind: word::Kind::Stub,
                seg,
                ..
            } => {
                let blob = blob_at(&self.live().ok_or(Unnamed::NotReady)?, seg);
                if let Some(m) = self.natives.get(&blob) {
                    return Ok(vec![self.frame(m, FrameKind::Jit, None)]);
                }
                let name = self.stubs.get(&blob).ok_or(Unnamed::NotAnnounced)?;
                let name = name.as_ref().ok_or(Unnamed::Unreadable)?;
                // The JVM's own generated code, named as its native code is.
                Ok(vec![Frame {
                    name: name.clone(),
                    kind: FrameKind::User,
                    line: None,
                }])
            }
            Word::Blob { seg, off, id, .. } => {
                let blob = blob_at(&self.live().ok_or(Unnamed::NotReady)?, seg);
                match self.nmethods.get(&(blob, id)) {
                    Some(nm) => self.nmethod_frames(nm, off),
                    None if self.freed.contains(&(blob, id)) => Err(Unnamed::Freed),
                    None => Err(Unnamed::NotAnnounced),
                }
            }
        }
    }

    fn frame(&self, m: &MethodInfo, kind: FrameKind, bci: Option<i32>) -> Frame {
        let line = bci.filter(|&b| b >= 0).and_then(|b| m.line(b as u32, self.coding));
        Frame {
            name: m.qualified(),
            kind,
            line,
        }
    }

    /// An nmethod's frames at code offset `off`: its own method, then
    /// those inlined into it at that pc. A method that could not be read
    /// leaves the whole word unnamed: a caller without its callee would be
    /// a wrong stack.
    fn nmethod_frames(&self, nm: &Nmethod, off: u32) -> Result<Vec<Frame>, Unnamed> {
        // C1's tiers 1 to 3; C2, a tier not known, or a native method's
        // wrapper: JIT code.
        let outer_kind = |m: &MethodInfo| match nm.level {
            Some(1..=3) if !m.native => FrameKind::C1,
            _ => FrameKind::Jit,
        };
        let chain = (off != word::OFF_MAX && off as u64 >= nm.code_off)
            .then(|| pc_desc_for(&nm.pcs, (off as u64 - nm.code_off) as i32))
            .flatten()
            .and_then(|pc| nm.chains.get(&pc.scope))
            .filter(|c| !c.is_empty());
        let Some(chain) = chain else {
            let m = nm.method.as_ref().ok_or(Unnamed::Unreadable)?;
            return Ok(vec![self.frame(m, outer_kind(m), None)]);
        };
        chain
            .iter()
            .rev()
            .enumerate()
            .map(|(i, (m, bci))| {
                // The outermost scope is the nmethod's own method.
                let m = if i == 0 { m.as_ref().or(nm.method.as_ref()) } else { m.as_ref() };
                let m = m.ok_or(Unnamed::Unreadable)?;
                let kind = if i == 0 { outer_kind(m) } else { FrameKind::Inlined };
                Ok(self.frame(m, kind, Some(*bci)))
            })
            .collect()
    }

    /// How many nmethods, methods and stubs are held (for the caller's
    /// accounting).
    pub fn cached(&self) -> (usize, usize, usize) {
        (self.nmethods.len(), self.methods.len(), self.stubs.len())
    }

    /// The `Method*` an nmethod at `blob` holds now (read from the JVM).
    pub fn nmethod_method(&self, blob: u64) -> Option<u64> {
        self.mem.u64(blob + self.offsets.nm.method).filter(|&m| m != 0)
    }

    /// The process memory reader (for tests walking the code cache).
    pub fn mem(&self) -> &Mem {
        &self.mem
    }
}
