//! What the reports count as a function, and which functions are runtime
//! plumbing rather than the user's code. Stacks hold inlined fragments
//! (`_[i]`), pseudo-frames (`[sleeping]`) and the start-up and dispatch
//! frames of each runtime; a person asking "where did the time go" wants
//! none of them first. Names are all there is (folded files carry no
//! binary identity), so the lists below go by name.

use crate::profile::{FrameId, FrameKind, Profile, Stack};
use crate::runtimes::plumbing;

/// How frames are grouped into functions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lens {
    /// Keep inlined frames apart (`--inlines`); by default their time is
    /// the time of the function they were inlined into.
    pub inlines: bool,
}

impl Lens {
    /// Whether `f` is a function of its own under this lens: neither a
    /// pseudo-frame nor, by default, an inlined fragment.
    pub fn is_function(self, profile: &Profile, f: FrameId) -> bool {
        match profile.frame(f).kind {
            FrameKind::Pseudo => false,
            FrameKind::Inlined => self.inlines,
            _ => true,
        }
    }

    /// The positions in `stack.frames` of its functions, root first.
    pub fn positions<'a>(
        self,
        profile: &'a Profile,
        stack: &'a Stack,
    ) -> impl DoubleEndedIterator<Item = usize> + 'a {
        (0..stack.frames.len()).filter(move |&i| self.is_function(profile, stack.frames[i]))
    }

    /// The function a stack's time is spent in: its deepest function.
    pub fn leaf(self, profile: &Profile, stack: &Stack) -> Option<FrameId> {
        self.positions(profile, stack).next_back().map(|i| stack.frames[i])
    }
}

/// Start-up, thread-entry, dispatch and syscall-entry frames of native
/// code (the managed runtimes' are in their folders, [`plumbing`]): they
/// sit under everything and explain nothing.
const PLUMBING_EXACT: &[&str] = &[
    // glibc and the loader
    "_start",
    "__libc_start_main",
    "__libc_start_main_impl",
    "__libc_start_call_main",
    "start_thread",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
    "_dl_start_user",
    // Rust's runtime
    "main",
    "std::rt::lang_start",
    "std::rt::lang_start_internal",
    "std::sys::backtrace::__rust_begin_short_backtrace",
    "std::sys_common::backtrace::__rust_begin_short_backtrace",
    "<std::sys::thread::unix::Thread>::new::thread_start",
    "std::sys::pal::unix::thread::Thread::new::thread_start",
    "core::ops::function::FnOnce::call_once",
    "core::ops::function::FnOnce::call_once{{vtable.shim}}",
    "std::panic::catch_unwind",
    "std::panicking::try",
    "std::panicking::try::do_call",
    "std::panicking::catch_unwind",
    "std::panicking::catch_unwind::do_call",
    // The kernel's way in
    "entry_SYSCALL_64",
    "entry_SYSCALL_64_after_hwframe",
    "do_syscall_64",
    "x64_sys_call",
    "ret_from_fork",
    "ret_from_fork_asm",
];

/// Name prefixes of plumbing, for families with generated names.
const PLUMBING_PREFIXES: &[&str] = &[
    // Rust: spawning and the boxed closures it calls through
    "std::thread::lifecycle::spawn_unchecked",
    "std::thread::Builder::spawn_unchecked",
    "<alloc::boxed::Box<dyn core::ops::function::FnOnce",
    "<core::panic::unwind_safe::AssertUnwindSafe<F> as core::ops::function::FnOnce",
    "std::rt::lang_start::{{closure}}",
    // C++: std::thread and std::function trampolines
    "std::thread::_State_impl<",
    "std::thread::_Invoker<",
    "std::__invoke",
    "std::_Function_handler<",
    "std::function<",
    "execute_native_thread_routine",
    // the kernel's interrupt entry
    "asm_sysvec_",
    "asm_common_interrupt",
    "asm_exc_",
];

/// Whether `name` (without its kind suffix) is runtime plumbing, or code
/// of a library that has no name for it (`libstdc++.so.6+0xd4490`): a
/// thread-entry routine whose symbol the distribution stripped.
pub fn is_plumbing(name: &str) -> bool {
    PLUMBING_EXACT.contains(&name)
        || PLUMBING_PREFIXES.iter().any(|p| name.starts_with(p))
        || plumbing().any(|r| r.exact.contains(&name) || r.prefixes.iter().any(|p| name.starts_with(p)))
        || is_unnamed_library_code(name)
}

/// `libfoo.so.1.2+0x1234`: an address in a shared library with no symbol.
fn is_unnamed_library_code(name: &str) -> bool {
    is_unnamed(name) && name.rsplit_once("+0x").is_some_and(|(file, _)| file.contains(".so"))
}

