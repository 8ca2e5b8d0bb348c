//! The process registry (filled in by the restructure).
pub mod unwind;
