/* Sandbox files over sandboxd's REST API on its unix socket (libcurl), with upstream's retry
 * rules: connection failures and 500/502/503/504 are retried with exponential backoff, as long as
 * the request body can be replayed and no byte of a streamed reply was delivered yet. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/buf.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"

#define ERROR_BODY_MAX 4096
#define LIST_BODY_MAX (8u << 20)

typedef struct request {
    const char *method; /* "GET", "HEAD", "PUT", "DELETE" */
    const char *path;
    const char *query; /* appended after '?', or NULL */
    /* request body: a buffer (replayable) or a source callback (not) */
    const char *body;
    size_t body_len;
    int has_body;
    asb_sandbox_source_cb source;
    void *source_payload;
    /* 2xx reply body: streamed to sink, or collected (up to collect_max) when sink is NULL */
    asb_sandbox_data_cb sink;
    void *sink_payload;
    size_t collect_max;
} request;

typedef struct transfer {
    const request *req;
    CURL *curl;
    size_t sent;      /* offset in req->body */
    size_t delivered; /* 2xx bytes given to the sink */
    int sink_ret;     /* the sink's non-zero return */
    int too_large, not_json;
    buf body; /* collected body (2xx without sink, or the error body) */
    size_t max;
    long status;
} transfer;

/* Collects n more bytes of the body, at most t->max in all. */
static int collect(transfer *t, const char *data, size_t n)
{
    if (t->body.len + n > t->max)
        return -EFBIG;
    return buf_append(&t->body, data, n);
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
    transfer *t = userdata;
    size_t n = size * nmemb;
    if (t->status == 0)
        curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->status);
    if (t->status >= 200 && t->status <= 299) {
        if (t->req->sink) {
            int r = t->req->sink(data, n, t->req->sink_payload);
            if (r) {
                t->sink_ret = r;
                return 0;
            }
            t->delivered += n;
            return n;
        }
        if (t->body.len == 0) {
            char *ct = NULL;
            curl_easy_getinfo(t->curl, CURLINFO_CONTENT_TYPE, &ct);
            if (!ct || strncmp(ct, "application/json", 16) != 0) {
                t->not_json = 1;
                return 0;
            }
        }
        t->max = t->req->collect_max;
        if (collect(t, data, n) < 0) {
            t->too_large = 1;
            return 0;
        }
        return n;
    }
    t->max = ERROR_BODY_MAX;
    if (t->body.len < ERROR_BODY_MAX)
        collect(t, data, n > ERROR_BODY_MAX - t->body.len ? ERROR_BODY_MAX - t->body.len : n);
    return n;
}

static size_t on_read(char *dst, size_t size, size_t nmemb, void *userdata)
{
    transfer *t = userdata;
    size_t cap = size * nmemb;
    if (t->req->source) {
        long n = t->req->source(dst, cap, t->req->source_payload);
        if (n < 0)
            return CURL_READFUNC_ABORT;
        return (size_t)n > cap ? cap : (size_t)n;
    }
    size_t n = t->req->body_len - t->sent;
    if (n > cap)
        n = cap;
    memcpy(dst, t->req->body + t->sent, n);
    t->sent += n;
    return n;
}

static int error_from_curl(const asb_sandbox *s, CURLcode rc, const char *curl_detail)
{
    const char *detail = curl_detail[0] ? curl_detail : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return asbi_error_set(ASB_ETIMEOUT, 0, NULL, "request to sandboxd at %s timed out: %s",
                              s->router_url ? s->router_url : s->rest_socket, detail);
    case CURLE_ABORTED_BY_CALLBACK:
        return asbi_error_set(ASB_ECANCELLED, 0, NULL, "cancelled by the source callback");
    case CURLE_OUT_OF_MEMORY:
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    default:
        return asbi_error_set(ASB_ECONNECT, 0, NULL, "the connection to sandboxd at %s failed: %s",
                              s->router_url ? s->router_url : s->rest_socket, detail);
    }
}

