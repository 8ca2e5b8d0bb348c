//! Writers, one file per format. Each takes a [`crate::profile::Profile`]
//! and its own options.

pub mod files;
pub mod folded;
pub mod palette;
pub mod report;
pub mod svg;
