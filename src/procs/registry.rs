//! The process registry: what naming a process's frames needs, read while
//! the process lives — its memory map with its history, an open descriptor
//! on every binary it maps (reached through /proc/PID/map_files, so deleted
//! files and files in other mount namespaces stay readable), each binary's
//! separate debug file, its root directory and its perf map. Processes
//! that exit, binaries deleted by a deploy and files that exist only inside
//! a container all still resolve after the capture. Each binary is opened
//! and parsed once, however many processes map it.
//!
//! A process is its PID and its start ([`maps::Stat::start`]): a PID the
//! kernel gives again within a capture is another process, with its own
//! name and map; the one before keeps its own until it is retired.
//!
//! A process that exited is retired once its stacks are all read: where
//! each address of them lies is kept (and the lines of its perf map they
//! need), its map, perf map and root directory are let go. What the
//! registry holds is then bounded by the live processes, the binaries ever
//! mapped and the addresses the profile's stacks hold.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::builds::Builds;
use super::debug_file;
use super::elf::ElfInfo;
use super::maps::{self, fd_path, MapsLine};
use super::perf_map::PerfMap;

pub use super::debug_file::SYSTEM_DEBUG_DIRS;

pub use super::ids::BinaryId;
type RootId = usize;

/// How often [`Registry::refresh`] looks for changed memory maps, and how
/// long one look may take: reading every process's map each time would
/// cost a busy host more than the capture itself.
const REFRESH_EVERY: Duration = Duration::from_millis(500);
const REFRESH_BUDGET: Duration = Duration::from_millis(5);

/// Identity of an open file: the same binary reached through different
/// paths, processes or namespaces is parsed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

/// fgbpf's own executable's device and inode, read once.
fn own_exe() -> Option<(u64, u64)> {
    static OWN: std::sync::OnceLock<Option<(u64, u64)>> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| fs::metadata("/proc/self/exe").ok().map(|m| (m.dev(), m.ino())))
}

impl FileKey {
    fn of(file: &File) -> Option<FileKey> {
        let m = file.metadata().ok()?;
        Some(FileKey {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
        })
    }
}

/// A file some process mapped executable.
pub struct Binary {
    /// Its file name, for `module+0xOFFSET` frames and reports.
    pub name: String,
    /// Held open from while a process mapped it: reopened through
    /// /proc/self/fd, it stays readable after the process exits, after
    /// the file is deleted, and outside the process's mount namespace.
    pub file: Option<File>,
    /// Where to read it when no descriptor could be kept.
    fallback: Option<PathBuf>,
    pub elf: Option<ElfInfo>,
    /// A separate debug file, found by build ID or debuglink.
    pub debug: Option<File>,
    /// fgbpf's own executable (a `fgbpf dump` waiting for its dump is in
    /// every dump it asks for).
    pub own: bool,
}

