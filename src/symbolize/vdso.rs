//! The vDSO, the kernel's code mapped into every process: its build ID
//! and executable segments, read once from fgbpf's own copy (the same
//! image in every process), for naming its frames and giving them
//! addresses as it is linked.

use std::ops::Range;

/// The GNU build ID and the executable segments of fgbpf's own vDSO
/// (`range`, in its memory), read through /proc/self/mem (at most 64 KB).
pub fn image(range: &Range<u64>) -> (Option<Vec<u8>>, Vec<crate::procs::elf::ExecSegment>) {
    use object::Object;
    use std::os::unix::fs::FileExt;
    let read = || {
        let len = usize::try_from(range.end.checked_sub(range.start)?).ok()?.min(64 << 10);
        let mut image = vec![0; len];
        std::fs::File::open("/proc/self/mem").ok()?.read_exact_at(&mut image, range.start).ok()?;
        Some(image)
    };
    let Some(image) = read() else { return (None, Vec::new()) };
    let id = object::File::parse(&image[..]).ok().and_then(|f| f.build_id().ok().flatten().map(<[u8]>::to_vec));
    (id, crate::procs::elf::exec_segments(&image))
}

#[cfg(test)]
mod vdso_tests {
    #[test]
    fn the_vdso_s_build_id_and_code_are_read() {
        let own = crate::procs::maps::own_vdso().expect("this process has a vDSO");
        let (id, code) = super::image(&own);
        let id = id.expect("the vDSO has a GNU build ID");
        assert!(id.len() >= 8, "{id:?}");
        assert_eq!(code.len(), 1, "{code:?}");
        assert!(code[0].size > 0 && code[0].offset + code[0].size <= own.end - own.start, "{code:?} in {own:x?}");
    }
}
