/* local/reconcile/local-names: the state directory's names of Ready sandboxes. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local/fs/local-fs.h"
#include "local/reconcile/local-names.h"
#include "unit.h"

static void make_run(const char *state, const char *uid)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/run", state);
    (void)mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/run/%s", state, uid);
    CHECK_INT_EQ(mkdir(p, 0700), 0);
}

/* A state directory with run/<a> and run/<b>. */
static void new_state(char *state, const char *a, const char *b)
{
    CHECK(mkdtemp(state) != NULL);
    make_run(state, a);
    make_run(state, b);
}

static bool link_is(const char *state, const char *ns, const char *name, const char *want)
{
    char p[256], t[256];
    snprintf(p, sizeof(p), "%s/names/%s/%s", state, ns, name);
    ssize_t n = readlink(p, t, sizeof(t) - 1);
    if (n < 0)
        return want == NULL;
    t[n] = '\0';
    return want && strcmp(t, want) == 0;
}

/* A bind points the name at its uid and a later Sandbox of the name takes it over; an unbind of
 * the older uid then leaves the newer one's link alone. */
TEST(bind_replaces_and_unbind_removes_only_its_own_uid)
{
    char state[] = "/tmp/test-local-names-XXXXXX";
    new_state(state, "u1", "u2");
    CHECK_INT_EQ(local_names_bind(state, "default", "vx", "u1"), 0);
    CHECK(link_is(state, "default", "vx", "../../run/u1"));
    CHECK_INT_EQ(local_names_bind(state, "default", "vx", "u1"), 0); /* again: nothing changes */
    CHECK(link_is(state, "default", "vx", "../../run/u1"));
    char sock[256];
    snprintf(sock, sizeof(sock), "%s/names/default/vx", state);
    struct stat st;
    CHECK_INT_EQ(stat(sock, &st), 0); /* the link leads to run/u1 */
    CHECK(S_ISDIR(st.st_mode));

    CHECK_INT_EQ(local_names_bind(state, "default", "vx", "u2"), 0);
    CHECK(link_is(state, "default", "vx", "../../run/u2"));
    local_names_unbind(state, "default", "vx", "u1");
    CHECK(link_is(state, "default", "vx", "../../run/u2"));
    local_names_unbind(state, "default", "vx", "u2");
    CHECK(link_is(state, "default", "vx", NULL));
    local_names_unbind(state, "default", "vx", "u2"); /* nothing there: nothing happens */
    CHECK_INT_EQ(fs_rm_rf(state), 0);
}

/* Names that are not one DNS path component, and uids that would leave run/, are refused. */
TEST(bind_refuses_what_is_not_a_name)
{
    char state[] = "/tmp/test-local-names-XXXXXX";
    CHECK(mkdtemp(state) != NULL);
    CHECK_INT_EQ(local_names_bind(state, "default", "../x", "u1"), -EINVAL);
    CHECK_INT_EQ(local_names_bind(state, "default", "a/b", "u1"), -EINVAL);
    CHECK_INT_EQ(local_names_bind(state, "..", "x", "u1"), -EINVAL);
    CHECK_INT_EQ(local_names_bind(state, "default", "Upper", "u1"), -EINVAL);
    CHECK_INT_EQ(local_names_bind(state, "default", "x", "../u1"), -EINVAL);
    CHECK_INT_EQ(local_names_bind(state, "default", "x", ".."), -EINVAL);
    CHECK_INT_EQ(local_names_bind(state, "default", "x", ""), -EINVAL);
    char p[256];
    snprintf(p, sizeof(p), "%s/names", state);
    CHECK(access(p, F_OK) < 0); /* nothing was made */
    CHECK_INT_EQ(fs_rm_rf(state), 0);
}

/* A prune removes the links whose run/<uid> is gone, what an interrupted bind left, and the
 * namespaces left empty; it keeps the rest. */
TEST(prune_removes_dangling_links_and_empty_namespaces)
{
    char state[] = "/tmp/test-local-names-XXXXXX";
    new_state(state, "live", "gone");
    CHECK_INT_EQ(local_names_bind(state, "default", "a", "live"), 0);
    CHECK_INT_EQ(local_names_bind(state, "default", "b", "gone"), 0);
    CHECK_INT_EQ(local_names_bind(state, "other", "c", "gone"), 0);
    char p[256];
    snprintf(p, sizeof(p), "%s/names/default/.a.new", state);
    CHECK_INT_EQ(symlink("../../run/live", p), 0);
    snprintf(p, sizeof(p), "%s/run/gone", state);
    CHECK_INT_EQ(rmdir(p), 0);

    local_names_prune(state);
    CHECK(link_is(state, "default", "a", "../../run/live"));
    CHECK(link_is(state, "default", "b", NULL));
    snprintf(p, sizeof(p), "%s/names/default/.a.new", state);
    CHECK(access(p, F_OK) < 0 && errno == ENOENT);
    snprintf(p, sizeof(p), "%s/names/other", state);
    CHECK(access(p, F_OK) < 0); /* empty: removed */
    local_names_prune(state); /* again: nothing more to do */
    CHECK(link_is(state, "default", "a", "../../run/live"));
    CHECK_INT_EQ(fs_rm_rf(state), 0);
}
