/* Raw request path -> Go mux cleaning -> percent-decoding -> confine_resolve on a temp root with
 * escaping and in-root symlinks. Whatever the input, a resolution must stay under the root. */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/confine.h"
#include "local/fs/local-fs.h"
#include "sandboxd/sandboxd-rest-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *root_path, *top;
static int root_fd = -1;

/* The temp root goes away with the process (corpus replays in `make test` too). */
static void cleanup(void)
{
    if (top)
        fs_rm_rf(top);
}

static void setup(void)
{
    char tmpl[] = "/tmp/fuzz-url-path-XXXXXX";
    char *d = mkdtemp(tmpl);
    if (!d || !(top = strdup(d)))
        abort();
    atexit(cleanup);
    char *real = realpath(d, NULL);
    if (!real)
        abort();
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/root", real);
    mkdir(p, 0755);
    root_path = realpath(p, NULL);
    snprintf(p, sizeof(p), "%s/outside", real);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/a", root_path);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/a/f.txt", root_path);
    close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    char t[PATH_MAX];
    snprintf(p, sizeof(p), "%s/out", root_path);
    snprintf(t, sizeof(t), "%s/outside", real);
    if (symlink(t, p) < 0) { /* escaping link */
    }
    snprintf(p, sizeof(p), "%s/in", root_path);
    if (symlink("a", p) < 0) {
    }
    snprintf(p, sizeof(p), "%s/abs", root_path);
    snprintf(t, sizeof(t), "%s/a", root_path);
    if (symlink(t, p) < 0) {
    }
    snprintf(p, sizeof(p), "%s/up", root_path);
    if (symlink("../root/a", p) < 0) {
    }
    snprintf(p, sizeof(p), "%s/loop", root_path);
    if (symlink("loop", p) < 0) {
    }
    free(real);
    root_fd = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        abort();
}

static void check_under_root(int fd)
{
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n < 0)
        abort();
    target[n] = '\0';
    size_t rl = strlen(root_path);
    if (strncmp(target, root_path, rl) != 0 || (target[rl] != '\0' && target[rl] != '/'))
        abort(); /* escaped the root */
}

/* Whether a '/'-separated path has a "." or ".." component. */
static bool has_dot_component(const char *p)
{
    while (*p) {
        size_t n = strcspn(p, "/");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return true;
        p += n;
        if (*p == '/')
            p++;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (root_fd < 0)
        setup();
    char *raw = strndup((const char *)data, size);
    if (!raw)
        return 0;
    char *q = strchr(raw, '?');
    if (q) {
        *q++ = '\0';
        char *v = NULL;
        if (rest_query_get(q, "mode", &v) == 0 && v) {
            mode_t m;
            rest_parse_mode(v, &m);
        }
        free(v);
    }
    if (rest_mux_valid_escapes(raw, strlen(raw))) {
        char *clean = rest_mux_clean_path(raw);
        if (clean && strncmp(clean, "/v1/files/", 10) == 0) {
            char *dec = NULL;
            size_t len = 0;
            if (rest_unescape(clean + 10, strlen(clean + 10), false, &dec, &len) == 0 &&
                !memchr(dec, '\0', len)) {
                confined c = CONFINED_INIT;
                if (confine_resolve(root_fd, root_path, dec, &c) == 0) {
                    check_under_root(c.dir_fd);
                    if (strchr(c.name, '/') || has_dot_component(c.missing))
                        abort();
                    confined_done(&c);
                }
                json_buf b = {0};
                json_buf_string(&b, dec, len);
                json_buf_done(&b);
            }
            free(dec);
        }
        free(clean);
    }
    free(raw);
    return 0;
}
