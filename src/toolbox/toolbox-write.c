/* write_file (spec/AGENT.md §2.4): whole-file writes, parent directories created. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/io-util.h"
#include "basic/macro.h"
#include "toolbox/toolbox.h"

int toolbox_write_content(const char *abs, const char *data, size_t len)
{
    int r = mkdir_parents(abs);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open(abs, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0)
        return -errno;
    r = loop_write(fd, data, len);
    if (r < 0)
        return r;
    if (close(TAKE_FD(fd)) < 0)
        return -errno;
    return 0;
}

int toolbox_write_error(toolbox_result *res, const char *abs, int r)
{
    switch (-r) {
    case EACCES:
    case EPERM:
    case EROFS:
        return toolbox_fail(res, "permission_denied", "Permission denied writing to file: %s (%s)",
                            abs,
                            r == -EROFS   ? "EROFS"
                            : r == -EPERM ? "EPERM"
                                          : "EACCES");
    case ENOSPC:
        return toolbox_fail(res, "no_space_left", "No space left on device: %s (ENOSPC)", abs);
    case EISDIR:
        return toolbox_fail(res, "target_is_directory",
                            "Target is a directory, not a file: %s (EISDIR)", abs);
    default:
        return toolbox_fail(res, "file_write_failure", "Error writing to file '%s': %s (%s)", abs,
                            strerror(-r), strerrorname_np(-r) ? strerrorname_np(-r) : "EIO");
    }
}

int toolbox_write_file(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    const char *file_path, *content;
    if (toolbox_arg_string(args, "file_path", true, &file_path, res) < 0 ||
        toolbox_arg_string(args, "content", true, &content, res) < 0)
        return 0;
    if (!*file_path)
        return toolbox_invalid(res, "Missing or empty \"file_path\"");
    bool inside;
    _cleanup_free_ char *abs = toolbox_resolve(ctx, file_path, &inside);
    if (!abs)
        return -ENOMEM;
    if (!inside)
        return toolbox_outside(ctx, res, abs);
    struct stat st;
    bool exists = lstat(abs, &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        return toolbox_invalid(res, "Path is a directory, not a file: %s", abs);
    int r = toolbox_write_content(abs, content, strlen(content));
    if (r < 0)
        return toolbox_write_error(res, abs, r);
    if (exists)
        toolbox_set_llm(res, "Successfully overwrote file: %s.", abs);
    else
        toolbox_set_llm(res, "Successfully created and wrote to new file: %s.", abs);
    return 0;
}
