//! The check at attach, before the walker is given a VM's layout: what the
//! layout makes of the live process must match what is known of it. The
//! version string at `ruby_version` reads as the file's version (the load
//! address is right), and `rb_cObject` is a class whose path, read
//! through the layout's class, string and symbol-table offsets, is
//! `Object`. A VM that has not yet set `rb_cObject` (a command profiled
//! from its first instruction) is not checked yet: its walker still
//! bounds every control frame by its VM stack. Ruby 2.7, whose walker
//! finds a thread's context among the VM's threads, has those read too:
//! the VM's main thread is in its `living_threads`, its context's
//! `thread_ptr` is it, that context's current frame is inside its VM
//! stack, and its `thread_id` is a pthread_t (glibc's TCB, whose
//! `header.self` at 16 is itself). A VM that fails is checked again at
//! the process's next reads (one caught booting changes under the read:
//! its symbol table grows, its tables are rehashed), and one that fails
//! each time is not read, and the summary says why.

use super::iseq::Reader;
use super::{parse_version, Context, Interpreter};
use crate::procs::mem::Mem;

/// A test hook: the path the check expects of `rb_cObject` (default
/// `Object`). tests/ruby.rs sets another to see a VM refused.
const EXPECT_ENV: &str = "FGBPF_TEST_RUBY_OBJECT_PATH";

/// Ok when `vm` checks out in the process `mem` reads (or cannot be
/// checked yet); else why not.
pub fn check(mem: &Mem, vm: &Interpreter) -> Result<(), String> {
    let (major, minor) = vm.version;
    let fail = |why: String| Err(format!("Ruby {major}.{minor}: the layout's check failed ({why})"));
    if vm.version_at != 0 {
        let read = mem.bytes(vm.version_at, 16).and_then(|b| parse_version(&b));
        if read != Some(vm.version) {
            return fail(format!("ruby_version reads {read:?} in the process"));
        }
    }
    if vm.object_at == 0 {
        return fail("no rb_cObject".into());
    }
    let Some(object) = mem.u64(vm.object_at) else {
        return fail("rb_cObject could not be read".into());
    };
    if object == 0 {
        return Ok(());
    }
    let want = std::env::var(EXPECT_ENV).unwrap_or_else(|_| "Object".into());
    let mut reader = Reader::new(mem.pid(), vm.layout, vm.data);
    match reader.class_path(object) {
        Some((path, false)) if path == want => {}
        Some((path, singleton)) => {
            return fail(format!("rb_cObject reads as {path:?}{}, not {want:?}", if singleton { " (singleton)" } else { "" }))
        }
        None => return fail(format!("rb_cObject's class path could not be read, {want:?} expected")),
    }
    threads(mem, vm).or_else(fail)
}

/// Most of the VM's threads looked through for its main thread.
const MAX_THREADS: usize = 1024;

/// 2.7: the VM's threads as the walker reads them (src/runtimes/ruby/ruby.bpf.h's
/// rb_ec_27), checked on its main thread.
fn threads(mem: &Mem, vm: &Interpreter) -> Result<(), String> {
    let Context::VmThreads { vm_threads, vm_main_thread, th_node, th_thread_id, th_ec } = vm.layout.context else {
        return Ok(());
    };
    let l = &vm.layout;
    let at = |base: u64, off: u16| mem.u64(base.wrapping_add(u64::from(off)));
    let the_vm = mem.u64(vm.vm_at).filter(|&v| v != 0).ok_or("ruby_current_vm_ptr could not be read")?;
    let main = at(the_vm, vm_main_thread).ok_or("the VM's main_thread could not be read")?;
    let head = the_vm.wrapping_add(u64::from(vm_threads));
    let mut node = mem.u64(head).ok_or("the VM's living_threads could not be read")?;
    // Init_VM, late in the VM's boot (after rb_cObject), sets main_thread
    // and then adds it to the list, empty until then (its head points to
    // itself): a VM caught booting is not checked yet, as one without
    // rb_cObject is not. Its walker takes no context whose thread is not
    // the sampled one.
    if main == 0 || node == head {
        return Ok(());
    }
    let mut found = false;
    for _ in 0..MAX_THREADS {
        if node == 0 || node == head {
            break;
        }
        if node.wrapping_sub(u64::from(th_node)) == main {
            found = true;
            break;
        }
        node = mem.u64(node).ok_or("a thread of living_threads could not be read")?;
    }
    if !found {
        return Err("the VM's main thread is not among its living_threads".into());
    }
    let ec = at(main, th_ec).ok_or("the main thread's ec could not be read")?;
    if at(ec, l.ec_thread_ptr) != Some(main) {
        return Err("the main thread's ec->thread_ptr is not the main thread".into());
    }
    let (stack, size, cfp) = (at(ec, l.ec_vm_stack), at(ec, l.ec_stack_size), at(ec, l.ec_cfp));
    let inside = matches!((stack, size, cfp), (Some(s), Some(n), Some(c)) if s != 0 && c >= s && n < 1 << 26 && c < s + n * 8);
    if !inside {
        return Err("the main thread's current control frame is not inside its VM stack".into());
    }
    let id = at(main, th_thread_id).ok_or("the main thread's thread_id could not be read")?;
    if id == 0 || mem.u64(id.wrapping_add(16)) != Some(id) {
        return Err(format!("the main thread's thread_id {id:#x} is not a pthread_t"));
    }
    Ok(())
}
