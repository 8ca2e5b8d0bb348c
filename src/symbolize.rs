//! Names raw addresses with blazesym and builds the [`Profile`]: kernel
//! frames from kallsyms, user frames per process from ELF and DWARF
//! (inlined functions, Rust and C++ demangling), JIT frames from perf maps.
//! Each distinct address is symbolized once.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use blazesym::normalize::{Normalizer, UserMeta};
use blazesym::symbolize::cache::{self, Cache};
use blazesym::symbolize::source::{Kernel, Process, Source};
use blazesym::symbolize::{Input, Sym, Symbolized, Symbolizer as Blazesym};
use blazesym::Pid;

use crate::drain::RawStack;
use crate::profile::{Frame, FrameKind, Profile, Stack, Thread, Unit, UNKNOWN};

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Extra directories searched for separate debug files.
    pub debug_dirs: Vec<PathBuf>,
}

/// A symbolizer that lives through a capture: processes are remembered
/// while they run, so they can be named after they exit.
pub struct Symbolizer {
    blazesym: Blazesym,
    /// Process names announced during the capture.
    names: HashMap<u32, String>,
    remembered: HashSet<u32>,
}

impl Symbolizer {
    pub fn new(opts: &Options) -> Self {
        let mut builder = Blazesym::builder()
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(true);
        if !opts.debug_dirs.is_empty() {
            let mut dirs = vec![PathBuf::from("/usr/lib/debug")];
            dirs.extend(opts.debug_dirs.iter().cloned());
            builder = builder.set_debug_dirs(Some(dirs));
        }
        Symbolizer {
            blazesym: builder.build(),
            names: HashMap::new(),
            remembered: HashSet::new(),
        }
    }

    /// Reads what naming `pid`'s frames will need (its mappings and perf
    /// map) while it lives. Call again after it execs.
    pub fn remember(&mut self, pid: u32, name: &str) {
        if pid == 0 {
            return;
        }
        if !name.is_empty() {
            self.names.insert(pid, name.to_string());
        }
        // A process that is already gone has nothing left to read.
        if self
            .blazesym
            .cache(&Cache::Process(cache::Process::new(Pid::from(pid))))
            .is_ok()
        {
            self.remembered.insert(pid);
        }
    }

    /// Names every frame of `raw` and returns the profile.
    pub fn profile(&mut self, raw: &[RawStack], unit: Unit) -> Profile {
        let kernel = self.kernel_frames(raw);
        let user = self.user_frames(raw);
        let mut profile = Profile::new(unit);
        for r in raw {
            let thread = profile.intern_thread(Thread {
                pid: r.pid,
                tid: r.tid,
                process: self.process_name(r),
                name: r.comm.clone(),
            });
            let mut frames = Vec::new();
            if let Some(note) = r.root_note {
                frames.push(profile.intern_frame(Frame::new(note, FrameKind::Pseudo)));
            }
            for (i, &ip) in r.user.iter().enumerate().rev() {
                for f in &user[&(r.pid, caller_adjusted(ip, i))] {
                    frames.push(profile.intern_frame(f.clone()));
                }
            }
            for (i, &ip) in r.kernel.iter().enumerate().rev() {
                for f in &kernel[&caller_adjusted(ip, i)] {
                    frames.push(profile.intern_frame(f.clone()));
                }
            }
            for name in r.kernel_names.iter().rev() {
                frames.push(profile.intern_frame(Frame::new(name.as_str(), FrameKind::Kernel)));
            }
            if let Some(note) = r.leaf_note {
                frames.push(profile.intern_frame(Frame::new(note, FrameKind::Pseudo)));
            }
            profile.push(Stack {
                thread: Some(thread),
                frames,
                weight: r.weight,
            });
        }
        profile.coalesce();
        profile
    }

    fn process_name(&self, r: &RawStack) -> String {
        if let Some(name) = self.names.get(&r.pid) {
            return name.clone();
        }
        match fs::read_to_string(format!("/proc/{}/comm", r.pid)) {
            Ok(name) if r.pid != 0 => name.trim_end_matches('\n').to_string(),
            _ if r.pid == 0 => "[idle]".to_string(),
            _ => r.comm.clone(),
        }
    }

