/* The sandbox handle (by socket paths or by Sandbox name) and the pure helpers shared by the
 * file and process halves: path encoding, the one error-code table, backoff, gRPC framing. */
#include <errno.h>
#include <stdbool.h>
#include <strings.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/hex-util.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_MAX_ATTEMPTS 6
#define DEFAULT_RETRY_DELAY_MS 500
#define MAX_RETRY_DELAY_MS 8000
#define DEFAULT_MAX_MESSAGE (64u << 20)

/* Validates opts and allocates a handle with the tuning fields set. */
static int sandbox_alloc(asb_sandbox **ret, const asb_sandbox_options *opts)
{
    if (opts && (opts->version == 0 || opts->version > ASB_SANDBOX_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_options: unknown version %u",
                              opts->version);
    if (opts && (opts->timeout_ms < 0 || opts->connect_timeout_ms < 0 || opts->max_attempts < 0 ||
                 opts->retry_delay_ms < 0))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_options: negative value");
    asb_sandbox *s = calloc(1, sizeof(*s));
    if (!s)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    s->timeout_ms = opts ? opts->timeout_ms : 0;
    s->connect_timeout_ms = opts && opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms
                                                                 : DEFAULT_CONNECT_TIMEOUT_MS;
    s->max_attempts = opts && opts->max_attempts > 0 ? opts->max_attempts : DEFAULT_MAX_ATTEMPTS;
    s->retry_delay_ms =
        opts && opts->retry_delay_ms > 0 ? opts->retry_delay_ms : DEFAULT_RETRY_DELAY_MS;
    *ret = s;
    return ASB_OK;
}

ASB_PUBLIC int asb_sandbox_open_sockets(asb_sandbox **out, const char *rest_socket,
                                        const char *grpc_socket, const asb_sandbox_options *opts)
{
    if (!out || !rest_socket || !*rest_socket || !grpc_socket || !*grpc_socket)
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "asb_sandbox_open_sockets: NULL out or empty socket path");
    *out = NULL;
    asb_sandbox *s = NULL;
    int r = sandbox_alloc(&s, opts);
    if (r != ASB_OK)
        return r;
    s->rest_socket = strdup(rest_socket);
    s->grpc_socket = strdup(grpc_socket);
    if (!s->rest_socket || !s->grpc_socket) {
        asb_sandbox_free(s);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    *out = s;
    return ASB_OK;
}

int asbi_router_url_split(const char *url, char **ret_host, char **ret_port)
{
    *ret_host = *ret_port = NULL;
    if (!url || strncmp(url, "http://", 7) != 0)
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "router URL \"%s\" is not http://HOST:PORT (gRPC needs h2c)",
                              url ? url : "");
    const char *h = url + 7, *end = h + strcspn(h, "/?#"), *colon;
    const char *hs = h, *he;
    if (*h == '[') {
        he = memchr(h, ']', (size_t)(end - h));
        if (!he)
            return asbi_error_set(ASB_EINVAL, 0, NULL, "router URL \"%s\": bad IPv6 host", url);
        hs = h + 1;
        colon = he + 1 < end && he[1] == ':' ? he + 1 : NULL;
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        he = colon ? colon : end;
    }
    if (he == hs || (colon && colon + 1 == end) || (*end && strcmp(end, "/") != 0))
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "router URL \"%s\" is not http://HOST[:PORT]", url);
    *ret_host = strndup(hs, (size_t)(he - hs));
    *ret_port = colon ? strndup(colon + 1, (size_t)(end - colon - 1)) : strdup("80");
    if (!*ret_host || !*ret_port) {
        free(*ret_host);
        free(*ret_port);
        *ret_host = *ret_port = NULL;
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    for (const char *p = *ret_port; *p; p++)
        if (*p < '0' || *p > '9') {
            free(*ret_host);
            free(*ret_port);
            *ret_host = *ret_port = NULL;
            return asbi_error_set(ASB_EINVAL, 0, NULL, "router URL \"%s\": bad port", url);
        }
    return ASB_OK;
}

