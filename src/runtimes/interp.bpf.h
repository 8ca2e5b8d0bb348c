/* What the interpreter walkers (python.bpf.h, ruby.bpf.h, php.bpf.h, luajit.bpf.h,
 * perl.bpf.h)
 * share: they append one word per interpreter frame after their marker,
 * and tell user space of each object a word names (a code object, an
 * iseq, a function) the first time a stack of a process holds it, so that
 * a script of half a second is named before it exits and its memory with
 * it. */
#ifndef FGBPF_INTERP_BPF_H
#define FGBPF_INTERP_BPF_H

#include "fgbpf.h"
#include "targets.bpf.h"
#include "stacks.bpf.h"

/* Bumped by user space each time it adds a process to py_procs, rb_procs,
 * php_procs, perl_procs, luajit_procs or go_procs: a process found to be none while it had this
 * value needs no lookup (fg_proc_unwind.interp_checked) until it changes. */
volatile __u64 interp_gen = 0;

struct interp_object {
	__u32 pid;
	__u32 kind; /* enum fg_proc_event_kind */
	__u64 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct interp_object);
	__type(value, __u8);
} interp_seen SEC(".maps");

/* In front of interp_seen, per CPU: the object a slot last saw announced,
 * so that a frame seen again (most are, sample after sample) costs an
 * array lookup rather than an LRU hash's. */
#define INTERP_SEEN_SLOTS 512

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, INTERP_SEEN_SLOTS);
	__type(key, __u32);
	__type(value, struct interp_object);
} interp_seen_cache SEC(".maps");

/* Sets FG_INTERP_ENTRY on the word a walk wrote last (index n - 1) when it
 * is past the walk's first (index `first`): the outermost frame of one call
 * of the evaluator, which user space puts in place of that native frame. */
static __always_inline void interp_mark_entry(struct stack_buf *buf, __u32 n, __u32 first)
{
	__u32 last = n - 1;

	if (n > first && last < MAX_STACK_DEPTH)
		buf->ips[last] |= FG_INTERP_ENTRY;
}

/* Announces (kind, addr, addr2) once per (pid, kind, addr). */
static __always_inline void interp_announce(__u32 pid, __u32 kind, __u64 addr, __u64 addr2)
{
	struct interp_object k = { .pid = pid, .kind = kind, .addr = addr };
	__u32 slot = (__u32)((addr >> 3) ^ (addr >> 17) ^ pid ^ kind) & (INTERP_SEEN_SLOTS - 1);
	struct interp_object *c = bpf_map_lookup_elem(&interp_seen_cache, &slot);
	__u8 one = 1;

	if (c && c->addr == addr && c->pid == pid && c->kind == kind)
		return;
	if (c)
		*c = k;
	if (bpf_map_lookup_elem(&interp_seen, &k))
		return;
	if (bpf_map_update_elem(&interp_seen, &k, &one, BPF_NOEXIST))
		return;
	announce_object(pid, kind, addr, addr2);
}

#endif
