/* libasb: kind names, the error enum and its mapping from Kubernetes Status replies, and client
 * configuration from options, environment and the state directory (no server needed). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asb/asb.h"
#include "libasb/libasb-internal.h"
#include "unit.h"

TEST(kind_names)
{
    static const struct {
        const char *name, *kind;
    } cases[] = {
        {"sandbox", "Sandbox"},
        {"sandboxes", "Sandbox"},
        {"sbx", "Sandbox"},
        {"Sandbox", "Sandbox"},
        {"SANDBOXES", "Sandbox"},
        {"sandboxes.agents.x-k8s.io", "Sandbox"},
        {"sandboxtemplate", "SandboxTemplate"},
        {"sandboxtemplates", "SandboxTemplate"},
        {"template", "SandboxTemplate"},
        {"templates", "SandboxTemplate"},
        {"sandboxwarmpool", "SandboxWarmPool"},
        {"sandboxwarmpools", "SandboxWarmPool"},
        {"warmpool", "SandboxWarmPool"},
        {"warmpools", "SandboxWarmPool"},
        {"swp", "SandboxWarmPool"},
        {"sandboxclaim", "SandboxClaim"},
        {"sandboxclaims", "SandboxClaim"},
        {"claim", "SandboxClaim"},
        {"claims", "SandboxClaim"},
        {"sandboxclaims.extensions.agents.x-k8s.io", "SandboxClaim"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const asb_kind *k = NULL;
        CHECK_INT_EQ(asb_kind_lookup(&k, cases[i].name), ASB_OK);
        CHECK_STR_EQ(k ? k->kind : NULL, cases[i].kind);
    }
    const asb_kind *k;
    CHECK_INT_EQ(asb_kind_lookup(&k, "pods"), ASB_EUNKNOWNKIND);
    CHECK(strstr(asb_error_last()->message, "\"pods\"") != NULL);
    CHECK_INT_EQ(asb_kind_lookup(&k, ""), ASB_EUNKNOWNKIND);
    CHECK_INT_EQ(asb_kind_lookup(&k, "sandboxes.extensions.agents.x-k8s.io"), ASB_EUNKNOWNKIND);
    CHECK_INT_EQ(asb_kind_lookup(NULL, "sbx"), ASB_EINVAL);
    CHECK_INT_EQ(asb_kind_count(), 4);
    CHECK_STR_EQ(asb_kind_at(0)->api_version, "agents.x-k8s.io/v1beta1");
    CHECK(asb_kind_at(4) == NULL);
}

TEST(status_mapping)
{
    CHECK_INT_EQ(asbi_error_from_status(404, "NotFound"), ASB_ENOTFOUND);
    CHECK_INT_EQ(asbi_error_from_status(409, "AlreadyExists"), ASB_EEXISTS);
    CHECK_INT_EQ(asbi_error_from_status(409, "Conflict"), ASB_ECONFLICT);
    CHECK_INT_EQ(asbi_error_from_status(409, NULL), ASB_ECONFLICT);
    CHECK_INT_EQ(asbi_error_from_status(422, "Invalid"), ASB_EINVALID);
    CHECK_INT_EQ(asbi_error_from_status(401, "Unauthorized"), ASB_EUNAUTHORIZED);
    CHECK_INT_EQ(asbi_error_from_status(403, NULL), ASB_EFORBIDDEN);
    CHECK_INT_EQ(asbi_error_from_status(410, "Expired"), ASB_EEXPIRED);
    CHECK_INT_EQ(asbi_error_from_status(400, "BadRequest"), ASB_EBADREQUEST);
    CHECK_INT_EQ(asbi_error_from_status(415, "UnsupportedMediaType"), ASB_EBADREQUEST);
    CHECK_INT_EQ(asbi_error_from_status(500, "InternalError"), ASB_ESERVER);
    CHECK_INT_EQ(asbi_error_from_status(503, NULL), ASB_ESERVER);
    CHECK_INT_EQ(asbi_error_from_status(302, NULL), ASB_EPROTOCOL);
    /* An unknown reason falls back to the HTTP status; a known one wins over it. */
    CHECK_INT_EQ(asbi_error_from_status(404, "SomethingNew"), ASB_ENOTFOUND);
    CHECK_INT_EQ(asbi_error_from_status(500, "NotFound"), ASB_ENOTFOUND);
    CHECK_INT_EQ(asbi_error_from_status(504, NULL), ASB_ETIMEOUT);
    CHECK_INT_EQ(asbi_error_from_status(500, "ServerTimeout"), ASB_ESERVER);
    CHECK_INT_EQ(asbi_error_from_status(410, NULL), ASB_EEXPIRED);
    CHECK_INT_EQ(asbi_error_from_status(405, NULL), ASB_EBADREQUEST);
    CHECK_INT_EQ(asbi_error_from_status(418, NULL), ASB_EBADREQUEST);
    CHECK_INT_EQ(asbi_error_from_status(0, NULL), ASB_EPROTOCOL);
    CHECK_INT_EQ(asbi_error_from_status(-1, "Gone"), ASB_EEXPIRED);
}

