//! Ruby 2.7 in fgbpf's stacks: Debian 11's `ruby2.7` (2.7.4, a stripped
//! libruby) in the root scripts/fetch-roots.sh builds (debootstrap), run
//! as a container runs it (`chroot ROOT`, the process's binaries read
//! through /proc/PID/root), started with no flag. Ruby 2.7 keeps no
//! execution context in TLS: the BPF walker finds each thread's among the
//! VM's living threads by its pthread_t (src/runtimes/ruby/ruby.bpf.h's
//! rb_ec_27), so threads waiting off the CPU, which do not hold the GVL,
//! are read from their own. The same checks as 3.1's and 3.3's
//! (tests/common/ruby.rs), and rbspy on the same process.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::roots::{bullseye, copy_workloads, start_in_root};
use common::ruby::*;
use common::runtime::*;
use common::*;

/// `ruby2.7 SCRIPT 30` in the Debian 11 root, once it says "ready".
fn start_27(name: &str) -> KillOnDrop {
    start_in_root(&bullseye(), "ruby", "ruby2.7", name, "30")
}

#[test]
fn ruby_2_7_busy_methods_are_named_in_order_in_a_debian_11_container() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (pid, summary) = busy_chain(start_27("busy.rb"), "ruby2.7", "ruby27_busy");
    let said = format!("Ruby: pid {pid} (ruby2.7, Ruby 2.7): 100.0% of its time with the Ruby stack read whole");
    assert!(summary.contains(&said), "the summary does not say `{said}`\n{summary}");
}

/// Classes on 2.7 are kept as on 3.1, in the class's instance-variable
/// table (`__classpath__`, `__attached__`), and Integer#times is a C
/// method.
#[test]
fn ruby_2_7_methods_are_named_with_their_class() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    classes_named(start_27("klass.rb"), "ruby2.7", "Integer#times [c function]", "ruby27_klass");
}

/// A thread sleeping holds no GVL: its context is found among the VM's
/// threads, not from the GVL holder's global.
#[test]
fn ruby_2_7_a_thread_sleeping_in_sleep_waits_under_nap() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let summary = naps_under_nap(start_27("nap.rb"), "ruby27_nap");
    assert!(summary.contains("under Object#nap (nap.rb:5)"), "the finding names the Ruby method that slept:\n{summary}");
}

/// Threads waiting in IO#read and Mutex#lock: one woken to take the GVL
/// back waits for it while another holds it, and the global context is
/// the holder's. Every thread is a Ruby thread, read whole (with the
/// holder's global alone, 15% of the time was said as native threads and
/// the Mutex#lock waiter's share fell to 79%).
#[test]
fn ruby_2_7_threads_waiting_in_io_read_and_mutex_lock_wait_under_their_callers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = start_27("waits.rb");
    let pid = target.id();
    let summary = waits_under_callers(target, "ruby27_waits");
    let said = format!("Ruby: pid {pid} (ruby2.7, Ruby 2.7): 100.0% of its time with the Ruby stack read whole");
    assert!(summary.contains(&said), "the summary does not say `{said}`\n{summary}");
}

/// Two busy threads take the GVL in turn: a thread on the CPU without it
/// (waking to take it) is read from its own context, never from the
/// holder's.
#[test]
fn ruby_2_7_each_thread_is_walked_from_its_own_context() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    threads_apart(start_27("threads.rb"), "ruby27_threads");
}

/// `fgbpf -- chroot ROOT ruby2.7 short.rb`: found before it has set
/// rb_cObject (then not checked yet), its half second named.
#[test]
fn ruby_2_7_a_script_of_half_a_second_keeps_its_names() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let root = bullseye();
    let inside = copy_workloads(&root, "ruby");
    let short = inside.join("short.rb");
    let command = ["chroot".as_ref(), root.as_os_str(), "ruby2.7".as_ref(), short.as_os_str()];
    short_script_keeps_names("ruby27_short", &command, "short.rb", "[ruby: process gone", &["<main>@short.rb:9", "Object#work@short.rb:5"], rb);
}

/// rbspy 0.55 reads 2.7 by its exported `ruby_current_execution_context_ptr`,
/// and opens the libruby its target maps by the path /proc/PID/maps says,
/// so it runs as a container's own tools run (as for 3.3 in tests/ruby.rs):
/// the workload in a mount namespace of its own with /proc mounted in the
/// root, rbspy entered into it (`nsenter -m -r`). rbspy is built against
/// the host's C library (it needs glibc 2.34; the root has 2.31), so it
/// runs with the host's loader and the libraries `ldd` lists, copied
/// beside it in the root: `ld-linux-x86-64.so.2 --library-path DIR
/// rbspy`. Returns the directory, as the root sees it.
fn rbspy_in_root(root: &Path) -> PathBuf {
    let inside = Path::new("/tmp/fgbpf-rbspy27");
    let dir = root.join(inside.strip_prefix("/").unwrap());
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::copy(rbspy(), dir.join("rbspy")).unwrap();
    let ldd = run(Command::new("ldd").arg(rbspy()));
    assert_ok(&ldd);
    let text = String::from_utf8_lossy(&ldd.stdout);
    let libs: Vec<&str> =
        text.lines().filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/'))).collect();
    assert!(libs.iter().any(|l| l.contains("ld-linux-x86-64")), "no loader in ldd's output:\n{text}");
    for lib in libs {
        let name = Path::new(lib).file_name().unwrap();
        std::fs::copy(lib, dir.join("lib").join(name)).unwrap();
    }
    inside.to_path_buf()
}

/// fgbpf and rbspy on the same Ruby 2.7 process at the same time, as on
/// 3.1 and 3.3: each share within 3 points of the known split and within
/// 5 of rbspy's (which writes bare labels on 2.7, as on 3.1).
#[test]
fn ruby_2_7_a_50_30_20_split_agrees_with_rbspy() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let root = std::fs::canonicalize(bullseye()).unwrap();
    let inside = copy_workloads(&root, "ruby");
    let tools = rbspy_in_root(&root);
    let written = root.join(tools.strip_prefix("/").unwrap()).join("rbspy.txt");
    let _ = std::fs::remove_file(&written);
    // unshare, sh and chroot each exec the next: the child is ruby2.7.
    let shell = format!(
        "mount -t proc proc {0}/proc && exec chroot {0} ruby2.7 {1}/split.rb 30",
        root.display(),
        inside.display()
    );
    let mut ruby = start_ready(
        Command::new("unshare").args(["--mount", "--propagation", "private", "sh", "-c", &shell]),
        "ruby2.7 split.rb in a mount namespace of its own",
        "unshare",
    );
    let pid = ruby.id();
    let mut rbspy = Command::new("nsenter");
    rbspy
        .args(["-t", &pid.to_string(), "-m", "-r"])
        .arg(tools.join("lib/ld-linux-x86-64.so.2"))
        .arg("--library-path")
        .arg(tools.join("lib"))
        .arg(tools.join("rbspy"));
    rbspy_record(&mut rbspy, pid, &tools.join("rbspy.txt"));
    split_beside_rbspy(&mut ruby, rbspy, &written, "ruby27_split", ("ruby2.7", ""));
}

/// A 2.7 VM whose layout does not check out at attach is not read, and
/// the summary and report.txt say so with why; its native frames are
/// kept whole to `_start`.
#[test]
fn ruby_2_7_refused_by_its_layout_check_is_named_as_not_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    refused_by_its_check(start_27("busy.rb"), "2.7", "ruby27_refused");
}