ASB_PUBLIC int asb_sandbox_open_router(asb_sandbox **out, const char *router_url,
                                       const char *token, const char *ns, const char *name,
                                       const asb_sandbox_options *opts)
{
    if (!out || !router_url || !name || !*name)
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "asb_sandbox_open_router: NULL out, router URL or name");
    *out = NULL;
    asb_sandbox *s = NULL;
    int r = sandbox_alloc(&s, opts);
    if (r != ASB_OK)
        return r;
    r = asbi_router_url_split(router_url, &s->router_host, &s->router_port);
    if (r != ASB_OK) {
        asb_sandbox_free(s);
        return r;
    }
    size_t n = strlen(router_url);
    while (n > 0 && router_url[n - 1] == '/')
        n--;
    s->router_url = strndup(router_url, n);
    s->sandbox_id = strdup(name);
    s->sandbox_ns = strdup(ns && *ns ? ns : "default");
    s->token = token ? strdup(token) : NULL;
    if (!s->router_url || !s->sandbox_id || !s->sandbox_ns || (token && !s->token)) {
        asb_sandbox_free(s);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    *out = s;
    return ASB_OK;
}

ASB_PUBLIC int asb_client_router(char **out, asb_client *client)
{
    if (!out || !client)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_client_router: NULL out or client");
    *out = NULL;
    const char *env = getenv("ASB_ROUTER");
    if (env && *env) {
        if (!(*out = strdup(env)))
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        return ASB_OK;
    }
    char *path = NULL;
    if (!client->state_dir || asprintf(&path, "%s/router", client->state_dir) < 0)
        return asbi_error_set(ASB_ECONFIG, 0, NULL,
                              "no router URL: $ASB_ROUTER is unset and there is no state directory");
    FILE *f = fopen(path, "re");
    char line[1024];
    if (!f || !fgets(line, sizeof(line), f)) {
        if (f)
            fclose(f);
        int r = asbi_error_set(ASB_ECONFIG, 0, NULL,
                               "no router URL: $ASB_ROUTER is unset and %s is missing or empty "
                               "(is `asb serve` running with its router?)",
                               path);
        free(path);
        return r;
    }
    fclose(f);
    free(path);
    line[strcspn(line, "\r\n")] = '\0';
    if (!*line)
        return asbi_error_set(ASB_ECONFIG, 0, NULL, "empty router URL in the state directory");
    if (!(*out = strdup(line)))
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    return ASB_OK;
}

ASB_PUBLIC int asb_sandbox_open_via_router(asb_sandbox **out, asb_client *client, const char *ns,
                                           const char *name, const asb_sandbox_options *opts)
{
    if (!out || !client || !name || !*name)
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "asb_sandbox_open_via_router: NULL out, client or name");
    *out = NULL;
    char *url = NULL;
    int r = asb_client_router(&url, client);
    if (r == ASB_OK)
        r = asb_sandbox_open_router(out, url, client->token, ns, name, opts);
    free(url);
    return r;
}

