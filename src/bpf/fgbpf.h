/* Everything fgbpf's BPF object and its Rust loader agree on. The loader
 * reads these structs through the skeleton's generated types, so a field
 * changed here changes on both sides. */
#ifndef FGBPF_H
#define FGBPF_H

#define TASK_COMM_LEN 16
/* The kernel's PERF_MAX_STACK_DEPTH: a stored stack holds at most this
 * many instruction pointers. */
#define MAX_STACK_DEPTH 127

/* What a counted bucket measures: on-CPU samples, or off-CPU time in one
 * of three states, read from the task's state when it switched out. */
enum fg_state {
	FG_ONCPU = 0,           /* weight: samples */
	FG_SLEEPING = 1,        /* interruptible: sleeps, sockets, futexes */
	FG_UNINTERRUPTIBLE = 2, /* D state: usually disk I/O */
	FG_RUNQUEUE = 3,        /* preempted while runnable: waiting for a CPU */
	/* Nanoseconds a thread ran, measured from its switch-in to its
	 * switch-out (wall-clock captures): no stacks, the total the on-CPU
	 * samples of the thread divide among its stacks. */
	FG_RAN = 4,
};

enum fg_key_flags {
	/* The block began before the capture: user space seeded its start
	 * from /proc, so it has no user stack. */
	FG_PRE_EXISTING = 1,
	/* The wait's end was not reported by sched_switch: ended at the
	 * thread's next run as the scheduler recorded it, without its kernel
	 * stack (gone by then). */
	FG_END_UNTRACED = 2,
	/* The wait's start was not reported by sched_switch: it began when the
	 * scheduler's account of the thread's run time ran out, without its
	 * user stack (the thread ran then, unseen). */
	FG_START_UNTRACED = 4,
};

/* How a key's user stack was walked, in bits 4-7 of its flags, so that
 * user space can say per process how far its stacks can be trusted. */
enum fg_walk {
	FG_WALK_NONE = 0,        /* no user stack walked (kernel thread, not asked) */
	FG_WALK_TABLES = 1,      /* whole, with tables */
	FG_WALK_MIXED = 2,       /* whole, tables and frame pointers */
	FG_WALK_FP = 3,          /* the kernel's frame-pointer walk: no tables yet */
	FG_WALK_DEPTH = 4,       /* cut at MAX_STACK_DEPTH */
	FG_WALK_FAULT = 5,       /* cut by a failed stack read */
	FG_WALK_UNSUPPORTED = 6, /* cut at a rule the walker cannot follow */
	FG_WALK_LOST = 7,        /* cut at code with no row and no frame pointer */
};
#define FG_WALK_SHIFT 4

/* How an interpreter's stack of a thread was read (src/runtimes/: the
 * walkers of CPython, Ruby and PHP, and Go's of its goroutine), in bits
 * 8-11 of a key's flags. */
enum fg_interp_walk {
	FG_INTERP_NONE = 0,      /* no interpreter in the process (or its frames off) */
	FG_INTERP_WHOLE = 1,     /* read to its outermost frame */
	FG_INTERP_NO_THREAD = 2, /* no interpreter state for this thread: not running it */
	FG_INTERP_CUT = 3,       /* no room left in the stack for more frames */
	FG_INTERP_FAULT = 4,     /* a read of the interpreter's memory failed */
};
#define FG_INTERP_SHIFT 8

/* Values in target_pids: a followed process, or the `-- COMMAND` child
 * that fgbpf forked and holds before execve. The held child is fgbpf's own
 * code until its exec, so it becomes a target only then; or, when fgbpf
 * stops it at its program's entry point to place its unwind tables
 * (src/app/session/entry.rs), only there, where user space makes it one
 * (the stop is fgbpf's doing, not the command's wait). */
enum fg_target {
	FG_TARGET = 1,
	FG_TARGET_HELD = 2,
	FG_TARGET_AT_ENTRY = 3,
};

/* One aggregation bucket, for every program: a thread, the pair of stacks
 * it was caught in, and what was measured. The value is a __u64: samples
 * for FG_ONCPU, nanoseconds for the off-CPU states. */
