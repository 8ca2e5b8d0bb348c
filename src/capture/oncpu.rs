//! Loader for `src/bpf/oncpu.bpf.c`: a cpu-clock sampler on every online
//! CPU that counts (thread, user stack, kernel stack) in kernel maps.

use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::Link;

use super::perf::{online_cpus, open_cpu_clock};
use super::procs::{ProcEvent, ProcWatcher};
use super::{
    add_shared_losses, attach_tracking, bpf_error, configure_common, have_btf_tracepoints,
    impl_proc_event, object_storage, quiet_libbpf, raise_memlock, CaptureError, Targets,
};
use crate::drain::{c_name, entries, sum_per_cpu, RawStack, StackReader, LOST_STACK};
use crate::profile::Losses;

mod skel {
    #![allow(clippy::all, non_camel_case_types, dead_code, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/oncpu.skel.rs"));
}
use skel::{types, OncpuSkel, OncpuSkelBuilder};

// SAFETY: plain C structs of integers and byte arrays, generated from
// src/bpf/oncpu.h; every bit pattern is valid.
unsafe impl plain::Plain for types::oncpu_key {}
unsafe impl plain::Plain for types::oncpu_stats {}
impl_proc_event!(types::fg_proc_event);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OncpuOptions {
    pub targets: Targets,
    /// Samples per second on each CPU.
    pub frequency: u64,
    pub include_idle: bool,
    pub user_stacks: bool,
    pub kernel_stacks: bool,
    /// Entries of the stack-trace map (distinct user and kernel stacks).
    pub max_stacks: u32,
    /// Entries of the counts map (distinct thread + stack pairs).
    pub max_entries: u32,
}

impl Default for OncpuOptions {
    fn default() -> Self {
        OncpuOptions {
            targets: Targets::default(),
            frequency: 99,
            include_idle: false,
            user_stacks: true,
            kernel_stacks: true,
            max_stacks: 16384,
            max_entries: 65536,
        }
    }
}

/// The sampler's counters (struct oncpu_stats of src/bpf/oncpu.h), summed
/// over CPUs.
pub use skel::types::oncpu_stats as OncpuStats;

/// What the sampler gathered, read out of the kernel.
#[derive(Debug, Default)]
pub struct OncpuDrain {
    pub stacks: Vec<RawStack>,
    pub stats: OncpuStats,
    pub losses: Losses,
}

/// A running (or stopped) on-CPU sampler. Dropping it detaches and unloads
/// everything it attached.
pub struct OncpuSampler {
    // Field order is drop order: the ring buffer and links go before the
    // skeleton whose maps and programs they use.
    watcher: ProcWatcher,
    links: Vec<Link>,
    skel: OncpuSkel<'static>,
    /// From the start of loading to the last perf event attached.
    pub attach_time: Duration,
    pub cpus: usize,
    pub frequency: u64,
}

impl OncpuSampler {
    /// Loads the program, fills the targets and starts sampling on every
    /// online CPU.
    pub fn start(opts: &OncpuOptions) -> Result<Self, CaptureError> {
        let started = Instant::now();
        raise_memlock();
        quiet_libbpf();
        let mut open = OncpuSkelBuilder::default()
            .open(object_storage())
            .map_err(|e| bpf_error("opening the on-CPU BPF program", e))?;

        let btf = have_btf_tracepoints();
        configure_common!(open, opts.targets, opts.max_stacks, opts.max_entries, btf);
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .expect("configured above");
        ro.include_idle = opts.include_idle;
        ro.user_stacks = opts.user_stacks;
        ro.kern_stacks = opts.kernel_stacks;
        ro.self_pid = std::process::id();

        let skel = open
            .load()
            .map_err(|e| bpf_error("loading the on-CPU BPF program", e))?;
        opts.targets
            .fill(&skel.maps.target_pids, &skel.maps.target_tids)?;
        let mut links = match btf {
            true => attach_tracking(&skel.progs.fork_btf, &skel.progs.exec_btf)?,
            false => attach_tracking(&skel.progs.fork_raw, &skel.progs.exec_raw)?,
        };
        let watcher = ProcWatcher::new::<types::fg_proc_event>(&skel.maps.proc_events)?;

        let mut cpus = 0;
        for cpu in online_cpus()? {
            let Some(fd) = open_cpu_clock(cpu, opts.frequency)? else {
                continue;
            };
            // libbpf owns the perf fd from here and closes it with the link.
            let link = skel.progs.do_sample.attach_perf_event(fd).map_err(|e| {
                // SAFETY: fd was opened above and not handed over.
                unsafe { libc::close(fd) };
                bpf_error(&format!("attaching the sampler to CPU {cpu}"), e)
            })?;
            links.push(link);
            cpus += 1;
        }
        if cpus == 0 {
            return Err(CaptureError::new(
                "no online CPU accepted a cpu-clock perf event",
            ));
        }
        Ok(OncpuSampler {
            watcher,
            links,
            skel,
            attach_time: started.elapsed(),
            cpus,
            frequency: opts.frequency,
        })
    }

    /// Adds a process to the targets while sampling.
    pub fn add_target_pid(&self, pid: u32) -> Result<(), CaptureError> {
        Targets::add_pid(pid, &self.skel.maps.target_pids)
    }

    /// Process announcements since the last call, waiting up to `timeout`.
    pub fn poll_processes(&self, timeout: Duration) -> Vec<ProcEvent> {
        self.watcher.poll(timeout)
    }

    pub fn stats(&self) -> OncpuStats {
        sum_per_cpu(&self.skel.maps.stats)
    }

    /// Stops sampling; the maps stay readable for [`Self::drain`].
    pub fn stop(&mut self) {
        self.links.clear();
    }

    /// Reads every counted stack. Call after [`Self::stop`] so the maps
    /// hold still.
    pub fn drain(&self) -> OncpuDrain {
        let mut reader = StackReader::new(&self.skel.maps.stacks);
        let mut stacks = Vec::new();
        for (k, v) in entries(&self.skel.maps.counts) {
            let mut key = types::oncpu_key::default();
            if plain::copy_from_bytes(&mut key, &k).is_err() || v.len() < 8 {
                continue;
            }
            let weight = u64::from_ne_bytes(v[..8].try_into().expect("8 bytes"));
            let user = reader.get(key.user_stack);
            let kernel = reader.get(key.kern_stack);
            stacks.push(RawStack {
                pid: key.pid,
                tid: key.tid,
                comm: c_name(&key.comm),
                root_note: (user.is_none() || kernel.is_none()).then_some(LOST_STACK),
                kernel_names: Vec::new(),
                user: user.unwrap_or_default(),
                kernel: kernel.unwrap_or_default(),
                weight,
                leaf_note: None,
            });
        }
        let stats = self.stats();
        let mut losses = Losses::default();
        losses.add(
            "samples (counts map full)",
            stats.lost_map_full,
            "raise --max-entries",
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
        OncpuDrain {
            stacks,
            stats,
            losses,
        }
    }
}
