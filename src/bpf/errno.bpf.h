/* vmlinux.h carries types, not macros: the errno values BPF helpers return. */
#ifndef FGBPF_ERRNO_BPF_H
#define FGBPF_ERRNO_BPF_H
#define ENOENT 2
#define EFAULT 14
#define EBUSY 16
#define EEXIST 17
#endif