struct fg_key {
	__u32 pid;
	__u32 tid;
	/* Keys into the `stacks` map; 0 when there was no such stack (a kernel
	 * thread has no user stack) or it was not asked for. A key missing
	 * from `stacks` is a stack that could not be stored (counted). */
	__u64 user_stack;
	__u64 kern_stack;
	__u16 state; /* enum fg_state */
	__u16 flags; /* enum fg_key_flags, enum fg_walk, enum fg_interp_walk */
	/* The process's start (targets.bpf.h: proc_start): with pid, which
	 * process it was. A pid the kernel gives again within one capture is
	 * another process. 32 bits, so the key keeps its size (the switch
	 * handler's chain of calls is at 6.1's 512 bytes of stack). */
	__u32 start;
	char comm[TASK_COMM_LEN];
	/* --wakers: key of the thread and stacks that woke this one, in the
	 * `wakers` map; 0 when not recorded or not asked for. */
	__u64 waker;
	/* The time slices (counts.bpf.h: slice_of) the weight fell in: a
	 * sample's one slice, or the first and last slice an off-CPU interval
	 * covered. */
	__u32 slice_first;
	__u32 slice_last;
	/* --group-by cgroup: the kernfs node ID of the thread's cgroup, in the
	 * hierarchy of the scope (cgroup v2 without one); 0 otherwise. */
	__u64 cgroup;
};

/* Who woke a blocked thread (--wakers), as the sched_waking tracepoint saw
 * it: the waking task and its stacks. A wakeup from an interrupt shows the
 * interrupted task here, with the interrupt's frames in its kernel stack:
 * user space tells the two apart by those frames. */
struct fg_waker {
	__u32 pid;
	__u32 tid;
	__u64 user_stack;
	__u64 kern_stack;
	char comm[TASK_COMM_LEN];
	__u64 start; /* the waking process's, as struct fg_key's (proc_start) */
};

/* A user thread's registers as its entry to the kernel saved them, and
 * its count of runs (sched_info.pcount; 0 without schedstats), written by
 * the task iterator of seeds.bpf.h at an off-CPU capture's start. */
struct fg_seed_regs {
	__u32 pid;
	__u32 tid;
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u64 pcount;
};

/* Where a traced thread is between two switches (struct fg_start). */
enum fg_phase {
	FG_WAITING = 0, /* off-CPU since ts, in a wait that is recorded */
	FG_RUNNING = 1, /* on-CPU since ts */
	FG_SKIPPED = 2, /* off-CPU since ts, in a wait the filters leave out */
};

/* A traced thread, keyed by thread id in a global map (a per-CPU map
 * would lose or inflate intervals of threads that migrate): one entry per
 * thread for its life, rewritten in place at each switch, deleted at its
 * last switch-out. */
struct fg_start {
	__u64 ts;         /* bpf_ktime_get_ns() at the switch that began the phase */
	__u64 user_stack; /* taken at switch-out, while the thread was current */
	__u32 pid;
	__u32 state;      /* enum fg_state */
	__u32 flags;      /* enum fg_key_flags */
	__u32 phase;      /* enum fg_phase */
	__u64 waker;      /* --wakers: set at the wakeup, see struct fg_key */
	__u64 kern_stack; /* when taken at switch-out (raw tracepoints, before 5.9) */
	__u64 sum_exec;   /* FG_RUNNING: the thread's se.sum_exec_runtime then */
	/* The scheduler's own account of the thread: sched_info.run_delay
	 * (time spent waiting on a run-queue) and sched_info.pcount (runs).
	 * FG_RUNNING: both as they stand once the switch-in's arrival is
	 * counted; a switch sched_switch did not report is measured against
	 * them. Waiting: run_delay at the switch-out, for the time the
	 * thread waited for a CPU once woken. */
	__u64 run_delay;
	__u64 pcount;
};

/* Per-CPU counters of one event of `fgbpf events` (events.bpf.h): its
 * hits in the targets, those counted, and those that lost a part. */
struct fg_event_stats {
	__u64 seen;            /* hits that passed the target filter */
	__u64 recorded;        /* hits added to counts */
	__u64 lost_counts;     /* counts map full: the hit is not in a stack */
	__u64 lost_user_stack; /* stacks map full: counted without its user stack */
	__u64 lost_kern_stack; /* stacks map full: counted without its kernel stack */
};

/* Per-CPU counters; user space sums them over CPUs. Every sample or
 * interval that was seen but could not be stored in full lands in one of
 * the lost_* fields. */
