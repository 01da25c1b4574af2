/* The seccomp allowlist of local sandboxes (local-seccomp.c): what a normal program needs is
 * allowed, the escape routes are not, and the OCI JSON has the shape runc reads. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "local/container/local-seccomp.h"
#include "unit.h"

static bool array_has(const json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (a, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
            return true;
    }
    return false;
}

/* Some rule with action `errno_ret` (0 = allow) names `name`, with or without comparisons. */
static bool named(const char *name, int errno_ret, bool with_args)
{
    size_t n;
    const local_seccomp_rule *r = local_seccomp_rules(&n);
    for (size_t i = 0; i < n; i++) {
        if (r[i].errno_ret != errno_ret || (r[i].n_args != 0) != with_args)
            continue;
        for (const char *const *p = r[i].names; *p; p++)
            if (strcmp(*p, name) == 0)
                return true;
    }
    return false;
}

TEST(normal_programs_are_allowed)
{
    static const char *const needed[] = {
        "read",
        "write",
        "openat",
        "close",
        "mmap",
        "mprotect",
        "munmap",
        "brk",
        "execve",
        "exit_group",
        "wait4",
        "futex",
        "rt_sigaction",
        "rt_sigprocmask",
        "rt_sigreturn",
        "fstat",
        "newfstatat",
        "statx",
        "getdents64",
        "pipe2",
        "dup3",
        "fcntl",
        "ioctl",
        "epoll_wait",
        "epoll_ctl",
        "connect",
        "bind",
        "listen",
        "accept4",
        "sendto",
        "recvfrom",
        "getrandom",
        "prlimit64",
        "set_tid_address",
        "set_robust_list",
        "rseq",
        "arch_prctl",
        "vfork",
        "fork",
        "close_range",
        "pidfd_open",
        "prctl",
        "kill",
        "uname",
        "clock_nanosleep",
        "getcwd",
        "chdir",
        "unlinkat",
        "renameat2",
        "mkdirat",
        "fchmodat",
        "utimensat",
        "sched_getaffinity",
        "madvise",
    };
    for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
        if (!local_seccomp_allows(needed[i]))
            printf("#   not allowed: %s\n", needed[i]);
        CHECK(local_seccomp_allows(needed[i]));
    }
}

TEST(escape_routes_are_refused)
{
    static const char *const refused[] = {
        "unshare",
        "setns",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "open_tree",
        "move_mount",
        "fsopen",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "keyctl",
        "add_key",
        "request_key",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "open_by_handle_at",
        "name_to_handle_at",
        "acct",
        "swapon",
        "swapoff",
        "reboot",
        "settimeofday",
        "clock_settime",
        "iopl",
        "ioperm",
        "syslog",
        "pidfd_getfd",
        "kcmp",
        "modify_ldt",
        "sethostname",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        if (local_seccomp_allows(refused[i]) || named(refused[i], 0, true))
            printf("#   allowed: %s\n", refused[i]);
        CHECK(!local_seccomp_allows(refused[i]) && !named(refused[i], 0, true));
        CHECK(named(refused[i], EPERM, false));
    }
    /* Only conditionally: clone, socket, socketpair, personality. clone3 is ENOSYS. */
    static const char *const conditional[] = {"clone", "socket", "socketpair", "personality"};
    for (size_t i = 0; i < sizeof(conditional) / sizeof(conditional[0]); i++) {
        CHECK(!local_seccomp_allows(conditional[i]));
        CHECK(named(conditional[i], 0, true));
    }
    CHECK(!local_seccomp_allows("clone3") && named("clone3", ENOSYS, false));
    /* Classic AIO draws on the machine-wide fs.aio-max-nr: ENOSYS, as without CONFIG_AIO. */
    static const char *const aio[] = {"io_setup",   "io_submit",     "io_getevents",
                                      "io_destroy", "io_pgetevents", "io_cancel"};
    for (size_t i = 0; i < sizeof(aio) / sizeof(aio[0]); i++)
        CHECK(!local_seccomp_allows(aio[i]) && named(aio[i], ENOSYS, false));
}

TEST(no_name_is_both_allowed_and_refused)
{
    size_t n;
    const local_seccomp_rule *r = local_seccomp_rules(&n);
    for (size_t i = 0; i < n; i++) {
        if (r[i].errno_ret == 0)
            continue;
        for (const char *const *p = r[i].names; *p; p++) {
            if (local_seccomp_allows(*p))
                printf("#   allowed and refused: %s\n", *p);
            CHECK(!local_seccomp_allows(*p));
        }
    }
}

