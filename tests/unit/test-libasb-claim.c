/* libasb claims without a server: the replaceable handle (the fake, custom ops, an "agent"
 * function unit-tested through it), the claim readiness rules, router URL parsing and the
 * cleanup registry. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asb/asb.h"
#include "libasb/libasb-claim-internal.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"
#include "shared/claim-reasons.h"
#include "unit.h"

/* What an agent tool would do: write a script, run it, return its stdout. */
static int agent_run_script(char **out, asb_handle *h, const char *script)
{
    int r = asb_handle_file_write(h, "work/run.sh", 0755, script, strlen(script));
    if (r != ASB_OK)
        return r;
    const char *argv[] = {"/bin/sh", "work/run.sh", NULL};
    asb_sandbox_result *res = NULL;
    r = asb_handle_execute(&res, h, argv, NULL);
    if (r != ASB_OK)
        return r;
    *out = res->exit_code == 0 ? strdup(res->out_data) : NULL;
    r = res->exit_code == 0 ? ASB_OK : ASB_ERROR;
    asb_sandbox_result_free(res);
    return r;
}

static int fake_exec(asb_sandbox_result *res, const char *const *argv, void *payload)
{
    int *calls = payload;
    (*calls)++;
    if (strcmp(argv[0], "false") == 0) {
        res->exit_code = 1;
        return ASB_OK;
    }
    if (strcmp(argv[0], "boom") == 0)
        return ASB_ECONNECT;
    res->out_data = strdup("hello from the fake\n");
    res->out_len = strlen(res->out_data);
    return ASB_OK;
}

TEST(fake_handle_drives_agent_code)
{
    int calls = 0;
    asb_handle *h = NULL;
    CHECK_INT_EQ(asb_handle_fake_new(&h, fake_exec, &calls), ASB_OK);
    char *out = NULL;
    CHECK_INT_EQ(agent_run_script(&out, h, "echo hi\n"), ASB_OK);
    CHECK_STR_EQ(out, "hello from the fake\n");
    free(out);
    CHECK_INT_EQ(calls, 1);
    const char *last = NULL;
    CHECK_INT_EQ(asb_handle_fake_commands(h, &last), 1);
    CHECK_STR_EQ(last, "/bin/sh work/run.sh");
    char *text = NULL;
    size_t len = 0;
    CHECK_INT_EQ(asb_handle_file_read(&text, &len, h, "/work/./run.sh"), ASB_OK);
    CHECK_INT_EQ(len, 8);
    CHECK_STR_EQ(text, "echo hi\n");
    asb_free(text);
    const char *f[] = {"false", NULL}, *b[] = {"boom", NULL};
    asb_sandbox_result *res = NULL;
    CHECK_INT_EQ(asb_handle_execute(&res, h, f, NULL), ASB_OK);
    CHECK_INT_EQ(res->exit_code, 1);
    CHECK_STR_EQ(res->out_data, "");
    asb_sandbox_result_free(res);
    CHECK_INT_EQ(asb_handle_execute(&res, h, b, NULL), ASB_ECONNECT);
    asb_handle_free(h);
}

TEST(fake_handle_files)
{
    asb_handle *h = NULL;
    CHECK_INT_EQ(asb_handle_fake_new(&h, NULL, NULL), ASB_OK);
    CHECK_INT_EQ(asb_handle_file_write(h, "a/b/c.txt", 0, "x", 1), ASB_OK);
    CHECK_INT_EQ(asb_handle_file_write(h, "a/z.txt", 0600, "yy", 2), ASB_OK);
    CHECK_INT_EQ(asb_handle_file_write(h, "a/z.txt", 0600, "yyy", 3), ASB_OK);
    CHECK_INT_EQ(asb_handle_file_write(h, "a", 0, "no", 2), ASB_EBADREQUEST);
    asb_sandbox_file_entry *e = NULL;
    size_t n = 0;
    CHECK_INT_EQ(asb_handle_file_list(&e, &n, h, "/a/"), ASB_OK);
    CHECK_INT_EQ(n, 2);
    if (n == 2) {
        CHECK_STR_EQ(e[0].name, "b");
        CHECK_INT_EQ(e[0].type, ASB_SANDBOX_DIRECTORY);
        CHECK_STR_EQ(e[1].name, "z.txt");
        CHECK_INT_EQ(e[1].size, 3);
        CHECK_INT_EQ(e[1].mode, 0600);
    }
    asb_sandbox_file_entries_free(e, n);
    CHECK_INT_EQ(asb_handle_file_list(&e, &n, h, "a/z.txt"), ASB_EBADREQUEST);
    CHECK_INT_EQ(asb_handle_file_list(&e, &n, h, "nope"), ASB_ENOTFOUND);
    int ex = -1;
    CHECK_INT_EQ(asb_handle_file_exists(&ex, h, "a/b"), ASB_OK);
    CHECK_INT_EQ(ex, 1);
    CHECK_INT_EQ(asb_handle_file_exists(&ex, h, "a/q"), ASB_OK);
    CHECK_INT_EQ(ex, 0);
    char *text = NULL;
    CHECK_INT_EQ(asb_handle_file_read(&text, NULL, h, "missing"), ASB_ENOTFOUND);
    CHECK_STR_EQ(asb_error_last()->reason, "NOT_FOUND");
    CHECK_INT_EQ(asb_handle_file_delete(h, "a", 0), ASB_ECONFLICT);
    CHECK_INT_EQ(asb_handle_file_delete(h, "a", 1), ASB_OK);
    CHECK_INT_EQ(asb_handle_file_exists(&ex, h, "a/b/c.txt"), ASB_OK);
    CHECK_INT_EQ(ex, 0);
    CHECK_INT_EQ(asb_handle_file_delete(h, "a", 1), ASB_ENOTFOUND);
    asb_handle_free(h);
}

