// SPDX-License-Identifier: GPL-2.0
/* fgbpf's one BPF object. Every capture loads it once and enables only the
 * programs it needs (the loader turns autoload off for the rest): the
 * on-CPU sampler (oncpu.bpf.h), the off-CPU switch tracer (offcpu.bpf.h)
 * the wakeup tracer for --wakers (wakers.bpf.h) and the process trackers
 * (targets.bpf.h). They share one stack store
 * (stacks.bpf.h), one target filter and process-event ring buffer
 * (targets.bpf.h), and one double-buffered counts map (counts.bpf.h).
 * On kernels without bpf_loop the sampler, switch and wakeup programs load
 * as their _compat variants, which walk user stacks by tail calls
 * (tailwalk.bpf.h). A task iterator reads the registers of the threads
 * already blocked when an off-CPU capture starts (seeds.bpf.h). The
 * programs of `fgbpf events` count stacks at tracepoints, uprobes and USDT
 * probes (events.bpf.h); those of `fgbpf alloc` sample the C library's
 * allocations by bytes (alloc.bpf.h). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "errno.bpf.h"
#include "fgbpf.h"
#include "targets.bpf.h"
#include "stacks.bpf.h"
#include "counts.bpf.h"
#include "unwind.bpf.h"
#include "tailwalk.bpf.h"
#include "oncpu.bpf.h"
#include "offcpu.bpf.h"
#include "wakers.bpf.h"
#include "lifecycle.bpf.h"
#include "seeds.bpf.h"
#include "events.bpf.h"
#include "alloc.bpf.h"

/* Never used: make the shared structs part of the object's BTF so that the
 * skeleton generates their Rust types. */
struct fg_proc_event fg_proc_event_type = {};
struct fg_key fg_key_type = {};
struct fg_start fg_start_type = {};
struct fg_waker fg_waker_type = {};
struct fg_seed_regs fg_seed_regs_type = {};
struct fg_event_stats fg_event_stats_type = {};

char LICENSE[] SEC("license") = "GPL";