TEST(status_reply_message)
{
    const char *st = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                     "\"message\":\"Sandbox.agents.x-k8s.io \\\"x\\\" is invalid: "
                     "spec.podTemplate: Required value\",\"reason\":\"Invalid\",\"code\":422}";
    CHECK_INT_EQ(asbi_error_from_reply(422, st, strlen(st)), ASB_EINVALID);
    const asb_error *e = asb_error_last();
    CHECK_INT_EQ(e->code, ASB_EINVALID);
    CHECK_INT_EQ(e->http_status, 422);
    CHECK_STR_EQ(e->reason, "Invalid");
    CHECK(strstr(e->message, "spec.podTemplate: Required value") != NULL);
    CHECK_INT_EQ(asbi_error_from_reply(502, "bad gateway", 11), ASB_ESERVER);
    CHECK(strstr(asb_error_last()->message, "bad gateway") != NULL);
    CHECK_STR_EQ(asb_error_last()->reason, "");
    asb_error_clear();
    CHECK(asb_error_last() == NULL);
}

TEST(strerror_is_total)
{
    for (int c = ASB_EUNKNOWNKIND; c <= 0; c++)
        CHECK(strcmp(asb_strerror(c), "unknown error") != 0);
    CHECK_STR_EQ(asb_strerror(12345), "unknown error");
    CHECK_STR_EQ(asb_strerror(ASB_ENOTFOUND), "not found");
    CHECK_STR_EQ(asb_version(), ASB_VERSION);
}

static void write_file(const char *dir, const char *name, const char *content)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(content, f);
    fclose(f);
}

