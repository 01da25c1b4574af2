/* Attack probe for the escape suite (test_escape_*.py): compiled on the host, copied into a
 * sandbox's workspace and run there. Each verb makes one raw system call (or one small sequence)
 * and prints `ret=<value> errno=<errno>` on stdout; the test decides what must have happened.
 * Raw syscall(2) everywhere, so that no libc wrapper or fallback hides what the kernel said. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(long ret, int err)
{
    printf("ret=%ld errno=%d\n", ret, ret < 0 ? err : 0);
    return 0;
}

/* Reports a raw call's result with the errno it set (evaluated after the call). */
#define REPORT(call)                                                                               \
    ({                                                                                             \
        long _r = (call);                                                                          \
        report(_r, errno);                                                                         \
    })

static unsigned long num(const char *s)
{
    return strtoul(s, NULL, 0);
}

/* clone(flags | SIGCHLD) with a child that exits at once: ret is the child's pid on success. */
static int do_clone(unsigned long flags)
{
    long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    int err = errno;
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    return report(r, err);
}

/* The kernel's struct clone_args (v0, 64 bytes). */
struct clone_args_v0 {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static int do_clone3(unsigned long flags)
{
    struct clone_args_v0 a = {.flags = flags, .exit_signal = SIGCHLD};
    long r = syscall(435 /* clone3 */, &a, sizeof(a));
    if (r == 0)
        _exit(0);
    int err = errno;
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    return report(r, err);
}

static void *thread_main(void *arg)
{
    return arg;
}

/* pthread_create: glibc tries clone3 first and must fall back to clone. */
static int do_thread(void)
{
    pthread_t t;
    int e = pthread_create(&t, NULL, thread_main, NULL);
    if (e == 0)
        pthread_join(t, NULL);
    return report(e ? -1 : 0, e);
}

/* Forks children that wait on a pipe until fork fails; prints how many there were and the errno
 * of the failing fork, then lets every child go. */
static int do_forkbomb(unsigned long max)
{
    int p[2];
    if (pipe(p) < 0)
        return report(-1, errno);
    unsigned long n = 0;
    int err = 0;
    for (; n < max; n++) {
        pid_t pid = fork();
        if (pid == 0) {
            char c;
            close(p[1]);
            while (read(p[0], &c, 1) < 0 && errno == EINTR)
                ;
            _exit(0);
        }
        if (pid < 0) {
            err = errno;
            break;
        }
    }
    close(p[1]);
    while (wait(NULL) > 0 || errno == EINTR)
        ;
    printf("forked=%lu errno=%d\n", n, err);
    return 0;
}

/* A system call through the 32-bit entry (int 0x80) of an x86_64 process, or with the x32 bit. */
static int do_compat(const char *how, unsigned long nr)
{
#if defined(__x86_64__)
    long r;
    if (strcmp(how, "int80") == 0) {
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(0), "c"(0), "d"(0) : "memory");
    } else {
        __asm__ volatile("syscall"
                         : "=a"(r)
                         : "a"(nr | 0x40000000UL), "D"(0), "S"(0), "d"(0)
                         : "rcx", "r11", "memory");
    }
    return report(r < 0 && r > -4096 ? -1 : r, r < 0 && r > -4096 ? (int)-r : 0);
#else
    (void)how;
    (void)nr;
    return report(-1, ENOSYS);
#endif
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: escape-probe VERB [ARGS...]\n");
        return 2;
    }
    const char *v = argv[1];
    const char *a1 = argc > 2 ? argv[2] : "0", *a2 = argc > 3 ? argv[3] : "0",
               *a3 = argc > 4 ? argv[4] : "0";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(v, "clone") == 0)
        return do_clone(num(a1));
    if (strcmp(v, "clone3") == 0)
        return do_clone3(num(a1));
    if (strcmp(v, "thread") == 0)
        return do_thread();
    if (strcmp(v, "unshare") == 0)
        return REPORT(syscall(SYS_unshare, num(a1)));
    if (strcmp(v, "setns") == 0) {
        int fd = open(a1, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return report(-1, errno);
        return REPORT(syscall(SYS_setns, fd, 0));
    }
    if (strcmp(v, "mount") == 0)
        return REPORT(syscall(SYS_mount, "none", a1, "tmpfs", 0UL, NULL));
    if (strcmp(v, "umount") == 0)
        return REPORT(syscall(SYS_umount2, a1, MNT_DETACH));
    if (strcmp(v, "socket") == 0)
        return REPORT(syscall(SYS_socket, num(a1), num(a2), num(a3)));
    if (strcmp(v, "socketpair") == 0) {
        int sv[2];
        return REPORT(syscall(SYS_socketpair, num(a1), num(a2), num(a3), sv));
    }
    if (strcmp(v, "io_uring_setup") == 0) {
        char params[120] = {0};
        return REPORT(syscall(425, 8, params));
    }
    if (strcmp(v, "bpf") == 0) {
        char attr[128] = {0};
        return REPORT(syscall(SYS_bpf, num(a1), attr, sizeof(attr)));
    }
    if (strcmp(v, "perf_event_open") == 0) {
        char attr[128] = {0};
        attr[4] = (char)sizeof(attr); /* attr.size */
        return REPORT(syscall(SYS_perf_event_open, attr, 0, -1, -1, 0));
    }
    if (strcmp(v, "keyctl") == 0) /* KEYCTL_GET_KEYRING_ID of the session keyring */
        return REPORT(syscall(SYS_keyctl, 0, -3, 0));
    if (strcmp(v, "add_key") == 0)
        return REPORT(syscall(SYS_add_key, "user", "k", "v", 1, -3));
    if (strcmp(v, "userfaultfd") == 0)
        return REPORT(syscall(SYS_userfaultfd, O_CLOEXEC));
    if (strcmp(v, "ptrace_attach") == 0) {
        return REPORT(syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, (pid_t)num(a1), 0, 0));
    }
    if (strcmp(v, "ptrace_traceme") == 0)
        return REPORT(syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0));
    if (strcmp(v, "process_vm_readv") == 0) {
        char buf[8];
        struct {
            void *base;
            size_t len;
        } local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
        return REPORT(syscall(SYS_process_vm_readv, (pid_t)num(a1), &local, 1, &remote, 1, 0));
    }
    if (strcmp(v, "open_by_handle_at") == 0) {
        char handle[16] = {8, 0, 0, 0, 1, 0, 0, 0};
        return REPORT(syscall(SYS_open_by_handle_at, AT_FDCWD, handle, O_RDONLY));
    }
    if (strcmp(v, "personality") == 0)
        return REPORT(syscall(SYS_personality, num(a1)));
    if (strcmp(v, "chroot") == 0)
        return REPORT(syscall(SYS_chroot, a1));
    if (strcmp(v, "pivot_root") == 0)
        return REPORT(syscall(SYS_pivot_root, a1, a2));
    if (strcmp(v, "syscall0") == 0) /* any syscall number, zero arguments */
        return REPORT(syscall((long)num(a1), 0, 0, 0, 0, 0, 0));
    if (strcmp(v, "int80") == 0 || strcmp(v, "x32") == 0)
        return do_compat(v, num(a1));
    if (strcmp(v, "forkbomb") == 0)
        return do_forkbomb(num(a1));
    fprintf(stderr, "escape-probe: unknown verb %s\n", v);
    return 2;
}