static int custom_exists(int *out, void *impl, const char *path)
{
    (*(int *)impl)++;
    *out = strcmp(path, "yes") == 0;
    return ASB_OK;
}

static void custom_free(void *impl)
{
    *(int *)impl = -100;
}

TEST(custom_ops_and_unsupported)
{
    int state = 0;
    asb_handle_ops ops = {
        .version = ASB_HANDLE_OPS_VERSION, .file_exists = custom_exists, .free = custom_free};
    asb_handle *h = NULL;
    CHECK_INT_EQ(asb_handle_new(&h, &ops, &state), ASB_OK);
    int ex = 0;
    CHECK_INT_EQ(asb_handle_file_exists(&ex, h, "yes"), ASB_OK);
    CHECK_INT_EQ(ex, 1);
    CHECK_INT_EQ(state, 1);
    const char *argv[] = {"true", NULL};
    asb_sandbox_result *res = NULL;
    CHECK_INT_EQ(asb_handle_execute(&res, h, argv, NULL), ASB_EINVAL);
    CHECK(strstr(asb_error_last()->message, "execute") != NULL);
    CHECK_INT_EQ(asb_handle_fake_commands(h, NULL), 0);
    asb_handle_free(h);
    CHECK_INT_EQ(state, -100);
    ops.version = 99;
    CHECK_INT_EQ(asb_handle_new(&h, &ops, &state), ASB_EINVAL);
    CHECK_INT_EQ(asb_handle_from_sandbox(&h, NULL, 1), ASB_EINVAL);
}

TEST(handle_over_a_sandbox_reports_its_errors)
{
    asb_sandbox *s = NULL;
    asb_sandbox_options so = ASB_SANDBOX_OPTIONS_INIT;
    so.max_attempts = 1;
    CHECK_INT_EQ(asb_sandbox_open_sockets(&s, "/nonexistent/r.sock", "/nonexistent/g.sock", &so),
                 ASB_OK);
    asb_handle *h = NULL;
    CHECK_INT_EQ(asb_handle_from_sandbox(&h, s, 1), ASB_OK);
    int ex = 0;
    CHECK_INT_EQ(asb_handle_file_exists(&ex, h, "x"), ASB_ECONNECT);
    asb_handle_free(h); /* frees s too (ASan would see a leak otherwise) */
}

static json_t *claim(const char *status, const char *reason, const char *sandbox,
                     const char *annotation)
{
    json_t *c = json_pack("{s:{s:s,s:i,s:{}},s:{s:[]}}", "metadata", "name", "c1", "generation", 1,
                          "annotations", "status", "conditions");
    if (status)
        json_array_append_new(json_object_get(json_object_get(c, "status"), "conditions"),
                              json_pack("{s:s,s:s,s:s,s:s,s:i}", "type", "Ready", "status", status,
                                        "reason", reason, "message", "msg", "observedGeneration",
                                        1));
    if (sandbox)
        json_object_set_new(json_object_get(c, "status"), "sandbox",
                            json_pack("{s:s}", "name", sandbox));
    if (annotation)
        json_object_set_new(json_object_get(json_object_get(c, "metadata"), "annotations"),
                            "agents.x-k8s.io/sandbox-name", json_string(annotation));
    return c;
}