int asbi_sandbox_socket_paths(const char *state_dir, const char *uid, char **ret_rest,
                              char **ret_grpc)
{
    *ret_rest = *ret_grpc = NULL;
    if (!state_dir || !*state_dir || !uid || !*uid || strchr(uid, '/') || strcmp(uid, ".") == 0 ||
        strcmp(uid, "..") == 0)
        return asbi_error_set(ASB_EPROTOCOL, 0, NULL, "unusable sandbox uid \"%s\"",
                              uid ? uid : "");
    size_t n = strlen(state_dir);
    while (n > 1 && state_dir[n - 1] == '/')
        n--;
    if (asprintf(ret_rest, "%.*s/run/%s/rest.sock", (int)n, state_dir, uid) < 0)
        *ret_rest = NULL;
    if (asprintf(ret_grpc, "%.*s/run/%s/grpc.sock", (int)n, state_dir, uid) < 0)
        *ret_grpc = NULL;
    if (!*ret_rest || !*ret_grpc) {
        free(*ret_rest);
        free(*ret_grpc);
        *ret_rest = *ret_grpc = NULL;
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    return ASB_OK;
}

/* Ready=True, but observed at an older generation than metadata.generation: a spec change (for
 * example a warm adoption rewriting the pod template's labels) the controller has not looked at
 * yet. */
static bool ready_true_but_stale(const json_t *obj)
{
    json_t *conds = json_object_get(json_object_get(obj, "status"), "conditions");
    json_t *gen = json_object_get(json_object_get(obj, "metadata"), "generation");
    for (size_t i = 0; i < json_array_size(conds); i++) {
        json_t *cd = json_array_get(conds, i);
        const char *t = json_string_value(json_object_get(cd, "type"));
        const char *s = json_string_value(json_object_get(cd, "status"));
        if (!t || strcasecmp(t, "Ready") != 0)
            continue;
        json_t *og = json_object_get(cd, "observedGeneration");
        return s && strcasecmp(s, "True") == 0 && json_is_integer(og) && json_is_integer(gen) &&
               json_integer_value(og) < json_integer_value(gen);
    }
    return false;
}

/* How long asb_sandbox_open waits for the controller to re-observe a Sandbox that was Ready
 * before its latest spec change (a claim just adopted it from a warm pool). */
#define SANDBOX_OPEN_STALE_WAIT_MS 10000

/* asb_sandbox_open() on the parsed object (consumed). */
static int open_object(asb_sandbox **out, asb_client *client, const char *ns, const char *name,
                       json_t *obj, const asb_sandbox_options *opts)
{
    int r;
    if (ready_true_but_stale(obj)) {
        /* A warm-adopted sandbox: its claim is Ready (the Sandbox's Ready condition, copied),
         * but the adoption bumped the Sandbox's generation. Wait for the controller to confirm
         * instead of failing the first command run right after `asb claim`; stop as soon as
         * the Sandbox settles any other way (finished, stopped, suspended). */
        asb_wait_options wo = ASB_WAIT_OPTIONS_INIT;
        wo.timeout_ms = SANDBOX_OPEN_STALE_WAIT_MS;
        char *fresh = NULL;
        if (asb_sandbox_wait_settled(&fresh, client, ns, name, &wo) == ASB_OK && fresh) {
            json_t *o2 = json_loads(fresh, 0, NULL);
            if (o2) {
                json_decref(obj);
                obj = o2;
            }
        }
        asb_free(fresh);
    }
    char *rest = NULL, *grpc = NULL, *why = NULL;
    const char *uid = json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
    if (!uid) {
        r = asbi_error_set(ASB_EPROTOCOL, 0, NULL, "sandbox %s has no metadata.uid", name);
        goto out;
    }
    /* Ready, or Finished with its container kept: sandboxd serves files and exec either way. */
    asb_sandbox_phase phase = ASB_SANDBOX_PENDING;
    r = asbi_sandbox_phase(obj, &phase, &why);
    if (r != ASB_OK)
        goto out;
    if (phase != ASB_SANDBOX_READY && phase != ASB_SANDBOX_FINISHED) {
        r = asbi_error_set(ASB_ECONFLICT, 0, "NotReady", "sandbox %s/%s is not ready%s%s%s",
                           ns ? ns : "default", name, *why ? " (" : "", why, *why ? ")" : "");
        goto out;
    }
    r = asbi_sandbox_socket_paths(client->state_dir, uid, &rest, &grpc);
    if (r == ASB_OK)
        r = asb_sandbox_open_sockets(out, rest, grpc, opts);
out:
    free(rest);
    free(grpc);
    free(why);
    json_decref(obj);
    return r;
}

ASB_PUBLIC int asb_sandbox_open(asb_sandbox **out, asb_client *client, const char *ns,
                                const char *name, const asb_sandbox_options *opts)
{
    if (!out || !client || !name || !*name)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_open: NULL out, client or name");
    *out = NULL;
    json_t *obj = NULL;
    int r = asbi_object_get_json(&obj, client, "Sandbox", ns, name);
    if (r != ASB_OK)
        return r;
    return open_object(out, client, ns, name, obj, opts);
}

ASB_PUBLIC int asb_sandbox_open_object(asb_sandbox **out, asb_client *client, const char *ns,
                                       const char *sandbox_json, const asb_sandbox_options *opts)
{
    if (!out || !client || !sandbox_json)
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "asb_sandbox_open_object: NULL out, client or object");
    *out = NULL;
    json_t *obj = json_loads(sandbox_json, 0, NULL);
    if (!obj)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_open_object: not a JSON object");
    const char *n = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!n || !*n) {
        json_decref(obj);
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "asb_sandbox_open_object: the object has no metadata.name");
    }
    /* A copy: open_object may replace obj by a fresher read. */
    _cleanup_free_ char *name = strdup(n);
    if (!name) {
        json_decref(obj);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    return open_object(out, client, ns, name, obj, opts);
}

