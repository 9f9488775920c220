// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* gpulimitd's eyes in the kernel. Two things leave the kernel, and nothing
 * else (every filter runs here, so the cost to the rest of the machine is a
 * 12-byte read at each open's entry and a map lookup at its exit):
 *   - the exit of a process gpulimitd tracks (its tenants' processes, in
 *     tenant_pids), as soon as its last thread exits;
 *   - an open of /dev/nvidia* by a process it does not track.
 * The loader is gpu_watch_loader.cpp, beside it. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "gpu_watch_event.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load: gpulimitd itself, never reported. */
const volatile __u32 server_tgid = 0;

/* Tenant processes (thread group ids). gpulimitd adds a pid when it joins a
 * tenant and removes it when it leaves; the exit handler removes it too, so
 * that a pid reused by another process is never mistaken for a tenant. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, __u8);
} tenant_pids SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline void fill_identity(struct gpu_watch_event *event, __u32 tgid,
                                          __u32 kind) {
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  __u64 uid_gid = bpf_get_current_uid_gid();
  event->kind = kind;
  event->pid = tgid;
  event->uid = (__u32)uid_gid;
  event->gid = (__u32)(uid_gid >> 32);
  /* The group leader's start: the process's, whichever thread this is. */
  event->start_boottime = BPF_CORE_READ(task, group_leader, start_boottime);
  bpf_get_current_comm(event->comm, sizeof(event->comm));
}

SEC("tp/sched/sched_process_exit")
int gpu_watch_exit(void *ctx) {
  __u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
  if (!bpf_map_lookup_elem(&tenant_pids, &tgid)) return 0;
  /* do_exit() counts the thread out of signal->live before this
   * tracepoint: 0 means the whole process is gone. */
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  if (BPF_CORE_READ(task, signal, live.counter) != 0) return 0;
  bpf_map_delete_elem(&tenant_pids, &tgid);

  struct gpu_watch_event *event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
  if (!event) return 0;
  fill_identity(event, tgid, GPU_WATCH_EXIT);
  event->path[0] = '\0';
  bpf_ringbuf_submit(event, 0);
  return 0;
}

/* Opens whose path was not readable at sys_enter, by thread: the path is
 * read again at sys_exit, once the kernel has faulted its page in. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192);
  __type(key, __u64);   /* pid_tgid */
  __type(value, __u64); /* the user pointer to the path */
} unread_paths SEC(".maps");

enum path_match { PATH_OTHER, PATH_GPU_NODE, PATH_UNREADABLE };

/* Compare the prefix first, so that the common case (any other path)
 * reads 12 bytes and reserves nothing. */
static __always_inline enum path_match match_path(const char *filename) {
  char prefix[GPU_WATCH_DEVICE_PREFIX_LEN + 1] = {};
  long length = bpf_probe_read_user_str(prefix, sizeof(prefix), filename);
  if (length < 0) return PATH_UNREADABLE;
  if (length < GPU_WATCH_DEVICE_PREFIX_LEN + 1) return PATH_OTHER;
  const char expected[] = GPU_WATCH_DEVICE_PREFIX;
  for (int i = 0; i < GPU_WATCH_DEVICE_PREFIX_LEN; ++i)
    if (prefix[i] != expected[i]) return PATH_OTHER;
  return PATH_GPU_NODE;
}

static __always_inline void send_open(const char *filename, __u32 tgid) {
  struct gpu_watch_event *event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
  if (!event) return;
  fill_identity(event, tgid, GPU_WATCH_OPEN);
  if (bpf_probe_read_user_str(event->path, sizeof(event->path), filename) < 0)
    event->path[0] = '\0';
  bpf_ringbuf_submit(event, 0);
}

static __always_inline int enter_open(const char *filename) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tgid = (__u32)(pid_tgid >> 32);
  if (tgid == server_tgid) return 0;
  enum path_match match = match_path(filename);
  if (match == PATH_OTHER) return 0;
  if (bpf_map_lookup_elem(&tenant_pids, &tgid)) return 0;
  if (match == PATH_GPU_NODE) {
    send_open(filename, tgid);
  } else {
    /* A tracepoint cannot fault a page in: a path in a page this process
     * has not touched yet (a string constant right after fork) reads as
     * -EFAULT here. The syscall itself faults it in; look again at exit. */
    __u64 pointer = (__u64)filename;
    bpf_map_update_elem(&unread_paths, &pid_tgid, &pointer, BPF_ANY);
  }
  return 0;
}

static __always_inline int exit_open(void) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u64 *pointer = bpf_map_lookup_elem(&unread_paths, &pid_tgid);
  if (!pointer) return 0;
  const char *filename = (const char *)*pointer;
  bpf_map_delete_elem(&unread_paths, &pid_tgid);
  if (match_path(filename) == PATH_GPU_NODE) send_open(filename, (__u32)(pid_tgid >> 32));
  return 0;
}

/* openat(dirfd, filename, flags, mode) and openat2(dirfd, filename, how,
 * size): the path is the second argument of both. A path relative to a
 * dirfd of /dev is not matched (see limiter-server/README.md). */
SEC("tp/syscalls/sys_enter_openat")
int gpu_watch_openat(struct trace_event_raw_sys_enter *ctx) {
  return enter_open((const char *)ctx->args[1]);
}

SEC("tp/syscalls/sys_exit_openat")
int gpu_watch_openat_exit(void *ctx) {
  return exit_open();
}

SEC("tp/syscalls/sys_enter_openat2")
int gpu_watch_openat2(struct trace_event_raw_sys_enter *ctx) {
  return enter_open((const char *)ctx->args[1]);
}

SEC("tp/syscalls/sys_exit_openat2")
int gpu_watch_openat2_exit(void *ctx) {
  return exit_open();
}