/// Whether a user-space function belongs to a language's or the system's
/// libraries rather than to the program: the standard libraries of Rust
/// and C++, glibc's internal names (`__GI___clock_nanosleep`), its
/// blocking wrappers, and each runtime's libraries ([`plumbing`]). Used to find the user's function above a wait.
pub fn is_library(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "std::", "core::", "alloc::", "<std::", "<core::", "<alloc::", "__", "_dl_", "_IO_",
        "pthread_", "sem_", "epoll_", "g_main_",
    ];
    const WRAPPERS: &[&str] = &[
        "read", "write", "pread64", "pwrite64", "readv", "writev", "recv", "recvfrom",
        "recvmsg", "send", "sendto", "sendmsg", "accept", "accept4", "connect", "poll",
        "ppoll", "select", "pselect", "nanosleep", "clock_nanosleep", "usleep", "sleep",
        "syscall", "waitpid", "wait4", "wait", "fsync", "fdatasync", "open", "openat",
        "close", "pause", "sigwait", "sigtimedwait", "msgrcv", "flock", "fcntl", "ioctl",
        "futex", "mmap", "munmap", "memcpy", "memmove", "memset", "malloc", "free",
        "[unknown]",
    ];
    // A C program's `main` is its own code, and the last place to say a
    // wait came from.
    name != "main"
        && (is_plumbing(name)
            || is_unnamed(name)
            || PREFIXES.iter().any(|p| name.starts_with(p))
            || plumbing().any(|r| r.libraries.iter().any(|p| name.starts_with(p)))
            || WRAPPERS.contains(&name)
            || is_std_impl(name))
}

/// Rust's standard library implementing its own traits for its own or the
/// language's types: `<u64 as core::iter::range::Step>::forward_unchecked`,
/// `<[T] as alloc::slice::Concat<T>>::concat`. A program's type
/// implementing a standard trait (`<my::Type as core::fmt::Display>::fmt`)
/// is the program's code.
fn is_std_impl(name: &str) -> bool {
    const STD: [&str; 3] = ["core::", "alloc::", "std::"];
    const PRIMITIVES: [&str; 17] = [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64",
        "bool", "char", "str",
    ];
    let Some(rest) = name.strip_prefix('<') else { return false };
    let Some((ty, tr)) = rest.split_once(" as ") else { return false };
    let ty = ty.trim_start_matches(['&', '*']).trim_start_matches("mut ").trim_start_matches("const ");
    STD.iter().any(|p| tr.starts_with(p))
        && (PRIMITIVES.contains(&ty) || ty.starts_with('[') || ty.starts_with('(') || STD.iter().any(|p| ty.starts_with(p)))
}

/// `file+0x1234`: code of any file that has no name for it, the program's
/// own stripped executable included: no use as a place to point at.
fn is_unnamed(name: &str) -> bool {
    name.rsplit_once("+0x").is_some_and(|(file, offset)| {
        !file.is_empty()
            && !file.contains(char::is_whitespace)
            && !offset.is_empty()
            && offset.chars().all(|c| c.is_ascii_hexdigit())
    })
}

/// A function's name as a sentence uses it: glibc's internal aliases
/// (`__GI___clock_nanosleep`, `__libc_read`) by their public names, Rust
/// closures by the function that holds them.
pub fn plain_name(name: &str) -> &str {
    let mut n = name;
    for p in ["__GI_", "__libc_", "__"] {
        if let Some(rest) = n.strip_prefix(p) {
            n = rest;
        }
    }
    let n = n.trim_start_matches('_');
    let mut n = if n.is_empty() { name } else { n };
    while let Some(rest) = n.strip_suffix("::{{closure}}") {
        n = rest;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plumbing_and_libraries_go_by_name() {
        assert!(is_plumbing("start_thread"));
        assert!(is_plumbing(
            "<alloc::boxed::Box<dyn core::ops::function::FnOnce<(), Output = ()> + core::marker::Send> as core::ops::function::FnOnce<()>>::call_once"
        ));
        assert!(is_plumbing("std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (*)()> > >::_M_run"));
        assert!(!is_plumbing("fgbpf::demo::parse_records"));
        assert!(is_plumbing("libstdc++.so.6.0.30+0xd4490"));
        assert!(!is_plumbing("handler+0x10"));
        assert!(!is_library("main"));
        assert!(is_library("__GI___clock_nanosleep"));
        assert!(is_library("std::thread::functions::sleep"));
        assert!(is_library("read"));
        assert!(!is_library("handle_request"));
        assert!(is_library("<u64 as core::iter::range::Step>::forward_unchecked"));
        assert!(is_library("<[u8] as alloc::slice::Concat<u8>>::concat"));
        assert!(is_library("<&str as core::str::pattern::Pattern>::is_contained_in"));
        assert!(!is_library("<fgbpf::demo::Record as core::fmt::Display>::fmt"));
        assert!(!is_library("<u64 as fgbpf::demo::Checksum>::fold"));
        // A JVM's thread: its start and calls into Java are plumbing, the
        // class library and the JVM's waits library code.
        assert!(is_plumbing("JavaCalls::call_helper(JavaValue*, methodHandle const&, JavaCallArguments*, JavaThread*)"));
        assert!(is_plumbing("StubRoutines (1)"));
        assert!(is_library("java.lang.Thread.sleep"));
        assert!(is_library("os::PlatformEvent::park(long)"));
        assert!(!is_library("Waits.sleeper"));
        assert!(!is_library("com.example.Handler.handle"));
        assert_eq!(plain_name("__GI___clock_nanosleep"), "clock_nanosleep");
        assert_eq!(plain_name("__libc_read"), "read");
        assert_eq!(plain_name("fgbpf::demo::run::{{closure}}::{{closure}}"), "fgbpf::demo::run");
        assert_eq!(plain_name("__"), "__");
    }
}