TEST(claim_readiness_rules)
{
    char last[256] = "";
    char *sn = NULL;
    json_t *c = claim(NULL, NULL, NULL, NULL);
    CHECK_INT_EQ(asbi_claim_check(c, &sn, last, sizeof(last)), 0);
    json_decref(c);
    c = claim("False", "SandboxNotReady", "pool-abc", NULL);
    CHECK_INT_EQ(asbi_claim_check(c, &sn, last, sizeof(last)), 0);
    CHECK_STR_EQ(last, "Ready=False SandboxNotReady: msg");
    json_decref(c);
    c = claim("True", "Ready", "pool-abc", NULL);
    CHECK_INT_EQ(asbi_claim_check(c, &sn, last, sizeof(last)), 1);
    CHECK_STR_EQ(sn, "pool-abc");
    free(sn);
    sn = NULL;
    json_decref(c);
    /* Ready without status.sandbox yet: the adoption annotation names the sandbox. */
    c = claim("True", "Ready", NULL, "pool-def");
    CHECK_INT_EQ(asbi_claim_check(c, &sn, NULL, 0), 1);
    CHECK_STR_EQ(sn, "pool-def");
    free(sn);
    sn = NULL;
    json_decref(c);
    c = claim("True", "Ready", NULL, NULL);
    CHECK_INT_EQ(asbi_claim_check(c, &sn, NULL, 0), 0);
    json_decref(c);
    static const char *const terminal[] = {"InvalidMetadata", "EnvVarsInjectionRejected",
                                           "VolumeClaimTemplatesError", "ClaimExpired",
                                           "SandboxExpired", "WarmPoolNotFound",
                                           "TemplateNotFound"};
    for (size_t i = 0; i < 7; i++) {
        c = claim("False", terminal[i], NULL, NULL);
        CHECK_INT_EQ(asbi_claim_check(c, &sn, NULL, 0), ASB_ECLAIMFAILED);
        CHECK_STR_EQ(asb_error_last()->reason, terminal[i]);
        json_decref(c);
    }
    /* Transient reasons keep waiting (a missing pool or template does not: the controller
     * keeps looking, a waiting client says so at once). */
    c = claim("False", "SandboxNotReady", NULL, NULL);
    CHECK_INT_EQ(asbi_claim_check(c, &sn, NULL, 0), 0);
    json_decref(c);
    CHECK_STR_EQ(asb_strerror(ASB_ECLAIMFAILED), "claim failed");
}

TEST(claim_bound_header)
{
    char *name = NULL, *uid = NULL;
    CHECK_INT_EQ(asbi_claim_parse_bound("name=wp-abc12; uid=0b1c-22", &name, &uid), 1);
    CHECK_STR_EQ(name, "wp-abc12");
    CHECK_STR_EQ(uid, "0b1c-22");
    free(name);
    free(uid);
    name = uid = NULL;
    CHECK_INT_EQ(asbi_claim_parse_bound(NULL, &name, &uid), 0);
    CHECK_INT_EQ(asbi_claim_parse_bound("name=x", &name, &uid), 0);
    CHECK_INT_EQ(asbi_claim_parse_bound("uid=1; name=x", &name, &uid), 0);
    CHECK_INT_EQ(asbi_claim_parse_bound("", &name, &uid), 0);
    CHECK(name == NULL && uid == NULL);
}

TEST(router_url_split)
{
    char *h = NULL, *p = NULL;
    CHECK_INT_EQ(asbi_router_url_split("http://127.0.0.1:7080", &h, &p), ASB_OK);
    CHECK_STR_EQ(h, "127.0.0.1");
    CHECK_STR_EQ(p, "7080");
    free(h);
    free(p);
    CHECK_INT_EQ(asbi_router_url_split("http://[::1]:81/", &h, &p), ASB_OK);
    CHECK_STR_EQ(h, "::1");
    CHECK_STR_EQ(p, "81");
    free(h);
    free(p);
    CHECK_INT_EQ(asbi_router_url_split("http://router", &h, &p), ASB_OK);
    CHECK_STR_EQ(p, "80");
    free(h);
    free(p);
    CHECK_INT_EQ(asbi_router_url_split("https://x:1", &h, &p), ASB_EINVAL);
    CHECK_INT_EQ(asbi_router_url_split("http://x:1/path", &h, &p), ASB_EINVAL);
    CHECK_INT_EQ(asbi_router_url_split("http://x:abc", &h, &p), ASB_EINVAL);
    CHECK_INT_EQ(asbi_router_url_split("http://:80", &h, &p), ASB_EINVAL);
    asb_sandbox *s = NULL;
    CHECK_INT_EQ(asb_sandbox_open_router(&s, "http://127.0.0.1:9/", "tok", NULL, "sbx", NULL),
                 ASB_OK);
    CHECK(asb_sandbox_rest_socket(s) == NULL);
    CHECK_STR_EQ(s->router_url, "http://127.0.0.1:9");
    CHECK_STR_EQ(s->sandbox_ns, "default");
    asb_sandbox_free(s);
}

/* The one table of claim reasons: the controller's terminal ones also stop a client's wait; a
 * missing template or pool stops only the wait. */
