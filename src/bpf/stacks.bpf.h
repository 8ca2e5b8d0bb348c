/* Exact stack storage. The kernel's STACK_TRACE map drops a stack whenever
 * its bucket holds a different one (a hash collision), which biases the
 * profile against whichever stack lost. Here a stack is keyed by a 64-bit
 * hash of all its frames, in an ordinary hash map: two different stacks
 * share a key only with probability ~2^-64 per pair. */
#ifndef FGBPF_STACKS_BPF_H
#define FGBPF_STACKS_BPF_H

#include "fgbpf.h"

const volatile bool user_stacks = true;
const volatile bool kern_stacks = true;
/* Random per capture: the profiled processes choose the frames hashed, so
 * they must not be able to predict the hash and force collisions. */
const volatile __u64 stack_seed = 0;

struct stack_buf {
	__u64 ips[MAX_STACK_DEPTH];
};

/* Sized by the loader before load (--max-stacks; the default is in
 * src/probe/mod.rs): 1 here is a placeholder. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, struct stack_buf);
} stacks SEC(".maps");

/* One scratch buffer per CPU: user stack in slot 0, kernel stack in 1. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct stack_buf);
} stack_scratch SEC(".maps");

#define STACK_NONE 0ULL /* no stack of that kind (or not asked for) */

static __always_inline __u64 mix64(__u64 h, __u64 v)
{
	h ^= v * 0x9E3779B97F4A7C15ULL;
	h = (h << 31) | (h >> 33);
	return h * 0xC2B2AE3D27D4EB4FULL;
}

/* Keys of stacks this CPU stored lately (in a direct-mapped table): a
 * stack stored once is in the map or, once drained, in user space for the
 * rest of the capture, so storing it again is needless. */
#define FG_STORED_CACHE 256

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FG_STORED_CACHE);
	__type(key, __u32);
	__type(value, __u64);
} stored_stacks SEC(".maps");

/* The key of the first n frames in scratch slot `slot`: a global
 * function taking scalars only, so that the verifier walks its loop once,
 * not once per caller (and it loads before 5.12, which allows no other
 * pointer argument than the context). */
__noinline __u64 hash_scratch(__u32 slot, __u32 n)
{
	struct stack_buf *buf = bpf_map_lookup_elem(&stack_scratch, &slot);
	__u64 h = 0x2545F4914F6CDD1DULL ^ stack_seed;

	if (!buf)
		return STACK_NONE;
	for (int i = 0; i < MAX_STACK_DEPTH; i++) {
		if (i >= n)
			break;
		h = mix64(h, buf->ips[i]);
	}
	h = mix64(h, n);
	return h == STACK_NONE ? 1 : h;
}

/* Keys the `bytes` of frames in `buf`, scratch slot `slot`, and stores
 * them; see store_stack. */
static __always_inline __u64 keep_stack(struct stack_buf *buf, __u32 slot, long bytes, bool *lost)
{
	__u64 h, *seen;
	__u32 at;

	if (bytes <= 0)
		return STACK_NONE;
	h = hash_scratch(slot, bytes / sizeof(__u64));
	if (h == STACK_NONE)
		return STACK_NONE;
	at = (__u32)h & (FG_STORED_CACHE - 1);
	seen = bpf_map_lookup_elem(&stored_stacks, &at);
	if (seen && *seen == h)
		return h;
	if (!bpf_map_lookup_elem(&stacks, &h)) {
		long err = bpf_map_update_elem(&stacks, &h, buf, BPF_NOEXIST);

		if (err && err != -EEXIST) {
			*lost = true;
			return h;
		}
	}
	if (seen)
		*seen = h;
	return h;
}

/* Takes the current task's stack (BPF_F_USER_STACK or 0 in flags) and
 * returns its key in `stacks`, STACK_NONE if there is no such stack. Sets
 * *lost when the stack existed but could not be stored. */
static __always_inline __u64 store_stack(void *ctx, __u32 slot, __u64 flags, bool *lost)
{
	struct stack_buf *buf = bpf_map_lookup_elem(&stack_scratch, &slot);

	if (!buf)
		return STACK_NONE;
	/* The helper zero-fills the buffer past the frames it wrote. */
	return keep_stack(buf, slot, bpf_get_stack(ctx, buf->ips, sizeof(buf->ips), flags), lost);
}

/* The saved kernel stack of a task that is not running. */
static __always_inline __u64 store_task_kernel_stack(struct task_struct *task, __u32 slot, bool *lost)
{
	struct stack_buf *buf = bpf_map_lookup_elem(&stack_scratch, &slot);

	if (!buf)
		return STACK_NONE;
	return keep_stack(buf, slot, bpf_get_task_stack(task, buf->ips, sizeof(buf->ips), 0), lost);
}

#endif
