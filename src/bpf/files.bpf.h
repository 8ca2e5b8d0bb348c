/* Walks by file: a process user space has not read yet (one that lives a
 * millisecond is gone before its maps can be read) is walked with the
 * rows of the files its code comes from. The walker asks the kernel which
 * mapping holds a pc (bpf_find_vma, Linux 5.17: the kernels of the
 * bpf_loop walker), finds its file's rows by device and inode
 * (`file_tables`, written by user space for every binary it compiled, see
 * src/probe/unwind.rs) and notes the mapping (`found_maps`), so that user
 * space names the frames after the process is gone. The exec hook notes
 * the path each binary was run by (`exec_paths`): the first processes of
 * a program nobody mapped before are named by it, and its rows built. */
#ifndef FGBPF_FILES_BPF_H
#define FGBPF_FILES_BPF_H

#include "fgbpf.h"
#include "targets.bpf.h"
#include "tables.bpf.h"
#include "walk.bpf.h"

/* Set by the loader where the kernel has bpf_find_vma and the bpf_loop
 * walker runs. */
const volatile bool by_files = false;

/* Preallocated: before 6.1 the verifier refuses a perf_event program
 * that uses a hash map allocated as it fills. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct fg_file_key);
	__type(value, struct fg_file_table);
} file_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct fg_found_key);
	__type(value, struct fg_found_map);
} found_maps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct fg_file_key);
	__type(value, struct fg_exec_path);
} exec_paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fg_exec_path);
} exec_path_scratch SEC(".maps");

/* Mappings looked up per walk at most: a stack crosses a few files; a walk
 * of garbage (frame pointers through code without them) stops asking. */
#define FG_MAX_ASKS 16

/* task_struct.flags: forked and not exec'd since (include/linux/sched.h). */
#define PF_FORKNOEXEC 0x00000040

/* What vma_found read of the mapping asked for. */
struct vma_ask {
	__u64 start, end, off, dev, ino;
	__u32 flags;
	__u32 pad;
};

/* A device number as /proc/PID/maps shows it: major << 32 | minor (the
 * kernel's dev_t keeps the minor in its low 20 bits). */
static __always_inline __u64 maps_dev(__u32 dev)
{
	return ((__u64)(dev >> 20) << 32) | (dev & 0xfffff);
}

static long vma_found(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_ask *a = data;
	struct file *f = vma->vm_file;

	a->start = vma->vm_start;
	a->end = vma->vm_end;
	a->off = vma->vm_pgoff << 12;
	if (f) {
		struct inode *inode = f->f_inode;

		a->ino = inode->i_ino;
		a->dev = maps_dev(inode->i_sb->s_dev);
	}
#if defined(__TARGET_ARCH_x86)
	else if ((__u64)vma->vm_mm->context.vdso == vma->vm_start) {
		a->flags = FG_FOUND_VDSO;
	}
#endif
	return 0;
}

/* Notes a mapping found in process pid since start, for user space. */
static __always_inline void note_found(__u32 pid, __u32 start, struct vma_ask *a)
{
	struct fg_found_key fk = { .pid = pid, .start = start, .vm_start = a->start };
	struct fg_found_map fv = {
		.vm_end = a->end,
		.offset = a->off,
		.dev = a->dev,
		.ino = a->ino,
		.flags = a->flags,
	};

	bpf_map_update_elem(&found_maps, &fk, &fv, BPF_NOEXIST);
}

/* m as the walker's entry for the mapping found, with its file's rows
 * when user space has compiled them (count 0: none). */
static __always_inline void place_found(struct fg_mapping *m, struct vma_ask *a)
{
	struct fg_file_key k = { .dev = a->dev, .ino = a->ino };
	struct fg_file_table *t;

	m->start = a->start;
	m->end = a->end;
	m->load = 0;
	m->count = 0;
	/* The vDSO's rows are filed under device and inode 0, as
	 * /proc/PID/maps shows it; other memory without a file has none. */
	t = (a->dev | a->ino | a->flags) ? bpf_map_lookup_elem(&file_tables, &k) : NULL;
	if (t && a->off >= t->seg_lo && a->off < t->seg_hi) {
		m->load = a->start - a->off + t->adjust;
		m->first = t->first;
		m->count = t->count;
		m->pages = t->pages;
		m->npages = t->npages;
	}
}

/* The mapping holding pc in the current process, found by the kernel;
 * NULL for none. The last one found is kept in the walk: a stack's frames
 * mostly lie in the mapping of the frame before. In a sample (an
 * interrupt) the kernel finds one mapping: its lock is let go after the
 * interrupt, and a second search before that finds it busy (EBUSY). */
