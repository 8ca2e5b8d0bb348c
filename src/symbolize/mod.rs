//! Names addresses: kernel frames from kallsyms; user frames from the ELF
//! symbols and DWARF (inlined functions, Rust and C++ demangling) of the
//! files each process had mapped, or of their separate debug files; JIT
//! frames from the runtimes' perf maps. What a process's frames need is
//! read while it lives, by the [`crate::procs`] registry. Each distinct
//! offset of each distinct binary is named once, however many processes
//! map it. When an address cannot be named, the reason comes with it.
//! Building a profile from named frames is [`crate::profile::build`]'s.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use blazesym::symbolize::source::{Elf, Kernel, Process, Source};
use blazesym::symbolize::{Input, Sym, Symbolized, Symbolizer as Blazesym};
use blazesym::Pid;

use crate::procs::maps::{fd_path, own_vdso};

pub mod debuginfod;
mod kernel_images;
mod named;
mod plt;
mod thread_role;
mod vdso;

pub use named::{Module, Named, UnresolvedReason};

pub use thread_role::ThreadRole;

use crate::procs::frame_kind::FrameKind;
use crate::procs::perf_map::PerfMap;
use crate::procs::{Binary, Held, Registry, Target, SYSTEM_DEBUG_DIRS};

/// The name of a frame nothing is known about.
pub const UNKNOWN: &str = "[unknown]";

/// An address in the kernel's text on x86-64 (its default base); only
/// used to make blazesym load the kernel's symbols early.
const KERNEL_TEXT_GUESS: u64 = 0xffff_ffff_8100_0000;

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Extra directories searched for separate debug files, before the
    /// system ones: `DIR/.build-id/xx/yyyy.debug` by build ID, and by
    /// `.gnu_debuglink` name.
    pub debug_dirs: Vec<PathBuf>,
    /// fgbpf's own executable named with its debug information (inlined
    /// functions) too, as any binary is: for a capture of a command, which
    /// may be fgbpf itself (`fgbpf demo`). Off elsewhere: a whole-host or
    /// flight capture holds `fgbpf dump` clients only, whose inlined
    /// frames nobody reads, and reading fgbpf's debug information costs
    /// each dump some 50 MB (measured).
    pub own_debug: bool,
    /// How threads a runtime leaves named as their process are named
    /// (each runtime's list, `runtimes::THREAD_ROLES`).
    pub thread_roles: &'static [&'static [ThreadRole]],
}

/// Frames of managed runtimes, per (process, frame word): the walkers of
/// runtimes without unwind tables (Java) write a tagged word in place of a
/// frame's address (src/bpf/fgbpf.h, FG_RT_TAG), which the probe names from
/// the runtime's own memory while it lives.
pub type RuntimeNames = HashMap<(u32, u64), Named>;

/// Whether a stack word is a managed runtime's frame word rather than an
/// address (bits 63-62 0b10: neither a user address nor a kernel one).
pub fn is_runtime_word(w: u64) -> bool {
    w >> 62 == 2
}

/// Addresses of one binary named by one call of blazesym.
const NAME_BATCH: usize = 1024;

/// blazesym as fgbpf names with it: code lines, inlined functions,
/// demangled names, separate debug files looked for in `debug_dirs`.
fn blazesym_for(debug_dirs: &[PathBuf]) -> Blazesym {
    Blazesym::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        .set_debug_dirs(Some(debug_dirs))
        .build()
}

/// A symbolizer that lives through a capture: processes are remembered
/// while they run, so they can be named after they exit.
pub struct Symbolizer {
    blazesym: Blazesym,
    debug_dirs: Vec<PathBuf>,
    registry: Registry,
    /// Runtime frame words named by the probe ([`Self::add_runtime_names`]).
    runtime: RuntimeNames,
    /// JIT code maps the runtimes read, per process ([`Self::add_code_maps`]).
    code_maps: HashMap<u32, PerfMap>,
    /// This process's vDSO: every process of a kernel maps the same one.
    own_vdso: Option<Range<u64>>,
    /// The kernel's text and modules, read at the first kernel frame.
    kernel_images: std::sync::OnceLock<kernel_images::Images>,
    /// [`Options::own_debug`].
    own_debug: bool,
    thread_roles: &'static [&'static [ThreadRole]],
    /// The debuginfod servers `DEBUGINFOD_URLS` names, if any.
    debuginfod: Option<debuginfod::Debuginfod>,
}

