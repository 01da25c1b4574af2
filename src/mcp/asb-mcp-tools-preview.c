/* `asb mcp` tool get_preview_url: a browser link to a server the agent started in its sandbox
 * (asb_preview_url, docs/router.md "Preview hosts"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/asb-mcp-tools.h"

void mcp_tool_preview(mcp_call *call, const json_t *args, tool_out *out)
{
    const char *name = mcp_arg_str(args, "sandbox_claim_name", NULL), *ns = mcp_arg_ns(args);
    long long port = mcp_arg_int(args, "port", -1, 1, 65535);
    long long ttl = mcp_arg_int(args, "ttl_seconds", 86400, 1, 366LL * 86400);
    if (!name || port < 0 || ttl < 0) {
        api_error_set_errno(&out->error, -EINVAL,
                            "sandbox_claim_name and port (1-65535) are required; ttl_seconds is 1 "
                            "second to a year");
        return;
    }
    _cleanup_(asb_client_freep) asb_client *cl = NULL;
    if (mcp_client_new(&cl, &out->error) < 0)
        return;
    _cleanup_free_ char *sn = NULL;
    if (mcp_sandbox_resolve(cl, ns, name, &sn, &out->error) < 0)
        return;
    char *url = NULL;
    if (asb_preview_url(&url, cl, ns, sn, (unsigned)port, (long)ttl) != ASB_OK) {
        mcp_error_take(&out->error, -EIO, mcp_error_text(name));
        return;
    }
    out->structured = json_pack("{s:s,s:I}", "url", url, "port", (json_int_t)port);
    asb_free(url);
}