impl Binary {
    /// A path that reads the binary, if any does.
    pub fn path(&self) -> Option<PathBuf> {
        match &self.file {
            Some(f) => Some(fd_path(f)),
            None => self.fallback.clone(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Region {
    File(BinaryId),
    /// Memory with no file behind it: where JIT compilers put code.
    Anon,
    Vdso,
}

#[derive(Clone, Copy, Debug)]
struct Vma {
    start: u64,
    end: u64,
    offset: u64,
    region: Region,
}

/// What was read about a process while it lived.
struct Proc {
    /// When it started, in clock ticks since boot (their low 32 bits, as
    /// [`maps::Stat::start`]); 0 when not known.
    start: u32,
    /// Sorted by start and disjoint.
    vmas: Vec<Vma>,
    /// Its PID as it sees itself, which names its perf map: read with the
    /// root, only for a process that maps code it compiled.
    ns_pid: Option<u32>,
    /// Its root directory when it is not ours (a container, a chroot).
    root: Option<RootId>,
    /// Whether `root` was found: only when a binary not seen before or a
    /// perf map had to be opened (two system calls fewer for most).
    root_known: bool,
    /// Its perf map, held open once seen: a /tmp private to its mount
    /// namespace goes away with the namespace, the open file does not.
    perf_map: Option<File>,
    /// Virtual memory size when the map was read: when it changes, the
    /// map has.
    vsize: u64,
    /// False once it is known to have exited.
    alive: bool,
}

/// Whether two starts can be one process's: 0 is a start not known (a
/// stack made in user space, a process read before it was announced).
pub(super) fn same_start(a: u32, b: u32) -> bool {
    a == 0 || b == 0 || a == b
}

/// What is kept of a process that exited once its stacks were drained.
#[derive(Default)]
struct Retired {
    /// Each address of its stacks, located; sorted by address.
    located: Vec<(u64, Target)>,
    /// The lines of its perf map its JIT addresses need.
    perf_map: Option<PerfMap>,
}

/// Where the addresses of one process lie (see [`Registry::locator`]).
pub struct Locator<'a> {
    retired: Option<&'a Retired>,
    proc: Option<&'a Proc>,
}

impl Locator<'_> {
    pub fn locate(&self, addr: u64) -> Target {
        // A retired process's stacks first: its PID may be in use again.
        if let Some(r) = self.retired {
            if let Ok(i) = r.located.binary_search_by_key(&addr, |&(a, _)| a) {
                return r.located[i].1;
            }
        }
        let Some(proc) = self.proc else {
            return Target::Gone;
        };
        let i = proc.vmas.partition_point(|v| v.start <= addr);
        let Some(vma) = i.checked_sub(1).map(|i| &proc.vmas[i]) else {
            return Target::Unmapped;
        };
        if addr >= vma.end {
            return Target::Unmapped;
        }
        match vma.region {
            Region::File(b) => Target::Binary(b, addr - vma.start + vma.offset),
            Region::Anon => Target::Jit,
            Region::Vdso => Target::Vdso(addr - vma.start),
        }
    }
}

/// How much a registry holds, for the summary: its memory is bounded by
/// these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    /// Processes whose maps are held (live, or exited and not yet retired).
    pub processes: usize,
    /// Processes that exited and were let go of, over the capture.
    pub retired: usize,
    /// Processes forked that took what was read of their parent instead
    /// of having their maps read, over the capture.
    pub inherited: usize,
    /// Mappings held for the processes above.
    pub mappings: usize,
    /// Addresses kept located for retired processes' stacks.
    pub located: usize,
    /// Distinct binaries held open.
    pub binaries: usize,
    /// Root directories of other mount namespaces held open.
    pub roots: usize,
    /// Approximate bytes of the above (without the binaries' own data).
    pub bytes: usize,
}

/// What a user address of a process was found to be.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// A file offset in a binary.
    Binary(BinaryId, u64),
    /// Anonymous memory: JIT code.
    Jit,
    /// An offset in the vDSO.
    Vdso(u64),
    /// Outside every mapping read while the process lived.
    Unmapped,
    /// The process exited before its map could be read.
    Gone,
}

pub struct Registry {
    /// Host directories searched for debug files, in order.
    debug_dirs: Vec<PathBuf>,
    /// Process names announced during the capture, by PID and start.
    names: HashMap<u32, Vec<(u32, String)>>,
    /// The process under each PID now (or last, if it exited).
    procs: HashMap<u32, Proc>,
    /// Processes that exited and whose PID was given again before they
    /// were retired, by PID and start.
    older: HashMap<(u32, u32), Proc>,
    binaries: Vec<Binary>,
    /// (device, inode) as /proc/PID/maps shows them: a file already held
    /// is recognised without a system call.
    by_maps_key: HashMap<(u64, u64), BinaryId>,
    by_file_key: HashMap<FileKey, BinaryId>,
    /// Executable memory files (memfd) found not to hold a program: a
    /// JIT's code, named by its perf map (see [`Registry::memfd_program`]).
    memfd_code: HashSet<(u64, u64)>,
    /// Copies of one build, read once (see [`Builds`]).
    builds: Builds,
    /// Open root directories of other mount namespaces or chroots, kept so
    /// that perf maps inside them can be read after the process exits;
    /// closed when no process held uses it.
    roots: Vec<Option<File>>,
    root_users: Vec<u32>,
    root_ids: HashMap<(String, u64, u64), RootId>,
    retired: HashMap<(u32, u32), Retired>,
    retired_count: usize,
    /// See [`Held::inherited`].
    inherited_count: usize,
    own_root: Option<(String, u64, u64)>,
    last_refresh: Instant,
    /// Where the next refresh resumes, in PID order.
    refresh_from: u32,
    /// Mappings found in processes not announced yet (see
    /// [`Registry::place_found`]), with when they were found.
    pending_found: Vec<(Instant, (u32, u32), Vec<FoundMap>)>,
}

impl Registry {
    /// `debug_dirs`: where separate debug files are looked for, in order.
    pub fn new(debug_dirs: Vec<PathBuf>) -> Self {
        maps::raise_fd_limit();
        Registry {
            debug_dirs,
            names: HashMap::new(),
            procs: HashMap::new(),
            older: HashMap::new(),
            binaries: Vec::new(),
            by_maps_key: HashMap::new(),
            by_file_key: HashMap::new(),
            memfd_code: HashSet::new(),
            builds: Builds::default(),
            roots: Vec::new(),
            root_users: Vec::new(),
            root_ids: HashMap::new(),
            retired: HashMap::new(),
            retired_count: 0,
            inherited_count: 0,
            own_root: maps::root_key("self"),
            last_refresh: Instant::now(),
            refresh_from: 0,
            pending_found: Vec::new(),
        }
    }

