/* libasb sandbox client, the pure parts: path encoding, socket path derivation, the error
 * mapping (REST bodies and gRPC statuses), grpc-message decoding, gRPC message reassembly,
 * backoff and option validation (no daemon needed). */
#include <stdlib.h>
#include <string.h>

#include "asb/asb.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"
#include "unit.h"

TEST(files_path_encoding)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"", "/v1/files/"},
        {"a.txt", "/v1/files/a.txt"},
        {"dir/sub/file.txt", "/v1/files/dir%2Fsub%2Ffile.txt"},
        {"/abs", "/v1/files/%2Fabs"},
        {"a b?c#d%e&f=g+h", "/v1/files/a%20b%3Fc%23d%25e%26f%3Dg%2Bh"},
        {"A-Z_a~z.0", "/v1/files/A-Z_a~z.0"},
        {".", "/v1/files/%2E"},
        {"..", "/v1/files/%2E%2E"},
        {"../etc", "/v1/files/..%2Fetc"},
        {"\xc3\xa9\x01\xff", "/v1/files/%C3%A9%01%FF"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *p = asbi_sandbox_files_path(cases[i].in);
        CHECK_STR_EQ(p, cases[i].out);
        free(p);
    }
}

TEST(socket_paths)
{
    char *rest = NULL, *grpc = NULL;
    CHECK_INT_EQ(asbi_sandbox_socket_paths("/var/lib/asb/", "1234-ab", &rest, &grpc), ASB_OK);
    CHECK_STR_EQ(rest, "/var/lib/asb/run/1234-ab/rest.sock");
    CHECK_STR_EQ(grpc, "/var/lib/asb/run/1234-ab/grpc.sock");
    free(rest);
    free(grpc);
    const char *bad[] = {"", ".", "..", "a/b", "../x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_INT_EQ(asbi_sandbox_socket_paths("/s", bad[i], &rest, &grpc), ASB_EPROTOCOL);
        CHECK(rest == NULL && grpc == NULL);
    }
}

TEST(code_names)
{
    CHECK_INT_EQ(asbi_sandbox_code_from_name("NOT_FOUND", 0), ASB_ENOTFOUND);
    CHECK_INT_EQ(asbi_sandbox_code_from_name("PERMISSION_DENIED", 0), ASB_EFORBIDDEN);
    CHECK_INT_EQ(asbi_sandbox_code_from_name("INVALID_ARGUMENT", 0), ASB_EBADREQUEST);
    CHECK_INT_EQ(asbi_sandbox_code_from_name("CONFLICT", 0), ASB_ECONFLICT);
    CHECK_INT_EQ(asbi_sandbox_code_from_name("FAILED_PRECONDITION", 0), ASB_ECONFLICT);
    CHECK_INT_EQ(asbi_sandbox_code_from_name("INTERNAL", 0), ASB_ESERVER);
    CHECK_INT_EQ(asbi_sandbox_code_from_name("UNAVAILABLE", 0), ASB_ESERVER);
    CHECK_INT_EQ(asbi_sandbox_code_from_name("DEADLINE_EXCEEDED", 0), ASB_ETIMEOUT);
    CHECK_INT_EQ(asbi_sandbox_code_from_name("CANCELLED", 0), ASB_ECANCELLED);
    CHECK_INT_EQ(asbi_sandbox_code_from_name("UNAUTHENTICATED", 0), ASB_EUNAUTHORIZED);
    /* unknown names fall back to the HTTP status */
    CHECK_INT_EQ(asbi_sandbox_code_from_name("WHATEVER", 404), ASB_ENOTFOUND);
    CHECK_INT_EQ(asbi_sandbox_code_from_name(NULL, 405), ASB_EBADREQUEST);
    CHECK_INT_EQ(asbi_sandbox_code_from_name(NULL, 503), ASB_ESERVER);
    CHECK_INT_EQ(asbi_sandbox_code_from_name(NULL, 0), ASB_ERROR);
    CHECK_STR_EQ(asbi_grpc_status_name(7), "PERMISSION_DENIED");
    CHECK_STR_EQ(asbi_grpc_status_name(16), "UNAUTHENTICATED");
    CHECK_STR_EQ(asbi_grpc_status_name(17), "UNKNOWN");
    CHECK_STR_EQ(asbi_grpc_status_name(-1), "UNKNOWN");
}