TEST(comparisons_are_on_distinct_arguments)
{
    size_t n;
    const local_seccomp_rule *r = local_seccomp_rules(&n);
    for (size_t i = 0; i < n; i++) {
        CHECK(r[i].n_args <= 3);
        for (unsigned a = 0; a < r[i].n_args; a++) {
            CHECK(r[i].args[a].index < 6 && r[i].args[a].op != NULL);
            for (unsigned b = a + 1; b < r[i].n_args; b++)
                CHECK(r[i].args[a].index != r[i].args[b].index);
        }
    }
}

TEST(oci_json_shape)
{
    json_t *p = local_seccomp_profile();
    CHECK(p != NULL);
    CHECK_STR_EQ(json_string_value(json_object_get(p, "defaultAction")), "SCMP_ACT_ERRNO");
    CHECK_INT_EQ(json_integer_value(json_object_get(p, "defaultErrnoRet")), EPERM);
    json_t *arches = json_object_get(p, "architectures");
    CHECK_INT_EQ(json_array_size(arches), 1);
#if defined(__x86_64__)
    CHECK(array_has(arches, "SCMP_ARCH_X86_64"));
#endif
    size_t i, n;
    json_t *rule;
    bool clone_ok = false, clone3_ok = false, netlink_ok = false;
    local_seccomp_rules(&n);
    CHECK_INT_EQ(json_array_size(json_object_get(p, "syscalls")), n);
    json_array_foreach (json_object_get(p, "syscalls"), i, rule) {
        json_t *names = json_object_get(rule, "names"), *args = json_object_get(rule, "args");
        const char *action = json_string_value(json_object_get(rule, "action"));
        CHECK(json_array_size(names) > 0 && json_is_array(args) && action);
        if (array_has(names, "clone")) {
            json_t *a = json_array_get(args, 0);
            CHECK_STR_EQ(action, "SCMP_ACT_ALLOW");
            CHECK_STR_EQ(json_string_value(json_object_get(a, "op")), "SCMP_CMP_MASKED_EQ");
            CHECK_INT_EQ(json_integer_value(json_object_get(a, "index")), 0);
            json_int_t mask = json_integer_value(json_object_get(a, "value"));
            /* CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID all in the mask. */
            CHECK((mask & 0x10000000) && (mask & 0x40000000) && (mask & 0x20000) &&
                  (mask & 0x20000000));
            CHECK_INT_EQ(json_integer_value(json_object_get(a, "valueTwo")), 0);
            clone_ok = true;
        }
        if (array_has(names, "clone3")) {
            CHECK_STR_EQ(action, "SCMP_ACT_ERRNO");
            CHECK_INT_EQ(json_integer_value(json_object_get(rule, "errnoRet")), ENOSYS);
            clone3_ok = true;
        }
        if (array_has(names, "socket") && json_array_size(args) == 2) {
            CHECK_STR_EQ(action, "SCMP_ACT_ALLOW");
            CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(args, 0), "value")), 16);
            CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(args, 1), "index")), 2);
            CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(args, 1), "value")), 0);
            netlink_ok = true;
        }
        if (strcmp(action, "SCMP_ACT_ERRNO") == 0)
            CHECK(json_integer_value(json_object_get(rule, "errnoRet")) > 0);
        else
            CHECK(json_object_get(rule, "errnoRet") == NULL);
    }
    CHECK(clone_ok && clone3_ok && netlink_ok);
    json_decref(p);
}

/* runsc answers every SCMP_ACT_ERRNO with EPERM: its profile lets the ENOSYS rules through
 * (clone3 and classic AIO: the Sentry answers them itself, and its AIO takes nothing of the
 * host's aio-max-nr), and only those change. */
TEST(runsc_profile_leaves_clone3_to_the_sentry)
{
    json_t *plain = local_seccomp_profile_for(false), *runsc = local_seccomp_profile_for(true);
    CHECK(plain && runsc);
    json_t *a = json_object_get(plain, "syscalls"), *b = json_object_get(runsc, "syscalls");
    CHECK_INT_EQ(json_array_size(a), json_array_size(b));
    size_t changed = 0;
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *ra = json_array_get(a, i), *rb = json_array_get(b, i);
        if (json_equal(ra, rb))
            continue;
        changed++;
        CHECK(array_has(json_object_get(rb, "names"), "clone3") ||
              array_has(json_object_get(rb, "names"), "io_setup"));
        CHECK_STR_EQ(json_string_value(json_object_get(rb, "action")), "SCMP_ACT_ALLOW");
        CHECK(json_object_get(rb, "errnoRet") == NULL);
    }
    CHECK_INT_EQ(changed, 2);
    json_decref(plain);
    json_decref(runsc);
}
