/* The seccomp allowlist of local sandboxes, as data. See local-seccomp.h.
 *
 * Written for this project after the shape of the Docker/containerd default profiles, stricter
 * where a sandbox for LLM-written code needs less: no namespaces of any kind, no mount API, no
 * ptrace, no io_uring, no keyrings, and socket families limited to what programs use to talk to
 * the network and to their own processes. What a normal program needs (python3, sh, coreutils,
 * gcc, pip, node, sandboxd itself) is allowed. */
#include <errno.h>
#include <string.h>

#include "basic/macro.h"
#include "local/container/local-seccomp.h"

/* The table's vocabulary (clang-format cannot lay out braced initializers in macros). */
/* clang-format off */
#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})
/* A group of names allowed unconditionally, or refused with EPERM. */
#define ALLOW(group, ...) {group, NAMES(__VA_ARGS__), 0, {{0}}, 0}
#define REFUSE(group, ...) {group, NAMES(__VA_ARGS__), EPERM, {{0}}, 0}
#define ARG_EQ(i, v) {(i), (v), 0, "SCMP_CMP_EQ"}
#define ARG_GE(i, v) {(i), (v), 0, "SCMP_CMP_GE"}
#define ARG_MASKED_EQ(i, mask, v) {(i), (mask), (v), "SCMP_CMP_MASKED_EQ"}
/* personality(2) with one value. */
#define PERSONALITY(v) {"personality", NAMES("personality"), 0, {ARG_EQ(0, v)}, 1}
/* socket(2) and socketpair(2) for one family (any type and protocol): allowed, or EAFNOSUPPORT. */
#define SOCKET_ALLOW(fam) {"sockets", NAMES("socket", "socketpair"), 0, {ARG_EQ(0, fam)}, 1}
#define SOCKET_NOFAM(fam) \
    {"sockets", NAMES("socket", "socketpair"), EAFNOSUPPORT, {ARG_EQ(0, fam)}, 1}
/* clang-format on */

/* clone(2) flags that create namespaces (values from linux/sched.h). CLONE_NEWTIME shares its
 * bit with the exit signal field of clone(), where no valid signal sets it. */
#define NS_CLONE_FLAGS                                                                             \
    (0x00000080ull /* CLONE_NEWTIME */ | 0x00020000ull /* CLONE_NEWNS */ |                         \
     0x02000000ull /* CLONE_NEWCGROUP */ | 0x04000000ull /* CLONE_NEWUTS */ |                      \
     0x08000000ull /* CLONE_NEWIPC */ | 0x10000000ull /* CLONE_NEWUSER */ |                        \
     0x20000000ull /* CLONE_NEWPID */ | 0x40000000ull /* CLONE_NEWNET */)

/* Address families (linux/socket.h) and the one netlink protocol a sandbox may open. */
enum {
    FAM_UNIX = 1,
    FAM_INET = 2,
    FAM_INET6 = 10,
    FAM_NETLINK = 16,
    NETLINK_ROUTE_PROTO = 0,
};

