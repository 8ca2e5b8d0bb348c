//! Ruby methods in fgbpf's stacks, on the machine's Ruby (Debian's
//! `ruby`, 3.1, with a stripped libruby, which scripts/test.sh installs)
//! and on Debian 13's Ruby 3.3 in a root run as a container (below; Debian
//! 11's 2.7 is tests/ruby_27.rs, the checks they share tests/common/ruby.rs),
//! started with no flag: the VM's control frames are walked in the kernel
//! from the thread's execution context (src/runtimes/ruby/ruby.bpf.h) and named from
//! the live process (src/runtimes/ruby/). Known answers: the scripts' own
//! lines and splits.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::roots::{copy_workloads, start_in_root, trixie};
use common::ruby::*;
use common::runtime::*;
use common::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn script(name: &str) -> PathBuf {
    Path::new(ROOT).join("tests/workloads/ruby").join(name)
}

/// Starts `ruby SCRIPT ARGS` and returns once it says "ready".
fn start(name: &str, args: &[&str]) -> KillOnDrop {
    start_ready(
        Command::new("ruby").arg(script(name)).args(args),
        name,
        "ruby is not installed: run scripts/test.sh, which installs it",
    )
}

#[test]
fn busy_ruby_methods_are_named_in_order_under_the_vms_entry() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (pid, summary) = busy_chain(start("busy.rb", &["30"]), "ruby", "ruby_busy");
    assert!(
        summary.contains(&format!("Ruby: pid {pid} (ruby, Ruby 3.1): 100.0% of its time with the Ruby stack read whole")),
        "{summary}"
    );
}

/// A block run by a method written in C (`Integer#times`): the method is
/// named between its caller and the block, and the VM's own frames go
/// with the methods they run, also when a block's VM call is between its
/// frame's pop and its return.
#[test]
fn a_block_run_by_a_c_method_is_named_under_it() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let Captured { pid, stacks, summary, .. } = capture_ended(start("blocks.rb", &["30"]), "oncpu", "3", "ruby_blocks");
    let main = thread(&stacks, &format!("ruby-{pid}"));
    let all = total(&main);
    let is = rb_or_c;
    let path = ["Object#outer@blocks.rb:16", "Integer#times [c function]", "block in Object#outer@blocks.rb:16"];
    let in_block = weight_in_order_by(&main, &path, is);
    let in_work = weight_in_order_by(&main, &["block in Object#outer@blocks.rb:16", "Object#work@blocks.rb:"], is);
    // Samples in the C method itself, between two calls of the block.
    let in_times = weight_in_order_by(&main, &["Object#outer@blocks.rb:16", "Integer#times [c function]"], is);
    eprintln!(
        "outer;times;block {:.1}%, block;work {:.1}%, under times {:.1}% of {all}",
        pct(in_block, all),
        pct(in_work, all),
        pct(in_times, all)
    );
    // 3 s at 499 Hz is ~1,500 samples on an idle machine, fewer when other
    // work shares the CPUs: the count against the CPU time the kernel gave
    // is tests/oncpu.rs's `command_is_profiled_from_its_start_until_it_exits`.
    // Here 300 says the shares below rest on the workload (at 95%, a share
    // of 300 samples has a standard error of 1.3 points).
    assert!(all >= 300, "{all} samples of the main thread\n{summary}");
    assert!(pct(in_times, all) >= 95.0, "{:.1}% under outer;times\n{summary}", pct(in_times, all));
    assert!(pct(in_block, all) >= 90.0, "{:.1}% under outer;times;block\n{summary}", pct(in_block, all));
    assert!(pct(in_work, all) >= 80.0, "{:.1}% in block;work\n{summary}", pct(in_work, all));
    // No rb_vm_exec of a VM call with a Ruby frame is left: only the
    // innermost, between a block's pop and its return.
    let stray = weight_in_order_by(&main, &["rb_vm_exec", "block in Object#outer@blocks.rb:16"], is);
    assert_eq!(stray, 0, "rb_vm_exec left under a Ruby frame\n{summary}");
}