ASB_PUBLIC void asb_sandbox_free(asb_sandbox *s)
{
    if (!s)
        return;
    free(s->rest_socket);
    free(s->grpc_socket);
    free(s->router_url);
    free(s->router_host);
    free(s->router_port);
    free(s->sandbox_id);
    free(s->sandbox_ns);
    free(s->token);
    free(s);
}

ASB_PUBLIC const char *asb_sandbox_rest_socket(const asb_sandbox *s)
{
    return s ? s->rest_socket : NULL;
}

ASB_PUBLIC const char *asb_sandbox_grpc_socket(const asb_sandbox *s)
{
    return s ? s->grpc_socket : NULL;
}

static int unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '~';
}

char *asbi_sandbox_files_path(const char *path)
{
    static const char prefix[] = "/v1/files/", hex[] = "0123456789ABCDEF";
    size_t n = strlen(path);
    char *o = malloc(sizeof(prefix) + 3 * n + 6);
    if (!o)
        return NULL;
    memcpy(o, prefix, sizeof(prefix) - 1);
    char *p = o + sizeof(prefix) - 1;
    if (strcmp(path, ".") == 0 || strcmp(path, "..") == 0) {
        for (size_t i = 0; i < n; i++)
            p += sprintf(p, "%%2E");
        *p = '\0';
        return o;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (unreserved(c)) {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    *p = '\0';
    return o;
}

static const char *const grpc_names[] = {
    "OK",        "CANCELLED",          "UNKNOWN",          "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",   "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",      "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *asbi_grpc_status_name(int status)
{
    if (status < 0 || (size_t)status >= sizeof(grpc_names) / sizeof(grpc_names[0]))
        return "UNKNOWN";
    return grpc_names[status];
}

/* The one table: sandboxd code names (REST bodies and gRPC statuses) -> public enum. */
int asbi_sandbox_code_from_name(const char *name, int http_status)
{
    static const struct {
        const char *name;
        int code;
    } table[] = {
        {"OK", ASB_OK},
        {"CANCELLED", ASB_ECANCELLED},
        {"UNKNOWN", ASB_ERROR},
        {"INVALID_ARGUMENT", ASB_EBADREQUEST},
        {"OUT_OF_RANGE", ASB_EBADREQUEST},
        {"DEADLINE_EXCEEDED", ASB_ETIMEOUT},
        {"NOT_FOUND", ASB_ENOTFOUND},
        {"ALREADY_EXISTS", ASB_EEXISTS},
        {"PERMISSION_DENIED", ASB_EFORBIDDEN},
        {"UNAUTHENTICATED", ASB_EUNAUTHORIZED},
        {"CONFLICT", ASB_ECONFLICT},
        {"FAILED_PRECONDITION", ASB_ECONFLICT},
        {"ABORTED", ASB_ECONFLICT},
        {"RESOURCE_EXHAUSTED", ASB_ESERVER},
        {"UNIMPLEMENTED", ASB_ESERVER},
        {"INTERNAL", ASB_ESERVER},
        {"UNAVAILABLE", ASB_ESERVER},
        {"DATA_LOSS", ASB_ESERVER},
    };
    if (name && *name)
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
            if (strcmp(name, table[i].name) == 0)
                return table[i].code;
    return http_status ? asbi_error_from_status(http_status, NULL) : ASB_ERROR;
}

int asbi_sandbox_error_from_rest(int http_status, const char *body, size_t len)
{
    json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *name = json_string_value(json_object_get(j, "code"));
    const char *message = json_string_value(json_object_get(j, "message"));
    if (!message) /* the router's (and upstream's) {"detail": ...} */
        message = json_string_value(json_object_get(j, "detail"));
    int code = asbi_sandbox_code_from_name(name, http_status);
    if (code == ASB_OK)
        code = ASB_EPROTOCOL;
    if (message && *message)
        asbi_error_set(code, http_status, name, "%s", message);
    else if (body && len > 0 && !j) {
        while (len > 0 && (body[len - 1] == '\n' || body[len - 1] == '\r'))
            len--;
        asbi_error_set(code, http_status, name, "HTTP %d: %.*s", http_status,
                       (int)(len > 200 ? 200 : len), body);
    } else
        asbi_error_set(code, http_status, name, "HTTP %d (%s)", http_status, asb_strerror(code));
    json_decref(j);
    return code;
}

int asbi_sandbox_error_from_grpc(int status, const char *message)
{
    const char *name = asbi_grpc_status_name(status);
    int code = asbi_sandbox_code_from_name(name, 0);
    if (code == ASB_OK)
        return ASB_OK;
    if (message && *message)
        return asbi_error_set(code, 0, name, "%s", message);
    return asbi_error_set(code, 0, name, "gRPC status %d (%s)", status, name);
}

char *asbi_grpc_message_decode(const char *v, size_t len)
{
    return percent_decode_lenient(v, len, NULL);
}

long asbi_sandbox_backoff_ms(long base_ms, int attempt)
{
    long d = base_ms;
    for (int i = 1; i < attempt && d < MAX_RETRY_DELAY_MS; i++)
        d *= 2;
    return d > MAX_RETRY_DELAY_MS ? MAX_RETRY_DELAY_MS : d;
}

int asbi_grpc_reader_feed(asbi_grpc_reader *r, const uint8_t *data, size_t len,
                          asbi_grpc_msg_cb cb, void *payload)
{
    size_t max = r->max_message ? r->max_message : DEFAULT_MAX_MESSAGE;
    if (buf_append(&r->pending, data, len) < 0)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    size_t off = 0;
    int ret = 0;
    while (r->pending.len - off >= 5) {
        const uint8_t *h = (const uint8_t *)r->pending.data + off;
        uint32_t n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
        if (h[0] != 0) {
            ret = asbi_error_set(ASB_EPROTOCOL, 0, NULL, "compressed gRPC message not supported");
            break;
        }
        if (n > max) {
            ret = asbi_error_set(ASB_EPROTOCOL, 0, NULL, "gRPC message of %u bytes is too large",
                                 n);
            break;
        }
        if (r->pending.len - off - 5 < n)
            break;
        off += 5 + n;
        ret = cb(h + 5, n, payload);
        if (ret)
            break;
    }
    buf_consume(&r->pending, off);
    return ret;
}

void asbi_grpc_reader_done(asbi_grpc_reader *r)
{
    buf_done(&r->pending);
    r->max_message = 0;
}