TEST(rest_errors)
{
    const char *body = "{\"code\":\"PERMISSION_DENIED\",\"message\":\"path traversal outside "
                       "sandbox root is forbidden\"}\n";
    CHECK_INT_EQ(asbi_sandbox_error_from_rest(403, body, strlen(body)), ASB_EFORBIDDEN);
    const asb_error *e = asb_error_last();
    CHECK(e != NULL);
    CHECK_INT_EQ(e->code, ASB_EFORBIDDEN);
    CHECK_INT_EQ(e->http_status, 403);
    CHECK_STR_EQ(e->reason, "PERMISSION_DENIED");
    CHECK_STR_EQ(e->message, "path traversal outside sandbox root is forbidden");
    /* Go ServeMux text bodies */
    const char *text = "404 page not found\n";
    CHECK_INT_EQ(asbi_sandbox_error_from_rest(404, text, strlen(text)), ASB_ENOTFOUND);
    CHECK_STR_EQ(asb_error_last()->message, "HTTP 404: 404 page not found");
    CHECK_STR_EQ(asb_error_last()->reason, "");
    /* no body (HEAD) */
    CHECK_INT_EQ(asbi_sandbox_error_from_rest(500, NULL, 0), ASB_ESERVER);
    CHECK_STR_EQ(asb_error_last()->message, "HTTP 500 (server error)");
    /* a body code wins over the status */
    const char *c = "{\"code\":\"CONFLICT\",\"message\":\"m\"}";
    CHECK_INT_EQ(asbi_sandbox_error_from_rest(400, c, strlen(c)), ASB_ECONFLICT);
}

TEST(grpc_errors)
{
    CHECK_INT_EQ(asbi_sandbox_error_from_grpc(0, NULL), ASB_OK);
    CHECK_INT_EQ(asbi_sandbox_error_from_grpc(5, "process 7 not found"), ASB_ENOTFOUND);
    const asb_error *e = asb_error_last();
    CHECK_STR_EQ(e->reason, "NOT_FOUND");
    CHECK_STR_EQ(e->message, "process 7 not found");
    CHECK_INT_EQ(e->http_status, 0);
    CHECK_INT_EQ(asbi_sandbox_error_from_grpc(3, ""), ASB_EBADREQUEST);
    CHECK_STR_EQ(asb_error_last()->message, "gRPC status 3 (INVALID_ARGUMENT)");
    CHECK_INT_EQ(asbi_sandbox_error_from_grpc(42, "x"), ASB_ERROR);
    CHECK_STR_EQ(asb_error_last()->reason, "UNKNOWN");
}

TEST(grpc_message_decode)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"cwd: access denied: %2E%2E%2F%2E%2E", "cwd: access denied: ../.."},
        {"100%25 sure", "100% sure"},
        {"bad %zz and %4", "bad %zz and %4"},
        {"trailing %", "trailing %"},
        {"%C3%A9", "\xc3\xa9"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *d = asbi_grpc_message_decode(cases[i].in, strlen(cases[i].in));
        CHECK_STR_EQ(d, cases[i].out);
        free(d);
    }
}

typedef struct seen {
    char msgs[8][32];
    int n;
    int stop_at;
} seen;

static int collect(const uint8_t *m, size_t len, void *payload)
{
    seen *s = payload;
    if (s->n < 8 && len < 32) {
        memcpy(s->msgs[s->n], m, len);
        s->msgs[s->n][len] = '\0';
    }
    s->n++;
    return s->n == s->stop_at ? 99 : 0;
}

