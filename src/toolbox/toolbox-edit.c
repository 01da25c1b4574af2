/* replace (spec/AGENT.md §2.5): exact literal replacement. old_string must match exactly once
 * unless allow_multiple; an empty old_string on a missing file creates it. The Oct-2025 form
 * expected_replacements is accepted too (the count must then match exactly). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basic/macro.h"
#include "toolbox/toolbox.h"

static size_t count_occurrences(const char *hay, size_t hay_len, const char *needle)
{
    size_t n = 0, nl = strlen(needle);
    const char *p = hay, *end = hay + hay_len;
    while (p + nl <= end) {
        const char *m = memmem(p, (size_t)(end - p), needle, nl);
        if (!m)
            break;
        n++;
        p = m + nl;
    }
    return n;
}

static char *replace_all(const char *hay, size_t hay_len, const char *old, const char *new,
                         size_t *ret_len)
{
    buf b = BUF_INIT;
    toolbox_buf_add(&b, "", 0);
    size_t ol = strlen(old), nl = strlen(new);
    const char *p = hay, *end = hay + hay_len;
    for (;;) {
        const char *m = memmem(p, (size_t)(end - p), old, ol);
        if (!m)
            break;
        toolbox_buf_add(&b, p, (size_t)(m - p));
        toolbox_buf_add(&b, new, nl);
        p = m + ol;
    }
    toolbox_buf_add(&b, p, (size_t)(end - p));
    *ret_len = b.len;
    return toolbox_buf_steal(&b);
}

int toolbox_replace(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    const char *file_path, *instruction, *old, *new;
    bool allow_multiple, has_expected;
    long long expected = 1;
    if (toolbox_arg_string(args, "file_path", true, &file_path, res) < 0 ||
        toolbox_arg_string(args, "instruction", true, &instruction, res) < 0 ||
        toolbox_arg_string(args, "old_string", true, &old, res) < 0 ||
        toolbox_arg_string(args, "new_string", true, &new, res) < 0 ||
        toolbox_arg_bool(args, "allow_multiple", false, &allow_multiple, res) < 0 ||
        toolbox_arg_int(args, "expected_replacements", 1, &expected, &has_expected, res) < 0)
        return 0;
    if (!*file_path)
        return toolbox_invalid(res, "The 'file_path' parameter must be non-empty.");
    _cleanup_free_ char *abs = NULL;
    int inside = toolbox_resolve_inside(ctx, file_path, &abs, res);
    if (inside <= 0)
        return inside;

    struct stat st;
    if (stat(abs, &st) < 0) {
        if (errno != ENOENT)
            return toolbox_fail(res, "read_content_failure",
                                "Failed to read content of existing file: %s", abs);
        if (*old) {
            toolbox_fail(res, "file_not_found", "File not found: %s", abs);
            toolbox_set_display(res, "Error: File not found. Cannot apply edit. Use an empty "
                                     "old_string to create a new file.");
            return 0;
        }
        int r = toolbox_write_content(abs, new, strlen(new));
        if (r < 0)
            return toolbox_write_error(res, abs, r);
        toolbox_set_llm(res, "Created new file: %s with provided content.", abs);
        return 0;
    }
    if (S_ISDIR(st.st_mode))
        return toolbox_invalid(res, "Path is a directory, not a file: %s", abs);
    if (!*old) {
        toolbox_fail(res, "attempt_to_create_existing_file",
                     "File already exists, cannot create: %s", abs);
        toolbox_set_display(res, "Error: Failed to edit. Attempted to create a file that "
                                 "already exists.");
        return 0;
    }
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    if (toolbox_read_all(abs, &data, &len) < 0)
        return toolbox_fail(res, "read_content_failure",
                            "Failed to read content of existing file: %s", abs);
    size_t n = count_occurrences(data, len, old);
    if (n == 0) {
        toolbox_fail(res, "edit_no_occurrence_found",
                     "Failed to edit, 0 occurrences found for old_string in %s. No edits made. "
                     "The exact text in old_string was not found. Ensure you're not escaping "
                     "content incorrectly and check whitespace, indentation, and context. Use "
                     "read_file tool to verify.",
                     abs);
        toolbox_set_display(res, "Error: Failed to edit, could not find the string to replace.");
        return 0;
    }
    if (has_expected && (size_t)expected != n) {
        toolbox_fail(res, "edit_expected_occurrence_mismatch",
                     "Failed to edit, Expected %lld %s but found %zu for old_string in file: %s",
                     expected, expected == 1 ? "occurrence" : "occurrences", n, abs);
        toolbox_set_display(res, "Error: Failed to edit, expected %lld %s but found %zu.", expected,
                            expected == 1 ? "occurrence" : "occurrences", n);
        return 0;
    }
    if (!has_expected && n > 1 && !allow_multiple) {
        toolbox_fail(res, "edit_expected_occurrence_mismatch",
                     "Failed to edit, Expected 1 occurrence but found %zu for old_string in "
                     "file: %s. If you intended to replace multiple occurrences, set "
                     "'allow_multiple' to true.",
                     n, abs);
        toolbox_set_display(res, "Error: Failed to edit, expected 1 occurrence but found %zu.", n);
        return 0;
    }
    if (strcmp(old, new) == 0) {
        toolbox_fail(res, "edit_no_change",
                     "No changes to apply. The old_string and new_string are identical in file: "
                     "%s",
                     abs);
        toolbox_set_display(res, "No changes to apply. The old_string and new_string are "
                                 "identical.");
        return 0;
    }
    size_t out_len = 0;
    _cleanup_free_ char *out = replace_all(data, len, old, new, &out_len);
    int r = toolbox_write_content(abs, out, out_len);
    if (r < 0)
        return toolbox_write_error(res, abs, r);
    toolbox_set_llm(res, "Successfully modified file: %s (%zu replacements).", abs, n);
    return 0;
}