/* The router's routing headers (REST port 8080) and the bearer token. */
static int router_headers(const asb_sandbox *s, struct curl_slist **h)
{
    const char *fmt[] = {"X-Sandbox-ID: %s", "X-Sandbox-Namespace: %s", "X-Sandbox-Port: 8080",
                         "Authorization: Bearer %s"};
    const char *val[] = {s->sandbox_id, s->sandbox_ns, "", s->token};
    for (size_t i = 0; i < 4; i++) {
        if (i == 3 && (!s->token || !*s->token))
            break;
        char *line = NULL;
        struct curl_slist *tmp;
        if (asprintf(&line, fmt[i], val[i]) < 0)
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        tmp = curl_slist_append(*h, line);
        free(line);
        if (!tmp)
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        *h = tmp;
    }
    return ASB_OK;
}

/* One attempt. Returns ASB_OK with t->status set (any status), or an error (set). */
static int attempt(asb_sandbox *s, const request *req, transfer *t)
{
    char curl_detail[CURL_ERROR_SIZE] = "";
    char *url = NULL;
    struct curl_slist *h = NULL, *tmp;
    int ret = asbi_curl_load();
    if (ret != ASB_OK)
        return ret;
    CURL *c = curl_easy_init();
    if (!c)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    t->curl = c;
    if (asprintf(&url, "%s%s%s%s", s->router_url ? s->router_url : "http://localhost", req->path,
                 req->query ? "?" : "", req->query ? req->query : "") < 0) {
        url = NULL;
        ret = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        goto out;
    }
    if (!(tmp = curl_slist_append(h, "Expect:")) || !(h = tmp) ||
        (req->has_body &&
         (!(tmp = curl_slist_append(h, "Content-Type: application/octet-stream")) || !(h = tmp)))) {
        ret = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        goto out;
    }
    if (s->router_url && (ret = router_headers(s, &h)) != ASB_OK)
        goto out;
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (!s->router_url)
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, s->rest_socket);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_detail);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, s->connect_timeout_ms);
    if (s->timeout_ms > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, s->timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
    if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (req->has_body) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, t);
        if (!req->source)
            curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
    } else if (strcmp(req->method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
    }
    CURLcode rc = curl_easy_perform(c);
    if (t->status == 0)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t->status);
    if (rc == CURLE_OK && req->collect_max && t->status >= 200 && t->status <= 299) {
        char *ct = NULL; /* an empty file never reaches on_write's check */
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (!ct || strncmp(ct, "application/json", 16) != 0) {
            rc = CURLE_WRITE_ERROR;
            t->not_json = 1;
        }
    }
    if (rc == CURLE_WRITE_ERROR && t->sink_ret) {
        ret = t->sink_ret;
        if (ret > 0)
            asbi_error_set(ASB_ECANCELLED, 0, NULL, "stopped by the callback (%d)", ret);
    }
    else if (rc == CURLE_WRITE_ERROR && t->not_json)
        ret = asbi_error_set(ASB_EBADREQUEST, (int)t->status, NULL, "%s is not a directory",
                             req->path);
    else if (rc == CURLE_WRITE_ERROR && t->too_large)
        ret = asbi_error_set(ASB_EPROTOCOL, (int)t->status, NULL,
                             "reply larger than %zu bytes (or out of memory)", req->collect_max);
    else if (rc != CURLE_OK)
        ret = error_from_curl(s, rc, curl_detail);
out:
    curl_slist_free_all(h);
    free(url);
    curl_easy_cleanup(c);
    t->curl = NULL;
    return ret;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0)
        ;
}

/* Runs req with retries. On ASB_OK, *ret_body (may be NULL) gets the collected 2xx body and
 * *ret_status the status; non-2xx replies become mapped errors. */
