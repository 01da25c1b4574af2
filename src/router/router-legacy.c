/* The legacy python-runtime endpoints (spec/UPSTREAM.md §4) served on top of sandboxd through
 * libasb: /execute (gRPC Execute), /upload, /download/, /list/, /exists/ (REST files) and the
 * `/` health. Paths are relative to sandboxd's root (upstream: relative to /app). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "asb/sandbox.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "basic/strv.h"
#include "router/router-internal.h"
#include "router/router-legacy-parse.h"

void router_legacy_response_done(router_legacy_response *r)
{
    free(r->body);
    free(r->extra_header);
    *r = (router_legacy_response){0};
}

static int json_reply(router_legacy_response *out, int status, json_t *o)
{
    out->status = status;
    out->content_type = "application/json";
    if (!o)
        return -ENOMEM;
    out->body = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(o);
    if (!out->body)
        return -ENOMEM;
    out->body_len = strlen(out->body);
    return 0;
}

static int message_reply(router_legacy_response *out, int status, const char *msg)
{
    return json_reply(out, status, json_pack("{s:s}", "message", msg));
}

static void sockets_of(const router_target *t, const char **rest, const char **grpc)
{
    *rest = t->rest && strncmp(t->rest, "unix:", 5) == 0 ? t->rest + 5 : t->rest;
    *grpc = t->grpc && strncmp(t->grpc, "unix:", 5) == 0 ? t->grpc + 5 : t->grpc;
}

static asb_sandbox *open_target(const router_target *t)
{
    const char *rest, *grpc;
    sockets_of(t, &rest, &grpc);
    asb_sandbox_options o = ASB_SANDBOX_OPTIONS_INIT;
    o.max_attempts = 1;
    o.connect_timeout_ms = 5000;
    asb_sandbox *s = NULL;
    if (asb_sandbox_open_sockets(&s, rest, grpc, &o) != ASB_OK)
        return NULL;
    return s;
}

/* Text for JSON: invalid UTF-8 bytes become U+FFFD. Owned. */
static json_t *json_text(const char *data, size_t len)
{
    json_t *j = json_stringn(data, len);
    if (j)
        return j;
    char *t = malloc(3 * len + 1);
    if (!t)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c < 0x80)
            t[n++] = (char)c;
        else {
            json_t *one = NULL;
            size_t k = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
            if (k > 1 && i + k <= len && (one = json_stringn(data + i, k))) {
                json_decref(one);
                memcpy(t + n, data + i, k);
                n += k;
                i += k - 1;
            } else {
                memcpy(t + n, "\xef\xbf\xbd", 3);
                n += 3;
            }
        }
    }
    j = json_stringn(t, n);
    free(t);
    return j;
}

static long exec_timeout_seconds(void)
{
    const char *v = getenv("SANDBOX_EXEC_TIMEOUT_SECONDS");
    if (!v || !*v)
        return 300;
    char *end;
    double d = strtod(v, &end);
    if (*end || !isfinite(d) || d <= 0)
        return 300;
    return (long)d > 0 ? (long)d : 1;
}

static int exec_failed(router_legacy_response *out, const char *why)
{
    _cleanup_free_ char *m = NULL;
    if (asprintf(&m, "Failed to execute command: %s", why) < 0)
        return -ENOMEM;
    return json_reply(out, 200,
                      json_pack("{s:s,s:s,s:i}", "stdout", "", "stderr", m, "exit_code", 1));
}

static int unprocessable(router_legacy_response *out, const char *type, const char *msg)
{
    return json_reply(out, 422,
                      json_pack("{s:[{s:s,s:[s,s],s:s}]}", "detail", "type", type, "loc", "body",
                                "command", "msg", msg));
}

