//! What every capture command shares around the BPF side: checking and
//! starting targets, Ctrl-C, and the capture window itself.

pub mod command;
pub mod entry;
pub mod signals;
pub mod targets;
pub mod window;
