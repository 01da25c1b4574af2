#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/io-util.h"
#include "unit.h"

/* More than a pipe or a socket buffer holds, so the writer sees partial writes while the reader
 * drains. */
#define BIG (1024 * 1024)

typedef int (*writer_fn)(int, const void *, size_t);

static void round_trip(int rfd, int wfd, writer_fn fn)
{
    char *data = malloc(BIG), *got = malloc(BIG);
    CHECK(data && got);
    if (!data || !got)
        return;
    for (size_t i = 0; i < BIG; i++)
        data[i] = (char)(i * 7);
    pid_t pid = fork();
    if (pid == 0) {
        close(rfd);
        _exit(fn(wfd, data, BIG) == 0 ? 0 : 1);
    }
    close(wfd);
    size_t have = 0;
    for (ssize_t k; (k = read(rfd, got + have, BIG - have)) > 0;)
        have += (size_t)k;
    close(rfd);
    int status = -1;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_INT_EQ(status, 0);
    CHECK_INT_EQ(have, BIG);
    CHECK(memcmp(data, got, BIG) == 0);
    free(data);
    free(got);
}

TEST(loop_write_writes_everything_through_partial_writes)
{
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    round_trip(p[0], p[1], loop_write);
}

TEST(loop_send_writes_everything_through_partial_writes)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    round_trip(sv[0], sv[1], loop_send);
}

TEST(errors_are_negative_errno)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    close(sv[0]);
    /* No SIGPIPE: the process lives on to see -EPIPE. */
    CHECK_INT_EQ(loop_send(sv[1], "x", 1), -EPIPE);
    close(sv[1]);
    CHECK_INT_EQ(loop_write(-1, "x", 1), -EBADF);
    CHECK_INT_EQ(loop_write(-1, "", 0), 0);
}
