/* `asb mcp` file tools: upload_file, download_file, list_files, file_exists. Each runs its
 * libasb call through mcp_tool_with_sandbox (cached handle, one retry on a fresh one). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/base64.h"
#include "mcp/asb-mcp-tools.h"

/* One file operation: its inputs, and what it read. */
typedef struct file_op {
    const char *path;
    const char *data;
    size_t len;
    char *read;
    size_t read_len;
    asb_sandbox_file_entry *entries;
    size_t count;
    int exists;
} file_op;

static int op_write(asb_sandbox *sb, void *payload)
{
    file_op *f = payload;
    return asb_sandbox_file_write_buffer(sb, f->path, 0, f->data, f->len);
}

static int op_read(asb_sandbox *sb, void *payload)
{
    file_op *f = payload;
    return asb_sandbox_file_read_buffer(&f->read, &f->read_len, sb, f->path);
}

static int op_list(asb_sandbox *sb, void *payload)
{
    file_op *f = payload;
    return asb_sandbox_file_list(&f->entries, &f->count, sb, f->path);
}

static int op_exists(asb_sandbox *sb, void *payload)
{
    file_op *f = payload;
    return asb_sandbox_file_exists(&f->exists, sb, f->path);
}

/* Runs op; false with out->error set when it failed. */
static bool run(const json_t *args, tool_out *out, mcp_sandbox_op op, file_op *f, const char *tool)
{
    int r = mcp_tool_with_sandbox(args, out, op, f);
    if (out->error)
        return false;
    if (r != ASB_OK) {
        const asb_error *e = asb_error_last();
        out->error = op == op_list && e && e->code == ASB_EBADREQUEST
                         ? strdup_printf("list_files %s: not a directory (use download_file to read "
                                     "a file)",
                                     f->path)
                         : mcp_file_error(tool, f->path);
        return false;
    }
    return true;
}

static const char *arg_path(const json_t *args, tool_out *out, const char *def)
{
    const char *p = mcp_arg_str(args, "path", def);
    if (!p)
        out->error = strdup("path is required (relative to the sandbox root)");
    return p;
}

void mcp_tool_upload(mcp_call *call, const json_t *args, tool_out *out)
{
    file_op f = {.path = arg_path(args, out, NULL)};
    json_t *content = json_object_get(args, "content");
    bool binary = json_is_true(json_object_get(args, "binary"));
    if (!f.path)
        return;
    if (!json_is_string(content)) {
        out->error = strdup("content is required (a string; base64 when binary is true)");
        return;
    }
    f.data = json_string_value(content);
    f.len = json_string_length(content);
    _cleanup_free_ char *decoded = NULL;
    if (binary) {
        if (base64_decode(f.data, f.len, &decoded, &f.len) < 0) {
            out->error = strdup("content is not valid base64 (binary is true)");
            return;
        }
        f.data = decoded;
    }
    if (run(args, out, op_write, &f, "upload_file"))
        out->structured =
            json_pack("{s:s,s:I}", "path", f.path, "bytes_written", (json_int_t)f.len);
}

void mcp_tool_download(mcp_call *call, const json_t *args, tool_out *out)
{
    file_op f = {.path = arg_path(args, out, NULL)};
    bool binary = json_is_true(json_object_get(args, "binary"));
    if (!f.path || !run(args, out, op_read, &f, "download_file"))
        return;
    json_t *content = NULL;
    if (binary) {
        char *b64 = NULL;
        if (base64_encode(f.read, f.read_len, &b64, NULL) == 0)
            content = json_string(b64);
        free(b64);
    } else {
        content = json_stringn(f.read, f.read_len);
        if (!content)
            out->error = strdup_printf("download_file %s: the file is not UTF-8 text; call it again "
                                   "with binary: true to get base64",
                                   f.path);
    }
    asb_free(f.read);
    if (content)
        out->structured = json_pack("{s:s,s:o,s:I,s:b}", "path", f.path, "content", content, "size",
                                    (json_int_t)f.read_len, "binary", binary);
}

static void format_time(char out[32], int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void mcp_tool_list(mcp_call *call, const json_t *args, tool_out *out)
{
    file_op f = {.path = arg_path(args, out, "/")};
    long long max = mcp_arg_int(args, "max_entries", 1000, 1, 10000);
    if (max < 0) {
        out->error = strdup("max_entries must be an integer from 1 to 10000");
        return;
    }
    if (!run(args, out, op_list, &f, "list_files"))
        return;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < f.count && i < (size_t)max; i++) {
        char when[32];
        format_time(when, f.entries[i].modified_at);
        json_t *name = mcp_json_text(f.entries[i].name, strlen(f.entries[i].name));
        json_t *e =
            name ? json_pack("{s:o,s:I,s:s,s:s}", "name", name, "size",
                             (json_int_t)f.entries[i].size, "type",
                             f.entries[i].type == ASB_SANDBOX_DIRECTORY ? "directory" : "file",
                             "mod_time", when)
                 : NULL;
        if (!e || json_array_append_new(arr, e) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    if (arr)
        out->structured =
            json_pack("{s:s,s:o,s:I,s:b}", "path", f.path, "entries", arr, "total_entries",
                      (json_int_t)f.count, "truncated", f.count > (size_t)max);
    asb_sandbox_file_entries_free(f.entries, f.count);
}

void mcp_tool_exists(mcp_call *call, const json_t *args, tool_out *out)
{
    file_op f = {.path = arg_path(args, out, NULL)};
    if (f.path && run(args, out, op_exists, &f, "file_exists"))
        out->structured = json_pack("{s:s,s:b}", "path", f.path, "exists", f.exists);
}
