/* Running nft (libnftables) and iproute2's `ip -batch` for local-net.c and
 * local-net-prepared.c: the error text they give back, and the child that makes a network
 * namespace before running ip in it. */
#include <errno.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/local-net-internal.h"

int net_nft_run(struct nft_ctx *ctx, const char *cmd, char **ret_error)
{
    if (nft_run_cmd_from_buffer(ctx, cmd) == 0)
        return 0;
    const char *e = nft_ctx_get_error_buffer(ctx);
    if (ret_error && asprintf(ret_error, "nft: %s", e && *e ? e : "failed") < 0)
        *ret_error = NULL;
    return -EIO;
}

static const char *ip_binary(void)
{
    static const char *const c[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
    for (size_t i = 0; i < ELEMENTSOF(c); i++)
        if (access(c[i], X_OK) == 0)
            return c[i];
    return NULL;
}

int net_ip_start(const char *batch, const char *ns_path, bool force, net_ip_child *ret,
                 char **ret_error)
{
    const char *ip = ip_binary();
    if (!ip) {
        *ret_error = strdup("iproute2 (ip) is not installed");
        return -ENOENT;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    char *argv[] = {(char *)ip, force ? "-force" : "-s", "-batch", (char *)batch, NULL};
    pid_t pid = fork();
    if (pid < 0) {
        int e = -errno;
        close(pfd[0]);
        close(pfd[1]);
        return e;
    }
    if (pid == 0) {
        dup2(pfd[1], 2);
        if (ns_path) {
            if (unshare(CLONE_NEWNET) < 0 ||
                mount("/proc/self/ns/net", ns_path, NULL, MS_BIND, NULL) < 0) {
                static const char m[] = "cannot create the network namespace\n";
                (void)!write(2, m, sizeof(m) - 1);
                _exit(125);
            }
            static const char *const v6[] = {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
                                             "/proc/sys/net/ipv6/conf/default/disable_ipv6"};
            for (size_t i = 0; i < 2; i++) {
                int fd = open(v6[i], O_WRONLY | O_CLOEXEC);
                if (fd >= 0) {
                    (void)!write(fd, "1", 1);
                    close(fd);
                }
            }
        }
        execv(ip, argv);
        _exit(127);
    }
    close(pfd[1]);
    *ret = (net_ip_child){pid, pfd[0]};
    return 0;
}

int net_ip_wait(net_ip_child *c, char **ret_error)
{
    char text[1024];
    size_t got = 0;
    ssize_t k;
    while (got < sizeof(text) - 1 && (k = read(c->err_fd, text + got, sizeof(text) - 1 - got)) > 0)
        got += (size_t)k;
    text[got] = '\0';
    close(c->err_fd);
    int st = 0;
    while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    text[strcspn(text, "\n")] = '\0';
    if (ret_error && asprintf(ret_error, "ip: %s", *text ? text : "failed") < 0)
        *ret_error = NULL;
    return -EIO;
}

int net_ip_run(const char *batch, const char *ns_path, bool force, char **ret_error)
{
    net_ip_child c;
    int k = net_ip_start(batch, ns_path, force, &c, ret_error);
    return k < 0 ? k : net_ip_wait(&c, ret_error);
}