TEST(claim_reason_table)
{
    CHECK(claim_reason_terminal("ClaimExpired") && claim_reason_stops_wait("ClaimExpired"));
    CHECK(claim_reason_terminal("InvalidMetadata"));
    CHECK(!claim_reason_terminal("TemplateNotFound") &&
          claim_reason_stops_wait("TemplateNotFound"));
    CHECK(asbi_claim_reason_terminal("WarmPoolNotFound"));
    CHECK(!claim_reason_stops_wait("Ready") && !claim_reason_stops_wait(NULL));
    CHECK(!claim_reason_terminal(NULL) && !asbi_claim_reason_terminal("SandboxReady"));
}

TEST(rfc3339)
{
    char a[40], b[40];
    asbi_rfc3339(a, 0, 1);
    asbi_rfc3339(b, 3600, 0);
    CHECK_INT_EQ(strlen(a), 30); /* 2026-01-02T03:04:05.123456789Z */
    CHECK_INT_EQ(strlen(b), 20);
    CHECK(a[10] == 'T' && a[29] == 'Z' && b[19] == 'Z');
    CHECK(strcmp(b, a) > 0);
}

/* A client of a server that is not there (nothing listens on port 1): deletes fail at once. */
static asb_client *client_of_nobody(void)
{
    asb_client *c = NULL;
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.server = "http://127.0.0.1:1";
    o.token = "t";
    CHECK_INT_EQ(asb_client_new(&c, &o), ASB_OK);
    return c;
}

TEST(cleanup_registry)
{
    asb_client *c = client_of_nobody();
    CHECK_INT_EQ(asbi_claims_registered(), 0);
    CHECK_INT_EQ(asbi_claims_register(c, "default", "a"), ASB_OK);
    CHECK_INT_EQ(asbi_claims_register(c, "default", "b"), ASB_OK);
    asbi_claims_unregister("default", "a");
    asbi_claims_unregister("other", "b");
    CHECK_INT_EQ(asbi_claims_registered(), 1);
    /* Nothing listens on port 1: the delete fails, is counted, and the registry empties. */
    CHECK_INT_EQ(asb_claims_cleanup_run(), 1);
    CHECK_INT_EQ(asbi_claims_registered(), 0);
    CHECK_INT_EQ(asb_claims_cleanup_install(), ASB_OK);
    CHECK_INT_EQ(asb_claims_cleanup_install(), ASB_OK);
    asb_claims_cleanup_uninstall();
    asb_client_free(c);
}

static void *late_register(void *arg)
{
    usleep(200 * 1000);
    asbi_claims_register(arg, "default", "late");
    asbi_claims_create_end();
    return NULL;
}

/* A signal that arrives while a create is in flight (the server created the claim, the answer
 * with its generated name is on its way) still deletes it: the cleanup waits for the create. */
TEST(cleanup_waits_for_a_create_in_flight)
{
    asb_client *c = client_of_nobody();
    CHECK_INT_EQ(asbi_claims_registered(), 0);
    asbi_claims_create_begin();
    pthread_t t;
    CHECK_INT_EQ(pthread_create(&t, NULL, late_register, c), 0);
    /* The late claim was waited for and its delete tried (nothing listens on port 1). */
    CHECK_INT_EQ(asb_claims_cleanup_run(), 1);
    pthread_join(t, NULL);
    CHECK_INT_EQ(asbi_claims_registered(), 0);
    asb_client_free(c);
}

TEST(claim_argument_checks)
{
    asb_claim *cl = NULL;
    CHECK_INT_EQ(asb_claim_create(&cl, NULL, NULL, "pool", NULL), ASB_EINVAL);
    asb_client *c = NULL;
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.server = "http://127.0.0.1:1";
    o.token = "t";
    CHECK_INT_EQ(asb_client_new(&c, &o), ASB_OK);
    asb_claim_options co = ASB_CLAIM_OPTIONS_INIT;
    co.data_plane = 7;
    CHECK_INT_EQ(asb_claim_create(&cl, c, NULL, "pool", &co), ASB_EINVAL);
    co = (asb_claim_options)ASB_CLAIM_OPTIONS_INIT;
    co.version = 0;
    CHECK_INT_EQ(asb_claim_attach(&cl, c, NULL, "x", &co), ASB_EINVAL);
    CHECK_INT_EQ(asb_claim_create(&cl, c, NULL, "pool", NULL), ASB_ECONNECT);
    CHECK(cl == NULL);
    CHECK_INT_EQ(asb_lifecycle_extend(c, "SandboxTemplate", NULL, "x", 10, NULL), ASB_EINVAL);
    CHECK_INT_EQ(asb_claim_close(NULL, c), ASB_OK);
    asb_client_free(c);
}
