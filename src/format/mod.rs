//! Readers and writers, one module per format: folded (both ways), SVG,
//! the text and JSON report, pprof, speedscope, `capture.json`, and the
//! timeline page (heat map and flamegraphs in one HTML file); a capture
//! directory's files ([`outputs`]) and what its report and pictures say
//! ([`capture`]). Each writer takes a [`crate::profile::Profile`] and its
//! own options and only renders: what to rank or compare is computed in
//! [`crate::analysis`].

pub mod breakdown;
pub mod alloc;
pub mod capture;
pub mod diff;
pub mod drawn;
pub mod files;
pub mod folded;
pub mod goroutines;
pub mod input;
pub mod narrow;
pub mod otlp;
pub mod outputs;
pub mod palette;
pub mod pprof;
pub mod recolour;
pub mod sidecar;
pub mod slices;
pub mod report;
pub mod speedscope;
pub mod svg;
pub mod timeline;
pub mod top;
pub mod unresolved;
pub mod wakers;