static int do_execute(const router_target *t, const char *body, size_t len,
                      router_legacy_response *out)
{
    json_error_t jerr;
    json_t *req = json_loadb(body ? body : "", len, 0, &jerr);
    if (!req)
        return unprocessable(out, "json_invalid", "JSON decode error");
    const char *command = json_string_value(json_object_get(req, "command"));
    if (!command) {
        json_decref(req);
        return unprocessable(out, "missing", "Field required");
    }
    char **argv = NULL;
    const char *perr = NULL;
    int r = router_shlex_split(command, &argv, &perr);
    json_decref(req);
    if (r < 0)
        return r == -ENOMEM ? r : exec_failed(out, perr);
    if (!argv[0]) {
        strv_free(argv);
        return exec_failed(out, "list index out of range");
    }
    asb_sandbox *s = open_target(t);
    if (!s) {
        strv_free(argv);
        return -ENOMEM;
    }
    long timeout = exec_timeout_seconds();
    asb_sandbox_process_options po = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    po.timeout_ms = timeout * 1000;
    asb_sandbox_result *res = NULL;
    r = asb_sandbox_execute(&res, s, (const char *const *)argv, &po);
    asb_sandbox_free(s);
    if (r == ASB_ECONNECT) {
        strv_free(argv);
        return -ECONNREFUSED;
    }
    if (r == ASB_ETIMEOUT) {
        /* Python's repr of the argument list. */
        _cleanup_buf_ buf list = BUF_INIT;
        _cleanup_free_ char *m = NULL;
        int k = buf_append_byte(&list, '[');
        for (size_t i = 0; argv[i] && k >= 0; i++)
            k = buf_appendf(&list, "%s'%s'", i ? ", " : "", argv[i]);
        if (k >= 0)
            k = buf_append_byte(&list, ']');
        strv_free(argv);
        if (k < 0 ||
            asprintf(&m, "Command '%s' timed out after %ld seconds", list.data, timeout) < 0)
            return -ENOMEM;
        return exec_failed(out, m);
    }
    strv_free(argv);
    if (r != ASB_OK) {
        const asb_error *e = asb_error_last();
        return exec_failed(out, e && *e->message ? e->message : asb_strerror(r));
    }
    json_t *o = json_object();
    if (o) {
        json_object_set_new(o, "stdout", json_text(res->out_data, res->out_len));
        json_object_set_new(o, "stderr", json_text(res->err_data, res->err_len));
        json_object_set_new(o, "exit_code", json_integer(res->exit_code));
    }
    asb_sandbox_result_free(res);
    return json_reply(out, 200, o);
}

static int do_upload(const router_target *t, const char *ctype, const char *body, size_t len,
                     router_legacy_response *out)
{
    const char *data = NULL;
    size_t dlen = 0;
    _cleanup_free_ char *filename = NULL;
    int r = router_multipart_file(ctype, body, len, &filename, &data, &dlen);
    if (r == -ENOMEM)
        return r;
    if (r < 0)
        return json_reply(out, 422,
                          json_pack("{s:[{s:s,s:[s,s],s:s}]}", "detail", "type", "missing", "loc",
                                    "body", "file", "msg", "Field required"));
    asb_sandbox *s = open_target(t);
    if (!s)
        return -ENOMEM;
    r = asb_sandbox_file_write_buffer(s, filename, 0644, data, dlen);
    asb_sandbox_free(s);
    if (r == ASB_ECONNECT)
        return -ECONNREFUSED;
    if (r == ASB_EFORBIDDEN)
        return message_reply(out, 403, "Access denied");
    if (r != ASB_OK) {
        const asb_error *e = asb_error_last();
        _cleanup_free_ char *m = NULL;
        if (asprintf(&m, "File upload failed: %s",
                     e && *e->message ? e->message : asb_strerror(r)) < 0)
            return -ENOMEM;
        return message_reply(out, 500, m);
    }
    _cleanup_free_ char *m = NULL;
    if (asprintf(&m, "File '%s' uploaded successfully.", filename) < 0)
        return -ENOMEM;
    return message_reply(out, 200, m);
}

static int do_list(const router_target *t, const char *path, router_legacy_response *out)
{
    asb_sandbox *s = open_target(t);
    if (!s)
        return -ENOMEM;
    asb_sandbox_file_entry *e = NULL;
    size_t n = 0;
    int r = asb_sandbox_file_list(&e, &n, s, *path ? path : "/");
    asb_sandbox_free(s);
    if (r == ASB_ECONNECT)
        return -ECONNREFUSED;
    if (r == ASB_EFORBIDDEN)
        return message_reply(out, 403, "Access denied");
    if (r == ASB_ENOTFOUND || r == ASB_EBADREQUEST)
        return message_reply(out, 404, "Path is not a directory");
    if (r != ASB_OK) {
        const asb_error *le = asb_error_last();
        _cleanup_free_ char *m = NULL;
        if (asprintf(&m, "List files failed: %s",
                     le && *le->message ? le->message : asb_strerror(r)) < 0)
            return -ENOMEM;
        return message_reply(out, 500, m);
    }
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(
            a, json_pack("{s:s,s:I,s:s,s:f}", "name", e[i].name, "size", (json_int_t)e[i].size,
                         "type", e[i].type == ASB_SANDBOX_DIRECTORY ? "directory" : "file",
                         "mod_time", (double)e[i].modified_at));
    asb_sandbox_file_entries_free(e, n);
    return json_reply(out, 200, a);
}

static int do_exists(const router_target *t, const char *path, router_legacy_response *out)
{
    asb_sandbox *s = open_target(t);
    if (!s)
        return -ENOMEM;
    int exists = 0;
    int r = asb_sandbox_file_exists(&exists, s, *path ? path : "/");
    asb_sandbox_free(s);
    if (r == ASB_ECONNECT)
        return -ECONNREFUSED;
    if (r == ASB_EFORBIDDEN)
        return message_reply(out, 403, "Access denied");
    if (r != ASB_OK && r != ASB_ENOTFOUND)
        exists = 0;
    return json_reply(out, 200, json_pack("{s:s,s:b}", "path", path, "exists", exists));
}

