//! The two counts buffers of `src/bpf/counts.bpf.h` as the drain steers
//! them: switching the programs to the other buffer (the generation in
//! the mapped .bss), the count of keys inserted into each, and which map
//! is which. Used by the drain in counts.rs alone.

use crate::bpf::FgbpfSkel;

/// Switches the programs to the other buffer; returns the one now idle.
pub(super) fn flip(skel: &mut FgbpfSkel<'_>) -> u64 {
    let bss = skel
        .maps
        .bss_data
        .as_deref_mut()
        .expect("fgbpf.bpf.c has a .bss");
    let p: *mut u64 = &mut bss.generation;
    // SAFETY: `generation` lives in the .bss map that libbpf mapped into
    // this process, aligned; BPF programs read it concurrently, so it is
    // read and written with volatile accesses the compiler cannot elide.
    unsafe {
        let old = std::ptr::read_volatile(p);
        std::ptr::write_volatile(p, old.wrapping_add(1));
        old & 1
    }
}

/// The keys inserted into the buffer in use since it was last emptied; with
/// `Some(idle)`, zeroes the count of that buffer, just emptied, instead.
pub(super) fn inserted(skel: &mut FgbpfSkel<'_>, zero: Option<u64>) -> u64 {
    let Some(bss) = skel.maps.bss_data.as_deref_mut() else { return 0 };
    let gen = bss.generation;
    let p: *mut u64 = match zero.unwrap_or(gen & 1) {
        0 => &mut bss.inserted0,
        _ => &mut bss.inserted1,
    };
    // SAFETY: as in flip: a counter of the mapped .bss, aligned, that BPF
    // programs add to concurrently.
    unsafe {
        match zero {
            Some(_) => {
                std::ptr::write_volatile(p, 0);
                0
            }
            None => std::ptr::read_volatile(p),
        }
    }
}

pub(super) fn map_of<'a>(skel: &'a FgbpfSkel<'_>, which: u64) -> &'a libbpf_rs::Map<'a> {
    match which {
        0 => &skel.maps.counts0,
        _ => &skel.maps.counts1,
    }
}