struct fg_stats {
	/* on-CPU sampler */
	__u64 samples;          /* samples that passed the filters */
	__u64 idle;             /* samples of the idle task, skipped by default */
	__u64 lost_samples;     /* counts map had no room for a new key */
	/* off-CPU tracer */
	__u64 switches;         /* switch-outs of target threads */
	__u64 recorded;         /* intervals added to counts */
	__u64 too_short;        /* dropped by --min-block */
	__u64 too_long;         /* dropped by --max-block */
	__u64 lost_start_full;  /* starts map full: interval not measured */
	__u64 lost_intervals;   /* counts map full: interval not stored */
	__u64 lost_ns;          /* time of the intervals lost above */
	__u64 kthread_switches; /* kernel threads' switch-outs, left out by choice */
	__u64 lost_runs;        /* wall: counts map full, a run's time not stored */
	__u64 lost_run_ns;      /* the time of the runs lost above */
	/* Switches sched_switch did not report, met at the thread's next
	 * switch: a switch-in (its wait ended from the scheduler's record of
	 * when it ran again, FG_END_UNTRACED), one whose time could not be
	 * recovered, and a switch-out (the run then counts to the next). */
	__u64 untraced_ins;
	__u64 untraced_ins_lost;
	__u64 untraced_outs;
	/* Entries left by a thread whose id a new thread took (its birth is
	 * after the entry's last switch): dropped, the new thread started
	 * afresh. */
	__u64 stale_starts;
	/* both */
	__u64 lost_user_stack;  /* user stack not stored: stacks map full */
	__u64 lost_kern_stack;  /* kernel stack not stored: stacks map full */
	/* --wakers */
	__u64 wakeups;          /* wakeups of blocked target threads seen */
	__u64 lost_wakers;      /* wakers map full: the wait has no waker */
	/* user stacks, by how they were walked and why the walk ended */
	__u64 unw_fp_only;      /* no tables for the process (yet): frame pointers */
	__u64 unw_tables;       /* walked with tables, to the outermost frame */
	__u64 unw_mixed;        /* tables, and frame pointers where code had none */
	__u64 unw_depth;        /* cut at MAX_STACK_DEPTH frames */
	__u64 unw_fault;        /* a stack read failed (page not resident) */
	__u64 unw_unsupported;  /* a rule the walker cannot follow */
	__u64 unw_lost_fp;      /* no table and no frame pointer for a frame */
	/* Python stacks (python.bpf.h), of threads of known interpreters */
	__u64 py_whole;         /* read to the outermost frame */
	__u64 py_no_thread;     /* the thread had no Python thread state */
	__u64 py_cut;           /* cut: no room left in the stack */
	__u64 py_fault;         /* cut by a failed read */
	/* HotSpot frames (java.bpf.h), per frame walked */
	__u64 java_frames;      /* Java frames walked */
	__u64 java_lost;        /* code with no blob, or an implausible caller */
	__u64 java_prologue;    /* a leaf in a prologue the walker cannot read */
	__u64 java_fault;       /* a failed read of the JVM's memory */
	/* V8 frames (v8.bpf.h), per frame of a known V8 process */
	__u64 v8_frames;        /* JavaScript frames named by their function */
	__u64 v8_fault;         /* a failed read of a function in V8's heap */
	/* Ruby stacks (ruby.bpf.h), of threads of known Ruby processes */
	__u64 rb_whole;         /* read to the outermost frame */
	__u64 rb_no_thread;     /* the thread had no execution context */
	__u64 rb_cut;           /* cut: no room left in the stack */
	__u64 rb_fault;         /* cut by a failed read */
	/* PHP stacks (php.bpf.h), of threads of known PHP processes */
	__u64 php_whole;        /* read to the outermost frame */
	__u64 php_no_thread;    /* no PHP code running (no execute data) */
	__u64 php_cut;          /* cut: no room left in the stack */
	__u64 php_fault;        /* cut by a failed read */
	/* Perl stacks (perl.bpf.h), of threads of known Perl processes */
	__u64 perl_whole;       /* read to the outermost frame */
	__u64 perl_no_thread;   /* no interpreter yet, or a thread of another (ithreads) */
	__u64 perl_cut;         /* cut: no room left in the stack */
	__u64 perl_fault;       /* cut by a failed read */
	/* LuaJIT stacks (luajit.bpf.h), of threads of known LuaJIT processes */
	__u64 lj_whole;         /* read to the bottom of the lua_State's stack */
	__u64 lj_no_thread;     /* no global state known, or no Lua code running */
	__u64 lj_cut;           /* cut: no room left, or too many frames */
	__u64 lj_fault;         /* cut by a failed read or an implausible frame */
	/* Goroutines (go.bpf.h), of threads of known Go processes */
	__u64 go_read;          /* the running goroutine's id and labels */
	__u64 go_none;          /* no goroutine running (the scheduler, a
				 * thread Go did not start) */
	__u64 go_cut;           /* no room left in the stack */
	__u64 go_fault;         /* a failed read */
	/* The BEAM's Erlang stacks (beam.bpf.h), of samples in its JIT code */
	__u64 beam_walked;      /* read to the Erlang process's first frame */
	__u64 beam_cut;         /* its first frame not found within reach: not read */
	__u64 beam_in_c;        /* JIT code that called C code, whose Erlang
				 * stack pointer fgbpf does not know: not read */
	__u64 beam_pid;         /* walked, and its Erlang process's id read */
	__u64 beam_no_pid;      /* walked, but r13 held no Erlang process */
	__u64 beam_no_process;  /* in the interpreter's loop (OTP 23), its
				 * registers holding no running Erlang process */
	/* A staged start (staged.bpf.h): recorded by the first load, before
	 * the runtimes' walkers joined */
	__u64 lean_samples;     /* on-CPU samples */
	__u64 lean_switches;    /* switch-outs */
};

