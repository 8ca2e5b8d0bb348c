//! fgbpf: an eBPF on-CPU and off-CPU profiler.
//!
//! The modules follow the pipeline:
//! - [`bpf`] is the one BPF object's skeleton, the types it shares with
//!   user space;
//! - [`probe`] owns the one BPF object: loading, attaching, feature
//!   probing, and draining what it aggregated while the capture runs;
//! - [`runtimes`] is one folder per managed runtime (CPython, Ruby, PHP,
//!   HotSpot, V8, Go) behind one trait: its BPF half, layouts, readers and
//!   namer;
//! - [`procs`] is the process registry: mappings, pinned binaries, build
//!   IDs, debug files, perf maps, and the unwind tables built from them;
//! - [`symbolize`] turns addresses into frames, with the reason when it
//!   cannot;
//! - [`profile`] is the one model (weighted stacks with a unit, threads,
//!   states and binary identity), its building and merging;
//! - [`analysis`] computes what the reports say of a profile: rankings,
//!   waits, threads, findings, the diff;
//! - [`format`] reads and writes it, one module per format;
//! - [`app`] is one thin file per subcommand, on top of all of these.

pub mod analysis;
pub mod app;
pub mod cli;
pub mod demo;
pub mod format;
pub mod net;
pub mod probe;
pub mod bpf;
pub mod procs;
pub mod profile;
pub mod runtimes;
pub mod symbolize;
