/* The router's answer texts (router-errors.c): each kind's words, HTTP status, gRPC status and
 * errno, and the {"detail"} rendering. */
#include <errno.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "router/router-core.h"
#include "router/router-errors.h"
#include "unit.h"

TEST(backend_failures)
{
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(router_error_backend(&e, -EIO, "box"), -EIO);
    CHECK_STR_EQ(e.message, "Could not connect to the backend sandbox: box");
    CHECK_INT_EQ(router_error_http(&e), 502);
    CHECK_INT_EQ(status_grpc(e.code), 14);
    CHECK_INT_EQ(api_error_errno(&e), -EIO);
    CHECK_INT_EQ(router_error_backend(&e, -ETIMEDOUT, "box"), -ETIMEDOUT);
    CHECK_STR_EQ(e.message, "Timed out waiting for the backend sandbox: box");
    CHECK_INT_EQ(router_error_http(&e), 504);
    CHECK_INT_EQ(status_grpc(e.code), 4);
    CHECK_INT_EQ(router_error_control_plane(&e, -EIO, "box"), -EIO);
    CHECK_STR_EQ(e.message, "Could not reach the control plane for sandbox box");
    CHECK_INT_EQ(router_error_http(&e), 502);
    CHECK_INT_EQ(router_error_resume(&e, -EIO, "box"), -EIO);
    CHECK_STR_EQ(e.message, "Could not resume the backend sandbox: box");
    CHECK_INT_EQ(router_error_http(&e), 502);
}

TEST(request_refusals)
{
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(router_error_not_found(&e, "ns", "box"), -ENOENT);
    CHECK_STR_EQ(e.message, "Sandbox \"box\" not found in namespace \"ns\".");
    CHECK_INT_EQ(router_error_http(&e), 404);
    CHECK_INT_EQ(status_grpc(e.code), 5);
    CHECK_INT_EQ(router_error_unauthorized(&e), -EACCES);
    CHECK_STR_EQ(e.message, "Missing or invalid Authorization header.");
    CHECK_INT_EQ(router_error_http(&e), 401);
    CHECK_INT_EQ(status_grpc(e.code), 16);
    CHECK_INT_EQ(router_error_upgrade(&e), -EOPNOTSUPP);
    CHECK_STR_EQ(e.message, "Protocol upgrades are not supported by this router.");
    CHECK_INT_EQ(router_error_http(&e), 501);
    CHECK_INT_EQ(router_error_legacy_too_large(&e), -E2BIG);
    CHECK_STR_EQ(e.message, "Request body too large for the legacy layer.");
    CHECK_INT_EQ(router_error_http(&e), 413);
    CHECK_INT_EQ(router_error_malformed(&e), -EINVAL);
    CHECK_STR_EQ(e.message, "Malformed HTTP request.");
    CHECK_INT_EQ(router_error_http(&e), 400);
    CHECK_INT_EQ(router_error_internal(&e, -ENOMEM), -ENOMEM);
    CHECK_STR_EQ(e.message, "An internal error occurred in the proxy.");
    CHECK_INT_EQ(router_error_http(&e), 500);
    CHECK_INT_EQ(status_grpc(e.code), 13);
}

TEST(detail_body)
{
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    router_error_not_found(&e, "ns", "a\"b");
    _cleanup_free_ char *body = router_error_body(&e);
    CHECK_STR_EQ(body,
                 "{\"detail\":\"Sandbox \\\"a\\\"b\\\" not found in namespace \\\"ns\\\".\"}");
    _cleanup_buf_ buf out = BUF_INIT;
    CHECK_INT_EQ(router_reply_error(&out, &e, true, true), 0);
    CHECK(strncmp(out.data, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n", 56) ==
          0);
    CHECK(strstr(out.data, "Connection: close") == NULL);
    CHECK(strstr(out.data, "\r\n\r\n{") == NULL); /* HEAD: no body */
}