/* Unwind tables (src/procs/unwind/ compiles them from .eh_frame; the BPF
 * walker is unwind.bpf.h). A table is a run of rows sorted by `pc`, one row
 * per address range with the same rules; a row holds from its pc to the
 * next row's. `pc` is relative to the table's base (the lowest ELF virtual
 * address it covers). x86_64: the return address is always at CFA - 8. */
enum fg_cfa_type {
	FG_CFA_NONE = 0,       /* no unwind information here: a gap between FDEs */
	FG_CFA_RSP = 1,        /* CFA = rsp + cfa_off */
	FG_CFA_RBP = 2,        /* CFA = rbp + cfa_off */
	FG_CFA_PLT = 3,        /* CFA = rsp + cfa_off + ((rip & 15) >= 11 ? 8 : 0) */
	FG_CFA_END = 4,        /* the outermost frame: return address undefined */
	FG_CFA_UNSUPPORTED = 5, /* a rule the walker cannot follow: stop, counted */
	/* A signal's return trampoline (glibc's __restore_rt, Go's
	 * runtime.sigreturn, marked from 1 byte before it: a return address
	 * is looked up at itself - 1): the kernel's signal frame is at rsp,
	 * its saved registers are the interrupted frame's. */
	FG_CFA_SIGNAL = 6,
};

/* x86-64's rt_sigframe, as the trampoline finds it (its return address,
 * pretcode, popped): the ucontext at rsp, its mcontext (struct
 * sigcontext) 40 bytes in, and in that the interrupted rbp, rsp, rip. */
#define FG_SIGCONTEXT 40
#define FG_SIGCONTEXT_RBP 80
#define FG_SIGCONTEXT_RSP 120
#define FG_SIGCONTEXT_RIP 128

enum fg_rbp_type {
	FG_RBP_SAME = 0,       /* rbp keeps the caller's value */
	FG_RBP_AT_CFA = 1,     /* the caller's rbp is saved at CFA + rbp_off */
	FG_RBP_UNSUPPORTED = 2, /* another rule: rbp is unknown from here on */
};

struct fg_unwind_row {
	__u32 pc;
	__s32 cfa_off;
	__s16 rbp_off;
	__u8 cfa_type; /* enum fg_cfa_type */
	__u8 rbp_type; /* enum fg_rbp_type */
};

/* Rows are found in two steps: the table's page index says which rows can
 * hold an address of each FG_PAGE_BYTES-byte page of the table (entry p is
 * the number of rows whose pc is at or below p * FG_PAGE_BYTES), and a
 * binary search among those few finds the row. A page holds at most one
 * row per byte, so FG_PAGE_STEPS halvings always end the search. */
#define FG_PAGE_SHIFT 8
#define FG_PAGE_BYTES (1U << FG_PAGE_SHIFT)
#define FG_PAGE_STEPS 9