static bool target_has(const char *target, const char *prefix)
{
    return strncmp(target, prefix, strlen(prefix)) == 0;
}

static bool path_eq(const char *target, const char *want)
{
    size_t n = strlen(want);
    return strncmp(target, want, n) == 0 && (target[n] == '\0' || target[n] == '?');
}

bool router_legacy_is_download(const char *method, const char *path)
{
    return (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) &&
           target_has(path, "/download/");
}

int router_legacy_handle(const router_target *t, const char *method, const char *path,
                         const char *content_type, const char *body, size_t body_len,
                         router_legacy_response *out)
{
    *out = (router_legacy_response){0};
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (path_eq(path, "/")) {
        if (!get)
            return json_reply(out, 405, json_pack("{s:s}", "detail", "Method Not Allowed"));
        return json_reply(
            out, 200,
            json_pack("{s:s,s:s}", "status", "ok", "message", "Sandbox Runtime is active."));
    }
    if (path_eq(path, "/execute") || path_eq(path, "/upload")) {
        if (!post)
            return json_reply(out, 405, json_pack("{s:s}", "detail", "Method Not Allowed"));
        if (path_eq(path, "/execute"))
            return do_execute(t, body, body_len, out);
        return do_upload(t, content_type, body, body_len, out);
    }
    static const char *const prefixes[] = {"/list/", "/exists/", "/download/"};
    for (size_t i = 0; i < 3; i++) {
        if (!target_has(path, prefixes[i]))
            continue;
        if (!get)
            return json_reply(out, 405, json_pack("{s:s}", "detail", "Method Not Allowed"));
        _cleanup_free_ char *p = NULL;
        int r = router_legacy_path(path, prefixes[i], &p);
        if (r < 0)
            return json_reply(out, 404, json_pack("{s:s}", "detail", "Not Found"));
        if (i == 0)
            return do_list(t, p, out);
        if (i == 1)
            return do_exists(t, p, out);
        return -EINVAL; /* downloads go through router_legacy_download */
    }
    return json_reply(out, 404, json_pack("{s:s}", "detail", "Not Found"));
}

typedef struct dl {
    int (*head_cb)(int, const char *, const char *, long long, void *);
    int (*data_cb)(const char *, size_t, void *);
    void *payload;
    const char *extra;
    bool started;
} dl;

static int dl_sink(const char *data, size_t len, void *payload)
{
    dl *d = payload;
    if (!d->started) {
        d->started = true;
        int r = d->head_cb(200, "application/octet-stream", d->extra, -1, d->payload);
        if (r < 0)
            return r;
    }
    return d->data_cb(data, len, d->payload);
}

static int dl_simple(dl *d, int status, const char *msg)
{
    json_t *o = json_pack("{s:s}", "message", msg);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return -ENOMEM;
    int r = d->head_cb(status, "application/json", NULL, (long long)strlen(s), d->payload);
    if (r >= 0)
        r = d->data_cb(s, strlen(s), d->payload);
    free(s);
    return r;
}

int router_legacy_download(const router_target *t, const char *path,
                           int (*head_cb)(int, const char *, const char *, long long, void *),
                           int (*data_cb)(const char *, size_t, void *), void *payload)
{
    _cleanup_free_ char *p = NULL, *extra = NULL;
    dl d = {.head_cb = head_cb, .data_cb = data_cb, .payload = payload};
    if (router_legacy_path(path, "/download/", &p) < 0)
        return dl_simple(&d, 404, "File not found");
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    if (asprintf(&extra, "Content-Disposition: attachment; filename=\"%s\"", base) < 0)
        return -ENOMEM;
    d.extra = extra;
    asb_sandbox *s = open_target(t);
    if (!s)
        return -ENOMEM;
    /* A directory is "not found" for a download: ask for a listing first (cheap). */
    asb_sandbox_file_entry *e = NULL;
    size_t n = 0;
    int r = asb_sandbox_file_list(&e, &n, s, *p ? p : "/");
    asb_sandbox_file_entries_free(e, n);
    if (r == ASB_OK || r == ASB_ENOTFOUND) {
        asb_sandbox_free(s);
        return dl_simple(&d, 404, "File not found");
    }
    if (r == ASB_EFORBIDDEN) {
        asb_sandbox_free(s);
        return dl_simple(&d, 403, "Access denied");
    }
    if (r == ASB_ECONNECT) {
        asb_sandbox_free(s);
        return -ECONNREFUSED;
    }
    r = asb_sandbox_file_read(s, p, dl_sink, &d);
    asb_sandbox_free(s);
    if (r == ASB_OK && !d.started)
        r = dl_sink("", 0, &d);
    if (r == ASB_OK)
        return 0;
    if (d.started)
        return r < 0 ? r : -EIO;
    if (r == ASB_ENOTFOUND)
        return dl_simple(&d, 404, "File not found");
    if (r == ASB_EFORBIDDEN)
        return dl_simple(&d, 403, "Access denied");
    return -ECONNREFUSED;
}