impl Symbolizer {
    pub fn new(opts: &Options) -> Self {
        let mut debug_dirs = opts.debug_dirs.clone();
        debug_dirs.extend(SYSTEM_DEBUG_DIRS.iter().map(PathBuf::from));
        Symbolizer {
            blazesym: blazesym_for(&debug_dirs),
            debug_dirs: debug_dirs.clone(),
            registry: Registry::new(debug_dirs),
            runtime: RuntimeNames::new(),
            code_maps: HashMap::new(),
            own_vdso: own_vdso(),
            kernel_images: std::sync::OnceLock::new(),
            own_debug: opts.own_debug,
            thread_roles: opts.thread_roles,
            debuginfod: debuginfod::Debuginfod::from_env(),
        }
    }

    /// Stops asking debuginfod servers, for a live view that cannot wait
    /// for a fetch at its refresh (`fgbpf top`); whether servers were set.
    pub fn stop_fetching(&mut self) -> bool {
        self.debuginfod.take().is_some()
    }

    /// Where names came from beyond the binaries and the host's debug
    /// files, and what could not be fetched: one sentence each (each
    /// debuginfod server used).
    pub fn source_lines(&self) -> Vec<String> {
        self.debuginfod.as_ref().map(debuginfod::Debuginfod::lines).unwrap_or_default()
    }

    /// Debug files fetched for the binaries in `binaries` that have no
    /// symbols of their own nor a local debug file: by binary.
    fn fetch_debug(&self, binaries: impl Iterator<Item = usize>) -> HashMap<usize, PathBuf> {
        let Some(d) = &self.debuginfod else {
            return HashMap::new();
        };
        let want: Vec<(usize, &str, &[u8])> = binaries
            .filter_map(|b| {
                let bin = self.registry.binary(b);
                let elf = bin.elf.as_ref()?;
                let id = elf.build_id.as_deref()?;
                let stripped = !elf.has_symtab && !elf.has_dwarf && !elf.has_debugdata;
                (stripped && bin.debug.is_none() && !bin.own).then_some((b, bin.name.as_str(), id))
            })
            .collect();
        let asks: Vec<(&str, &[u8])> = want.iter().map(|&(_, name, id)| (name, id)).collect();
        want.iter()
            .zip(d.fetch_all(&asks))
            .filter_map(|(&(b, _, _), path)| Some((b, path?)))
            .collect()
    }