/* The table is data, laid out by hand (one group per entry, names sorted within a group). */
/* clang-format off */
static const local_seccomp_rule rules[] = {
    /* Files and directories: open, read, write, stat, metadata, links, xattrs, locks, sync,
     * inotify, ioctl on fds the process has. Permission checks stay the kernel's (uid 1000, no
     * capabilities). */
    ALLOW("files",
          "access", "cachestat", "chdir", "chmod", "chown", "close", "close_range",
          "copy_file_range", "creat", "dup", "dup2", "dup3", "faccessat", "faccessat2",
          "fadvise64", "fallocate", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown",
          "fchownat", "fcntl", "fdatasync", "fgetxattr", "flistxattr", "flock", "fremovexattr",
          "fsetxattr", "fstat", "fstatfs", "fsync", "ftruncate", "futimesat", "getcwd",
          "getdents", "getdents64", "getxattr", "getxattrat", "inotify_add_watch",
          "inotify_init", "inotify_init1", "inotify_rm_watch", "ioctl", "lchown", "lgetxattr",
          "link", "linkat", "listxattr", "listxattrat", "llistxattr", "lremovexattr", "lseek",
          "lsetxattr", "lstat", "mkdir", "mkdirat", "mknod", "mknodat", "newfstatat", "open",
          "openat", "openat2", "pread64", "preadv", "preadv2", "pwrite64", "pwritev", "pwritev2",
          "read", "readahead", "readlink", "readlinkat", "readv", "removexattr", "removexattrat",
          "rename", "renameat", "renameat2", "rmdir", "sendfile", "setxattr", "setxattrat",
          "splice", "stat", "statfs", "statx", "symlink", "symlinkat", "sync",
          "sync_file_range", "syncfs", "tee", "truncate", "umask", "unlink", "unlinkat", "utime",
          "utimensat", "utimes", "vmsplice", "write", "writev"),
    /* Memory: mappings and protections, locking within RLIMIT_MEMLOCK, memory fds, protection
     * keys, shadow stacks, sealing, the caller's NUMA policy (read only). */
    ALLOW("memory",
          "brk", "get_mempolicy", "madvise", "map_shadow_stack", "membarrier", "memfd_create",
          "memfd_secret", "mincore", "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mremap",
          "mseal", "msync", "munlock", "munlockall", "munmap", "pkey_alloc", "pkey_free",
          "pkey_mprotect", "remap_file_pages"),
    /* Processes and threads in the sandbox's own pid namespace: exec, exit, wait, signals to
     * them, ids (setuid and friends succeed only as far as the kernel allows without
     * capabilities), limits, scheduling, pidfds, landlock and seccomp on oneself. fork and vfork
     * create no namespace; clone has its own rule below. */
    ALLOW("processes",
          "arch_prctl", "capget", "capset", "execve", "execveat", "exit", "exit_group", "fork",
          "get_robust_list", "get_thread_area", "getcpu", "getegid", "geteuid", "getgid",
          "getgroups", "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getresgid",
          "getresuid", "getrlimit", "getrusage", "getsid", "gettid", "getuid", "ioprio_get",
          "ioprio_set", "kill", "landlock_add_rule", "landlock_create_ruleset",
          "landlock_restrict_self", "pidfd_open", "pidfd_send_signal", "prctl", "prlimit64",
          "rseq", "sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity",
          "sched_getattr", "sched_getparam", "sched_getscheduler", "sched_rr_get_interval",
          "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
          "sched_yield", "seccomp", "set_robust_list", "set_thread_area", "set_tid_address",
          "setfsgid", "setfsuid", "setgid", "setgroups", "setpgid", "setpriority", "setregid",
          "setresgid", "setresuid", "setreuid", "setrlimit", "setsid", "setuid", "tgkill",
          "times", "tkill", "vfork", "wait4", "waitid"),
    /* Signals, futexes, pipes, polling, timers, clocks (read only), sleeping. */
    ALLOW("events",
          "alarm", "clock_getres", "clock_gettime", "clock_nanosleep", "epoll_create",
          "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait", "eventfd",
          "eventfd2", "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake",
          "getitimer", "gettimeofday", "nanosleep", "pause", "pipe", "pipe2", "poll", "ppoll",
          "pselect6", "restart_syscall", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
          "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
          "rt_tgsigqueueinfo", "select", "setitimer", "sigaltstack", "signalfd", "signalfd4",
          "time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
          "timer_settime", "timerfd_create", "timerfd_gettime", "timerfd_settime"),
    /* System V and POSIX IPC, private to the sandbox's ipc namespace (POSIX queues are charged
     * to the sandbox's own RLIMIT_MSGQUEUE budget, local-userns.h). */
    ALLOW("ipc",
          "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend",
          "mq_unlink", "msgctl", "msgget", "msgrcv", "msgsnd", "semctl", "semget", "semop",
          "semtimedop", "shmat", "shmctl", "shmdt", "shmget"),
    /* Calls on sockets the process already has; which sockets it may create is decided by the
     * socket rules below. */
    ALLOW("network",
          "accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt",
          "listen", "recvfrom", "recvmmsg", "recvmsg", "sendmmsg", "sendmsg", "sendto",
          "setsockopt", "shutdown"),
    /* System information anyone may read. */
    ALLOW("info", "getrandom", "sysinfo", "uname"),

    /* clone without any namespace flag: threads, fork, posix_spawn. A new user namespace would
     * give the process every capability inside it (and with them nf_tables, mounts, ...), so
     * every CLONE_NEW* flag is refused (the default EPERM). */
    {"clone", NAMES("clone"), 0, {ARG_MASKED_EQ(0, NS_CLONE_FLAGS, 0)}, 1},
    /* clone3 passes its flags in memory, out of seccomp's reach: answered ENOSYS, so glibc, musl
     * and language runtimes fall back to clone, which the rule above checks. */
    {"clone3", NAMES("clone3"), ENOSYS, {{0}}, 0},
    /* personality(2) only with the values Docker allows: PER_LINUX, PER_LINUX32, UNAME26,
     * UNAME26|PER_LINUX32, and 0xffffffff, which only queries (no ADDR_NO_RANDOMIZE, no
     * READ_IMPLIES_EXEC). */
    PERSONALITY(0x0), PERSONALITY(0x8), PERSONALITY(0x20000), PERSONALITY(0x20008),
    PERSONALITY(0xffffffff),
    /* Sockets: unix, IPv4, IPv6, and netlink for NETLINK_ROUTE only (ip addr, getifaddrs). No
     * packet or link-layer access, no vsock to a hypervisor, no AF_ALG kernel crypto, no netlink
     * to netfilter, audit, uevents or other kernel subsystems. Raw inet sockets still need
     * CAP_NET_RAW, which a sandbox does not have. */
    SOCKET_ALLOW(FAM_UNIX), SOCKET_ALLOW(FAM_INET), SOCKET_ALLOW(FAM_INET6),
    {"sockets", NAMES("socket", "socketpair"), 0,
     {ARG_EQ(0, FAM_NETLINK), ARG_EQ(2, NETLINK_ROUTE_PROTO)}, 2},
    /* Any other family answers EAFNOSUPPORT, as on a kernel built without it, so programs that
     * probe (OpenSSL's AF_ALG engine, tools trying AF_PACKET) take their fallback quietly. A
     * netlink protocol other than NETLINK_ROUTE gets the default EPERM. */
    SOCKET_NOFAM(0), SOCKET_NOFAM(3), SOCKET_NOFAM(4), SOCKET_NOFAM(5), SOCKET_NOFAM(6),
    SOCKET_NOFAM(7), SOCKET_NOFAM(8), SOCKET_NOFAM(9), SOCKET_NOFAM(11), SOCKET_NOFAM(12),
    SOCKET_NOFAM(13), SOCKET_NOFAM(14), SOCKET_NOFAM(15),
    {"sockets", NAMES("socket", "socketpair"), EAFNOSUPPORT, {ARG_GE(0, FAM_NETLINK + 1)}, 1},

    /* Refused explicitly with EPERM. The default refuses them too; they are named so that the
     * profile documents itself and the tests can check the list. */
    /* Namespaces and mounts: entering, creating or changing them is how container escapes
     * start. */
    REFUSE("namespaces",
           "chroot", "fsconfig", "fsmount", "fsopen", "fspick", "listmount", "mount",
           "mount_setattr", "move_mount", "open_tree", "open_tree_attr", "pivot_root", "setns",
           "statmount", "umount", "umount2", "unshare"),
    /* Kernel attack surface with a long CVE record and no use in a sandbox: io_uring, eBPF,
     * perf, userfaultfd, keyrings, fanotify, file handles (open_by_handle_at is the classic
     * container breakout), LDT changes, NUMA page moves, obsolete calls. */
    REFUSE("kernel",
           "_sysctl", "add_key", "bpf", "fanotify_init", "fanotify_mark", "io_uring_enter",
           "io_uring_register", "io_uring_setup", "keyctl", "lookup_dcookie", "mbind",
           "migrate_pages", "modify_ldt", "move_pages", "name_to_handle_at", "nfsservctl",
           "open_by_handle_at", "perf_event_open", "request_key", "set_mempolicy",
           "set_mempolicy_home_node", "sysfs", "userfaultfd", "uselib", "ustat", "vhangup"),
    /* Classic AIO: its contexts count against fs.aio-max-nr, one machine-wide counter with no
     * per-user or per-cgroup budget, so one sandbox could take every context of the host and of
     * every other sandbox. ENOSYS, as on a kernel built without AIO (glibc's POSIX AIO uses
     * threads and is unaffected). */
    {"aio", NAMES("io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup",
                  "io_submit"), ENOSYS, {{0}}, 0},
    /* Reaching into other processes: ptrace and its relatives. Every process of a sandbox runs
     * under the same uid as sandboxd, its PID 1, so ptrace would let sandboxed code take over
     * the daemon that answers the host; debuggers are not worth that. */
    REFUSE("ptrace",
           "kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev",
           "ptrace"),
    /* The machine itself: modules, kexec, reboot, swap, clocks, accounting, quotas, the kernel
     * log, I/O ports, host and domain names. */
    REFUSE("machine",
           "acct", "adjtimex", "clock_adjtime", "clock_settime", "delete_module",
           "finit_module", "init_module", "ioperm", "iopl", "kexec_file_load", "kexec_load",
           "quotactl", "quotactl_fd", "reboot", "setdomainname", "sethostname", "settimeofday",
           "swapoff", "swapon", "syslog"),
};
/* clang-format on */