    fn kernel_frames(&self, raw: &[RawStack]) -> HashMap<u64, Vec<Frame>> {
        let addrs: Vec<u64> = unique(raw.iter().flat_map(|r| adjusted(&r.kernel)));
        let src = Source::Kernel(Kernel::default());
        let syms = self
            .blazesym
            .symbolize(&src, Input::AbsAddr(&addrs))
            .unwrap_or_default();
        addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let frames = match syms.get(i) {
                    Some(Symbolized::Sym(sym)) => sym_frames(sym, FrameKind::Kernel),
                    _ => vec![Frame::new(UNKNOWN, FrameKind::Kernel)],
                };
                (a, frames)
            })
            .collect()
    }

    fn user_frames(&self, raw: &[RawStack]) -> HashMap<(u32, u64), Vec<Frame>> {
        let mut by_pid: HashMap<u32, Vec<u64>> = HashMap::new();
        for r in raw.iter().filter(|r| !r.user.is_empty()) {
            by_pid.entry(r.pid).or_default().extend(adjusted(&r.user));
        }
        let normalizer = Normalizer::new();
        let mut out = HashMap::new();
        for (pid, addrs) in by_pid {
            let addrs = unique(addrs);
            let frames = self.symbolize_process(pid, &addrs, &normalizer);
            for (a, f) in addrs.into_iter().zip(frames) {
                out.insert((pid, a), f);
            }
        }
        out
    }

    fn symbolize_process(
        &self,
        pid: u32,
        addrs: &[u64],
        normalizer: &Normalizer,
    ) -> Vec<Vec<Frame>> {
        let unknown = || vec![Frame::new(UNKNOWN, FrameKind::User)];
        // Pid 0 would mean fgbpf itself to blazesym; the idle task has no
        // user frames anyway.
        if pid == 0 {
            return addrs.iter().map(|_| unknown()).collect();
        }
        let alive = is_alive(pid);
        if alive {
            // Pick up libraries loaded since the process was remembered.
            let _ = self
                .blazesym
                .cache(&Cache::Process(cache::Process::new(Pid::from(pid))));
        }
        let mut src = Process::new(Pid::from(pid));
        // map_files entries vanish with the process; the remembered
        // mappings then lead to the files by path.
        src.map_files = alive;
        let syms = self
            .blazesym
            .symbolize(&Source::Process(src), Input::AbsAddr(addrs))
            .unwrap_or_else(|_| {
                vec![Symbolized::Unknown(blazesym::symbolize::Reason::Unmapped); addrs.len()]
            });
        let mut frames: Vec<Vec<Frame>> = syms
            .iter()
            .map(|s| match s {
                Symbolized::Sym(sym) => sym_frames(sym, FrameKind::User),
                Symbolized::Unknown(_) => unknown(),
            })
            .collect();

        // Unnamed frames of a live process still get their module and offset.
        let unnamed: Vec<usize> = (0..addrs.len())
            .filter(|&i| frames[i][0].is_unknown())
            .collect();
        if alive && !unnamed.is_empty() {
            let lookup: Vec<u64> = unnamed.iter().map(|&i| addrs[i]).collect();
            if let Ok(norm) = normalizer.normalize_user_addrs(Pid::from(pid), &lookup) {
                for (&i, &(offset, meta)) in unnamed.iter().zip(&norm.outputs) {
                    if let Some(UserMeta::Elf(elf)) = norm.meta.get(meta) {
                        frames[i] = vec![Frame::new(
                            module_offset(&elf.path, offset),
                            FrameKind::User,
                        )];
                    }
                }
            }
        }
        frames
    }
}

/// Return addresses point after the call; step back into the call
/// instruction so callers resolve to the calling function and line.
fn caller_adjusted(ip: u64, index_from_leaf: usize) -> u64 {
    if index_from_leaf == 0 {
        ip
    } else {
        ip.saturating_sub(1)
    }
}

fn adjusted(ips: &[u64]) -> impl Iterator<Item = u64> + '_ {
    ips.iter()
        .enumerate()
        .map(|(i, &ip)| caller_adjusted(ip, i))
}

fn unique(addrs: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut v: Vec<u64> = addrs.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn is_alive(pid: u32) -> bool {
    // A zombie keeps its /proc entry but has no mappings; exe resolves
    // only while the address space exists.
    fs::read_link(format!("/proc/{pid}/exe")).is_ok()
}

/// The frames for one address, root first: the function, then the
/// functions inlined into it at that address.
fn sym_frames(sym: &Sym<'_>, kind: FrameKind) -> Vec<Frame> {
    let jit = kind == FrameKind::User
        && sym.module.as_deref().is_some_and(|m| {
            let m = m.to_string_lossy();
            m.contains("perf-") && m.ends_with(".map")
        });
    let outer = if jit { FrameKind::Jit } else { kind };
    let mut frames = vec![Frame::new(sym.name.to_string(), outer)];
    let inline_kind = if kind == FrameKind::Kernel {
        FrameKind::Kernel
    } else {
        FrameKind::Inlined
    };
    frames.extend(
        sym.inlined
            .iter()
            .map(|f| Frame::new(f.name.to_string(), inline_kind)),
    );
    frames
}

fn module_offset(path: &Path, offset: u64) -> String {
    let name = path
        .file_name()
        .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy());
    format!("{name}+{offset:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_step_back_into_the_call() {
        let v: Vec<u64> = adjusted(&[0x1000, 0x2000, 0x3000]).collect();
        assert_eq!(v, vec![0x1000, 0x1fff, 0x2fff]);
    }

    #[test]
    fn module_offset_uses_file_name() {
        assert_eq!(
            module_offset(Path::new("/usr/lib/libc.so.6"), 0x1a2b),
            "libc.so.6+0x1a2b"
        );
    }

    #[test]
    fn symbolizes_own_function_through_pid() {
        // A frame of this test binary, named through the process source
        // exactly as a capture names a target's frames.
        let addr = symbolizes_own_function_through_pid as usize as u64;
        let s = Symbolizer::new(&Options::default());
        let frames = s.symbolize_process(std::process::id(), &[addr], &Normalizer::new());
        assert!(
            frames[0][0]
                .name
                .contains("symbolizes_own_function_through_pid"),
            "{:?}",
            frames
        );
    }
}
