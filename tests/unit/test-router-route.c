#include <errno.h>

#include "basic/strv.h"
#include "router/router-internal.h"
#include "router/router-legacy-parse.h"
#include "unit.h"

static int route(const char *path, const char *id, const char *ns, const char *port, const char *ct,
                 router_route *out, api_error *err)
{
    router_request_info in = {"GET", path, id, ns, port, NULL, ct, NULL, NULL};
    return router_route_request(&in, out, err);
}

TEST(dispatch)
{
    router_route r;
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(route("/v1/files/x", "box", NULL, NULL, NULL, &r, &e), 0);
    CHECK_INT_EQ(r.kind, ROUTER_KIND_REST);
    CHECK(strcmp(r.ns, "default") == 0);
    CHECK_INT_EQ(route("/execute", "box", "", NULL, NULL, &r, &e), 0);
    CHECK_INT_EQ(r.kind, ROUTER_KIND_LEGACY);
    CHECK_INT_EQ(route("/process.v1.ProcessService/Execute", "box", "ns1", NULL,
                       "application/grpc+proto", &r, &e),
                 0);
    CHECK_INT_EQ(r.kind, ROUTER_KIND_GRPC);
    CHECK(strcmp(r.ns, "ns1") == 0);
    CHECK_INT_EQ(route("/v1/files/x", "box", NULL, "8888", NULL, &r, &e), 0);
    CHECK_INT_EQ(r.kind, ROUTER_KIND_LEGACY);
    CHECK_INT_EQ(route("/x", "box", NULL, "9090", NULL, &r, &e), 0);
    CHECK_INT_EQ(r.kind, ROUTER_KIND_GRPC);
    CHECK_INT_EQ(route("/x", "box", NULL, "8080", NULL, &r, &e), 0);
    CHECK_INT_EQ(r.kind, ROUTER_KIND_REST);
    CHECK_INT_EQ(route("/x", "box", NULL, "3000", NULL, &r, &e), 0);
    CHECK_INT_EQ(r.kind, ROUTER_KIND_PORT);
    CHECK_INT_EQ(r.port, 3000);
    CHECK(!r.preview);
    CHECK(!router_is_grpc_content_type("application/grpcx"));
    CHECK(router_is_grpc_content_type("application/grpc"));
}

TEST(validation_messages)
{
    router_route r;
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(route("/", NULL, NULL, NULL, NULL, &r, &e), -EINVAL);
    CHECK(strcmp(e.message, "X-Sandbox-ID header is required.") == 0);
    CHECK_INT_EQ(route("/", "-box", NULL, NULL, NULL, &r, &e), -EINVAL);
    CHECK(strcmp(e.message, "Invalid sandbox ID format.") == 0);
    CHECK_INT_EQ(route("/", "box", "a_b", NULL, NULL, &r, &e), -EINVAL);
    CHECK(strcmp(e.message, "Invalid namespace format.") == 0);
    CHECK_INT_EQ(route("/", "box", NULL, "0", NULL, &r, &e), -EINVAL);
    CHECK(strcmp(e.message, "Invalid port format.") == 0);
    CHECK_INT_EQ(route("/", "box", NULL, "+80", NULL, &r, &e), -EINVAL);
    CHECK(router_valid_dns_label("a"));
    CHECK(router_valid_dns_label("a-1"));
    CHECK(!router_valid_dns_label("a-"));
    CHECK(!router_valid_dns_label("A"));
}

TEST(auth)
{
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(router_check_auth("Bearer tok", "tok", false, false, &e), 0);
    CHECK_INT_EQ(router_check_auth("  BEARER   tok  ", "tok", false, false, &e), 0);
    CHECK_INT_EQ(router_check_auth("Bearer to", "tok", false, false, &e), -EACCES);
    CHECK(strcmp(e.message, "Invalid token.") == 0);
    CHECK_INT_EQ(router_check_auth("Bearertok", "tok", false, false, &e), -EACCES);
    CHECK(strcmp(e.message, "Missing or invalid Authorization header.") == 0);
    CHECK_INT_EQ(router_check_auth(NULL, "tok", true, true, &e), 0);
    CHECK_INT_EQ(router_check_auth(NULL, "tok", true, false, &e), -EACCES);
    CHECK_INT_EQ(router_check_auth("Bearer x", "tok", true, true, &e), -EACCES);
    CHECK_INT_EQ(router_check_auth(NULL, NULL, false, false, &e), 0);
}

static bool split_is(const char *in, const char *const *want)
{
    char **v = NULL;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    if (router_shlex_split(in, &v, &err) < 0)
        return false;
    bool ok = true;
    size_t i = 0;
    for (; want[i]; i++)
        if (!v[i] || strcmp(v[i], want[i]) != 0)
            ok = false;
    if (ok && v[i])
        ok = false;
    strv_free(v);
    return ok;
}

TEST(shlex)
{
    CHECK(split_is("echo 'a b' c", (const char *const[]){"echo", "a b", "c", NULL}));
    CHECK(split_is("a\\ b \"c \\\" \\d\" ''", (const char *const[]){"a b", "c \" \\d", "", NULL}));
    CHECK(split_is("x&&y | z", (const char *const[]){"x&&y", "|", "z", NULL}));
    CHECK(split_is("  ", (const char *const[]){NULL}));
    CHECK(split_is("a'b'\"c\"", (const char *const[]){"abc", NULL}));
    char **v = NULL;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    CHECK_INT_EQ(router_shlex_split("echo 'x", &v, &err), -EINVAL);
    CHECK(err.message && strcmp(err.message, "No closing quotation") == 0);
    CHECK_INT_EQ(router_shlex_split("echo x\\", &v, &err), -EINVAL);
    CHECK(err.message && strcmp(err.message, "No escaped character") == 0);
}

TEST(legacy_path_and_multipart)
{
    char *p = NULL;
    CHECK_INT_EQ(router_legacy_path("/download/a%252Fb%20c?x=1", "/download/", &p), 0);
    CHECK(p && strcmp(p, "a/b c") == 0);
    free(p);
    CHECK_INT_EQ(router_legacy_path("/download/a%00", "/download/", &p), -EINVAL);
    static const char body[] = "--B\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n"
                               "--B\r\nContent-Disposition: form-data; name=\"file\"; "
                               "filename=\"d/f.txt\"\r\nContent-Type: text/plain\r\n\r\n"
                               "hello\r\nworld\r\n--B--\r\n";
    char *fn = NULL;
    const char *d = NULL;
    size_t n = 0;
    CHECK_INT_EQ(router_multipart_file("multipart/form-data; boundary=B", body, sizeof(body) - 1,
                                       &fn, &d, &n),
                 0);
    CHECK(fn && strcmp(fn, "d/f.txt") == 0);
    CHECK(n == 12 && memcmp(d, "hello\r\nworld", 12) == 0);
    free(fn);
    CHECK_INT_EQ(router_multipart_file("text/plain", body, sizeof(body) - 1, &fn, &d, &n), -EINVAL);
}