const local_seccomp_rule *local_seccomp_rules(size_t *ret_n)
{
    *ret_n = ELEMENTSOF(rules);
    return rules;
}

bool local_seccomp_allows(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(rules); i++) {
        if (rules[i].errno_ret != 0 || rules[i].n_args != 0)
            continue;
        for (const char *const *n = rules[i].names; *n; n++)
            if (strcmp(*n, name) == 0)
                return true;
    }
    return false;
}

/* json_decref that returns NULL, for `x = json_unref(x)`. */
static json_t *json_unref(json_t *j)
{
    json_decref(j);
    return NULL;
}

static json_t *rule_json(const local_seccomp_rule *r)
{
    json_t *names = json_array(), *args = json_array();
    bool ok = names && args;
    for (const char *const *n = r->names; ok && *n; n++)
        ok = json_array_append_new(names, json_string(*n)) == 0;
    for (unsigned i = 0; ok && i < r->n_args; i++) {
        const local_seccomp_arg *a = &r->args[i];
        ok = json_array_append_new(args, json_pack("{s:i, s:I, s:I, s:s}", "index", (int)a->index,
                                                   "value", (json_int_t)a->value, "valueTwo",
                                                   (json_int_t)a->value_two, "op", a->op)) == 0;
    }
    if (!ok) {
        json_decref(names);
        json_decref(args);
        return NULL;
    }
    json_t *o = json_pack("{s:o, s:o, s:s}", "names", names, "args", args, "action",
                          r->errno_ret ? "SCMP_ACT_ERRNO" : "SCMP_ACT_ALLOW");
    if (o && r->errno_ret && json_object_set_new(o, "errnoRet", json_integer(r->errno_ret)) < 0)
        o = json_unref(o);
    return o;
}