TEST(grpc_reader_reassembly)
{
    /* two messages ("hello", "") and the start of a third ("abc"), fed one byte at a time */
    const uint8_t wire[] = {0, 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o', 0, 0, 0, 0, 0,
                            0, 0, 0, 0, 3, 'a', 'b'};
    asbi_grpc_reader r = {0};
    seen s = {0};
    for (size_t i = 0; i < sizeof(wire); i++)
        CHECK_INT_EQ(asbi_grpc_reader_feed(&r, wire + i, 1, collect, &s), 0);
    CHECK_INT_EQ(s.n, 2);
    CHECK_STR_EQ(s.msgs[0], "hello");
    CHECK_STR_EQ(s.msgs[1], "");
    CHECK_INT_EQ(r.pending.len, 7); /* the partial third message stays buffered */
    CHECK_INT_EQ(asbi_grpc_reader_feed(&r, (const uint8_t *)"c", 1, collect, &s), 0);
    CHECK_INT_EQ(s.n, 3);
    CHECK_STR_EQ(s.msgs[2], "abc");
    CHECK_INT_EQ(r.pending.len, 0);
    asbi_grpc_reader_done(&r);

    /* a callback's non-zero value stops delivery and is returned */
    seen t = {.stop_at = 1};
    const uint8_t two[] = {0, 0, 0, 0, 1, 'x', 0, 0, 0, 0, 1, 'y'};
    CHECK_INT_EQ(asbi_grpc_reader_feed(&r, two, sizeof(two), collect, &t), 99);
    CHECK_INT_EQ(t.n, 1);
    asbi_grpc_reader_done(&r);

    /* compressed flag and oversized length are protocol errors */
    const uint8_t comp[] = {1, 0, 0, 0, 1, 'x'};
    CHECK_INT_EQ(asbi_grpc_reader_feed(&r, comp, sizeof(comp), collect, &s), ASB_EPROTOCOL);
    asbi_grpc_reader_done(&r);
    r.max_message = 16;
    const uint8_t big[] = {0, 0, 0, 0, 17};
    CHECK_INT_EQ(asbi_grpc_reader_feed(&r, big, sizeof(big), collect, &s), ASB_EPROTOCOL);
    asbi_grpc_reader_done(&r);
}

TEST(backoff)
{
    CHECK_INT_EQ(asbi_sandbox_backoff_ms(500, 1), 500);
    CHECK_INT_EQ(asbi_sandbox_backoff_ms(500, 2), 1000);
    CHECK_INT_EQ(asbi_sandbox_backoff_ms(500, 5), 8000);
    CHECK_INT_EQ(asbi_sandbox_backoff_ms(500, 6), 8000);
    CHECK_INT_EQ(asbi_sandbox_backoff_ms(500, 1000), 8000);
}

TEST(open_sockets_options)
{
    asb_sandbox *s = NULL;
    CHECK_INT_EQ(asb_sandbox_open_sockets(&s, "/r", "", NULL), ASB_EINVAL);
    CHECK_INT_EQ(asb_sandbox_open_sockets(NULL, "/r", "/g", NULL), ASB_EINVAL);
    asb_sandbox_options o = ASB_SANDBOX_OPTIONS_INIT;
    o.version = 99;
    CHECK_INT_EQ(asb_sandbox_open_sockets(&s, "/r", "/g", &o), ASB_EINVAL);
    o.version = ASB_SANDBOX_OPTIONS_VERSION;
    o.max_attempts = -1;
    CHECK_INT_EQ(asb_sandbox_open_sockets(&s, "/r", "/g", &o), ASB_EINVAL);
    CHECK_INT_EQ(asb_sandbox_open_sockets(&s, "/r", "/g", NULL), ASB_OK);
    CHECK_STR_EQ(asb_sandbox_rest_socket(s), "/r");
    CHECK_STR_EQ(asb_sandbox_grpc_socket(s), "/g");
    CHECK_INT_EQ(s->max_attempts, 6);
    CHECK_INT_EQ(s->retry_delay_ms, 500);
    /* argument checks before any connection */
    const char *const empty[] = {NULL};
    asb_sandbox_result *res = NULL;
    CHECK_INT_EQ(asb_sandbox_execute(&res, s, empty, NULL), ASB_EINVAL);
    asb_sandbox_process_options po = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    const char *env[] = {"NOEQUALS", NULL};
    po.env = env;
    const char *const argv[] = {"true", NULL};
    CHECK_INT_EQ(asb_sandbox_execute(&res, s, argv, &po), ASB_EINVAL);
    CHECK_INT_EQ(asb_sandbox_file_write_buffer(s, "x", 01000, "", 0), ASB_EINVAL);
    asb_sandbox_free(s);
    asb_sandbox_free(NULL);
    asb_sandbox_result_free(NULL);
    asb_sandbox_file_entries_free(NULL, 0);
}

