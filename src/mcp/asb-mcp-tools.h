/* `asb mcp` tools: what the tool files share (argument access, results, error text). */
#pragma once

#include <jansson.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "mcp/asb-mcp.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(asb_client *, asb_client_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(asb_sandbox *, asb_sandbox_free);

/* What a tool produced: structured output on success, or why it failed (error.code is not
 * STATUS_OK; the message is what the agent reads). Start it zeroed. */
typedef struct tool_out {
    json_t *structured;
    api_error error;
} tool_out;

static inline bool tool_failed(const tool_out *out)
{
    return out->error.code != STATUS_OK;
}

/* A non-empty string argument, else def. */
const char *mcp_arg_str(const json_t *args, const char *key, const char *def);
/* `namespace`, default the -n of `asb mcp`, else "default". */
const char *mcp_arg_ns(const json_t *args);
/* An integer argument, def when absent or null; -EINVAL when not an integer in [min, max]. */
long long mcp_arg_int(const json_t *args, const char *key, long long def, long long min,
                      long long max);
/* mcp_with_sandbox() on the sandbox of `sandbox_claim_name`/`namespace`. When the sandbox cannot
 * be opened (or the name is missing) out->error is filled and ASB_ENOTFOUND returned; otherwise
 * op's result is returned and out is untouched. */
int mcp_tool_with_sandbox(const json_t *args, tool_out *out, mcp_sandbox_op op, void *payload);
/* A file operation's failure in words (missing file, path outside the root, ...). Owned. */
char *mcp_file_error(const char *op, const char *path);

void mcp_tool_create(mcp_call *call, const json_t *args, tool_out *out);
void mcp_tool_delete(mcp_call *call, const json_t *args, tool_out *out);
void mcp_tool_execute(mcp_call *call, const json_t *args, tool_out *out);
void mcp_tool_upload(mcp_call *call, const json_t *args, tool_out *out);
void mcp_tool_download(mcp_call *call, const json_t *args, tool_out *out);
void mcp_tool_list(mcp_call *call, const json_t *args, tool_out *out);
void mcp_tool_exists(mcp_call *call, const json_t *args, tool_out *out);
void mcp_tool_snapshot(mcp_call *call, const json_t *args, tool_out *out);
void mcp_tool_fork(mcp_call *call, const json_t *args, tool_out *out);
void mcp_tool_preview(mcp_call *call, const json_t *args, tool_out *out);

/* A JSON string of n bytes of output, invalid UTF-8 replaced by U+FFFD (jansson takes only valid
 * UTF-8). New reference; NULL when out of memory. */
json_t *mcp_json_text(const char *data, size_t n);
