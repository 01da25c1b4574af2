/* TEMPORARY: minimal confine_open_dir until src/basic/confine.c lands on main. Deleted then. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/confine.h"
#include "shared/status.h"

int confine_open_dir(int root_fd, const char *root_path, const char *path, int *ret_fd)
{
    size_t rl = strlen(root_path);
    if (strncmp(path, root_path, rl) == 0 && (path[rl] == '/' || path[rl] == '\0'))
        path += rl;
    while (*path == '/')
        path++;
    if (!*path)
        path = ".";
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    /* RESOLVE_BENEATH rejects ".." escapes with EXDEV. */
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
    if (fd < 0)
        return -errno;
    *ret_fd = (int)fd;
    return 0;
}
