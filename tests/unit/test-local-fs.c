/* local/fs/local-fs: fs_each_entry(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local/fs/local-fs.h"
#include "unit.h"

typedef struct seen {
    int calls;
    int stop_at; /* the call that returns 7, 0 = none */
    char names;  /* a bit per entry seen: 1 a, 2 .hidden, 4 sub */
} seen;

static int visit(const char *path, void *payload)
{
    seen *s = payload;
    s->calls++;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    s->names |= strcmp(base, "a") == 0         ? 1
                : strcmp(base, ".hidden") == 0 ? 2
                : strcmp(base, "sub") == 0     ? 4
                                               : 8;
    return s->calls == s->stop_at ? 7 : 0;
}

/* Every entry once, hidden ones too, never "." or ".."; the first non-zero result stops the
 * walk and is returned; a missing directory is its open error. */
TEST(each_entry_visits_every_entry_and_stops_on_a_result)
{
    char dir[] = "/tmp/test-local-fs-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p[256];
    snprintf(p, sizeof(p), "%s/a", dir);
    CHECK_INT_EQ(fs_write_file(p, "x", 0644), 0);
    snprintf(p, sizeof(p), "%s/.hidden", dir);
    CHECK_INT_EQ(fs_write_file(p, "y", 0644), 0);
    snprintf(p, sizeof(p), "%s/sub", dir);
    CHECK_INT_EQ(mkdir(p, 0755), 0);

    seen all = {0};
    CHECK_INT_EQ(fs_each_entry(dir, visit, &all), 0);
    CHECK_INT_EQ(all.calls, 3);
    CHECK_INT_EQ(all.names, 7);

    seen two = {.stop_at = 2};
    CHECK_INT_EQ(fs_each_entry(dir, visit, &two), 7);
    CHECK_INT_EQ(two.calls, 2);

    snprintf(p, sizeof(p), "%s/missing", dir);
    seen none = {0};
    CHECK_INT_EQ(fs_each_entry(p, visit, &none), -ENOENT);
    CHECK_INT_EQ(none.calls, 0);

    CHECK_INT_EQ(fs_rm_rf(dir), 0);
    CHECK(access(dir, F_OK) < 0);
}