/* The phase of a Sandbox object: generation 2, conditions as the local reconciler writes them. */
static int phase_of(const char *extra_md, const char *spec, const char *status, char **why)
{
    char obj[2048];
    snprintf(obj, sizeof(obj),
             "{\"metadata\":{\"name\":\"s\",\"generation\":2%s},\"spec\":{%s},\"status\":{%s}}",
             extra_md, spec, status);
    asb_sandbox_phase p = 99;
    int r = asb_sandbox_phase_of(&p, why, obj);
    return r == ASB_OK ? (int)p : r;
}

#define COND(t, s, r, m, g)                                                                        \
    "{\"type\":\"" t "\",\"status\":\"" s "\",\"reason\":\"" r "\",\"message\":\"" m               \
    "\",\"observedGeneration\":" #g "}"

TEST(sandbox_phase)
{
    char *why = NULL;
    CHECK_INT_EQ(phase_of("", "", "", &why), ASB_SANDBOX_PENDING);
    CHECK_STR_EQ(why, "");
    free(why);
    CHECK_INT_EQ(phase_of("", "",
                          "\"conditions\":[" COND("Ready", "True", "DependenciesReady",
                                                  "Pod is Ready", 2) "]",
                          NULL),
                 ASB_SANDBOX_READY);
    /* Ready about an older spec: not yet confirmed. */
    CHECK_INT_EQ(phase_of("", "",
                          "\"conditions\":[" COND("Ready", "True", "DependenciesReady",
                                                  "Pod is Ready", 1) "]",
                          NULL),
                 ASB_SANDBOX_PENDING);
    CHECK_INT_EQ(phase_of("", "",
                          "\"conditions\":[" COND("Ready", "False", "DependenciesNotReady",
                                                  "Pod does not exist", 2) "]",
                          NULL),
                 ASB_SANDBOX_PENDING);
    /* Finished with its container (status.selector) is served; without it, gone. */
    const char *fin =
        "\"conditions\":[" COND("Ready", "False", "PodFailed", "Pod failed", 2) "," COND(
            "Finished", "True", "PodFailed", "main process exited with code 3", 2) "]";
    char st[1024];
    snprintf(st, sizeof(st), "%s,\"selector\":\"agents.x-k8s.io/sandbox-name-hash=1\"", fin);
    CHECK_INT_EQ(phase_of("", "", st, &why), ASB_SANDBOX_FINISHED);
    CHECK_STR_EQ(why, "PodFailed: main process exited with code 3");
    free(why);
    CHECK_INT_EQ(phase_of("", "", fin, NULL), ASB_SANDBOX_FINISHED_GONE);
    /* Terminal reasons at the current generation stop; at an older one a new spec is pending. */
    CHECK_INT_EQ(phase_of("", "",
                          "\"conditions\":[" COND("Ready", "False", "ImageNotSupported",
                                                  "image \\\"x\\\" is not supported", 2) "]",
                          &why),
                 ASB_SANDBOX_STOPPED);
    CHECK_STR_EQ(why, "ImageNotSupported: image \"x\" is not supported");
    free(why);
    CHECK_INT_EQ(phase_of("", "",
                          "\"conditions\":[" COND("Ready", "False", "ReconcilerError",
                                                  "Error seen: x", 1) "]",
                          NULL),
                 ASB_SANDBOX_PENDING);
    /* Suspended by spec (whatever the status says yet); being deleted stops. */
    CHECK_INT_EQ(phase_of("", "\"operatingMode\":\"Suspended\"",
                          "\"conditions\":[" COND("Ready", "True", "DependenciesReady",
                                                  "Pod is Ready", 2) "]",
                          &why),
                 ASB_SANDBOX_SUSPENDED);
    CHECK_STR_EQ(why, "SandboxSuspended: spec.operatingMode is Suspended");
    free(why);
    CHECK_INT_EQ(phase_of(",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"", "", "", NULL),
                 ASB_SANDBOX_STOPPED);
    asb_sandbox_phase p;
    CHECK_INT_EQ(asb_sandbox_phase_of(&p, NULL, "[1]"), ASB_EPROTOCOL);
    CHECK_INT_EQ(asb_sandbox_phase_of(&p, NULL, "not json"), ASB_EPROTOCOL);
    CHECK_INT_EQ(asb_sandbox_phase_of(NULL, NULL, "{}"), ASB_EINVAL);
}