    /// See [`Options::thread_roles`].
    pub fn thread_roles(&self) -> &'static [&'static [ThreadRole]] {
        self.thread_roles
    }

    /// Reads and indexes the kernel's symbols now, during the capture,
    /// rather than after it: parsing kallsyms is most of the time between
    /// the end of a capture and its flamegraph.
    pub fn prepare_kernel(&mut self) {
        let src = Source::Kernel(Kernel::default());
        // Any address does: the first lookup loads the whole table, which
        // blazesym then keeps.
        let _ = self
            .blazesym
            .symbolize(&src, Input::AbsAddr(&[KERNEL_TEXT_GUESS]));
    }

    /// Reads, during the capture rather than after it, what naming a
    /// targeted process's frames will take: its memory map, and the
    /// symbols and debug information of every binary it maps. For the
    /// processes a capture targets only, whose code fills its stacks: with
    /// a C library's debug information installed, loading it was most of
    /// the wait for a short capture's flamegraph.
    pub fn prepare_process(&mut self, pid: u32) {
        for (b, offset) in self.registry.binaries_of(pid) {
            // blazesym keeps what it loads for the file; the result of
            // naming this one offset does not matter.
            let _ = self.name_binary(self.registry.binary(b), &[offset], None);
        }
    }

    /// Names for runtime frame words (see [`RuntimeNames`]), kept for the
    /// rest of the capture.
    pub fn add_runtime_names(&mut self, names: RuntimeNames) {
        self.runtime.extend(names);
    }

    /// JIT code maps a runtime read of its processes (the BEAM's), which
    /// name their JIT code before any perf map does.
    pub fn add_code_maps(&mut self, maps: impl IntoIterator<Item = (u32, PerfMap)>) {
        self.code_maps.extend(maps);
    }

    /// See [`Registry::remember`].
    pub fn remember(&mut self, pid: u32, start: u32, name: &str) -> Option<String> {
        self.registry.remember(pid, start, name)
    }

    /// See [`Registry::retire`].
    pub fn retire(&mut self, pid: u32, start: u32, addrs: &[u64]) {
        self.registry.retire(pid, start, addrs);
    }

    /// See [`Registry::place_found`].
    pub fn place_found(&mut self, found: Vec<((u32, u32), Vec<crate::procs::registry::FoundMap>)>) {
        self.registry.place_found(found);
    }

    /// See [`Registry::inherit`].
    pub fn inherit(&mut self, child: u32, start: u32, parent: u32, size: u64, name: &str) -> bool {
        self.registry.inherit(child, start, parent, size, name)
    }

    /// See [`Registry::exited`].
    pub fn exited(&mut self, pid: u32, start: u32) {
        self.registry.exited(pid, start);
    }

    /// See [`Registry::forget_retired`].
    pub fn forget_retired(&mut self, held: &HashSet<u32>, addresses: &dyn Fn(u32) -> Option<HashSet<u64>>) {
        self.registry.forget_retired(held, addresses);
    }

    /// Lets go of the symbol tables and debug information read so far
    /// (the next names read them again): `fgbpf flight` names a dump now
    /// and then, and would otherwise keep every binary's tables for weeks.
    pub fn drop_caches(&mut self) {
        self.blazesym = blazesym_for(&self.debug_dirs);
    }

    /// See [`Registry::held`].
    pub fn held(&self) -> Held {
        self.registry.held()
    }

    /// See [`Registry::refresh`].
    pub fn refresh(&mut self) {
        self.registry.refresh();
    }

    /// Re-reads a process's map now (code mapped since it was last read);
    /// false when it is gone.
    pub fn reread(&mut self, pid: u32) -> bool {
        self.registry.read_process(pid)
    }

    /// [`Self::reread`] with the map read already (`text`).
    pub fn reread_from(&mut self, pid: u32, text: &str) -> bool {
        self.registry.read_from(pid, text)
    }

    /// Where the addresses of `pid` since `start` lie, for [`Self::user`]
    /// (a runtime's frame word lies nowhere); the process is looked up
    /// once.
    pub fn locator(&self, pid: u32, start: u32) -> impl Fn(u64) -> Target + '_ {
        let at = self.registry.locator(pid, start);
        move |addr| match is_runtime_word(addr) {
            true => Target::Unmapped,
            false => at.locate(addr),
        }
    }

    /// See [`Registry::process_name`]: the process under `pid` now, or
    /// last.
    pub fn process_name(&self, pid: u32, comm: &str) -> String {
        self.registry.process_name(pid, 0, comm)
    }

    /// The file name of a binary [`Self::locator`] found an address in
    /// (the target's: untrusted).
    pub fn binary_name(&self, b: crate::procs::BinaryId) -> &str {
        &self.registry.binary(b).name
    }

    /// See [`Registry::process_name`]: the process `pid` since `start`.
    pub fn process_name_of(&self, pid: u32, start: u32, comm: &str) -> String {
        self.registry.process_name(pid, start, comm)
    }

    /// Whether the process writes a perf map (a runtime's JIT symbols).
    pub fn has_perf_map(&self, pid: u32) -> bool {
        self.registry.perf_map(pid).is_some()
    }

    /// The kernel's image (`None`) or a module's, by name: the mapping of
    /// a kernel frame named without its address.
    pub fn kernel_image(&self, module: Option<&str>) -> Option<std::sync::Arc<Module>> {
        self.kernel_images.get_or_init(kernel_images::Images::read).named(module)
    }

    /// Names kernel addresses (each one once).
    pub fn kernel(&self, addrs: &[u64]) -> Vec<Named> {
        if addrs.is_empty() {
            return Vec::new();
        }
        let src = Source::Kernel(Kernel::default());
        let syms = self
            .blazesym
            .symbolize(&src, Input::AbsAddr(addrs))
            .unwrap_or_default();
        let images = self.kernel_images.get_or_init(kernel_images::Images::read);
        (0..addrs.len())
            .map(|i| match syms.get(i) {
                Some(Symbolized::Sym(sym)) if !sym.name.is_empty() => Named {
                    module: images.of(addrs[i]),
                    ..Named::known(sym_frames(sym, FrameKind::Kernel))
                },
                _ => Named::unknown(UNKNOWN.into(), FrameKind::Kernel, UnresolvedReason::Kernel),
            })
            .collect()
    }

    /// Names user addresses of processes, each with where it lies
    /// ([`Self::locator`]), each key once: each binary's offsets are
    /// gathered from every process that maps it and named together. Returns
    /// the distinct names, and for each key the index of its name: a name
    /// is made once however many processes and addresses share it.
    pub fn user(&self, keys: &[(u32, u64, Target)]) -> (Vec<Named>, Vec<u32>) {
        let mut wanted: HashMap<usize, Vec<u64>> = HashMap::new();
        let mut vdso_offsets = Vec::new();
        for &(_, _, t) in keys {
            match t {
                Target::Binary(b, off) => wanted.entry(b).or_default().push(off),
                Target::Vdso(off) => vdso_offsets.push(off),
                _ => {}
            }
        }
        let mut names: Vec<Named> = Vec::new();
        let mut push = |n: Named| {
            names.push(n);
            (names.len() - 1) as u32
        };
        let mut by_offset: HashMap<(usize, u64), u32> = HashMap::new();
        let fetched = self.fetch_debug(wanted.keys().copied());
        for (b, offsets) in wanted {
            let offsets = unique(offsets);
            let named = self.name_binary(self.registry.binary(b), &offsets, fetched.get(&b).map(PathBuf::as_path));
            for (o, n) in offsets.into_iter().zip(named) {
                by_offset.insert((b, o), push(n));
            }
        }
        let vdso_offsets = unique(vdso_offsets);
        let mut vdso: HashMap<u64, u32> = HashMap::new();
        for (o, n) in vdso_offsets.iter().zip(self.name_vdso(&vdso_offsets)) {
            vdso.insert(*o, push(n));
        }
        let mut unknown: HashMap<UnresolvedReason, u32> = HashMap::new();
        let mut jit: HashMap<String, u32> = HashMap::new();
        let mut perf_maps: HashMap<u32, Option<PerfMap>> = HashMap::new();
        let mut runtime: HashMap<&Named, u32> = HashMap::new();
        let no_name = Named::unknown(
            UNKNOWN.into(),
            FrameKind::User,
            UnresolvedReason::Runtime {
                why: "a runtime's frame fgbpf did not read",
                remedy: "none: report it, it is a bug",
            },
        );
        let index = keys
            .iter()
            .map(|&(pid, addr, target)| {
                if is_runtime_word(addr) {
                    let named = self.runtime.get(&(pid, addr)).unwrap_or(&no_name);
                    if let Some(&i) = runtime.get(named) {
                        return i;
                    }
                    let i = push(named.clone());
                    runtime.insert(named, i);
                    return i;
                }
                let why = match target {
                    Target::Binary(b, off) => return by_offset[&(b, off)],
                    Target::Vdso(off) => return vdso[&off],
                    Target::Gone => UnresolvedReason::ProcessGone,
                    Target::Jit | Target::Unmapped => {
                        let own = self.code_maps.get(&pid).and_then(|m| m.find(addr));
                        let map = perf_maps
                            .entry(pid)
                            .or_insert_with(|| self.registry.perf_map(pid));
                        match own.map(Some).or_else(|| map.as_ref().map(|m| m.find(addr))) {
                            Some(Some(name)) => {
                                if let Some(&i) = jit.get(name) {
                                    return i;
                                }
                                let i = push(Named::known(vec![(name.to_string(), FrameKind::Jit)]));
                                jit.insert(name.to_string(), i);
                                return i;
                            }
                            Some(None) if matches!(target, Target::Jit) => {
                                UnresolvedReason::NotInPerfMap
                            }
                            None if matches!(target, Target::Jit) => {
                                UnresolvedReason::JitWithoutPerfMap
                            }
                            _ => UnresolvedReason::Unmapped,
                        }
                    }
                };
                *unknown.entry(why.clone()).or_insert_with(|| {
                    push(Named::unknown(UNKNOWN.into(), FrameKind::User, why))
                })
            })
            .collect();
        (names, index)
    }

    /// Names `offsets` (file offsets) of one binary: from its separate
    /// debug file first when there is one (found on the host, or
    /// `fetched` from a debuginfod server), then from the binary itself.
    fn name_binary(&self, bin: &Binary, offsets: &[u64], fetched: Option<&Path>) -> Vec<Named> {
        let mut out: Vec<Option<Vec<(String, FrameKind)>>> = vec![None; offsets.len()];
        let path = bin.path();
        if let Some(path) = &path {
            match &bin.elf {
                Some(elf) => {
                    let virt: Vec<Option<u64>> = offsets.iter().map(|&o| elf.virt(o)).collect();
                    // fgbpf's own frames from its symbols only, unless
                    // asked (Options::own_debug).
                    let full = !bin.own || self.own_debug;
                    if let Some(debug) = bin.debug.as_ref().filter(|_| full) {
                        self.fill(&mut out, &virt, &fd_path(debug), true);
                    } else if let Some(debug) = fetched {
                        self.fill(&mut out, &virt, debug, true);
                    }
                    self.fill(&mut out, &virt, path, full);
                }
                None => {
                    // Not an ELF layout fgbpf reads: let blazesym map the
                    // offsets itself.
                    let src = Source::Elf(Elf::new(path.clone()));
                    if let Ok(syms) = self.blazesym.symbolize(&src, Input::FileOffset(offsets)) {
                        for (slot, sym) in out.iter_mut().zip(&syms) {
                            *slot = named_sym(sym, FrameKind::User);
                        }
                    }
                }
            }
        }
        // Stubs of the procedure linkage table: no symbol covers them.
        if let (Some(elf), Some(file)) = (&bin.elf, &bin.file) {
            plt::fill_stubs(elf, file, offsets, &mut out);
        }
        // Unnamed code is named by where its function starts, so that one
        // function of a stripped binary stays one frame.
        let starts = match (&bin.elf, &bin.file) {
            (Some(elf), Some(file)) if out.iter().any(Option::is_none) => elf.function_starts(file),
            _ => Vec::new(),
        };
        let function_offset = |off: u64| -> u64 {
            let Some(elf) = &bin.elf else { return off };
            let Some(virt) = elf.virt(off) else {
                return off;
            };
            let i = starts.partition_point(|&s| s <= virt);
            i.checked_sub(1)
                .and_then(|i| elf.file_offset(starts[i]))
                .unwrap_or(off)
        };
        let module = std::sync::Arc::new(Module {
            name: bin.name.clone(),
            build_id: bin.elf.as_ref().and_then(|e| e.build_id.clone()),
            code: bin.elf.as_ref().map(|e| e.code.clone()).unwrap_or_default(),
        });
        // Each address as the binary is linked, named or not.
        let in_module = |mut n: Named, off: u64| {
            n.module = Some(module.clone());
            n.address = bin.elf.as_ref().and_then(|e| e.virt(off)).unwrap_or(0);
            n
        };
        out.into_iter()
            .zip(offsets)
            .map(|(frames, &off)| match frames {
                Some(frames) => in_module(Named::known(frames), off),
                None => {
                    let module = bin.name.clone();
                    let name = format!("{module}+{:#x}", function_offset(off));
                    let why = match path {
                        Some(_) => UnresolvedReason::NoSymbols { module },
                        None => UnresolvedReason::Unreadable { module },
                    };
                    in_module(Named::unknown(name, FrameKind::User, why), off)
                }
            })
            .collect()
    }

    /// Names the still unnamed entries of `out` from the ELF file at
    /// `path`, given their virtual addresses in it; a batch at a time, so
    /// that blazesym's answers for a binary's many thousands of addresses
    /// are never all held at once.
    fn fill(&self, out: &mut [Option<Vec<(String, FrameKind)>>], virt: &[Option<u64>], path: &Path, debug: bool) {
        let todo: Vec<usize> = (0..out.len())
            .filter(|&i| out[i].is_none() && virt[i].is_some())
            .collect();
        let symbolize = |addrs: &[u64], debug: bool| {
            let mut src = Elf::new(path);
            src.debug_syms = debug;
            self.blazesym
                .symbolize(&Source::Elf(src), Input::VirtOffset(addrs))
        };
        for batch in todo.chunks(NAME_BATCH) {
            let addrs: Vec<u64> = batch.iter().map(|&i| virt[i].unwrap_or(0)).collect();
            // A broken debug link or unreadable DWARF: the ELF symbols
            // alone may still name these.
            let syms = match symbolize(&addrs, debug) {
                Err(_) if debug => symbolize(&addrs, false),
                syms => syms,
            };
            for (&i, sym) in batch.iter().zip(syms.iter().flatten()) {
                out[i] = named_sym(sym, FrameKind::User);
            }
        }
    }

    fn name_vdso(&self, offsets: &[u64]) -> Vec<Named> {
        let unknown = |off: u64| {
            Named::unknown(
                format!("[vdso]+{off:#x}"),
                FrameKind::User,
                UnresolvedReason::NoSymbols {
                    module: "[vdso]".into(),
                },
            )
        };
        let Some(own) = &self.own_vdso else {
            return offsets.iter().map(|&o| unknown(o)).collect();
        };
        // The vDSO is the kernel's, the same image in every process: its
        // build ID and segments read once from fgbpf's own.
        let (build_id, code) = vdso::image(own);
        let module = std::sync::Arc::new(Module { name: "[vdso]".into(), build_id, code });
        let in_vdso = |mut n: Named, off: u64| {
            n.address = crate::procs::elf::virt_in(&module.code, off).unwrap_or(0);
            n.module = Some(module.clone());
            n
        };
        let addrs: Vec<u64> = offsets.iter().map(|&o| own.start + o).collect();
        let src = Source::Process(Process::new(Pid::Slf));
        let syms = self
            .blazesym
            .symbolize(&src, Input::AbsAddr(&addrs))
            .unwrap_or_default();
        offsets
            .iter()
            .enumerate()
            .map(
                |(i, &off)| match syms.get(i).and_then(|s| named_sym(s, FrameKind::User)) {
                    Some(frames) => in_vdso(Named::known(frames), off),
                    None => in_vdso(unknown(off), off),
                },
            )
            .collect()
    }
}

fn named_sym(sym: &Symbolized<'_>, kind: FrameKind) -> Option<Vec<(String, FrameKind)>> {
    match sym {
        Symbolized::Sym(sym) if !sym.name.is_empty() => Some(sym_frames(sym, kind)),
        _ => None,
    }
}

/// The frames for one address, root first: the function, then the
/// functions inlined into it at that address.
fn sym_frames(sym: &Sym<'_>, kind: FrameKind) -> Vec<(String, FrameKind)> {
    let inline_kind = match kind {
        FrameKind::Kernel => FrameKind::Kernel,
        _ => FrameKind::Inlined,
    };
    std::iter::once((sym.name.to_string(), kind))
        .chain(sym.inlined.iter().map(|f| (f.name.to_string(), inline_kind)))
        .collect()
}

fn unique(addrs: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut v: Vec<u64> = addrs.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    v
}