static int perform(asb_sandbox *s, const request *req, char **ret_body, long *ret_status,
                   int accept_404)
{
    int replayable = !req->source;
    int ret = ASB_OK;
    for (int n = 1;; n++) {
        transfer t = {.req = req};
        ret = attempt(s, req, &t);
        int retry = 0;
        if (ret == ASB_ECONNECT || ret == ASB_ETIMEOUT) {
            retry = 1;
        } else if (ret == ASB_OK && (t.status < 200 || t.status > 299) &&
                   !(accept_404 && t.status == 404)) {
            ret = asbi_sandbox_error_from_rest((int)t.status, t.body.data, t.body.len);
            retry = t.status == 500 || t.status == 502 || t.status == 503 || t.status == 504;
        } else if (ret == ASB_OK) {
            if (ret_status)
                *ret_status = t.status;
            if (ret_body)
                *ret_body = TAKE_PTR(t.body.data);
            buf_done(&t.body);
            return ASB_OK;
        }
        buf_done(&t.body);
        if (!retry || !replayable || t.delivered > 0 || n >= s->max_attempts)
            return ret;
        long d = asbi_sandbox_backoff_ms(s->retry_delay_ms, n);
        d += d * ((rand() % 51) - 25) / 100; /* +-25 % jitter */
        sleep_ms(d);
    }
}

static int check_path(const char *fn, const asb_sandbox *s, const char *path)
{
    if (!s || !path)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "%s: NULL sandbox or path", fn);
    return ASB_OK;
}

ASB_PUBLIC int asb_sandbox_file_read(asb_sandbox *s, const char *path, asb_sandbox_data_cb cb,
                                     void *payload)
{
    int r = check_path("asb_sandbox_file_read", s, path);
    if (r != ASB_OK)
        return r;
    if (!cb)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_file_read: NULL callback");
    char *p = asbi_sandbox_files_path(path);
    if (!p)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    request req = {.method = "GET", .path = p, .sink = cb, .sink_payload = payload};
    r = perform(s, &req, NULL, NULL, 0);
    free(p);
    return r;
}

static int buf_sink(const char *data, size_t n, void *payload)
{
    if (buf_append(payload, data, n) < 0)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    return 0;
}

ASB_PUBLIC int asb_sandbox_file_read_buffer(char **out, size_t *out_len, asb_sandbox *s,
                                            const char *path)
{
    if (!out)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_file_read_buffer: NULL out");
    *out = NULL;
    if (out_len)
        *out_len = 0;
    _cleanup_buf_ buf b = BUF_INIT;
    int r = asb_sandbox_file_read(s, path, buf_sink, &b);
    if (r != ASB_OK)
        return r;
    size_t len = b.len;
    char *data = buf_steal(&b, NULL);
    if (!data)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    *out = data;
    if (out_len)
        *out_len = len;
    return ASB_OK;
}

static int write_common(asb_sandbox *s, const char *path, unsigned int mode, request *req)
{
    int r = check_path("asb_sandbox_file_write", s, path);
    if (r != ASB_OK)
        return r;
    if (mode > 0777)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "mode %o: only permission bits (<= 0777)",
                              mode);
    char q[16];
    snprintf(q, sizeof(q), "mode=0%03o", mode ? mode : 0644);
    char *p = asbi_sandbox_files_path(path);
    if (!p)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    req->method = "PUT";
    req->path = p;
    req->query = q;
    req->has_body = 1;
    r = perform(s, req, NULL, NULL, 0);
    free(p);
    return r;
}

ASB_PUBLIC int asb_sandbox_file_write(asb_sandbox *s, const char *path, unsigned int mode,
                                      asb_sandbox_source_cb cb, void *payload)
{
    if (!cb)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_file_write: NULL callback");
    request req = {.source = cb, .source_payload = payload};
    return write_common(s, path, mode, &req);
}

ASB_PUBLIC int asb_sandbox_file_write_buffer(asb_sandbox *s, const char *path, unsigned int mode,
                                             const void *data, size_t len)
{
    if (!data && len)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_file_write_buffer: NULL data");
    request req = {.body = data ? data : "", .body_len = len};
    return write_common(s, path, mode, &req);
}

