/* Directory helpers (fs-util.h). */
#include "basic/fs-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basic/macro.h"

int mkdir_parents(const char *path)
{
    _cleanup_free_ char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    return 0;
}

int mkdir_p(const char *path, mode_t mode)
{
    int r = mkdir_parents(path);
    if (r < 0)
        return r;
    if (mkdir(path, mode) < 0)
        return errno == EEXIST ? 0 : -errno;
    return chmod(path, mode) < 0 ? -errno : 0;
}
