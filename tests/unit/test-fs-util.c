/* basic/fs-util: self_exe_dir(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
