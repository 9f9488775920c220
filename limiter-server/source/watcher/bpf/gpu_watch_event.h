/* What gpu_watch.bpf.c sends gpulimitd through its ring buffer: one struct,
 * shared by the kernel side (which includes vmlinux.h first) and the loader.
 * Fixed-width fields only: both sides must agree on the layout byte for
 * byte. */
#ifndef GPULIMIT_GPU_WATCH_EVENT_H
#define GPULIMIT_GPU_WATCH_EVENT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define GPU_WATCH_COMM_LEN 16 /* TASK_COMM_LEN */
#define GPU_WATCH_PATH_LEN 64 /* "/dev/nvidia-caps/nvidia-cap123" fits with room */

/* The prefix every NVIDIA device node shares: nvidiactl, nvidia-uvm,
 * nvidia-uvm-tools, nvidia-modeset, nvidia0..N, nvidia-caps/. */
#define GPU_WATCH_DEVICE_PREFIX "/dev/nvidia"
#define GPU_WATCH_DEVICE_PREFIX_LEN 11

enum gpu_watch_kind {
  /* The last thread of a tracked (tenant) process exited. */
  GPU_WATCH_EXIT = 1,
  /* A process that is not tracked opened an NVIDIA device node. */
  GPU_WATCH_OPEN = 2,
};

struct gpu_watch_event {
  __u32 kind;           /* enum gpu_watch_kind */
  __u32 pid;            /* thread group id, in the initial pid namespace */
  __u32 uid;            /* real uid and gid of the thread */
  __u32 gid;
  __u64 start_boottime; /* ns since boot: tells a pid's owner from a later one */
  char comm[GPU_WATCH_COMM_LEN];
  char path[GPU_WATCH_PATH_LEN]; /* GPU_WATCH_OPEN only; NUL-terminated */
};

#endif /* GPULIMIT_GPU_WATCH_EVENT_H */
