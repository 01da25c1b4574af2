/* basic/fs-util: self_exe_dir(), fs_rm_rf(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "unit.h"

/* The directory of this test binary: it holds test-fs-util, and has no trailing slash. */
TEST(self_exe_dir_is_where_this_binary_is)
{
    char *dir = NULL;
    CHECK_INT_EQ(self_exe_dir(&dir), 0);
    CHECK(dir != NULL);
    if (!dir)
        return;
    CHECK(dir[0] == '/');
    size_t n = strlen(dir);
    CHECK(n > 1 && dir[n - 1] != '/');
    char *self = NULL;
    CHECK(asprintf(&self, "%s/test-fs-util", dir) > 0);
    CHECK(self && access(self, X_OK) == 0);
    free(self);
    free(dir);
}

/* A tree with a nested directory, a file and a symlink out of it goes; the symlink's target
 * stays; a missing path and a plain file are success. */
TEST(fs_rm_rf_removes_a_tree_and_not_what_links_point_to)
{
    char base[] = "/tmp/test-fs-util-XXXXXX";
    CHECK(mkdtemp(base) != NULL);
    char dir[300], p[400], outside[300];
    snprintf(dir, sizeof(dir), "%s/tree", base);
    snprintf(outside, sizeof(outside), "%s/kept", base);
    CHECK_INT_EQ(mkdir_p(dir, 0755), 0);
    snprintf(p, sizeof(p), "%s/a/b", dir);
    CHECK_INT_EQ(mkdir_p(p, 0755), 0);
    FILE *f = fopen(outside, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    snprintf(p, sizeof(p), "%s/a/b/link", dir);
    CHECK_INT_EQ(symlink(outside, p), 0);
    snprintf(p, sizeof(p), "%s/a/file", dir);
    f = fopen(p, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    CHECK_INT_EQ(fs_rm_rf(dir), 0);
    CHECK(access(dir, F_OK) < 0 && errno == ENOENT);
    CHECK_INT_EQ(access(outside, F_OK), 0);
    CHECK_INT_EQ(fs_rm_rf(dir), 0);     /* missing: success */
    CHECK_INT_EQ(fs_rm_rf(outside), 0); /* a plain file */
    CHECK(access(outside, F_OK) < 0);
    CHECK_INT_EQ(fs_rm_rf(base), 0);
    CHECK(access(base, F_OK) < 0);
}

/* A path under a regular file is not a directory: the errno comes back negative. */
TEST(fs_rm_rf_returns_a_negative_errno)
{
    CHECK_INT_EQ(fs_rm_rf("/proc/self/exe/x"), -ENOTDIR);
}
