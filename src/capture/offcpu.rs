//! Loader for `src/bpf/offcpu.bpf.c`: time spent off-CPU per thread, stack
//! and state, measured on `sched_switch` alone.

use std::fs;
use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags};

use super::procs::{ProcEvent, ProcWatcher};
use super::{
    add_shared_losses, attach_tracking, bpf_error, configure_common, have_btf_tracepoints,
    impl_proc_event, object_storage, quiet_libbpf, raise_memlock, CaptureError, Targets,
};
use crate::drain::{c_name, entries, sum_per_cpu, RawStack, StackReader, LOST_STACK};
use crate::profile::Losses;

mod skel {
    #![allow(clippy::all, non_camel_case_types, dead_code, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/offcpu.skel.rs"));
}
use skel::{types, OffcpuSkel, OffcpuSkelBuilder};

// SAFETY: plain C structs of integers and byte arrays, generated from
// src/bpf/offcpu.h; every bit pattern is valid.
unsafe impl plain::Plain for types::offcpu_key {}
unsafe impl plain::Plain for types::offcpu_start {}
unsafe impl plain::Plain for types::offcpu_stats {}
impl_proc_event!(types::fg_proc_event);

/// Why a thread was off-CPU; the order matches `enum offcpu_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Sleeping,
    Uninterruptible,
    Runqueue,
}

impl State {
    pub const ALL: [State; 3] = [State::Sleeping, State::Uninterruptible, State::Runqueue];

    fn from_raw(raw: u32) -> Self {
        match raw {
            1 => State::Uninterruptible,
            2 => State::Runqueue,
            _ => State::Sleeping,
        }
    }

    fn raw(self) -> u32 {
        self as u32
    }

    /// The pseudo-frame that ends every off-CPU stack.
    pub fn frame(self) -> &'static str {
        match self {
            State::Sleeping => "[sleeping]",
            State::Uninterruptible => "[uninterruptible]",
            State::Runqueue => "[runqueue]",
        }
    }

    /// Parses a `--state` word: a name or ps(1)'s letter.
    pub fn parse(word: &str) -> Option<Self> {
        match word.trim().to_ascii_lowercase().as_str() {
            "sleeping" | "s" => Some(State::Sleeping),
            "uninterruptible" | "d" => Some(State::Uninterruptible),
            "runqueue" | "r" => Some(State::Runqueue),
            _ => None,
        }
    }
}

/// The pseudo-frame for blocks that began before the capture, whose user
/// stack could not be taken.
pub const BEFORE_CAPTURE: &str = "[blocked before capture]";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffcpuOptions {
    pub targets: Targets,
    pub user_stacks: bool,
    pub kernel_stacks: bool,
    /// Intervals shorter than this are not recorded.
    pub min_block: Duration,
    /// Intervals longer than this are not recorded.
    pub max_block: Option<Duration>,
    pub states: Vec<State>,
    /// Record one switch in N, scaling times by N.
    pub sample_every: u32,
    pub max_stacks: u32,
    pub max_entries: u32,
}

impl Default for OffcpuOptions {
    fn default() -> Self {
        OffcpuOptions {
            targets: Targets::default(),
            user_stacks: true,
            kernel_stacks: true,
            min_block: Duration::ZERO,
            max_block: None,
            states: State::ALL.to_vec(),
            sample_every: 1,
            max_stacks: 16384,
            max_entries: 65536,
        }
    }
}

/// The tracer's counters (struct offcpu_stats of src/bpf/offcpu.h), summed
/// over CPUs.
pub use skel::types::offcpu_stats as OffcpuStats;

#[derive(Debug, Default)]
pub struct OffcpuDrain {
    /// Weighted in microseconds; `leaf_note` holds the state frame.
    pub stacks: Vec<RawStack>,
    pub stats: OffcpuStats,
    pub losses: Losses,
    /// Blocks still open when the capture ended (their time so far is in
    /// `stacks`).
    pub open_blocks: u64,
}

