//! The Perl folder's unit tests: the checked-in layouts held to the
//! headers, the walker's reads bounded, and the host's libperl found.

use super::*;

/// A prerequisite `what` not installed: the test is skipped, and says
/// so, on a developer's machine; in CI (`CI` set) it fails, as a skip
/// must not pass there.
fn missing(what: &str) {
    assert!(std::env::var_os("CI").is_none(), "{what} not installed: scripts/test.sh installs it");
    eprintln!("skipped: {what} not installed");
}

/// scripts/perl-layouts.sh --check: layouts.rs says what the host's Perl
/// headers say (where they are: Debian's perl ships them).
#[test]
fn the_layouts_are_the_headers() {
    let headers = std::path::Path::new("/usr/lib/x86_64-linux-gnu/perl/5.36/CORE/perl.h");
    let gcc = std::process::Command::new("gcc").arg("--version").output().is_ok_and(|o| o.status.success());
    if !headers.exists() || !gcc {
        return missing("Perl 5.36's headers (perl) or gcc");
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new(format!("{root}/scripts/perl-layouts.sh")).arg("--check").output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// src/runtimes/perl/perl.bpf.h reads a context to its last field read
/// (at most 128 bytes) and 64 bytes of a stack info and masks the offsets into them instead of checking them:
/// each must be inside.
#[test]
fn the_walkers_offsets_are_inside_what_it_reads() {
    for l in LAYOUTS {
        let read = cx_read(&l);
        assert!((8..=128).contains(&read) && read <= l.cx_size, "perl.bpf.h reads at most 128 bytes of a context, and no more than one, not {read}");
        for off in [l.cx_type, l.cx_oldcop, l.cx_sub_cv] {
            assert!(off + 8 <= read, "context offset {off} past the {read} bytes perl.bpf.h reads");
        }
        for off in [l.si_cxstack, l.si_prev, l.si_cxix, l.si_type] {
            assert!(off + 8 <= 64, "stack info offset {off} past the 64 bytes perl.bpf.h reads");
        }
        assert!(l.cx_size >= 8 && l.cx_size <= 1024);
    }
}

#[test]
fn libperl_and_perl_may_be_interpreters() {
    assert!(may_be_interpreter("/usr/lib/x86_64-linux-gnu/libperl.so.5.36.0"));
    assert!(may_be_interpreter("/usr/bin/perl"));
    assert!(!may_be_interpreter("/usr/bin/python3"));
}

/// The host's libperl (Debian 12's) is found as Perl 5.36, threaded.
#[test]
fn the_hosts_libperl_is_found() {
    let path = "/usr/lib/x86_64-linux-gnu/libperl.so.5.36";
    let Ok(file) = File::open(path) else {
        return missing(path);
    };
    // Its executable segment, as a process maps it: file offset 0x50000
    // at base + 0x50000 (the segment's own address).
    let base = 0x7f00_0000_0000;
    let i = find(&file, path, base + 0x50000, 0x50000).expect("readable").expect("an interpreter");
    assert_eq!(i.version, (5, 36));
    assert!(i.release.starts_with("5.36."), "{}", i.release);
    let nm = std::process::Command::new("nm").args(["-D", path]).output();
    if let Some(at) = nm.ok().and_then(|o| {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.lines().find(|l| l.ends_with(" PL_curinterp")).and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
    }) {
        assert_eq!(i.curinterp, base + at, "PL_curinterp at the load bias");
    }
}

/// `check` on memory laid out as 5.36's, in this process (read through
/// /proc/self/mem, as a target is): no interpreter yet, stack infos that
/// end at the main one, and ones that do not.
#[test]
fn the_check_reads_the_bottom_stack_info() {
    let l = LAYOUT_536;
    let mut bottom = [0u64; 8];
    let mut top = [0u64; 8];
    let mut interp = vec![0u64; (l.interp_size / 8) as usize];
    let mut curinterp = [0u64; 1];
    let mem = Mem::open(std::process::id()).unwrap();
    let i = Interpreter { version: l.version, release: "5.36.0".into(), curinterp: curinterp.as_ptr() as u64, thr_key_at: 0, tsd: std::cell::Cell::new(None), layout: l, binary: "libperl".into() };
    assert_eq!(check(&mem, &i), Ok(()), "no interpreter yet");
    let set_i32 = |w: &mut [u64], off: u16, v: i32| {
        let (word, shift) = (usize::from(off) / 8, (off % 8) * 8);
        w[word] = (w[word] & !(0xffff_ffffu64 << shift)) | (u64::from(v as u32) << shift);
    };
    set_i32(&mut bottom, l.si_type, i32::from(l.perlsi_main));
    set_i32(&mut top, l.si_type, 2);
    top[usize::from(l.si_prev) / 8] = bottom.as_ptr() as u64;
    interp[usize::from(l.i_curstackinfo) / 8] = top.as_ptr() as u64;
    curinterp[0] = interp.as_ptr() as u64;
    std::hint::black_box((&curinterp, &interp, &top, &bottom));
    assert_eq!(check(&mem, &i), Ok(()));
    set_i32(&mut bottom, l.si_type, 5);
    std::hint::black_box(&bottom);
    let why = check(&mem, &i).unwrap_err();
    assert!(why.contains("Perl 5.36.0: the layout's check failed (its bottom stack info's type is 5, not 1"), "{why}");
}
