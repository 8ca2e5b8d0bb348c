/* V8's JavaScript frames, named in the kernel. V8 keeps a frame pointer in
 * every frame it builds, so the walk (unwind.bpf.h) steps through them by
 * rbp; what a native walk lacks is which function each one runs. When a
 * frame's code has no unwind row (V8's builtins and interpreter in the
 * binary, or code V8 compiled) in a process user space found to be V8
 * (`v8_procs`, from the binary's own post-mortem metadata, see
 * src/runtimes/v8/), the frame's fixed slots say what it is:
 *
 * - rbp + fp_marker holds a Smi (low bit 0) in V8's typed frames (entry,
 *   exit, stub, internal frames): left as the native frame it is;
 * - else it holds the function's context, and rbp + fp_function the
 *   JSFunction, whose SharedFunctionInfo outlives the function object and
 *   its code, and moves only when the heap is compacted.
 *
 * The frame's pc is replaced with a tagged word (fgbpf.h, FG_RT_V8): in
 * the interpreter, the SharedFunctionInfo; in compiled code, the pc (whose
 * code says which functions were inlined where); either with a hash of the
 * function's address and two of its fields, so that a function moved away
 * and another at the same address make two words. What a word names is
 * announced, and user space reads and checks it at once (src/runtimes/v8/walker.rs).
 * The caller is then found by rbp as before. */
#ifndef FGBPF_V8_BPF_H
#define FGBPF_V8_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "targets.bpf.h"
#include "walk.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fg_v8_proc);
} v8_procs SEC(".maps");

/* Objects announced to user space, per process: a SharedFunctionInfo
 * (value: the identity + 1 it was announced with), or a pc of compiled
 * code (value: the second it was announced in, and the identity). */
struct v8_function {
	__u32 pid;
	__u32 pad;
	__u64 sfi;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct v8_function);
	__type(value, __u32);
} v8_seen SEC(".maps");

/* Off with --no-node. */
const volatile bool v8_frames = true;

/* Set by user space once `v8_procs` holds a process: until then no frame
 * pays for the lookup. */
volatile __u32 v8_tracked = 0;

/* Bytes of a SharedFunctionInfo read at once (into the walk's scratch
 * w->code): its fields up to script_or_debug_info in every V8 the
 * metadata describes. */
#define V8_SFI_HEAD 48

/* The identity of a function: a hash of its SharedFunctionInfo's address,
 * name_or_scope_info and script_or_debug_info (src/runtimes/v8/: the same). */
static __always_inline __u32 v8_identity(__u64 sfi, __u64 name, __u64 script)
{
	__u64 h = (sfi ^ name) ^ (script * 0x9e3779b97f4a7c15ULL);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 29;
	return (__u32)h & ((1U << FG_V8_ID_BITS) - 1);
}

/* In front of v8_seen, per CPU: the (pid, key, tag) a slot last saw
 * announced, so that a frame seen again (most are, sample after sample)
 * costs an array lookup rather than an LRU hash's. */
#define V8_SEEN_SLOTS 512

struct v8_seen_slot {
	__u64 key;
	__u32 pid;
	__u32 tag;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, V8_SEEN_SLOTS);
	__type(key, __u32);
	__type(value, struct v8_seen_slot);
} v8_seen_cache SEC(".maps");

/* Announces (addr, addr2) once per `tag` for the key (pid, key). */
static __always_inline void v8_announce(__u32 pid, __u64 key, __u32 tag, __u32 kind, __u64 addr, __u64 addr2)
{
	struct v8_function k = { .pid = pid, .sfi = key };
	__u32 slot = (__u32)((key >> 3) ^ (key >> 17) ^ pid) & (V8_SEEN_SLOTS - 1);
	struct v8_seen_slot *c = bpf_map_lookup_elem(&v8_seen_cache, &slot);
	__u32 *seen;

	if (c && c->key == key && c->pid == pid && c->tag == tag)
		return;
	if (c) {
		c->key = key;
		c->pid = pid;
		c->tag = tag;
	}
	seen = bpf_map_lookup_elem(&v8_seen, &k);
	if (seen && *seen == tag)
		return;
	if (seen)
		*seen = tag;
	else if (bpf_map_update_elem(&v8_seen, &k, &tag, BPF_ANY))
		return;
	announce_object(pid, kind, addr, addr2);
}

/* Frame n of the walk (recorded as its pc) when it is a JavaScript frame:
 * its word written in place of the pc. in_binary: the pc is in a mapped
 * file (V8's interpreter and builtins). The walk goes on by rbp. A global
 * function: the verifier checks it once. */
__noinline int v8_frame(struct walk *w, struct stack_buf *buf, __u32 pid, __u32 in_binary)
{
	struct fg_v8_proc *vp;
	struct fg_stats *st;
	__u64 marker, fn, sfi, name, script, word, pc;
	__u32 n, id, jid;

	if (!w || !buf || !v8_frames || !v8_tracked)
		return 0;
	vp = bpf_map_lookup_elem(&v8_procs, &pid);
	st = get_stats();
	if (!vp || !st || w->bp == 0 || w->bp < w->sp)
		return 0;
	n = w->n - 1;
	if (n >= MAX_STACK_DEPTH)
		return 0;
	if (stack_read(w, w->bp + vp->fp_marker, &marker, false) || (marker & 1) == 0)
		return 0;
	if (stack_read(w, w->bp + vp->fp_function, &fn, false) || (fn & 3) != 1)
		return 0;
	if (bpf_probe_read_user(&sfi, sizeof(sfi), (void *)(fn - 1 + vp->fn_shared)) ||
	    (sfi & 3) != 1 || bpf_probe_read_user(w->code, V8_SFI_HEAD, (void *)(sfi - 1))) {
		st->v8_fault++;
		return 0;
	}
	if (vp->sfi_name > V8_SFI_HEAD - 8 || vp->sfi_script > V8_SFI_HEAD - 8)
		return 0;
	name = *(__u64 *)(w->code + vp->sfi_name);
	script = *(__u64 *)(w->code + vp->sfi_script);
	id = v8_identity(sfi, name, script);
	st->v8_frames++;
	if (in_binary) {
		word = FG_RT_TAG | ((__u64)FG_RT_V8 << FG_RT_SHIFT) |
		       ((__u64)FG_V8_INTERPRETED << FG_RT_KIND_SHIFT) | ((__u64)id << 44) |
		       ((sfi >> 3) & ((1ULL << 44) - 1));
		put_word(buf, n, word);
		v8_announce(pid, sfi, id + 1, FG_PROC_V8_FUNCTION, sfi, id);
		return 1;
	}
	pc = w->ip;
	jid = id & ((1U << FG_V8_JIT_ID_BITS) - 1);
	word = FG_RT_TAG | ((__u64)FG_RT_V8 << FG_RT_SHIFT) | ((__u64)FG_V8_JIT << FG_RT_KIND_SHIFT) |
	       ((__u64)jid << 48) | (n == 0 ? 1ULL << 47 : 0) | (pc & ((1ULL << 47) - 1));
	put_word(buf, n, word);
	/* Again each second: the code at a pc may be replaced. */
	v8_announce(pid, pc, (((__u32)(bpf_ktime_get_ns() >> 30)) << FG_V8_ID_BITS) | id, FG_PROC_V8_CODE, pc,
		    (sfi & ((1ULL << 48) - 1)) | ((__u64)id << 48));
	return 1;
}

#endif