/* One executable mapping of a process, as the walker sees it: code in
 * [start, end) uses rows [first, first + count) of `unwind_rows`, looked up
 * with pc - load (load = the mapping's bias plus its table's base), and
 * their page index, entries [pages, pages + npages] of `unwind_pages`.
 * count 0: no table for this code (JIT, no .eh_frame, no room): frame
 * pointers. */
struct fg_mapping {
	__u64 start;
	__u64 end;
	__u64 load;
	__u32 first;
	__u32 count;
	__u32 pages;
	__u32 npages;
};

#define FG_MAX_MAPPINGS 96

/* A process's executable mappings, sorted by start, in `proc_unwind`. */
struct fg_proc_unwind {
	__u32 count;
	__u32 flags; /* enum fg_proc_flags */
	/* Unique to this list of mappings (user space counts them up; a
	 * forked child shares its parent's until it is read): the walker's
	 * row cache is keyed by it. */
	__u64 gen;
	/* Written by the walker: interp_gen + 1 when the process was found not
	 * to be a known interpreter (0: not looked at), see interp.bpf.h. */
	__u64 interp_checked;
	struct fg_mapping maps[FG_MAX_MAPPINGS];
};

enum fg_proc_flags {
	/* User space wrote the entry: it was announced and read (a forked
	 * child's inherited copy has it cleared). */
	FG_PROC_READ = 1,
};

/* Walks by file (files.bpf.h): the rows of a binary by its device (major
 * << 32 | minor, as /proc/PID/maps shows it) and inode, for a process
 * user space has not read. */
struct fg_file_key {
	__u64 dev;
	__u64 ino;
};

/* Where a binary's rows are, and how its executable segment is placed:
 * a mapping of it at `start` from file offset `off` (in [seg_lo, seg_hi))
 * has load = start - off + adjust (see fg_mapping.load). */
struct fg_file_table {
	__u64 seg_lo;
	__u64 seg_hi;
	__u64 adjust;
	__u32 first;
	__u32 count;
	__u32 pages;
	__u32 npages;
};

/* A mapping the walker found in a process user space had not read, noted
 * for naming its frames after the process is gone (`found_maps`). */
struct fg_found_key {
	__u32 pid;
	__u32 start; /* the process's start (proc_start) */
	__u64 vm_start;
};

struct fg_found_map {
	__u64 vm_end;
	__u64 offset; /* file offset of vm_start */
	__u64 dev;    /* 0 with ino 0: no file (anonymous memory, the vDSO) */
	__u64 ino;
	__u32 flags;  /* enum fg_found_flags */
	__u32 pad;
};

enum fg_found_flags {
	FG_FOUND_VDSO = 1,
};

/* The path a binary was exec'd by, as the exec gave it (`exec_paths`,
 * keyed by fg_file_key): user space opens it, checks it is that file, and
 * names the frames of processes of it that exited unread. */
#define FG_EXEC_PATH 256

struct fg_exec_path {
	char path[FG_EXEC_PATH];
};

/* known_procs values (user space writes FG_KNOWN to a process read after
 * its execve). */
enum fg_known {
	/* Announced with its current image. */
	FG_KNOWN = 1,
	/* Known from before its last execve, whose announcement does not wake
	 * user space or was lost: announced again at its next stack (and
	 * announced gone at its exit all the same). */
	FG_KNOWN_BEFORE_EXEC = 2,
};

/* Frames of managed runtimes whose code has no unwind tables (HotSpot's
 * JIT and interpreter; V8 later) are written in place of the native pc of
 * the frame they are, as one tagged word that user space names
 * (src/runtimes/<runtime>/): bits 63-62 FG_RT_TAG (never a user address,
 * below 2^57, nor a kernel one, whose top bits are 0b11), bits 61-60 the
 * runtime, 59-58 the kind of frame, 57-0 the runtime's payload. The
 * objects a word refers to are announced once (FG_PROC_JAVA_*), so that
 * user space reads them while they live. */
#define FG_RT_TAG (2ULL << 62)
#define FG_RT_IS(w) (((w) >> 62) == 2)
#define FG_RT_SHIFT 60
#define FG_RT_KIND_SHIFT 58

enum fg_runtime {
	FG_RT_HOTSPOT = 0,
	FG_RT_V8 = 1,
	/* Frames of no runtime's code: FG_SIGNAL_WORD. */
	FG_RT_NATIVE = 2,
	/* Erlang code run by the BEAM's interpreter (OTP 23): FG_BEAM_WORD. */
	FG_RT_BEAM = 3,
};