    pub fn binary(&self, b: BinaryId) -> &Binary {
        &self.binaries[b]
    }

    /// The name the process (`pid` since `start`; 0: the last under it)
    /// was announced with, else its current one if it still runs, else
    /// the thread's (`comm`).
    pub fn process_name(&self, pid: u32, start: u32, comm: &str) -> String {
        if pid == 0 {
            return "[idle]".to_string();
        }
        let named = self.names.get(&pid).and_then(|n| match start {
            0 => n.iter().max_by_key(|(s, _)| *s),
            _ => n.iter().find(|(s, _)| *s == start),
        });
        if let Some((_, name)) = named {
            return name.clone();
        }
        // The PID's process now, unless it is another than the one asked.
        if start != 0 && maps::stat(pid).is_none_or(|s| s.start != start) {
            return comm.to_string();
        }
        match fs::read_to_string(format!("/proc/{pid}/comm")) {
            Ok(name) => name.trim_end_matches('\n').to_string(),
            Err(_) => comm.to_string(),
        }
    }

    /// Notes `name` as the name of `pid` since `start`.
    pub(super) fn name(&mut self, pid: u32, start: u32, name: &str) {
        if name.is_empty() {
            return;
        }
        let names = self.names.entry(pid).or_default();
        match names.iter_mut().find(|(s, _)| *s == start) {
            Some((_, n)) => *n = name.to_string(),
            None => names.push((start, name.to_string())),
        }
    }

    /// The binaries `pid` maps, each with one file offset it maps.
    pub fn binaries_of(&mut self, pid: u32) -> Vec<(BinaryId, u64)> {
        if !self.procs.contains_key(&pid) && !self.read_process(pid) {
            return Vec::new();
        }
        let mut firsts: Vec<(BinaryId, u64)> = Vec::new();
        for v in self.procs.get(&pid).map_or(&[][..], |p| &p.vmas[..]) {
            if let Region::File(b) = v.region {
                if !firsts.iter().any(|&(seen, _)| seen == b) {
                    firsts.push((b, v.offset));
                }
            }
        }
        firsts
    }

