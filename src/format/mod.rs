//! Writers, one file per format. Each takes a [`crate::profile::Profile`]
//! and its own options.

pub mod breakdown;
pub mod diff;
pub mod drawn;
pub mod files;
pub mod folded;
pub mod input;
pub mod palette;
pub mod pprof;
pub mod sidecar;
pub mod report;
pub mod speedscope;
pub mod svg;
pub mod unresolved;
