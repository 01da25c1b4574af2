/* Preview hosts, their credentials and the admission of sandbox ports (router-preview.c,
 * router-route.c, router-admit.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router/router-core.h"
#include "router/router-errors.h"
#include "router/router-preview.h"
#include "unit.h"

TEST(preview_host_parse)
{
    router_route r;
    CHECK(router_preview_host("8000-box.default.localhost:7080", "localhost", &r));
    CHECK_INT_EQ(r.kind, ROUTER_KIND_PORT);
    CHECK_INT_EQ(r.port, 8000);
    CHECK_STR_EQ(r.id, "box");
    CHECK_STR_EQ(r.ns, "default");
    CHECK(r.preview);
    /* a name with dashes: the port is the digits before the first dash */
    CHECK(router_preview_host("3000-my-box-2.team.LocalHost", "localhost", &r));
    CHECK_INT_EQ(r.port, 3000);
    CHECK_STR_EQ(r.id, "my-box-2");
    CHECK_STR_EQ(r.ns, "team");
    CHECK(router_preview_host("80-a.b.sandboxes.example.com", "sandboxes.example.com", &r));
    CHECK(!router_preview_host("localhost:7080", "localhost", &r));
    CHECK(!router_preview_host("127.0.0.1:7080", "localhost", &r));
    CHECK(!router_preview_host("8000-box.default.localhostx", "localhost", &r));
    CHECK(!router_preview_host("8000-box.default.localhost:x", "localhost", &r));
    CHECK(!router_preview_host("0-box.default.localhost", "localhost", &r));
    CHECK(!router_preview_host("70000-box.default.localhost", "localhost", &r));
    CHECK(!router_preview_host("box.default.localhost", "localhost", &r));
    CHECK(!router_preview_host("8000-.default.localhost", "localhost", &r));
    CHECK(!router_preview_host("8000-b_x.default.localhost", "localhost", &r));
    CHECK(!router_preview_host("8000-box.default.localhost", NULL, &r));
    CHECK(!router_preview_host(NULL, "localhost", &r));
}

TEST(credentials)
{
    char c[ROUTER_PREVIEW_CRED_MAX];
    long long now = 1700000000;
    CHECK_INT_EQ(router_preview_credential("key", "default", "box", 8000, now + 60, c, sizeof(c)),
                 0);
    CHECK(router_preview_check("key", "default", "box", 8000, c, strlen(c), now));
    CHECK(!router_preview_check("key", "default", "box", 8000, c, strlen(c), now + 60));
    CHECK(!router_preview_check("key2", "default", "box", 8000, c, strlen(c), now));
    CHECK(!router_preview_check("key", "default", "box", 8001, c, strlen(c), now));
    CHECK(!router_preview_check("key", "default", "box2", 8000, c, strlen(c), now));
    CHECK(!router_preview_check("key", "other", "box", 8000, c, strlen(c), now));
    /* a later expiry with the old signature */
    char forged[ROUTER_PREVIEW_CRED_MAX];
    snprintf(forged, sizeof(forged), "%lld%s", now + 999, strchr(c, '.'));
    CHECK(!router_preview_check("key", "default", "box", 8000, forged, strlen(forged), now));
    CHECK(!router_preview_check("key", "default", "box", 8000, "", 0, now));
    CHECK(!router_preview_check("key", "default", "box", 8000, c, strlen(c) - 1, now));
}

TEST(link_param_and_cookie)
{
    size_t n;
    const char *v = router_preview_link_param("/a?x=1&asb-preview=12.ab&y=2", &n);
    CHECK(v && n == 5 && strncmp(v, "12.ab", 5) == 0);
    CHECK(!router_preview_link_param("/a?x=1", &n));
    char *s = NULL;
    CHECK_INT_EQ(router_preview_strip_param("/a?x=1&asb-preview=12.ab&y=2", &s), 0);
    CHECK_STR_EQ(s, "/a?x=1&y=2");
    free(s);
    CHECK_INT_EQ(router_preview_strip_param("/?asb-preview=12.ab", &s), 0);
    CHECK_STR_EQ(s, "/");
    free(s);
    CHECK_INT_EQ(router_preview_strip_param("/p?x=1&asb-preview=12.ab", &s), 0);
    CHECK_STR_EQ(s, "/p?x=1");
    free(s);
    v = router_preview_cookie("a=1; asb-preview=9.ff; b=2", &n);
    CHECK(v && n == 4 && strncmp(v, "9.ff", 4) == 0);
    CHECK_INT_EQ(router_preview_cookie_filter("a=1; asb-preview=9.ff; b=2", &s), 0);
    CHECK_STR_EQ(s, "a=1; b=2");
    free(s);
    CHECK_INT_EQ(router_preview_cookie_filter("asb-preview=9.ff", &s), 0);
    CHECK(s == NULL);
}