/// fgbpf and rbspy on the same process at the same time: each method's
/// share within 3 points of the known split and within 5 of rbspy's. rbspy
/// samples at fgbpf's rate: at its default 99 Hz its 495 samples left it a
/// binomial spread of 2.2 points per share (more when the machine is busy,
/// as it samples a preempted thread too), and a CI run read 43.2% for fifty.
/// Both sample for 8 s: fgbpf's 2,000 samples of a 4 s capture left thirty
/// a spread of 1.0 point, so that 3 points were 2.9 of them, and a CI run
/// read 27.0% with every frame named; 4,000 make them 4.1.
#[test]
fn a_50_30_20_split_between_ruby_methods_agrees_with_rbspy() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let mut ruby = start("split.rb", &["30"]);
    let pid = ruby.id();
    let spied = out_dir("ruby_split_rbspy");
    std::fs::create_dir_all(&spied).unwrap();
    let written = spied.join("rbspy.txt");
    let mut rbspy = Command::new(rbspy());
    rbspy_record(&mut rbspy, pid, &written).arg("--raw-file").arg(spied.join("rbspy.raw.gz"));
    split_beside_rbspy(&mut ruby, rbspy, &written, "ruby_split", ("ruby", ""));
}

#[test]
fn a_thread_sleeping_in_sleep_waits_under_nap() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let Captured { stacks, summary, .. } = capture_ended(start("nap.rb", &["30"]), "offcpu", "3", "ruby_nap");
    // Ruby names the thread by where it was created.
    let sleeper = thread(&stacks, "nap.rb:9-");
    let all = total(&sleeper);
    let under = share_under(&sleeper, &["block in <main>@nap.rb:9", "Object#nap@nap.rb:5", "Kernel#sleep [c function]"]);
    eprintln!("{under:.1}% of the sleeper's {all} us off-CPU under nap;sleep");
    assert!(all > 2_000_000, "the sleeping thread's off-CPU time: {all} us\n{summary}");
    assert!(under >= 95.0, "{under:.1}% of {all} us under nap;sleep\n{summary}");
    assert!(summary.contains("under Object#nap (nap.rb:5)"), "the finding names the Ruby method that slept:\n{summary}");
}

/// A script that exits before the first drain of the counts still has its
/// methods named: the walker announces each new iseq, read at once.
#[test]
fn a_script_of_half_a_second_keeps_its_names() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let short = script("short.rb");
    let command = ["ruby".as_ref(), short.as_os_str()];
    short_script_keeps_names("ruby_short", &command, "short.rb", "[ruby: process gone", &["<main>@short.rb:9", "Object#work@short.rb:5"], rb);
}

/// Two Ruby threads run methods of their own: each thread's samples are
/// in its method and never in the other's, so each stack was read from
/// its own thread's execution context.
#[test]
fn each_ruby_thread_is_walked_from_its_own_context() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    threads_apart(start("threads.rb", &["30"]), "ruby_threads");
}

/// Threads that wait in C methods other than `sleep`: IO#read on a pipe
/// and Mutex#lock on a mutex another thread holds. Each one's off-CPU time
/// is under its Ruby caller and the C method it called.
#[test]
fn threads_waiting_in_io_read_and_mutex_lock_wait_under_their_callers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    waits_under_callers(start("waits.rb", &["30"]), "ruby_waits");
}

/// Methods of a class in a module, a block in one and a class method, as
/// Ruby's own profiling API names them (rbspy names them so from Ruby 3.3
/// on; on 3.1 it writes the bare label): the class read from the method
/// entry the frame runs.
#[test]
fn methods_are_named_with_their_class() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    classes_named(start("klass.rb", &["30"]), "ruby", "Integer#times [c function]", "ruby_klass");
}

/// Two Ractors run in parallel, each on a thread of its own with its own
/// execution context: each thread's samples are in its Ractor's method and
/// never in the other's.
#[test]
fn each_ractor_is_walked_from_its_own_context() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let Captured { stacks, summary, .. } = capture_ended(start("ractors.rb", &["30"]), "oncpu", "3", "ruby_ractors");
    // Ractors' threads are not named: tell them apart by their thread id.
    let mut threads: Vec<String> = stacks.iter().filter_map(|(f, _)| f.get(1).cloned()).collect();
    threads.sort();
    threads.dedup();
    let mut seen = Vec::new();
    for label in threads {
        let of = of_threads(&stacks, |t| t == label);
        let a = share_under(&of, &["block in <main>@ractors.rb:19", "Object#ractor_a@ractors.rb:"]);
        let b = share_under(&of, &["block in <main>@ractors.rb:20", "Object#ractor_b@ractors.rb:"]);
        if a + b == 0.0 {
            continue;
        }
        eprintln!("thread {label}: {} samples, {a:.1}% in ractor_a, {b:.1}% in ractor_b", total(&of));
        assert!(total(&of) > 100, "thread {label}: {} samples\n{summary}", total(&of));
        assert!(a.max(b) >= 95.0 && a.min(b) == 0.0, "thread {label}: {a:.1}% ractor_a, {b:.1}% ractor_b\n{summary}");
        seen.push(if a > b { "a" } else { "b" });
    }
    seen.sort();
    assert_eq!(seen, ["a", "b"], "one thread for each Ractor\n{summary}");
}

