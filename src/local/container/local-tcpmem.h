/* TCP buffer memory of a local sandbox on cgroup v1 (docs/security.md, "Kernel budgets").
 *
 * cgroup v2 charges socket buffers to the memory cgroup by itself. cgroup v1 charges TCP buffers
 * to memory.kmem.tcp, a budget of its own beside memory.limit_in_bytes, and only for sockets made
 * after that budget got a limit: without one, a sandbox's TCP buffers are charged to no cgroup at
 * all (40 loopback pairs queued 437 MiB in a 256Mi sandbox). runc 1.1 ignores config.json's
 * linux.resources.memory.kernelTCP, so asb serve makes the cgroup and sets the limit itself before
 * runc runs (runc then uses the cgroup as it is). */
#pragma once

#include <stdint.h>

/* A sandbox's TCP buffers may take its memory limit / LOCAL_TCPMEM_SHARE. */
#define LOCAL_TCPMEM_SHARE 4

/* Creates the v1 memory cgroup cgroups_path ("/asb/<uid>") if missing and sets its
 * memory.kmem.tcp.limit_in_bytes to memory_limit / LOCAL_TCPMEM_SHARE. 0 when done, when
 * memory_limit <= 0 or when this host has no v1 memory hierarchy with TCP accounting (v2); a
 * negative errno otherwise. */
int local_tcpmem_limit(const char *cgroups_path, int64_t memory_limit);
