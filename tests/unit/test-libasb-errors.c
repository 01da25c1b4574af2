/* libasb's public boundary: an internal failure (a negative errno from libc or src/basic, or a
 * helper of libasb's own) reaches the caller as a documented asb_error_code, never as the errno
 * (ASB_ESERVER is -12, which is also -ENOMEM; -20 and -21 are -ENOTDIR and -EISDIR). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asb/asb.h"
#include "libasb/libasb-internal.h"
#include "shared/status.h"
#include "unit.h"

TEST(error_from_maps_errno_to_public_codes)
{
    CHECK_INT_EQ(asbi_error_from(0, NULL), ASB_OK);
    CHECK_INT_EQ(asbi_error_from(-ENOMEM, NULL), ASB_ENOMEM);
    CHECK(asb_error_last() != NULL);
    if (!asb_error_last())
        return;
    CHECK_INT_EQ(asb_error_last()->code, ASB_ENOMEM);
    CHECK_STR_EQ(asb_error_last()->message, "out of memory");
    CHECK_STR_EQ(asb_error_last()->reason, "");
    CHECK_INT_EQ(asbi_error_from(-EIO, NULL), ASB_ERROR);
    CHECK_STR_EQ(asb_error_last()->message, strerror(EIO));
    /* errnos whose values are also public codes map by meaning, not by number */
    CHECK_INT_EQ(asbi_error_from(-EISDIR, NULL), ASB_ERROR);     /* -21: not ASB_ETERMINAL */
    CHECK_INT_EQ(asbi_error_from(-ENOTDIR, NULL), ASB_ERROR);    /* -20: not ASB_ECLAIMFAILED */
    CHECK_INT_EQ(asbi_error_from(-EPERM, NULL), ASB_EFORBIDDEN); /* -1: not ASB_ERROR */
    CHECK_INT_EQ(asbi_error_from(-ENOENT, NULL), ASB_ENOTFOUND); /* -2: not ASB_ENOMEM */
    CHECK_INT_EQ(asbi_error_from(-EINVAL, NULL), ASB_EINVAL);    /* -22 */
    CHECK_INT_EQ(asbi_error_from(-ETIMEDOUT, NULL), ASB_ETIMEOUT);
    CHECK_INT_EQ(asbi_error_from(-ECANCELED, NULL), ASB_ECANCELLED);
    CHECK_INT_EQ(asbi_error_from(-ECONNREFUSED, NULL), ASB_ECONNECT);
    CHECK_INT_EQ(asbi_error_from(-EBADMSG, NULL), ASB_EPROTOCOL);
}

/* The words come from the api_error the internal code filled. */
TEST(error_from_keeps_the_message)
{
    api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(api_error_set_errno(&e, -EACCES, "cannot open %s: %s", "/x", strerror(EACCES)),
                 -EACCES);
    CHECK_INT_EQ(asbi_error_from(api_error_errno(&e), &e), ASB_EFORBIDDEN);
    CHECK_STR_EQ(asb_error_last()->message, "cannot open /x: Permission denied");
    CHECK_INT_EQ(asb_error_last()->http_status, 0);
    api_error_clear(&e);
}

static void rm_tree(const char *dir)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/state/server", dir);
    rmdir(p);
    snprintf(p, sizeof(p), "%s/state", dir);
    rmdir(p);
    snprintf(p, sizeof(p), "%s/file", dir);
    unlink(p);
    rmdir(dir);
}

/* Internal failures reading the state directory: read() gives -EISDIR (a directory where the
 * server file goes), open() -ENOTDIR (a state "directory" that is a file); both are -21 and
 * -20, the values of ASB_ETERMINAL and ASB_ECLAIMFAILED, and asb_client_new() answers the
 * documented ASB_ECONFIG for both. */
TEST(public_calls_never_return_an_errno)
{
    char dir[] = "/tmp/test-libasb-errors-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    unsetenv("ASB_SERVER");
    unsetenv("ASB_TOKEN");
    char state[300], file[300], server[320];
    snprintf(state, sizeof(state), "%s/state", dir);
    snprintf(file, sizeof(file), "%s/file", dir);
    snprintf(server, sizeof(server), "%s/server", state);
    CHECK_INT_EQ(mkdir(state, 0755), 0);
    CHECK_INT_EQ(mkdir(server, 0755), 0);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);

    asb_client *c = NULL;
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.state_dir = state;
    CHECK_INT_EQ(asb_client_new(&c, &o), ASB_ECONFIG);
    CHECK(c == NULL);
    CHECK(strstr(asb_error_last()->message, strerror(EISDIR)) != NULL);
    o.state_dir = file;
    CHECK_INT_EQ(asb_client_new(&c, &o), ASB_ECONFIG);
    CHECK(strstr(asb_error_last()->message, strerror(ENOTDIR)) != NULL);

    /* The YAML loader fails internally with -EBADMSG; the caller sees ASB_EMANIFEST. */
    char *out = NULL;
    static const char bad[] = "a: [1, 2\n";
    CHECK_INT_EQ(asb_manifest_parse(&out, bad, sizeof(bad) - 1), ASB_EMANIFEST);
    CHECK(out == NULL);
    CHECK(strncmp(asb_error_last()->message, "yaml: line ", 11) == 0);
    rm_tree(dir);
    CHECK(access(dir, F_OK) < 0);
}
