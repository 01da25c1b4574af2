/* User namespace ranges: parsing, the machine-wide registry (a private file here), slots and
 * their persistence. Needs root (the staging mount point under /run/asb); skipped otherwise. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "local/fs/local-fs.h"
#include "local/container/local-idmap.h"
#include "unit.h"

static char base[64];
static char registry[128];

static void setup(void)
{
    if (base[0])
        return;
    snprintf(base, sizeof(base), "/tmp/test-idmap-XXXXXX");
    if (!mkdtemp(base))
        abort();
    snprintf(registry, sizeof(registry), "%s/registry", base);
}

static char *state(const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", base, name) < 0 || mkdir_p(p, 0700) < 0)
        abort();
    return p;
}

static int open_map(const char *dir, const char *range, local_idmap **ret, char **ret_error)
{
    local_idmap_options o = {.state_dir = dir, .range = range, .registry = registry};
    return local_idmap_open(&o, ret, ret_error);
}

static bool keep_none(const char *uid, void *payload)
{
    (void)uid;
    (void)payload;
    return false;
}

TEST(parse_range)
{
    uint32_t s, c;
    CHECK_INT_EQ(local_idmap_parse_range("2147483648:65536", &s, &c), 0);
    CHECK(s == 2147483648u && c == 65536);
    CHECK_INT_EQ(local_idmap_parse_range("0x80000000:0x20000", &s, &c), 0);
    CHECK(s == 0x80000000u && c == 0x20000);
    CHECK_INT_EQ(local_idmap_parse_range("0:65536", &s, &c), -EINVAL);          /* root */
    CHECK_INT_EQ(local_idmap_parse_range("100000:1000", &s, &c), -EINVAL);      /* < a slot */
    CHECK_INT_EQ(local_idmap_parse_range("100000:65537", &s, &c), -EINVAL);     /* not slots */
    CHECK_INT_EQ(local_idmap_parse_range("4294901760:65536", &s, &c), -EINVAL); /* 2^32-1 */
    CHECK_INT_EQ(local_idmap_parse_range("-1:65536", &s, &c), -EINVAL);
    CHECK_INT_EQ(local_idmap_parse_range("12345", &s, &c), -EINVAL);
    CHECK_INT_EQ(local_idmap_parse_range("", &s, &c), -EINVAL);
}

TEST(off_is_no_map)
{
    setup();
    _cleanup_free_ char *a = state("off"), *err = NULL;
    local_idmap *m = (local_idmap *)1;
    CHECK_INT_EQ(open_map(a, "off", &m, &err), 0);
    CHECK(m == NULL);
}

TEST(ranges_slots_and_registry)
{
    if (geteuid() != 0) {
        printf("# skipped: needs root\n");
        return;
    }
    setup();
    _cleanup_free_ char *a = state("a"), *b = state("b"), *c = state("c"), *err = NULL;
    local_idmap *ma = NULL, *mb = NULL, *mc = NULL;
    uint32_t as, ac, bs, bc, s1, s2, s3;
    CHECK_INT_EQ(open_map(a, NULL, &ma, &err), 0);
    CHECK_INT_EQ(open_map(b, NULL, &mb, &err), 0);
    if (!ma || !mb)
        return;
    local_idmap_range(ma, &as, &ac);
    local_idmap_range(mb, &bs, &bc);
    CHECK(as >= LOCAL_IDMAP_AUTO_START && ac == LOCAL_IDMAP_AUTO_COUNT);
    CHECK((uint64_t)as + ac <= bs || (uint64_t)bs + bc <= as); /* disjoint */

    /* An explicit range over a live server's is refused, naming its state directory. */
    char spec[64];
    snprintf(spec, sizeof(spec), "%u:%u", as + LOCAL_IDMAP_SLOT, LOCAL_IDMAP_SLOT);
    CHECK_INT_EQ(open_map(c, spec, &mc, &err), -EEXIST);
    CHECK(mc == NULL && err && strstr(err, "overlaps the range") && strstr(err, a));
    free(err);
    err = NULL;
    /* So is a host account's (root's group, daemon, ... are in 1..65536). */
    CHECK_INT_EQ(open_map(c, "1:65536", &mc, &err), -EEXIST);
    CHECK(err && strstr(err, "overlaps a host account"));
    free(err);
    err = NULL;

    /* Slots: distinct, recorded, reused once released. */
    CHECK_INT_EQ(local_idmap_get(ma, "uid-1", &s1), 0);
    CHECK_INT_EQ(local_idmap_get(ma, "uid-2", &s2), 0);
    CHECK(s1 != s2 && s1 >= as && s2 + LOCAL_IDMAP_SLOT <= (uint64_t)as + ac);
    CHECK_INT_EQ(local_idmap_get(ma, "uid-1", &s3), 0);
    CHECK(s3 == s1);
    CHECK_INT_EQ(local_idmap_get(ma, "../x", &s3), -EINVAL);
    local_idmap_release(ma, "uid-1");
    CHECK_INT_EQ(local_idmap_lookup(ma, "uid-1", &s3), -ENOENT);
    CHECK_INT_EQ(local_idmap_get(ma, "uid-3", &s3), 0);
    CHECK(s3 == s1);

    /* A restart keeps the range and the slots; the entry of a state directory with slots
     * outlives its process. */
    local_idmap_free(ma);
    ma = NULL;
    CHECK_INT_EQ(open_map(c, spec, &mc, &err), -EEXIST); /* a still holds slots */
    free(err);
    err = NULL;
    CHECK_INT_EQ(open_map(a, NULL, &ma, &err), 0);
    uint32_t as2, ac2;
    local_idmap_range(ma, &as2, &ac2);
    CHECK(as2 == as && ac2 == ac);
    CHECK_INT_EQ(local_idmap_lookup(ma, "uid-2", &s3), 0);
    CHECK(s3 == s2);
    /* A different range that leaves the slots out is refused. */
    local_idmap_free(ma);
    ma = NULL;
    snprintf(spec, sizeof(spec), "%u:%u", bs + bc + LOCAL_IDMAP_SLOT * 16, LOCAL_IDMAP_SLOT);
    CHECK_INT_EQ(open_map(a, spec, &ma, &err), -EEXIST);
    CHECK(err && strstr(err, "outside the user namespace range"));
    free(err);
    err = NULL;

    /* Once its slots are gone, a state directory's range is free again. */
    CHECK_INT_EQ(open_map(a, NULL, &ma, &err), 0);
    local_idmap_gc(ma, keep_none, NULL);
    CHECK_INT_EQ(local_idmap_lookup(ma, "uid-2", &s3), -ENOENT);
    local_idmap_free(ma);
    snprintf(spec, sizeof(spec), "%u:%u", as, LOCAL_IDMAP_SLOT);
    CHECK_INT_EQ(open_map(c, spec, &mc, &err), 0);
    local_idmap_free(mc);
    mc = NULL;

    /* A dead server whose state directory is gone is a stale entry. */
    FILE *f = fopen(registry, "a");
    if (f) {
        fprintf(f, "%u %u 4194303 1 %s/gone\n", 3221225472u, 65536u * 4, base);
        fclose(f);
    }
    CHECK_INT_EQ(open_map(c, "3221225472:65536", &mc, &err), 0);
    local_idmap_free(mc);
    local_idmap_free(mb);
    fs_rm_rf(base);
}