static int fake_resolve(router_resolver *r, const char *ns, const char *id, unsigned port,
                        bool nonblock, router_target *out, api_error *err)
{
    out->rest = strdup("unix:/x/rest.sock");
    if (port && asprintf(&out->port, "10.0.0.9:%u", port) < 0)
        return -ENOMEM;
    return out->rest ? 0 : -ENOMEM;
}

static router_admit_result admit(router_ctx *ctx, const char *path, const char *host,
                                 const char *port, const char *auth, const char *cookie,
                                 router_route *route, router_answer *ans, api_error *err)
{
    router_admission a = {
        .info = {.method = "GET",
                 .path = path,
                 .sandbox_id = host ? NULL : "box",
                 .sandbox_port = port,
                 .host = host},
        .authorization = auth,
        .cookie = cookie,
    };
    router_target t = {0};
    router_admit_result r = router_admit(ctx, &a, true, route, &t, ans, err);
    if (r == ROUTER_ADMIT_TARGET && route->kind == ROUTER_KIND_PORT) {
        char want[32];
        snprintf(want, sizeof(want), "10.0.0.9:%u", route->port);
        CHECK_STR_EQ(t.port, want);
    }
    router_target_done(&t);
    return r;
}

TEST(admission_of_ports_and_previews)
{
    router_resolver res = {.resolve = fake_resolve};
    router_ctx ctx = {
        .token = (char *)"tok", .resolver = &res, .preview_domain = (char *)"localhost"};
    router_route rt;
    router_answer ans;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    /* any port is routed to the sandbox; its /healthz is the sandbox's */
    CHECK_INT_EQ(admit(&ctx, "/x", NULL, "3000", "Bearer tok", NULL, &rt, &ans, &err),
                 ROUTER_ADMIT_TARGET);
    CHECK_INT_EQ(rt.kind, ROUTER_KIND_PORT);
    CHECK_INT_EQ(admit(&ctx, "/healthz", NULL, "3000", NULL, NULL, &rt, &ans, &err),
                 ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ((int)router_error_http(&err), 401);
    CHECK_INT_EQ(admit(&ctx, "/healthz", NULL, "8080", NULL, NULL, &rt, &ans, &err),
                 ROUTER_ADMIT_HEALTHZ);
    /* a preview host without credentials */
    const char *host = "3000-box.default.localhost:7080";
    CHECK_INT_EQ(admit(&ctx, "/", host, NULL, NULL, NULL, &rt, &ans, &err), ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ((int)router_error_http(&err), 401);
    CHECK(strstr(err.message, "asb preview box 3000") != NULL);
    /* the bearer token works there too */
    CHECK_INT_EQ(admit(&ctx, "/", host, NULL, "Bearer tok", NULL, &rt, &ans, &err),
                 ROUTER_ADMIT_TARGET);
    CHECK_INT_EQ(admit(&ctx, "/", host, NULL, "Bearer bad", NULL, &rt, &ans, &err),
                 ROUTER_ADMIT_REFUSED);
    /* a signed link: a redirect without the parameter that sets the cookie */
    router_admission mint = {
        .info = {.method = "GET",
                 .path = "/preview-url?namespace=default&sandbox=box&port=3000",
                 .host = "127.0.0.1:7080"},
        .authorization = "Bearer tok"};
    router_target t = {0};
    CHECK_INT_EQ(router_admit(&ctx, &mint, true, &rt, &t, &ans, &err), ROUTER_ADMIT_ANSWER);
    CHECK_INT_EQ(ans.status, 200);
    const char *u = strstr(ans.body, "http://3000-box.default.localhost:7080/?asb-preview=");
    CHECK(u != NULL);
    char path[256];
    snprintf(path, sizeof(path), "%.*s", (int)strcspn(u + 38, "\""), u + 38);
    CHECK(strncmp(path, "/?asb-preview=", 14) == 0);
    CHECK_INT_EQ(admit(&ctx, path, host, NULL, NULL, NULL, &rt, &ans, &err), ROUTER_ADMIT_ANSWER);
    CHECK_INT_EQ(ans.status, 303);
    CHECK(strncmp(ans.headers, "Location: /\r\nSet-Cookie: asb-preview=", 37) == 0);
    /* a link whose path would make the Location leave the host goes to "/" instead */
    char evil[300];
    snprintf(evil, sizeof(evil), "//evil.example%s", path + 1);
    CHECK_INT_EQ(admit(&ctx, evil, host, NULL, NULL, NULL, &rt, &ans, &err), ROUTER_ADMIT_ANSWER);
    CHECK(strncmp(ans.headers, "Location: /\r\n", 13) == 0);
    CHECK_INT_EQ(admit(&ctx, path, host, NULL, NULL, NULL, &rt, &ans, &err), ROUTER_ADMIT_ANSWER);
    char cookie[160];
    snprintf(cookie, sizeof(cookie), "x=1; %.*s", (int)strcspn(ans.headers + 25, ";"),
             ans.headers + 25);
    CHECK_INT_EQ(admit(&ctx, "/app", host, NULL, NULL, cookie, &rt, &ans, &err),
                 ROUTER_ADMIT_TARGET);
    CHECK_INT_EQ(rt.port, 3000);
    /* the cookie of one port is no credential for another */
    CHECK_INT_EQ(
        admit(&ctx, "/app", "3001-box.default.localhost:7080", NULL, NULL, cookie, &rt, &ans, &err),
        ROUTER_ADMIT_REFUSED);
    /* minting needs the token */
    mint.authorization = NULL;
    CHECK_INT_EQ(router_admit(&ctx, &mint, true, &rt, &t, &ans, &err), ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ((int)router_error_http(&err), 401);
    mint.authorization = "Bearer tok";
    mint.info.path = "/preview-url?sandbox=box&port=8080";
    CHECK_INT_EQ(router_admit(&ctx, &mint, true, &rt, &t, &ans, &err), ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ((int)router_error_http(&err), 400);
}

TEST(connect_only_to_sandbox_ports)
{
    router_resolver res = {.resolve = fake_resolve};
    router_ctx ctx = {.token = (char *)"tok", .resolver = &res};
    router_route rt;
    router_answer ans;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    router_target t = {0};
    router_admission a = {
        .info = {.method = "CONNECT", .path = "x:1", .sandbox_id = "box", .sandbox_port = "5432"},
        .authorization = "Bearer tok",
        .upgrade = true,
        .connect = true};
    CHECK_INT_EQ(router_admit(&ctx, &a, true, &rt, &t, &ans, &err), ROUTER_ADMIT_TARGET);
    CHECK_STR_EQ(t.port, "10.0.0.9:5432");
    router_target_done(&t);
    a.info.sandbox_port = "8080";
    CHECK_INT_EQ(router_admit(&ctx, &a, true, &rt, &t, &ans, &err), ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ((int)router_error_http(&err), 501);
    a.info.sandbox_port = "5432";
    a.connect = false; /* a caller that cannot tunnel */
    CHECK_INT_EQ(router_admit(&ctx, &a, true, &rt, &t, &ans, &err), ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ((int)router_error_http(&err), 501);
}

TEST(upstream_head_drops_the_preview_cookie)
{
    router_headers h = {0};
    router_headers_field(&h, "Cookie", 6);
    router_headers_value(&h, "a=1; asb-preview=1.ff; b=2", 26);
    router_headers_field(&h, "cookie", 6);
    router_headers_value(&h, "asb-preview=1.ff", 16);
    router_headers_end(&h);
    buf out = BUF_INIT;
    CHECK_INT_EQ(router_request_head(&out, "GET", "/", "127.0.0.1:3000", &h, false), 0);
    CHECK_STR_EQ(out.data, "GET / HTTP/1.1\r\nHost: 127.0.0.1:3000\r\nCookie: a=1; b=2\r\n\r\n");
    buf_done(&out);
    router_headers_done(&h);
}