// Ruby 3.3: Debian 13's `ruby3.3` in the root scripts/fetch-roots.sh
// builds (debootstrap), run as a container runs it (`chroot ROOT`, the
// process's binaries read through /proc/PID/root). Its libruby, stripped,
// exports neither ruby_current_ec nor rb_vm_exec: both are found from the
// code of exported functions (src/runtimes/ruby/tls.rs, hidden.rs).

/// `ruby3.3 SCRIPT 30` in the Debian 13 root, once it says "ready".
fn start_33(name: &str) -> KillOnDrop {
    start_in_root(&trixie(), "ruby", "ruby3.3", name, "30")
}

/// The hidden rb_vm_exec is found: the Ruby frames take its place.
#[test]
fn ruby_3_3_busy_methods_are_named_in_order_in_a_debian_13_container() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (pid, summary) = busy_chain(start_33("busy.rb"), "ruby3.3", "ruby33_busy");
    let said = format!("Ruby: pid {pid} (ruby3.3, Ruby 3.3): ");
    assert!(summary.contains(&said) && summary.contains("with the Ruby stack read whole"), "{summary}");
}

/// Classes on 3.3 are kept in the classext's classpath field (object
/// shapes), and Integer#times is a Ruby method (`<internal:numeric>`).
#[test]
fn ruby_3_3_methods_are_named_with_their_class() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    classes_named(start_33("klass.rb"), "ruby3.3", "Integer#times@<internal:numeric>", "ruby33_klass");
}

#[test]
fn ruby_3_3_a_thread_sleeping_in_sleep_waits_under_nap() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    naps_under_nap(start_33("nap.rb"), "ruby33_nap");
}

/// rbspy 0.55 finds Ruby 3.3's VM by the symbol `ruby_current_vm_ptr`,
/// which Debian 13's stripped libruby does not have, and opens the
/// libruby its target maps by the path it reads in /proc/PID/maps under
/// /proc/PID/root, which from outside a chroot is the host's path. So the
/// reference runs as a container's own tools do: the workload in a mount
/// namespace of its own with /proc mounted in the root, rbspy entered into
/// it (`nsenter -m -r`), and the workload's libruby a copy of Debian's
/// with that one symbol added to a symbol table (objcopy; the code and
/// dynamic symbols fgbpf reads are the same). The symbol's address is
/// that which `ruby_vm_at_exit` (exported: `GET_VM()->at_exit`) loads
/// the VM pointer from; a wrong one makes rbspy fail, never read wrongly.
fn rbspy_ready_root(root: &Path) -> PathBuf {
    use object::{Object, ObjectSection, ObjectSymbol};
    let lib = root.join("usr/lib/x86_64-linux-gnu/libruby-3.3.so.3.3");
    let data = std::fs::read(&lib).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let f = obj.dynamic_symbols().find(|s| s.name() == Ok("ruby_vm_at_exit")).expect("ruby_vm_at_exit in libruby 3.3");
    let text = obj.section_by_name(".text").unwrap();
    let code_at = (f.address() - text.address() + text.file_range().unwrap().0) as usize;
    let code = &data[code_at..code_at + f.size() as usize];
    // The first `mov disp32(%rip),%r64` (REX.W 8b, modrm 00 reg 101).
    let at = (0..code.len() - 7).find(|&i| code[i] == 0x48 && code[i + 1] == 0x8b && code[i + 2] & 0xc7 == 0x05).expect("a RIP-relative load");
    let disp = i32::from_le_bytes(code[at + 3..at + 7].try_into().unwrap());
    let vm_ptr = (f.address() + at as u64 + 7).wrapping_add(disp as i64 as u64);
    let bss = obj.section_by_name(".bss").unwrap();
    assert!((bss.address()..bss.address() + bss.size()).contains(&vm_ptr), "{vm_ptr:#x} not in .bss");
    let dir = root.join("tmp/fgbpf-rbspy");
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    let out = Command::new("objcopy")
        .arg(format!("--add-symbol=ruby_current_vm_ptr={vm_ptr:#x},global,object"))
        .arg(&lib)
        .arg(dir.join("lib/libruby-3.3.so.3.3"))
        .output()
        .unwrap();
    assert!(out.status.success(), "objcopy: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::copy(rbspy(), dir.join("rbspy")).unwrap();
    Path::new("/tmp/fgbpf-rbspy").to_path_buf()
}

/// fgbpf and rbspy on the same Ruby 3.3 process at the same time, as the
/// 3.1 test above: each share within 3 points of the known split and
/// within 5 of rbspy's.
#[test]
fn ruby_3_3_a_50_30_20_split_agrees_with_rbspy() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let root = std::fs::canonicalize(trixie()).unwrap();
    let inside = copy_workloads(&root, "ruby");
    let tools = rbspy_ready_root(&root);
    let written = root.join("tmp/fgbpf-rbspy/rbspy.txt");
    let _ = std::fs::remove_file(&written);
    // unshare, sh, chroot and env each exec the next: the child is ruby3.3.
    let shell = format!(
        "mount -t proc proc {0}/proc && exec chroot {0} env LD_LIBRARY_PATH={1}/lib ruby3.3 {2}/split.rb 30",
        root.display(),
        tools.display(),
        inside.display()
    );
    let mut ruby = start_ready(
        Command::new("unshare").args(["--mount", "--propagation", "private", "sh", "-c", &shell]),
        "ruby3.3 split.rb in a mount namespace of its own",
        "unshare",
    );
    let pid = ruby.id();
    let mut rbspy = Command::new("nsenter");
    rbspy.args(["-t", &pid.to_string(), "-m", "-r"]).arg(tools.join("rbspy"));
    rbspy_record(&mut rbspy, pid, &tools.join("rbspy.txt"));
    split_beside_rbspy(&mut ruby, rbspy, &written, "ruby33_split", ("ruby3.3", "Object#"));
}

