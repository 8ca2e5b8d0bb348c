//! The skeleton of `src/bpf/fgbpf.bpf.c`, generated at build time, and the
//! traits that let its plain C structs be read from map bytes: what the
//! probe and the runtimes (`src/runtimes/`) share with the BPF programs.

#![allow(clippy::all, non_camel_case_types, dead_code, unused_imports)]
include!(concat!(env!("OUT_DIR"), "/fgbpf.skel.rs"));

// SAFETY: plain C structs of integers and byte arrays, generated from
// src/bpf/fgbpf.h; every bit pattern is valid.
unsafe impl plain::Plain for types::fg_key {}
unsafe impl plain::Plain for types::fg_start {}
unsafe impl plain::Plain for types::fg_waker {}
unsafe impl plain::Plain for types::fg_seed_regs {}
unsafe impl plain::Plain for types::fg_event_stats {}
unsafe impl plain::Plain for types::fg_stats {}
unsafe impl plain::Plain for types::fg_proc_event {}
unsafe impl plain::Plain for types::fg_proc_unwind {}
unsafe impl plain::Plain for types::fg_py_proc {}
unsafe impl plain::Plain for types::fg_file_key {}
unsafe impl plain::Plain for types::fg_file_table {}
unsafe impl plain::Plain for types::fg_found_key {}
unsafe impl plain::Plain for types::fg_found_map {}
unsafe impl plain::Plain for types::fg_exec_path {}

/// The object's read-only configuration, set before it loads.
pub fn rodata<'a>(open: &'a mut OpenFgbpfSkel<'_>) -> &'a mut types::rodata {
    open.maps
        .rodata_data
        .as_deref_mut()
        .expect("fgbpf.bpf.c has read-only config")
}

/// The BPF object as built, for checks of its code (`stack_depth`).
#[cfg(test)]
pub(crate) fn object_bytes() -> &'static [u8] {
    include_bytes!(concat!(env!("OUT_DIR"), "/fgbpf.bpf.o"))
}
