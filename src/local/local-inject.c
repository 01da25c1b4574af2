/* sandboxd injection. See local-inject.h. */
#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "local/local-fs.h"
#include "local/local-inject.h"
#include "local/local-runtime-oci.h"

#define LOADER_NAME "ld-linux-x86-64.so.2"

/* One ldd line: "\tlibx.so.1 => /path/libx.so.1 (0x...)" or "\t/lib64/ld-linux... (0x...)".
 * Copies the library under the name the binary asks for. */
static int copy_ldd_line(char *line, const char *libdir, bool *ret_loader)
{
    char *arrow = strstr(line, " => ");
    char *name = line, *path;
    while (*name == ' ' || *name == '\t')
        name++;
    if (arrow) {
        *arrow = '\0';
        path = arrow + 4;
    } else {
        path = name;
    }
    char *sp = strchr(path, ' ');
    if (sp)
        *sp = '\0';
    if (path[0] != '/')
        return 0; /* linux-vdso.so.1, "not found", ... */
    if (!arrow) {
        name = basename(path);
        if (strncmp(name, "ld-linux", 8) == 0) {
            name = (char *)LOADER_NAME;
            *ret_loader = true;
        }
    }
    _cleanup_free_ char *dst = NULL;
    if (asprintf(&dst, "%s/%s", libdir, name) < 0)
        return -ENOMEM;
    return fs_copy_file(path, dst, 0755);
}

int local_inject_prepare(const char *sandboxd, const char *dir, char **ret_error)
{
    *ret_error = NULL;
    _cleanup_free_ char *bindir = NULL, *libdir = NULL, *bin = NULL, *out = NULL;
    if (asprintf(&bindir, "%s/bin", dir) < 0 || asprintf(&libdir, "%s/lib", dir) < 0 ||
        asprintf(&bin, "%s/sandboxd", bindir) < 0)
        return -ENOMEM;
    int r = fs_mkdir_p(dir, 0755);
    if (r == 0)
        r = fs_mkdir_p(bindir, 0755);
    if (r == 0)
        r = fs_mkdir_p(libdir, 0755);
    if (r == 0)
        r = fs_copy_file(sandboxd, bin, 0755);
    if (r < 0) {
        if (asprintf(ret_error, "cannot install %s into %s: %s", sandboxd, bindir, strerror(-r)) <
            0)
            *ret_error = NULL;
        return r;
    }
    char *argv[] = {(char *)"ldd", (char *)sandboxd, NULL};
    r = local_spawn_capture(argv, &out);
    if (r != 0) {
        if (asprintf(ret_error, "ldd %s failed (%d): %s", sandboxd, r, out ? out : "") < 0)
            *ret_error = NULL;
        return r < 0 ? r : -EIO;
    }
    bool loader = false;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        r = copy_ldd_line(line, libdir, &loader);
        if (r < 0) {
            if (asprintf(ret_error, "cannot copy a library of %s: %s", sandboxd, strerror(-r)) <
                0)
                *ret_error = NULL;
            return r;
        }
    }
    if (!loader) {
        if (asprintf(ret_error, "%s: no " LOADER_NAME " in its ldd output", sandboxd) < 0)
            *ret_error = NULL;
        return -ENOEXEC;
    }
    return 0;
}