/* RFC 3339 ("2026-05-30T12:00:05Z", fractions and offsets allowed) -> epoch seconds. */
static int parse_time(const char *v, int64_t *ret)
{
    struct tm tm = {0};
    const char *p = v ? strptime(v, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!p)
        return -EINVAL;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    int64_t off = 0;
    if (*p == '+' || *p == '-') {
        int hh, mm;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return -EINVAL;
        off = (int64_t)(hh * 3600 + mm * 60) * (*p == '-' ? -1 : 1);
    } else if (*p != 'Z' && *p != 'z') {
        return -EINVAL;
    }
    *ret = (int64_t)timegm(&tm) - off;
    return 0;
}

ASB_PUBLIC void asb_sandbox_file_entries_free(asb_sandbox_file_entry *e, size_t count)
{
    if (!e)
        return;
    for (size_t i = 0; i < count; i++)
        free(e[i].name);
    free(e);
}

ASB_PUBLIC int asb_sandbox_file_list(asb_sandbox_file_entry **out, size_t *out_count,
                                     asb_sandbox *s, const char *path)
{
    if (!out || !out_count)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_file_list: NULL out");
    *out = NULL;
    *out_count = 0;
    int r = check_path("asb_sandbox_file_list", s, path);
    if (r != ASB_OK)
        return r;
    char *p = asbi_sandbox_files_path(path), *body = NULL;
    if (!p)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    request req = {.method = "GET", .path = p, .collect_max = LIST_BODY_MAX};
    r = perform(s, &req, &body, NULL, 0);
    free(p);
    if (r != ASB_OK)
        return r;
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    free(body);
    json_t *entries = json_object_get(j, "entries");
    if (!json_is_array(entries)) {
        json_decref(j);
        return asbi_error_set(ASB_EPROTOCOL, 200, NULL, "directory listing without entries");
    }
    size_t n = json_array_size(entries), k = 0;
    asb_sandbox_file_entry *e = calloc(n ? n : 1, sizeof(*e));
    if (!e) {
        json_decref(j);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(entries, i);
        const char *name = json_string_value(json_object_get(it, "name"));
        const char *type = json_string_value(json_object_get(it, "type"));
        const char *mode = json_string_value(json_object_get(it, "mode"));
        if (!name || !type)
            continue;
        if (strcmp(type, "file") != 0 && strcmp(type, "directory") != 0)
            continue; /* unknown types are skipped (Go SDK) */
        e[k].type = strcmp(type, "directory") == 0 ? ASB_SANDBOX_DIRECTORY : ASB_SANDBOX_FILE;
        e[k].size = json_integer_value(json_object_get(it, "size"));
        if (parse_time(json_string_value(json_object_get(it, "modified_at")), &e[k].modified_at))
            e[k].modified_at = 0;
        e[k].mode = mode ? (unsigned int)strtoul(mode, NULL, 8) : 0;
        if (!(e[k].name = strdup(name))) {
            asb_sandbox_file_entries_free(e, k);
            json_decref(j);
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        }
        k++;
    }
    json_decref(j);
    *out = e;
    *out_count = k;
    return ASB_OK;
}

ASB_PUBLIC int asb_sandbox_file_exists(int *out, asb_sandbox *s, const char *path)
{
    if (!out)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_file_exists: NULL out");
    *out = 0;
    int r = check_path("asb_sandbox_file_exists", s, path);
    if (r != ASB_OK)
        return r;
    char *p = asbi_sandbox_files_path(path);
    if (!p)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    long status = 0;
    request req = {.method = "HEAD", .path = p};
    r = perform(s, &req, NULL, &status, 1);
    free(p);
    if (r == ASB_OK)
        *out = status != 404;
    return r;
}

ASB_PUBLIC int asb_sandbox_file_delete(asb_sandbox *s, const char *path, int recursive)
{
    int r = check_path("asb_sandbox_file_delete", s, path);
    if (r != ASB_OK)
        return r;
    char *p = asbi_sandbox_files_path(path);
    if (!p)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    request req = {.method = "DELETE", .path = p, .query = recursive ? "recursive=true" : NULL};
    r = perform(s, &req, NULL, NULL, 0);
    free(p);
    return r;
}
