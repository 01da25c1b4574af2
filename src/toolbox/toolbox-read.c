/* read_file (spec/AGENT.md §2.3): one file, 2000 lines by default, start_line/end_line 1-based
 * inclusive, truncation notice naming the next start_line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basic/macro.h"
#include "toolbox/toolbox.h"

int toolbox_read_file(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    const char *file_path;
    long long start_line = 1, end_line = 0;
    bool has_start, has_end;
    if (toolbox_arg_string(args, "file_path", true, &file_path, res) < 0 ||
        toolbox_arg_int(args, "start_line", 1, &start_line, &has_start, res) < 0 ||
        toolbox_arg_int(args, "end_line", 1, &end_line, &has_end, res) < 0)
        return 0;
    if (!*file_path || !file_path[strspn(file_path, " \t\n")])
        return toolbox_invalid(res, "The 'file_path' parameter must be non-empty.");
    if (has_start && has_end && end_line < start_line)
        return toolbox_invalid(res,
                               "end_line (%lld) must be greater than or equal to "
                               "start_line (%lld)",
                               end_line, start_line);
    _cleanup_free_ char *abs = NULL;
    int inside = toolbox_resolve_inside(ctx, file_path, &abs, res);
    if (inside <= 0)
        return inside;
    _cleanup_free_ char *rel = toolbox_relative(ctx->root, abs);

    struct stat st;
    if (stat(abs, &st) < 0) {
        toolbox_fail(res, "file_not_found",
                     "Could not read file because no file was found at the specified path.");
        toolbox_set_display(res, "File not found: %s", abs);
        return 0;
    }
    if (S_ISDIR(st.st_mode)) {
        toolbox_fail(res, "target_is_directory",
                     "Could not read file because the provided path is a directory, not a file.");
        toolbox_set_display(res, "Path is a directory: %s", abs);
        return 0;
    }
    if (st.st_size > (off_t)TOOLBOX_MAX_FILE_SIZE) {
        toolbox_fail(res, "file_too_large", "File size exceeds the 20MB limit.");
        return 0;
    }
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    int r = toolbox_read_all(abs, &data, &len);
    if (r == -EFBIG)
        return toolbox_fail(res, "file_too_large", "File size exceeds the 20MB limit.");
    if (r < 0)
        return toolbox_fail(res, "read_content_failure", "Error reading file %s: %s", abs,
                            strerror(-r));
    if (toolbox_is_binary(abs, data, len)) {
        toolbox_set_llm(res, "Cannot display content of binary file: %s", rel);
        toolbox_set_display(res, "Skipped binary file: %s", rel);
        return 0;
    }
    size_t start = (size_t)(start_line - 1);
    size_t end = has_end ? (size_t)end_line : start + TOOLBOX_MAX_LINES;
    toolbox_text t;
    toolbox_text_slice(data, len, start, end, &t);
    if (t.truncated) {
        toolbox_set_llm(res,
                        "\nIMPORTANT: The file content has been truncated.\n"
                        "Status: Showing lines %zu-%zu of %zu total lines.\n"
                        "Action: To read more of the file, you can use the 'start_line' and "
                        "'end_line' parameters in a subsequent 'read_file' call. For example, to "
                        "read the next section of the file, use start_line: %zu.\n\n"
                        "--- FILE CONTENT (truncated) ---\n%s",
                        t.first, t.last, t.total, t.last + 1, t.content);
        toolbox_set_display(res, "Read lines %zu-%zu of %zu from %s", t.first, t.last, t.total,
                            rel);
    } else {
        res->llm = TAKE_PTR(t.content);
        toolbox_set_display(res, "%s", "");
    }
    free(t.content);
    return 0;
}