static __always_inline struct fg_mapping *file_mapping(struct walk *w, __u64 pc)
{
	struct vma_ask a = {};

	if (w->found_ok && pc >= w->found.start && pc < w->found.end)
		return &w->found;
	if (w->asks >= FG_MAX_ASKS)
		return NULL;
	w->asks++;
	w->found_ok = 0;
	w->asked = bpf_find_vma(bpf_get_current_task_btf(), pc, vma_found, &a, 0);
	if (w->asked || a.end <= a.start)
		return NULL;
	note_found(w->pid, proc_start((struct task_struct *)bpf_get_current_task()), &a);
	place_found(&w->found, &a);
	w->found_ok = 1;
	return &w->found;
}

/* Mappings gathered at a process's start (libc_start): the C library's,
 * the program's, the loader's and the vDSO. */
#define FG_START_MAPPINGS 4

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fg_proc_unwind);
} start_entries SEC(".maps");

/* Adds the mapping holding addr to u, unless it holds it already. */
static __always_inline void gather(struct fg_proc_unwind *u, __u32 pid, __u32 start, __u64 addr)
{
	struct vma_ask a = {};
	__u32 n = u->count;

	if (!addr || n >= FG_START_MAPPINGS)
		return;
	for (int i = 0; i < FG_START_MAPPINGS; i++) {
		if (i < n && addr >= u->maps[i].start && addr < u->maps[i].end)
			return;
	}
	if (bpf_find_vma(bpf_get_current_task_btf(), addr, vma_found, &a, 0) || a.end <= a.start)
		return;
	note_found(pid, start, &a);
	place_found(&u->maps[n & (FG_START_MAPPINGS - 1)], &a);
	u->count = n + 1;
}

/* A process not read yet reaches the C library's __libc_start_main with
 * its libraries mapped: the walker is given its first mappings here, in
 * the process's own context, where the kernel finds as many as asked (a
 * sample finds one). Its entry is marked not read: user space writes
 * over it when it reads the process. */
SEC("uprobe")
int BPF_KPROBE(libc_start, void *main_fn, long argc, void *argv, void *init, void *fini, void *rtld_fini)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, zero = 0, start;
	struct task_struct *task = bpf_get_current_task_btf();
	struct fg_proc_unwind *u;

	if (!by_files || pid == self_pid || !is_target(pid, (__u32)pid_tgid))
		return 0;
	/* Read already, and with the C library: nothing to add. An entry
	 * read before the loader mapped the library (user space reads a new
	 * process at once) is replaced, and user space's next reading
	 * replaces this one. */
	u = bpf_map_lookup_elem(&proc_unwind, &pid);
	if (u && find_mapping(u, PT_REGS_IP(ctx)) < FG_MAX_MAPPINGS)
		return 0;
	u = bpf_map_lookup_elem(&start_entries, &zero);
	if (!u)
		return 0;
	start = proc_start((struct task_struct *)task);
	u->count = 0;
	u->flags = 0;
	u->interp_checked = 0;
	/* Never one of user space's (they count up from 1). */
	u->gen = (1ULL << 63) | bpf_ktime_get_ns();
	gather(u, pid, start, PT_REGS_IP(ctx));
	gather(u, pid, start, (__u64)main_fn);
	gather(u, pid, start, (__u64)rtld_fini);
#if defined(__TARGET_ARCH_x86)
	gather(u, pid, start, (__u64)task->mm->context.vdso);
#endif
	/* Sorted by start, as the walker's search wants them. */
	for (int i = 0; i < FG_START_MAPPINGS - 1; i++) {
		for (int j = 0; j < FG_START_MAPPINGS - 1 - i; j++) {
			if (j + 1 < u->count && u->maps[j].start > u->maps[j + 1].start) {
				struct fg_mapping t = u->maps[j];

				u->maps[j] = u->maps[j + 1];
				u->maps[j + 1] = t;
			}
		}
	}
	if (u->count)
		bpf_map_update_elem(&proc_unwind, &pid, u, BPF_ANY);
	return 0;
}

/* At an exec: the path the new program was run by, for its binary (the
 * interpreter's, for a script), unless one is noted already. */
static __always_inline void note_exec_path(struct linux_binprm *bprm)
{
	struct fg_file_key k = {};
	struct fg_exec_path *v;
	struct inode *inode;
	__u32 zero = 0;

	if (!by_files)
		return;
	inode = BPF_CORE_READ(bprm, file, f_inode);
	if (!inode)
		return;
	k.dev = maps_dev(BPF_CORE_READ(inode, i_sb, s_dev));
	k.ino = BPF_CORE_READ(inode, i_ino);
	if (bpf_map_lookup_elem(&exec_paths, &k))
		return;
	v = bpf_map_lookup_elem(&exec_path_scratch, &zero);
	if (!v || bpf_probe_read_kernel_str(v->path, sizeof(v->path), BPF_CORE_READ(bprm, interp)) <= 0)
		return;
	bpf_map_update_elem(&exec_paths, &k, v, BPF_NOEXIST);
}

#endif
