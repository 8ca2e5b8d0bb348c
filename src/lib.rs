//! fgbpf: an eBPF on-CPU and off-CPU profiler.
//!
//! The modules follow the pipeline: [`capture`] loads and attaches the BPF
//! programs, [`drain`] reads what they aggregated, [`symbolize`] names the
//! addresses, [`profile`] holds the result, and [`output`] writes it.

pub mod capture;
pub mod cli;
pub mod cmd;
pub mod demo;
pub mod drain;
pub mod input;
pub mod output;
pub mod profile;
pub mod session;
pub mod symbolize;