    /// Where the addresses of `pid` since `start` (0: the last process
    /// under it) lie ([`Locator::locate`]): the process is looked up once
    /// for all of them.
    pub fn locator(&self, pid: u32, start: u32) -> Locator<'_> {
        let now = self.procs.get(&pid).filter(|p| same_start(p.start, start));
        let proc = now.or_else(|| self.older.get(&(pid, start)));
        Locator {
            retired: match proc {
                Some(_) => None,
                None => self.retired_of(pid, start),
            },
            proc,
        }
    }

    /// What is kept of `pid` since `start` retired (0: the last retired).
    fn retired_of(&self, pid: u32, start: u32) -> Option<&Retired> {
        match start {
            0 => self.retired.iter().filter(|((p, _), _)| *p == pid).max_by_key(|((_, s), _)| *s).map(|(_, r)| r),
            _ => self.retired.get(&(pid, start)),
        }
    }

    /// The process's perf map, read now: JIT runtimes append to it for as
    /// long as they run. Read inside the process's own root, through the
    /// descriptor kept on it, so it is found in containers and after exit.
    pub fn perf_map(&self, pid: u32) -> Option<PerfMap> {
        let Some(proc) = self.procs.get(&pid) else {
            return self.retired_of(pid, 0)?.perf_map.clone();
        };
        let path = match &proc.perf_map {
            Some(file) => fd_path(file),
            None => {
                // Not known for a process read without compiled code:
                // asked of it while it lives, else there is none to find.
                let ns_pid = match proc.ns_pid {
                    Some(n) => n,
                    None if proc.alive => maps::ns_pid(pid)?,
                    None => return None,
                };
                let rel = format!("tmp/perf-{ns_pid}.map");
                match (proc.root_known, proc.root.and_then(|r| self.roots[r].as_ref())) {
                    (true, Some(root)) => fd_path(root).join(rel),
                    (true, None) => Path::new("/").join(rel),
                    (false, _) if proc.alive => PathBuf::from(format!("/proc/{pid}/root/{rel}")),
                    (false, _) => return None,
                }
            }
        };
        let text = fs::read(path).ok()?;
        Some(PerfMap::parse(&text))
    }

    /// What the registry holds now.
    pub fn held(&self) -> Held {
        let mappings: usize = self.procs.values().chain(self.older.values()).map(|p| p.vmas.len()).sum();
        let located: usize = self.retired.values().map(|r| r.located.len()).sum();
        Held {
            processes: self.procs.len() + self.older.len(),
            retired: self.retired_count,
            inherited: self.inherited_count,
            mappings,
            located,
            binaries: self.binaries.len(),
            roots: self.roots.iter().flatten().count(),
            bytes: mappings * std::mem::size_of::<Vma>()
                + located * std::mem::size_of::<(u64, Target)>()
                + (self.procs.len() + self.older.len()) * (std::mem::size_of::<Proc>() + 16)
                + self.retired.len() * (std::mem::size_of::<Retired>() + 8)
                + self.names.values().flatten().map(|(_, n)| n.len() + 40).sum::<usize>(),
        }
    }

    fn release_root(&mut self, root: Option<RootId>) {
        let Some(r) = root else { return };
        self.root_users[r] = self.root_users[r].saturating_sub(1);
        if self.root_users[r] == 0 {
            self.roots[r] = None;
            self.root_ids.retain(|_, &mut id| id != r);
        }
    }

    /// The binary behind an executable mapping, opened on first sight.
    fn open_binary(&mut self, pid: u32, m: &MapsLine<'_>, root: Option<RootId>) -> BinaryId {
        let maps_key = (m.dev, m.inode);
        if let Some(&b) = self.by_maps_key.get(&maps_key) {
            return b;
        }
        let path = m.path.strip_suffix(" (deleted)").unwrap_or(m.path);
        let root_path = root.and_then(|r| self.roots[r].as_ref()).map(fd_path);
        // map_files reaches the very file mapped, deleted or not, whatever
        // mount namespace it lives in; the paths are for kernels or
        // privileges that refuse it.
        let in_root = match &root_path {
            Some(r) => r.join(path.trim_start_matches('/')),
            None => PathBuf::from(path),
        };
        let opened = File::open(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end))
            .or_else(|_| File::open(format!("/proc/{pid}/root{path}")))
            .or_else(|_| File::open(&in_root));
        // Without a descriptor, only a path that outlives the process
        // will do.
        let fallback = (opened.is_err() && root.is_none() && path == m.path).then(|| PathBuf::from(path));
        self.hold_binary(maps_key, path, opened.ok(), fallback, root_path.as_deref())
    }

    /// The binary opened as `file` (mapped as `path`, under the process's
    /// root `root_path`), held: the one held already when it is the same
    /// file or a copy of the same build.
    fn hold_binary(
        &mut self,
        maps_key: (u64, u64),
        path: &str,
        file: Option<File>,
        fallback: Option<PathBuf>,
        root_path: Option<&Path>,
    ) -> BinaryId {
        let name = Path::new(path)
            .file_name()
            .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned());
        let key = file.as_ref().and_then(FileKey::of);
        if let Some(b) = key.and_then(|k| self.by_file_key.get(&k).copied()) {
            self.by_maps_key.insert(maps_key, b);
            return b;
        }
        let elf = file.as_ref().and_then(ElfInfo::read);
        let build = match (&file, &elf) {
            (Some(f), Some(info)) => Builds::key(f, info),
            _ => None,
        };
        let binaries = &self.binaries;
        let copy_of = build
            .as_ref()
            .zip(file.as_ref())
            .and_then(|(k, f)| self.builds.find(k, f, |b| binaries.get(b).and_then(|b| b.file.as_ref())));
        if let Some(b) = copy_of {
            self.by_maps_key.insert(maps_key, b);
            if let Some(k) = key {
                self.by_file_key.insert(k, b);
            }
            return b;
        }
        let debug = match (&elf, &file) {
            (Some(info), Some(_)) if !info.has_dwarf => {
                debug_file::find(&self.debug_dirs, info, path, root_path, &|f| {
                    key.is_some() && FileKey::of(f) == key
                })
            }
            _ => None,
        };
        let b = self.binaries.len();
        let own = key.is_some_and(|k| own_exe() == Some((k.dev, k.ino)));
        self.binaries.push(Binary {
            name,
            file,
            fallback,
            elf,
            debug,
            own,
        });
        self.by_maps_key.insert(maps_key, b);
        if let Some(k) = key {
            self.by_file_key.insert(k, b);
        }
        if let Some(k) = build {
            self.builds.note(k, b);
        }
        b
    }

    /// The process's root directory when it differs from fgbpf's (another
    /// mount namespace or a chroot), held open.
    fn root_of(&mut self, pid: u32) -> Option<RootId> {
        let key = maps::root_key(&pid.to_string())?;
        if Some(&key) == self.own_root.as_ref() {
            return None;
        }
        if let Some(&r) = self.root_ids.get(&key) {
            return Some(r);
        }
        let dir = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(format!("/proc/{pid}/root"))
            .ok()?;
        let r = self.roots.len();
        self.roots.push(Some(dir));
        self.root_users.push(0);
        self.root_ids.insert(key, r);
        Some(r)
    }
}

#[path = "reading.rs"]
mod reading;
#[path = "retired.rs"]
mod retired;
#[path = "found.rs"]
mod found;

pub use found::FoundMap;

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