/* The kernel's signal frame, in place of the signal return trampoline's
 * pc (FG_CFA_SIGNAL): a signal handler's frames above it, the code the
 * signal interrupted below. */
#define FG_SIGNAL_WORD (FG_RT_TAG | ((__u64)FG_RT_NATIVE << FG_RT_SHIFT))

/* The whole user stack of a thread in execve past its point of no return:
 * its registers are still those of the image the exec replaced, whose
 * memory is gone (files.bpf.h). */
#define FG_EXEC_WORD (FG_SIGNAL_WORD | (1ULL << FG_RT_KIND_SHIFT))

/* Each runtime's part, in its folder (src/runtimes/<name>/). */
#include "python/python.h"
#include "ruby/ruby.h"
#include "php/php.h"
#include "perl/perl.h"
#include "luajit/luajit.h"
#include "go/go.h"
#include "java/java.h"
#include "v8/v8.h"
#include "beam/beam.h"

enum fg_proc_event_kind {
	/* First stack of a process: user space snapshots its mappings for
	 * symbolization while it still lives. */
	FG_PROC_NEW = 1,
	/* A watched process called execve: its mappings changed. */
	FG_PROC_EXEC = 2,
	/* A Python code object seen for the first time in a process (`addr`):
	 * user space names it at once, before a short script exits. */
	FG_PROC_PY_CODE = 3,
	/* An announced process's last thread exited: once its stacks are
	 * drained, user space keeps where their addresses were and lets go of
	 * the rest of what it read about the process. */
	FG_PROC_EXIT = 4,
	/* HotSpot objects a frame word refers to, seen for the first time in
	 * a process: an nmethod (addr: the CodeBlob, addr2: its compile id;
	 * again when the same address holds another), a Method* (addr2: the
	 * second, about, it was seen in; again each second), a stub (addr:
	 * the CodeBlob). User space reads them at once. */
	FG_PROC_JAVA_NMETHOD = 5,
	FG_PROC_JAVA_METHOD = 6,
	FG_PROC_JAVA_STUB = 7,
	/* A V8 SharedFunctionInfo an interpreted frame's word names, seen for
	 * the first time in a process with this identity (addr2, the
	 * word's). */
	FG_PROC_V8_FUNCTION = 8,
	/* A pc of V8's compiled code in a frame word (addr), with the frame's
	 * SharedFunctionInfo and identity (addr2: the address in bits 0-47,
	 * FG_V8_ID_BITS of identity from bit 48); again each second or so, so
	 * that code replaced at the same address is seen. */
	FG_PROC_V8_CODE = 9,
	/* A Ruby iseq or C method entry (addr) a frame word names, seen for
	 * the first time in a process (addr2: 1 for a method entry). */
	FG_PROC_RB_OBJECT = 10,
	/* A PHP zend_function (addr) a frame word names, seen for the first
	 * time in a process. */
	FG_PROC_PHP_FUNCTION = 11,
	/* fgbpf flight --wait-above: a wait at least that long just ended
	 * (addr: its length in ns, unsampled; addr2: its first slice << 32 |
	 * the thread's id; comm: the thread's name, not its process's). */
	FG_PROC_LONG_WAIT = 12,
	/* A Go goroutine's pprof labels (addr: g.labels) seen for the first
	 * time in a process. */
	FG_PROC_GO_LABELS = 13,
	/* A Perl COP (addr) a frame word names, with its sub's CV (addr2; bit
	 * 0 set: the main program's), or a CV alone (addr, addr2 2), seen for
	 * the first time in a process. */
	FG_PROC_PERL_OBJECT = 14,
	/* A LuaJIT prototype (addr, a GCproto) a frame word names, seen for
	 * the first time in a process. */
	FG_PROC_LUAJIT_PROTO = 15,
};

/* Sent through a ring buffer once per process (not per sample). */
struct fg_proc_event {
	__u32 pid;
	__u32 kind;
	char comm[TASK_COMM_LEN]; /* the process's (thread group leader's) name */
	__u64 addr;               /* FG_PROC_PY_CODE: the code object */
	__u64 addr2;              /* FG_PROC_JAVA_NMETHOD: the compile id */
	__u64 start;              /* the process's start (proc_start); 0 for a runtime's object */
};

#endif
