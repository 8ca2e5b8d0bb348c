//! The process registry and what it knows of binaries: memory maps read
//! from /proc while processes live ([`registry`], [`maps`]), ELF facts for
//! symbolization ([`elf`]) and their separate debug files ([`debug_file`]),
//! JIT perf maps ([`perf_map`]), unwind tables compiled from `.eh_frame`
//! ([`unwind`]), the kind of code a frame is ([`frame_kind`]), the
//! runtimes' lookups that remember why a frame has no name ([`lookup`]),
//! bounded reads of a process's memory ([`mem`]) and the cgroups a capture
//! can be scoped to ([`cgroup`]) and grouped by ([`groups`]). Used by the
//! symbolizer, the probe and the capture's checks alike; it knows nothing
//! of any of them.

pub mod builds;
pub mod cgroup;
pub mod debug_file;
pub mod elf;
pub mod frame_kind;
pub mod groups;
pub mod ids;
pub mod lookup;
pub mod maps;
pub mod mem;
pub mod perf_map;
pub mod registry;
pub mod unwind;

pub use registry::{Binary, BinaryId, Held, Locator, Registry, Target, SYSTEM_DEBUG_DIRS};
