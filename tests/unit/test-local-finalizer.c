/* Deletion that finishes: the finalizer helpers (Kubernetes DELETE semantics in a store update
 * fn) and the capped, rotated collection of sandboxd's output pipe. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "local/reconcile/local-finalizer.h"
#include "local/runtime/local-logs.h"
#include "local/store/local-store.h"
#include "unit.h"

TEST(delete_without_finalizers_deletes)
{
    json_t *o = json_pack("{s:{s:s}}", "metadata", "name", "x"), *n = NULL;
    CHECK_INT_EQ(local_delete_or_mark(o, &n), STORE_UPDATE_DELETE);
    CHECK(n == NULL);
    json_decref(o);
}

TEST(delete_with_finalizer_marks_once)
{
    json_t *o = json_pack("{s:{s:s}}", "metadata", "name", "x"), *n = NULL, *m = NULL;
    json_t *f = local_finalizer_add(o, LOCAL_TEARDOWN_FINALIZER);
    CHECK(local_has_finalizer(f, LOCAL_TEARDOWN_FINALIZER));
    CHECK_INT_EQ(local_delete_or_mark(f, &n), 0);
    CHECK(json_object_get(json_object_get(n, "metadata"), "deletionTimestamp") != NULL);
    CHECK(!json_object_get(json_object_get(f, "metadata"), "deletionTimestamp")); /* a copy */
    CHECK_INT_EQ(local_delete_or_mark(n, &m), STORE_UPDATE_UNCHANGED);
    json_t *r = local_finalizer_remove(n, LOCAL_TEARDOWN_FINALIZER);
    CHECK(!local_has_finalizer(r, LOCAL_TEARDOWN_FINALIZER));
    CHECK(!json_object_get(json_object_get(r, "metadata"), "finalizers"));
    json_t *twice = local_finalizer_add(f, LOCAL_TEARDOWN_FINALIZER);
    CHECK_INT_EQ(json_array_size(json_object_get(json_object_get(twice, "metadata"), "finalizers")),
                 1);
    json_decref(o);
    json_decref(f);
    json_decref(n);
    json_decref(r);
    json_decref(twice);
}

static off_t size_of(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? st.st_size : -1;
}

TEST(logs_are_capped_and_rotated)
{
    char dir[] = "/tmp/test-local-logs-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], old[140];
    snprintf(path, sizeof(path), "%s/sandboxd.log", dir);
    snprintf(old, sizeof(old), "%s.1", path);
    local_logs *l = NULL;
    CHECK_INT_EQ(local_logs_start(4096, &l), 0);
    int p[2];
    CHECK_INT_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_INT_EQ(local_logs_add(l, "u1", p[0], path, true), 0);
    char buf[1000];
    memset(buf, 'x', sizeof(buf));
    for (int i = 0; i < 50; i++)
        CHECK_INT_EQ(write(p[1], buf, sizeof(buf)), (int)sizeof(buf));
    CHECK_INT_EQ(write(p[1], "END\n", 4), 4);
    close(p[1]); /* EOF: the collector closes its end */
    for (int i = 0; i < 200; i++) {
        char tail[4] = {0};
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        off_t s = size_of(path);
        if (fd >= 0 && s >= 4 && pread(fd, tail, 4, s - 4) == 4 && memcmp(tail, "END\n", 4) == 0) {
            close(fd);
            break;
        }
        if (fd >= 0)
            close(fd);
        usleep(10000);
    }
    CHECK(size_of(path) > 0 && size_of(path) <= 4096);
    CHECK(size_of(old) <= 4096); /* the previous generation (absent or empty after one big read) */
    local_logs_stop(l);
    CHECK_INT_EQ(fs_rm_rf(dir), 0); /* the logs and their .times records */
}

/* Waits until path holds exactly want. */
static bool file_becomes(const char *path, const char *want)
{
    for (int i = 0; i < 300; i++) {
        char buf[64] = {0};
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n >= 0 && strcmp(buf, want) == 0)
            return true;
        usleep(10000);
    }
    return false;
}

TEST(logs_keep_two_pipes_of_one_sandbox)
{
    /* sandboxd's output and the main process's: same uid, two files, neither replaces the
     * other. */
    char dir[] = "/tmp/test-local-logs-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char a[128], b[128];
    snprintf(a, sizeof(a), "%s/sandboxd.log", dir);
    snprintf(b, sizeof(b), "%s/main.log", dir);
    local_logs *l = NULL;
    CHECK_INT_EQ(local_logs_start(0, &l), 0);
    int pa[2], pb[2];
    CHECK_INT_EQ(pipe2(pa, O_CLOEXEC), 0);
    CHECK_INT_EQ(pipe2(pb, O_CLOEXEC), 0);
    CHECK_INT_EQ(local_logs_add(l, "u1", pa[0], a, true), 0);
    CHECK_INT_EQ(local_logs_add(l, "u1", pb[0], b, true), 0);
    CHECK_INT_EQ(write(pa[1], "daemon\n", 7), 7);
    CHECK_INT_EQ(write(pb[1], "main\n", 5), 5);
    CHECK(file_becomes(a, "daemon\n"));
    CHECK(file_becomes(b, "main\n"));
    close(pa[1]);
    close(pb[1]);
    local_logs_stop(l);
    CHECK_INT_EQ(fs_rm_rf(dir), 0); /* the logs and their .times records */
}

TEST(adopt_refuses_what_is_not_a_pipe)
{
    local_logs *l = NULL;
    CHECK_INT_EQ(local_logs_start(0, &l), 0);
    /* This process's stdout under the test runner: a file or a pipe; a file must be refused. */
    struct stat st;
    if (fstat(1, &st) == 0 && !S_ISFIFO(st.st_mode))
        CHECK_INT_EQ(local_logs_adopt(l, "u", getpid(), 1, "/tmp/never-written.log"), -ENOTSUP);
    local_logs_stop(l);
    CHECK(access("/tmp/never-written.log", F_OK) < 0);
}
