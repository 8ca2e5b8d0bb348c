//! The process registry (filled in by the restructure).