json_t *local_seccomp_profile(void)
{
    return local_seccomp_profile_for(false);
}

json_t *local_seccomp_profile_for(bool runsc)
{
#if defined(__x86_64__)
    static const char arch[] = "SCMP_ARCH_X86_64";
#elif defined(__aarch64__)
    static const char arch[] = "SCMP_ARCH_AARCH64";
#else
#error "local-seccomp: name the native SCMP_ARCH_* of this architecture"
#endif
    json_t *syscalls = json_array();
    for (size_t i = 0; syscalls && i < ELEMENTSOF(rules); i++) {
        local_seccomp_rule r = rules[i];
        /* runsc answers every SCMP_ACT_ERRNO with EPERM (it ignores errnoRet): an EPERM clone3
         * would stop glibc's fallback to clone, so under runsc the Sentry answers clone3 itself
         * (ENOSYS in release 20221219; later releases check its flags in the Sentry), and the
         * classic AIO calls too (the Sentry's AIO uses none of the host's aio-max-nr). */
        if (runsc && r.errno_ret == ENOSYS)
            r.errno_ret = 0;
        if (json_array_append_new(syscalls, rule_json(&r)) < 0)
            syscalls = json_unref(syscalls);
    }
    if (!syscalls)
        return NULL;
    return json_pack("{s:s, s:i, s:[s], s:o}", "defaultAction", "SCMP_ACT_ERRNO", "defaultErrnoRet",
                     EPERM, "architectures", arch, "syscalls", syscalls);
}
