//! The process registry and what it knows of binaries: memory maps read
//! from /proc while processes live ([`registry`], [`maps`]), ELF facts for
//! symbolization ([`elf`]), JIT perf maps ([`perf_map`]), and unwind tables
//! compiled from `.eh_frame` ([`unwind`]). Used by the symbolizer and by
//! the probe's unwind-table loader alike; it knows nothing of either.

pub mod cgroup;
pub mod debug_file;
pub mod elf;
pub mod maps;
pub mod perf_map;
pub mod python;
pub mod registry;
pub mod unwind;

pub use registry::{Binary, BinaryId, Held, Registry, Target, SYSTEM_DEBUG_DIRS};
