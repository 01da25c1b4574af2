/* Running nft (libnftables) for local-net.c and local-net-prepared.c: the error text it gives
 * back. (Links, addresses and routes: rtnetlink, local-net-link.c.) */
#include <errno.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>

#include "local/net/local-net-internal.h"

int net_nft_run(struct nft_ctx *ctx, const char *cmd, char **ret_error)
{
    if (nft_run_cmd_from_buffer(ctx, cmd) == 0)
        return 0;
    const char *e = nft_ctx_get_error_buffer(ctx);
    if (ret_error && asprintf(ret_error, "nft: %s", e && *e ? e : "failed") < 0)
        *ret_error = NULL;
    return -EIO;
}