TEST(client_configuration)
{
    char dir[] = "/tmp/test-libasb-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    unsetenv("ASB_SERVER");
    unsetenv("ASB_TOKEN");
    asb_client *c = NULL;
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.state_dir = dir;
    CHECK_INT_EQ(asb_client_new(&c, &o), ASB_ECONFIG);
    CHECK(strstr(asb_error_last()->message, dir) != NULL);
    write_file(dir, "server", "http://127.0.0.1:1/\n");
    write_file(dir, "token", "abc\n");
    CHECK_INT_EQ(asb_client_new(&c, &o), ASB_OK);
    CHECK_STR_EQ(asb_client_server(c), "http://127.0.0.1:1");
    CHECK_STR_EQ(c->token, "abc");
    /* Nothing listens on port 1: a connection error, not a crash. */
    char *out = NULL;
    CHECK_INT_EQ(asb_object_get(&out, c, "sbx", NULL, "x"), ASB_ECONNECT);
    CHECK(out == NULL);
    CHECK_INT_EQ(asb_object_get(&out, c, "pods", NULL, "x"), ASB_EUNKNOWNKIND);
    CHECK_INT_EQ(asb_object_get(&out, c, "sbx", NULL, ""), ASB_EINVAL);
    asb_client_free(c);
    setenv("ASB_SERVER", "http://127.0.0.2:2", 1);
    setenv("ASB_STATE_DIR", dir, 1);
    CHECK_INT_EQ(asb_client_new(&c, NULL), ASB_OK);
    CHECK_STR_EQ(asb_client_server(c), "http://127.0.0.2:2");
    asb_client_free(c);
    o.server = "ftp://x";
    CHECK_INT_EQ(asb_client_new(&c, &o), ASB_EINVAL);
    o.server = NULL;
    o.version = 99;
    CHECK_INT_EQ(asb_client_new(&c, &o), ASB_EINVAL);
    unsetenv("ASB_SERVER");
    unsetenv("ASB_STATE_DIR");
    char path[512];
    snprintf(path, sizeof(path), "%s/server", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/token", dir);
    unlink(path);
    rmdir(dir);
    asb_client_free(NULL);
}

TEST(patch_typed_and_discovery_arguments)
{
    asb_client *c = NULL;
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.server = "http://127.0.0.1:1";
    o.token = "t";
    CHECK_INT_EQ(asb_client_new(&c, &o), ASB_OK);
    asb_patch_options po = ASB_PATCH_OPTIONS_INIT;
    CHECK_INT_EQ(po.type, ASB_PATCH_MERGE);
    CHECK(po.subresource == NULL);
    CHECK_INT_EQ(asb_object_patch_typed(NULL, c, "sbx", NULL, "x", NULL, &po), ASB_EINVAL);
    po.type = 7;
    CHECK_INT_EQ(asb_object_patch_typed(NULL, c, "sbx", NULL, "x", "{}", &po), ASB_EINVAL);
    CHECK(strstr(asb_error_last()->message, "unknown patch type 7") != NULL);
    po.type = ASB_PATCH_STRATEGIC;
    po.version = 0;
    CHECK_INT_EQ(asb_object_patch_typed(NULL, c, "sbx", NULL, "x", "{}", &po), ASB_EINVAL);
    po.version = ASB_PATCH_OPTIONS_VERSION;
    CHECK_INT_EQ(asb_object_patch_typed(NULL, c, "pods", NULL, "x", "{}", &po), ASB_EUNKNOWNKIND);
    /* Well-formed: it goes to the server, which is not there. */
    CHECK_INT_EQ(asb_object_patch_typed(NULL, c, "sbx", NULL, "x", "{}", &po), ASB_ECONNECT);
    CHECK_INT_EQ(asb_object_patch_typed(NULL, c, "sbx", NULL, "x", "{}", NULL), ASB_ECONNECT);
    char *out = NULL;
    CHECK_INT_EQ(asb_server_discovery(NULL, c, NULL), ASB_EINVAL);
    CHECK_INT_EQ(asb_server_discovery(&out, c, "agents.x-k8s.io/v1beta1"), ASB_ECONNECT);
    CHECK(out == NULL);
    asb_client_free(c);
}

TEST(condition_met)
{
    json_t *o =
        json_loads("{\"metadata\":{\"generation\":2},\"status\":{\"conditions\":["
                   "{\"type\":\"Ready\",\"status\":\"True\",\"observedGeneration\":2},"
                   "{\"type\":\"Suspended\",\"status\":\"False\",\"observedGeneration\":1}]}}",
                   0, NULL);
    CHECK(asbi_condition_met(o, "ready", "true"));
    CHECK(!asbi_condition_met(o, "Ready", "False"));
    CHECK(!asbi_condition_met(o, "Suspended", "False")); /* outdated by generation */
    CHECK(!asbi_condition_met(o, "Finished", "True"));
    json_decref(o);
}

TEST(default_state_dir_rule)
{
    char *dir = NULL;
    setenv("ASB_STATE_DIR", "/tmp/asb-unit-state", 1);
    CHECK_INT_EQ(asb_client_default_state_dir(&dir), ASB_OK);
    CHECK_STR_EQ(dir, "/tmp/asb-unit-state");
    asb_free(dir);
    unsetenv("ASB_STATE_DIR");
    CHECK_INT_EQ(asb_client_default_state_dir(&dir), ASB_OK);
    CHECK_STR_EQ(dir, geteuid() == 0 ? "/var/lib/asb" : dir);
    CHECK(dir && strstr(dir, "asb") != NULL);
    asb_free(dir);
}
