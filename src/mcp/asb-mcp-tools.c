/* `asb mcp` tools: sandbox lifecycle (create/delete), commands (with progress and cancellation)
 * and files. Tool failures are CallToolResults with isError and a message an agent can act on;
 * only an unknown tool or arguments of the wrong shape are JSON-RPC errors. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/base64.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "mcp/asb-mcp-schemas.h"
#include "mcp/asb-mcp-tools.h"

const char *mcp_arg_str(const json_t *args, const char *key, const char *def)
{
    const char *s = json_string_value(json_object_get(args, key));
    return s && *s ? s : def;
}

const char *mcp_arg_ns(const json_t *args)
{
    return mcp_arg_str(args, "namespace", cli_namespace()); /* -n, else "default" */
}

long long mcp_arg_int(const json_t *args, const char *key, long long def, long long min,
                      long long max)
{
    json_t *v = json_object_get(args, key);
    if (!v || json_is_null(v))
        return def;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return -EINVAL;
    return json_integer_value(v);
}

int mcp_tool_with_sandbox(const json_t *args, tool_out *out, mcp_sandbox_op op, void *payload)
{
    const char *name = mcp_arg_str(args, "sandbox_claim_name", NULL);
    if (!name) {
        api_error_set_errno(&out->error, -EINVAL, "%s",
                            "sandbox_claim_name is required: the name create_sandbox returned");
        return ASB_ENOTFOUND;
    }
    return mcp_with_sandbox(mcp_arg_ns(args), name, op, payload, &out->error);
}

char *mcp_file_error(const char *op, const char *path)
{
    const asb_error *e = asb_error_last();
    int code = e ? e->code : ASB_ERROR;
    const char *msg = e && e->message && *e->message ? e->message : asb_strerror(code);
    if (code == ASB_ENOTFOUND)
        return strdup_printf("%s %s: no such file or directory in the sandbox", op, path);
    if (code == ASB_EFORBIDDEN)
        return strdup_printf("%s %s: the path escapes the sandbox root or is not permitted (%s); use "
                         "a path inside the sandbox",
                         op, path, msg);
    return strdup_printf("%s %s: %s", op, path, msg);
}

static const struct tool {
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema;
    const char *output_schema;
    void (*run)(mcp_call *call, const json_t *args, tool_out *out);
    bool read_only, destructive;
} tools[] = {
    {"create_sandbox", "Create sandbox",
     "Claim a new sandbox from a warm pool and wait until it is ready. Returns the claim name "
     "the other tools take.",
     MCP_SCHEMA_CREATE_IN, MCP_SCHEMA_CREATE_OUT, mcp_tool_create, false, false},
    {"delete_sandbox", "Delete sandbox",
     "Delete a sandbox claim (and its sandbox), or a Sandbox by name.", MCP_SCHEMA_DELETE_IN,
     MCP_SCHEMA_DELETE_OUT, mcp_tool_delete, false, true},
    {"execute_command", "Execute command",
     "Run a shell command line in a sandbox (sh -c) and return its exit code, stdout and stderr. "
     "Output is streamed as progress notifications while it runs.",
     MCP_SCHEMA_EXEC_IN, MCP_SCHEMA_EXEC_OUT, mcp_tool_execute, false, true},
    {"upload_file", "Upload file",
     "Write a file in a sandbox (parents created). Set binary to send base64 content.",
     MCP_SCHEMA_UPLOAD_IN, MCP_SCHEMA_UPLOAD_OUT, mcp_tool_upload, false, true},
    {"download_file", "Download file",
     "Read a file of a sandbox. Set binary to get base64 content (needed for non-UTF-8 files).",
     MCP_SCHEMA_DOWNLOAD_IN, MCP_SCHEMA_DOWNLOAD_OUT, mcp_tool_download, true, false},
    {"list_files", "List files", "List a directory of a sandbox (name, size, type, mod_time).",
     MCP_SCHEMA_LIST_IN, MCP_SCHEMA_LIST_OUT, mcp_tool_list, true, false},
    {"file_exists", "File exists", "Tell whether a path exists in a sandbox.", MCP_SCHEMA_EXISTS_IN,
     MCP_SCHEMA_EXISTS_OUT, mcp_tool_exists, true, false},
    {"snapshot_sandbox", "Snapshot sandbox",
     "Capture a sandbox's files (workspace and volumes; not its processes) as a named snapshot, "
     "a checkpoint to fork from later. The sandbox keeps running; it pauses only briefly.",
     MCP_SCHEMA_SNAPSHOT_IN, MCP_SCHEMA_SNAPSHOT_OUT, mcp_tool_snapshot, false, false},
    {"fork_sandbox", "Fork sandbox",
     "Start count new sandboxes whose files are a copy of a sandbox's (snapshotted now) or of an "
     "earlier snapshot, and wait until they are ready. Returns their names for the other tools.",
     MCP_SCHEMA_FORK_IN, MCP_SCHEMA_FORK_OUT, mcp_tool_fork, false, false},
    {"get_preview_url", "Get preview URL",
     "Return a URL a person opens in a browser to see a server (web app, notebook, dev server) "
     "listening on a port inside a sandbox. The link is signed and admits that port only.",
     MCP_SCHEMA_PREVIEW_IN, MCP_SCHEMA_PREVIEW_OUT, mcp_tool_preview, true, false},
};

