/* sandboxd's sockets under runsc (local-runtime-gvisor.c): the box is made for the sandbox user
 * and emptied of an earlier container's sockets, and only sockets are ever linked where clients
 * look, by inode: a symlink the sandbox leaves there is never followed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local/runtime/local-runtime-gvisor.h"
#include "unit.h"

static char *tmpdir(void)
{
    char t[] = "/tmp/test-gvisor-XXXXXX";
    char *d = mkdtemp(t);
    return d ? strdup(d) : NULL;
}

/* A listening unix socket bound at dir/name (the fd, kept open by the caller). */
static int bound(const char *dir, const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0)
        return -1;
    return fd;
}

static ino_t inode(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    struct stat st;
    return lstat(p, &st) == 0 ? st.st_ino : 0;
}

static void cleanup(const char *run)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", run);
    CHECK_INT_EQ(system(cmd), 0);
}

TEST(prepare_makes_the_box_and_drops_old_sockets)
{
    char *run = tmpdir();
    CHECK(run != NULL);
    int old = bound(run, "rest.sock");
    CHECK(old >= 0);
    char *box = NULL;
    CHECK_INT_EQ(local_gvisor_prepare(run, 4242, 4343, &box), 0);
    struct stat st;
    CHECK_INT_EQ(stat(box, &st), 0);
    CHECK(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700);
    CHECK(st.st_uid == 4242 && st.st_gid == 4343);
    CHECK(inode(run, "rest.sock") == 0); /* a dead container's socket is no longer reached */
    int again = bound(box, "grpc.sock");
    CHECK(again >= 0);
    free(box);
    CHECK_INT_EQ(local_gvisor_prepare(run, 4242, 4343, &box), 0);
    CHECK(inode(box, "grpc.sock") == 0);
    close(old);
    close(again);
    free(box);
    cleanup(run);
    free(run);
}

TEST(publish_links_sockets_by_inode_and_never_a_symlink)
{
    char *run = tmpdir(), *box = NULL;
    CHECK(run != NULL);
    CHECK_INT_EQ(local_gvisor_prepare(run, 0, 0, &box), 0);
    /* A symlink where a socket should be (to a socket elsewhere): not linked, so the wait ends
     * without it. */
    int elsewhere = bound(run, "other.sock");
    char target[512];
    snprintf(target, sizeof(target), "%s/other.sock", run);
    char link[512];
    snprintf(link, sizeof(link), "%s/rest.sock", box);
    CHECK_INT_EQ(symlink(target, link), 0);
    int grpc = bound(box, "grpc.sock");
    CHECK(elsewhere >= 0 && grpc >= 0);
    CHECK_INT_EQ(local_gvisor_publish(run, 0, 50), -ETIMEDOUT);
    CHECK(inode(run, "rest.sock") == 0);
    /* The real socket: both are linked, the same inodes as in the box. */
    CHECK_INT_EQ(unlink(link), 0);
    int rest = bound(box, "rest.sock");
    CHECK(rest >= 0);
    CHECK_INT_EQ(local_gvisor_publish(run, 0, 1000), 0);
    CHECK(inode(run, "rest.sock") == inode(box, "rest.sock") && inode(run, "rest.sock") != 0);
    CHECK(inode(run, "grpc.sock") == inode(box, "grpc.sock") && inode(run, "grpc.sock") != 0);
    close(elsewhere);
    close(grpc);
    close(rest);
    free(box);
    cleanup(run);
    free(run);
}

TEST(publish_ends_when_the_first_process_exits)
{
    char *run = tmpdir(), *box = NULL;
    CHECK(run != NULL);
    CHECK_INT_EQ(local_gvisor_prepare(run, 0, 0, &box), 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    CHECK(pid > 0);
    /* Exited but not reaped: a pidfd still opens, and polls readable. */
    usleep(20000);
    CHECK_INT_EQ(local_gvisor_publish(run, pid, 5000), -ESRCH);
    CHECK_INT_EQ(waitpid(pid, NULL, 0), pid);
    free(box);
    cleanup(run);
    free(run);
}