/// A running (or stopped) off-CPU tracer. Dropping it detaches and unloads
/// everything it attached.
pub struct OffcpuTracer {
    // Field order is drop order: ring buffer and links before the skeleton.
    watcher: ProcWatcher,
    links: Vec<Link>,
    skel: OffcpuSkel<'static>,
    opts: OffcpuOptions,
    pub attach_time: Duration,
    /// When tracing stopped: blocks still open are counted up to here,
    /// however long draining takes.
    stopped_at: Option<u64>,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a stack value; CLOCK_MONOTONIC is the clock
    // of bpf_ktime_get_ns().
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl OffcpuTracer {
    pub fn start(opts: &OffcpuOptions) -> Result<Self, CaptureError> {
        let started = Instant::now();
        raise_memlock();
        quiet_libbpf();
        let mut open = OffcpuSkelBuilder::default()
            .open(object_storage())
            .map_err(|e| bpf_error("opening the off-CPU BPF program", e))?;
        let btf = have_btf_tracepoints();
        configure_common!(open, opts.targets, opts.max_stacks, opts.max_entries, btf);
        open.progs.switch_btf.set_autoload(btf);
        open.progs.switch_raw.set_autoload(!btf);
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .expect("configured above");
        ro.user_stacks = opts.user_stacks;
        ro.kern_stacks = opts.kernel_stacks;
        ro.self_pid = std::process::id();
        ro.min_block_ns = opts.min_block.as_nanos() as u64;
        ro.max_block_ns = opts.max_block.map_or(u64::MAX, |d| d.as_nanos() as u64);
        ro.state_mask = opts.states.iter().fold(0, |m, s| m | 1 << s.raw());
        ro.sample_every = opts.sample_every.max(1);

        let skel = open
            .load()
            .map_err(|e| bpf_error("loading the off-CPU BPF program", e))?;
        opts.targets
            .fill(&skel.maps.target_pids, &skel.maps.target_tids)?;
        let mut links = match btf {
            true => attach_tracking(&skel.progs.fork_btf, &skel.progs.exec_btf)?,
            false => attach_tracking(&skel.progs.fork_raw, &skel.progs.exec_raw)?,
        };
        let watcher = ProcWatcher::new::<types::fg_proc_event>(&skel.maps.proc_events)?;
        let switch = if btf {
            &skel.progs.switch_btf
        } else {
            &skel.progs.switch_raw
        };
        links.push(
            switch
                .attach()
                .map_err(|e| bpf_error("attaching to sched_switch", e))?,
        );
        let tracer = OffcpuTracer {
            watcher,
            links,
            skel,
            opts: opts.clone(),
            attach_time: started.elapsed(),
            stopped_at: None,
        };
        // A command started by fgbpf has no history before the capture.
        if !opts.targets.follow_children {
            tracer.seed_blocked_threads();
        }
        Ok(tracer)
    }

    /// Threads already blocked when tracing starts would otherwise go
    /// unseen until they wake: start their clocks now, from /proc.
    fn seed_blocked_threads(&self) {
        let now = monotonic_ns();
        for (pid, tid, state) in blocked_threads(&self.opts.targets) {
            if pid == std::process::id() || !self.opts.states.contains(&state) {
                continue;
            }
            let start = types::offcpu_start {
                ts: now,
                user_stack: 0,
                pid,
                state: state.raw(),
                pre_existing: 1,
                pad: 0,
            };
            // SAFETY: offcpu_start is a padding-free struct of integers.
            let bytes = unsafe { plain::as_bytes(&start) };
            // NOEXIST: a switch-out seen since attaching is more precise.
            let _ = self
                .skel
                .maps
                .starts
                .update(&tid.to_ne_bytes(), bytes, MapFlags::NO_EXIST);
        }
    }

    /// Adds a process to the targets while tracing.
    pub fn add_target_pid(&self, pid: u32) -> Result<(), CaptureError> {
        Targets::add_pid(pid, &self.skel.maps.target_pids)
    }

    pub fn poll_processes(&self, timeout: Duration) -> Vec<ProcEvent> {
        self.watcher.poll(timeout)
    }

    pub fn stats(&self) -> OffcpuStats {
        sum_per_cpu(&self.skel.maps.stats)
    }

    /// Stops tracing; the maps stay readable for [`Self::drain`].
    pub fn stop(&mut self) {
        self.links.clear();
        self.stopped_at.get_or_insert_with(monotonic_ns);
    }

    /// Reads every recorded interval, plus the blocks still open. Call
    /// after [`Self::stop`].
    pub fn drain(&self) -> OffcpuDrain {
        let now = self.stopped_at.unwrap_or_else(monotonic_ns);
        let mut reader = StackReader::new(&self.skel.maps.stacks);
        let mut stacks = Vec::new();
        for (k, v) in entries(&self.skel.maps.counts) {
            let mut key = types::offcpu_key::default();
            if plain::copy_from_bytes(&mut key, &k).is_err() || v.len() < 8 {
                continue;
            }
            let ns = u64::from_ne_bytes(v[..8].try_into().expect("8 bytes"));
            let user = reader.get(key.user_stack);
            let kernel = reader.get(key.kern_stack);
            let root_note = match () {
                _ if key.pre_existing != 0 => Some(BEFORE_CAPTURE),
                _ if user.is_none() || kernel.is_none() => Some(LOST_STACK),
                _ => None,
            };
            stacks.push(RawStack {
                pid: key.pid,
                tid: key.tid,
                comm: c_name(&key.comm),
                user: user.unwrap_or_default(),
                kernel: kernel.unwrap_or_default(),
                kernel_names: Vec::new(),
                weight: (ns + 500) / 1000,
                root_note,
                leaf_note: Some(State::from_raw(key.state).frame()),
            });
        }
        let open_blocks = self.open_blocks(now, &mut reader, &mut stacks);

        let stats = self.stats();
        let mut losses = Losses::default();
        losses.add(
            "off-CPU intervals (counts map full)",
            stats.lost_map_full,
            "raise --max-entries",
        );
        losses.add(
            "off-CPU intervals (blocked-thread map full)",
            stats.lost_start_full,
            "profile fewer threads with -p or -t",
        );
        let events_lost = self
            .skel
            .maps
            .bss_data
            .as_deref()
            .map_or(0, |b| b.proc_events_lost);
        add_shared_losses(
            &mut losses,
            stats.lost_user_stack,
            stats.lost_kern_stack,
            events_lost,
        );
        OffcpuDrain {
            stacks,
            stats,
            losses,
            open_blocks,
        }
    }

    /// Blocks still open at the end count up to now. Their kernel stacks
    /// were never read at a switch-in, so they come from /proc/TID/stack.
    fn open_blocks<M: MapCore>(
        &self,
        now: u64,
        reader: &mut StackReader<'_, M>,
        out: &mut Vec<RawStack>,
    ) -> u64 {
        let mut count = 0;
        let sample_every = self.opts.sample_every.max(1) as u64;
        for (k, v) in entries(&self.skel.maps.starts) {
            let mut start = types::offcpu_start::default();
            if k.len() < 4 || plain::copy_from_bytes(&mut start, &v).is_err() {
                continue;
            }
            let tid = u32::from_ne_bytes(k[..4].try_into().expect("4 bytes"));
            let ns = now.saturating_sub(start.ts);
            let pre = start.pre_existing != 0;
            if !pre
                && (ns < self.opts.min_block.as_nanos() as u64
                    || self
                        .opts
                        .max_block
                        .is_some_and(|m| ns > m.as_nanos() as u64))
            {
                continue;
            }
            // A thread that has exited leaves its last start behind.
            let Ok(comm) = fs::read_to_string(format!("/proc/{}/task/{tid}/comm", start.pid))
            else {
                continue;
            };
            let user = reader.get(start.user_stack);
            count += 1;
            out.push(RawStack {
                pid: start.pid,
                tid,
                comm: comm.trim_end_matches('\n').to_string(),
                root_note: if pre {
                    Some(BEFORE_CAPTURE)
                } else {
                    user.is_none().then_some(LOST_STACK)
                },
                user: user.unwrap_or_default(),
                kernel: Vec::new(),
                kernel_names: if self.opts.kernel_stacks {
                    proc_kernel_stack(start.pid, tid)
                } else {
                    Vec::new()
                },
                weight: (ns * sample_every + 500) / 1000,
                leaf_note: Some(State::from_raw(start.state).frame()),
            });
        }
        count
    }
}

/// The kernel stack of a blocked thread as the kernel names it, leaf first.
fn proc_kernel_stack(pid: u32, tid: u32) -> Vec<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stack")).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|f| f.split('+').next().unwrap_or(f).to_string())
        .collect()
}

/// Threads of the targets (every thread when there are none) that are
/// blocked now, with their state.
fn blocked_threads(targets: &Targets) -> Vec<(u32, u32, State)> {
    let pids: Vec<u32> = if targets.whole_system() {
        fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect()
    } else {
        targets.pids.clone()
    };
    let mut out = Vec::new();
    let mut add = |pid: u32, tid: u32| {
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) else {
            return;
        };
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        let state = match state {
            Some("S") | Some("I") => State::Sleeping,
            Some("D") => State::Uninterruptible,
            _ => return,
        };
        out.push((pid, tid, state));
    };
    for pid in pids {
        for tid in fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        {
            add(pid, tid);
        }
    }
    for &tid in &targets.tids {
        let tgid = fs::read_to_string(format!("/proc/{tid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse().ok())
            });
        if let Some(pid) = tgid {
            add(pid, tid);
        }
    }
    out
}