json_t *mcp_tools_list(const mcp_session *session)
{
    bool structured = mcp_version_at_least(session, "2025-06-18");
    json_t *list = json_array();
    if (!list)
        return NULL;
    for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
        json_t *in = json_loads(tools[i].input_schema, 0, NULL);
        json_t *t = json_pack("{s:s,s:s,s:s,s:o,s:{s:b,s:b,s:b}}", "name", tools[i].name, "title",
                              tools[i].title, "description", tools[i].description, "inputSchema",
                              in, "annotations", "readOnlyHint", tools[i].read_only,
                              "destructiveHint", tools[i].destructive, "openWorldHint", 0);
        if (!t || json_array_append_new(list, t) < 0) {
            json_decref(list);
            return NULL;
        }
        if (structured) {
            json_t *o = json_loads(tools[i].output_schema, 0, NULL);
            if (!o || json_object_set_new(t, "outputSchema", o) < 0) {
                json_decref(list);
                return NULL;
            }
        }
    }
    return json_pack("{s:o}", "tools", list);
}

static json_t *tool_result(const mcp_session *session, tool_out *out)
{
    if (tool_failed(out) || !out->structured) {
        json_t *r =
            json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text",
                      out->error.message ? out->error.message : "out of memory", "isError", 1);
        api_error_clear(&out->error);
        json_decref(out->structured);
        return r;
    }
    char *text = json_dumps(out->structured, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_t *r = text ? json_pack("{s:[{s:s,s:s}]}", "content", "type", "text", "text", text) : NULL;
    free(text);
    if (r && mcp_version_at_least(session, "2025-06-18"))
        json_object_set(r, "structuredContent", out->structured);
    json_decref(out->structured);
    return r;
}

json_t *mcp_tools_call(mcp_call *call, const json_t *params, int *ret_code, api_error *err)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments");
    if (!name) {
        *ret_code = JSONRPC_ERR_INVALID_PARAMS;
        api_error_set_errno(err, -EINVAL, "tools/call needs params.name");
        return NULL;
    }
    if (args && !json_is_object(args)) {
        *ret_code = JSONRPC_ERR_INVALID_PARAMS;
        api_error_set_errno(err, -EINVAL, "tools/call params.arguments must be an object");
        return NULL;
    }
    for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
        if (strcmp(tools[i].name, name) != 0)
            continue;
        json_t *empty = args ? NULL : json_object();
        tool_out out = {0};
        tools[i].run(call, args ? args : empty, &out);
        json_decref(empty);
        return tool_result(call->session, &out);
    }
    *ret_code = JSONRPC_ERR_INVALID_PARAMS;
    api_error_set_errno(err, -EINVAL, "unknown tool (see tools/list)");
    return NULL;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return s[0] ? 1 : 0; /* jansson strings may hold NUL only through json_stringn */
    size_t len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
        return 0; /* overlong, surrogate, beyond U+10FFFF */
    return len;
}

json_t *mcp_json_text(const char *data, size_t n)
{
    json_t *s = json_stringn(data, n);
    if (s)
        return s;
    _cleanup_buf_ buf b = BUF_INIT;
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(p + i, n - i);
        int r = k ? buf_append(&b, p + i, k) : buf_append(&b, "\xef\xbf\xbd", 3);
        if (r < 0)
            return NULL;
        i += k ? k : 1;
    }
    return json_stringn(b.data ? b.data : "", b.len);
}
