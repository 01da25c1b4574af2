/* GET /metrics of the API server: Prometheus text format 0.0.4 (local-metrics.h), behind the same
 * bearer token as every other path. */
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "local/apiserver/local-apiserver-internal.h"
#include "local/metrics/local-metrics.h"

enum MHD_Result apiserver_metrics(local_apiserver *srv, struct MHD_Connection *c,
                                  const char *method)
{
    if (strcmp(method, "GET") != 0)
        return reply_status(c, KUBE_REASON_METHOD_NOT_ALLOWED, NULL, NULL,
                            "the server does not allow this method on the requested resource");
    /* The gauges are read from the store at scrape time, so they never drift from it. */
    _cleanup_(json_decrefp) json_t *pools = NULL, *sandboxes = NULL;
    uint64_t rv;
    char *text = NULL;
    size_t n = 0;
    if (local_store_list(srv->store, api_kind_by_name("SandboxWarmPool"), NULL, &pools, &rv) < 0 ||
        local_store_list(srv->store, api_kind_by_name("Sandbox"), NULL, &sandboxes, &rv) < 0 ||
        local_metrics_render(pools, sandboxes, &text, &n) < 0)
        return reply_status(c, KUBE_REASON_INTERNAL_ERROR, NULL, NULL, "cannot render the metrics");
    struct MHD_Response *r = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}
