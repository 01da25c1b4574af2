/* sandboxd injection. See local-inject.h. */
#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "local/fs/local-fs.h"
#include "local/container/local-inject.h"
#include "local/runtime/local-runtime-oci.h"

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

/* Copies binary into dir/bin/<name> and its libraries (from ldd) into dir/lib. */
static int install_binary(const char *binary, const char *name, const char *dir, char **ret_error)
{
    _cleanup_free_ char *bindir = NULL, *libdir = NULL, *bin = NULL, *out = NULL;
    if (asprintf(&bindir, "%s/bin", dir) < 0 || asprintf(&libdir, "%s/lib", dir) < 0 ||
        asprintf(&bin, "%s/%s", bindir, name) < 0)
        return -ENOMEM;
    int r = mkdir_p(dir, 0755);
    if (r == 0)
        r = mkdir_p(bindir, 0755);
    if (r == 0)
        r = mkdir_p(libdir, 0755);
    if (r == 0)
        r = fs_copy_file(binary, bin, 0755);
    if (r < 0) {
        if (asprintf(ret_error, "cannot install %s into %s: %s", binary, bindir, strerror(-r)) < 0)
            *ret_error = NULL;
        return r;
    }
    char *argv[] = {(char *)"ldd", (char *)binary, NULL};
    r = local_spawn_capture(argv, &out);
    if (r != 0) {
        if (asprintf(ret_error, "ldd %s failed (%d): %s", binary, r, out ? out : "") < 0)
            *ret_error = NULL;
        return r < 0 ? r : -EIO;
    }
    bool loader = false;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        r = copy_ldd_line(line, libdir, &loader);
        if (r < 0) {
            if (asprintf(ret_error, "cannot copy a library of %s: %s", binary, strerror(-r)) < 0)
                *ret_error = NULL;
            return r;
        }
    }
    if (!loader) {
        if (asprintf(ret_error, "%s: no " LOADER_NAME " in its ldd output", binary) < 0)
            *ret_error = NULL;
        return -ENOEXEC;
    }
    return 0;
}

char *local_inject_toolbox_path(const char *sandboxd)
{
    const char *e = getenv("ASB_TOOLBOX");
    if (e && *e)
        return strdup(e);
    const char *slash = sandboxd ? strrchr(sandboxd, '/') : NULL;
    char *p = NULL;
    if (slash) {
        if (asprintf(&p, "%.*s/" LOCAL_INJECT_TOOLBOX, (int)(slash - sandboxd), sandboxd) < 0)
            return NULL;
    } else if (!(p = strdup(LOCAL_INJECT_TOOLBOX))) {
        return NULL;
    }
    return p;
}

int local_inject_prepare(const char *sandboxd, const char *dir, char **ret_error)
{
    *ret_error = NULL;
    int r = install_binary(sandboxd, "sandboxd", dir, ret_error);
    if (r < 0)
        return r;
    /* The geminicli toolset's helper: optional unless named explicitly with ASB_TOOLBOX. */
    _cleanup_free_ char *toolbox = local_inject_toolbox_path(sandboxd);
    if (!toolbox)
        return -ENOMEM;
    const char *e = getenv("ASB_TOOLBOX");
    if (access(toolbox, X_OK) < 0 && !(e && *e))
        return 0;
    return install_binary(toolbox, LOCAL_INJECT_TOOLBOX, dir, ret_error);
}