/// A VM whose layout does not check out at attach is not read, and the
/// summary and report.txt say so with why; its native frames are kept.
#[test]
fn ruby_3_3_refused_by_its_layout_check_is_named_as_not_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    refused_by_its_check(start_33("busy.rb"), "3.3", "ruby33_refused");
}

/// Under a JIT (Debian 13's ruby3.3 has RJIT, not YJIT), a compiled
/// method saves its pc only at some calls: its frames are named, without
/// lines, and the summary says why.
#[test]
fn ruby_3_3_under_a_jit_is_named_without_lines_and_said() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let root = trixie();
    let inside = copy_workloads(&root, "ruby");
    let ruby = start_ready(
        Command::new("chroot").arg(&root).args(["ruby3.3", "--rjit"]).arg(inside.join("busy.rb")).arg("30"),
        "ruby3.3 --rjit busy.rb",
        "chroot",
    );
    let Captured { pid, stacks, summary, .. } = capture_ended(ruby, "oncpu", "3", "ruby33_rjit");
    let main = thread(&stacks, &format!("ruby3.3-{pid}"));
    let all = total(&main);
    let path = ["<main> (busy.rb)_[p]", "Object#outer (busy.rb)_[p]", "Object#inner (busy.rb)_[p]"];
    let named = share_in_order(&main, &path, exactly);
    eprintln!("Ruby 3.3 --rjit: <main>;outer;inner without lines {named:.1}% of {all}");
    assert!(all > 300, "{all} samples of the main thread\n{summary}");
    assert!(named >= 95.0, "{named:.1}% of {all} in <main>;outer;inner without lines\n{summary}");
    assert!(summary.contains(&format!("Ruby: pid {pid} (ruby3.3): a JIT runs")), "{summary}");
}

/// A script profiled from its first instruction (`fgbpf -- chroot ROOT
/// ruby3.3 short.rb`): its VM may be found before it has set rb_cObject
/// (then not checked yet: src/runtimes/ruby/check.rs), and its half
/// second is named.
#[test]
fn ruby_3_3_a_script_of_half_a_second_keeps_its_names() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let root = trixie();
    let inside = copy_workloads(&root, "ruby");
    let short = inside.join("short.rb");
    let command = ["chroot".as_ref(), root.as_os_str(), "ruby3.3".as_ref(), short.as_os_str()];
    short_script_keeps_names("ruby33_short", &command, "short.rb", "[ruby: process gone", &["<main>@short.rb:9", "Object#work@short.rb:5"], rb);
}
