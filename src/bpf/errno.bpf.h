/* vmlinux.h carries types, not macros: the errno values BPF helpers return. */
#ifndef FGBPF_ERRNO_BPF_H
#define FGBPF_ERRNO_BPF_H
#define EFAULT 14
#define EEXIST 17
#endif
