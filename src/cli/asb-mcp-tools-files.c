/* `asb mcp` file tools: upload_file, download_file, list_files, file_exists. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/base64.h"
#include "cli/asb-mcp-tools.h"

static const char *arg_path(const json_t *args, tool_out *out, const char *def)
{
    const char *p = mcp_arg_str(args, "path", def);
    if (!p)
        out->error = strdup("path is required (relative to the sandbox root)");
    return p;
}

void mcp_tool_upload(mcp_call *call, const json_t *args, tool_out *out)
{
    const char *path = arg_path(args, out, NULL);
    json_t *content = json_object_get(args, "content");
    bool binary = json_is_true(json_object_get(args, "binary"));
    if (!path)
        return;
    if (!json_is_string(content)) {
        out->error = strdup("content is required (a string; base64 when binary is true)");
        return;
    }
    const char *data = json_string_value(content);
    size_t len = json_string_length(content);
    _cleanup_free_ char *decoded = NULL;
    if (binary) {
        if (base64_decode(data, len, &decoded, &len) < 0) {
            out->error = strdup("content is not valid base64 (binary is true)");
            return;
        }
        data = decoded;
    }
    _cleanup_(asb_sandbox_freep) asb_sandbox *sb = mcp_tool_open_sandbox(args, out);
    if (!sb)
        return;
    if (asb_sandbox_file_write_buffer(sb, path, 0, data, len) != ASB_OK) {
        out->error = mcp_file_error("upload_file", path);
        return;
    }
    out->structured = json_pack("{s:s,s:I}", "path", path, "bytes_written", (json_int_t)len);
}

void mcp_tool_download(mcp_call *call, const json_t *args, tool_out *out)
{
    const char *path = arg_path(args, out, NULL);
    bool binary = json_is_true(json_object_get(args, "binary"));
    if (!path)
        return;
    _cleanup_(asb_sandbox_freep) asb_sandbox *sb = mcp_tool_open_sandbox(args, out);
    if (!sb)
        return;
    char *data = NULL;
    size_t len = 0;
    if (asb_sandbox_file_read_buffer(&data, &len, sb, path) != ASB_OK) {
        out->error = mcp_file_error("download_file", path);
        return;
    }
    json_t *content = NULL;
    if (binary) {
        char *b64 = NULL;
        if (base64_encode(data, len, &b64, NULL) == 0)
            content = json_string(b64);
        free(b64);
    } else {
        content = json_stringn(data, len);
        if (!content) {
            asb_free(data);
            out->error = mcp_textf("download_file %s: the file is not UTF-8 text; call it again "
                                   "with binary: true to get base64",
                                   path);
            return;
        }
    }
    asb_free(data);
    if (content)
        out->structured = json_pack("{s:s,s:o,s:I,s:b}", "path", path, "content", content, "size",
                                    (json_int_t)len, "binary", binary);
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
    const char *path = arg_path(args, out, "/");
    long long max = mcp_arg_int(args, "max_entries", 1000, 1, 10000);
    if (max < 0) {
        out->error = strdup("max_entries must be an integer from 1 to 10000");
        return;
    }
    _cleanup_(asb_sandbox_freep) asb_sandbox *sb = mcp_tool_open_sandbox(args, out);
    if (!sb)
        return;
    asb_sandbox_file_entry *ents = NULL;
    size_t n = 0;
    if (asb_sandbox_file_list(&ents, &n, sb, path) != ASB_OK) {
        const asb_error *e = asb_error_last();
        out->error = e && e->code == ASB_EBADREQUEST
                         ? mcp_textf("list_files %s: not a directory (use download_file to read "
                                     "a file)",
                                     path)
                         : mcp_file_error("list_files", path);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n && i < (size_t)max; i++) {
        char when[32];
        format_time(when, ents[i].modified_at);
        json_t *name = mcp_json_text(ents[i].name, strlen(ents[i].name));
        json_t *e = name ? json_pack("{s:o,s:I,s:s,s:s}", "name", name, "size",
                                     (json_int_t)ents[i].size, "type",
                                     ents[i].type == ASB_SANDBOX_DIRECTORY ? "directory" : "file",
                                     "mod_time", when)
                         : NULL;
        if (!e || json_array_append_new(arr, e) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    if (arr)
        out->structured = json_pack("{s:s,s:o,s:I,s:b}", "path", path, "entries", arr,
                                    "total_entries", (json_int_t)n, "truncated",
                                    n > (size_t)max);
    asb_sandbox_file_entries_free(ents, n);
}

void mcp_tool_exists(mcp_call *call, const json_t *args, tool_out *out)
{
    const char *path = arg_path(args, out, NULL);
    if (!path)
        return;
    _cleanup_(asb_sandbox_freep) asb_sandbox *sb = mcp_tool_open_sandbox(args, out);
    if (!sb)
        return;
    int exists = 0;
    if (asb_sandbox_file_exists(&exists, sb, path) != ASB_OK) {
        out->error = mcp_file_error("file_exists", path);
        return;
    }
    out->structured = json_pack("{s:s,s:b}", "path", path, "exists", exists);
}
