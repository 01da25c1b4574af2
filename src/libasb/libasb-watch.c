/* Watch (newline-delimited {"type","object"} events over one long HTTP response) and the waits
 * built on it: get the object, check, then watch from its resourceVersion, so a change is seen
 * the moment it is committed and nothing between the get and the watch is missed. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "basic/buf.h"
#include "basic/time-util.h"
#include "libasb/libasb-http.h"
#include "libasb/libasb-claim-internal.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"

#define MAX_EVENT_LINE (16u << 20)

typedef struct watch_state {
    asb_client *c;
    asbi_event_cb cb;
    void *payload;
    const volatile int *cancel;
    buf line;    /* bytes after the last complete event line (an error reply: all of it) */
    int result;  /* set when the callback or an ERROR event ends the watch */
    int stopped; /* result is final */
    long http;   /* non-2xx: the body is collected for the Status */
} watch_state;

static int stop(watch_state *w, int result)
{
    w->result = result;
    w->stopped = 1;
    return 0;
}

static int dispatch_line(watch_state *w, const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' '))
        n--;
    if (n == 0)
        return 1;
    json_t *ev = json_loadb(s, n, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    if (!type || !json_is_object(obj)) {
        json_decref(ev);
        return stop(w, asbi_error_set(ASB_EPROTOCOL, 200, NULL, "malformed watch event"));
    }
    int r;
    if (strcmp(type, "ERROR") == 0) {
        char *st = json_dumps(obj, JSON_COMPACT);
        json_t *code = json_object_get(obj, "code");
        r = asbi_error_from_reply(json_is_integer(code) ? (int)json_integer_value(code) : 500, st,
                                  st ? strlen(st) : 0);
        free(st);
        json_decref(ev);
        return stop(w, r);
    }
    r = w->cb(type, obj, w->payload);
    json_decref(ev);
    if (r != 0)
        return stop(w, r);
    return 1;
}

static bool watch_body(const char *data, size_t len, long status, void *payload)
{
    watch_state *w = payload;
    if (w->stopped)
        return false;
    w->http = status;
    if (w->line.len + len + 1 > MAX_EVENT_LINE) {
        stop(w, asbi_error_set(ASB_EPROTOCOL, (int)w->http, NULL, "watch event too large"));
        return false;
    }
    if (buf_append(&w->line, data, len) < 0) {
        stop(w, asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory"));
        return false;
    }
    if (w->http < 200 || w->http > 299)
        return true; /* an error reply: kept whole for its Status */
    size_t start = 0;
    for (size_t i = w->line.len - len; i < w->line.len; i++) {
        if (w->line.data[i] != '\n')
            continue;
        if (!dispatch_line(w, w->line.data + start, i - start))
            return false;
        start = i + 1;
    }
    buf_consume(&w->line, start);
    return true;
}

int asbi_watch(asb_client *c, const asb_kind *k, const char *ns, const asbi_watch_params *p,
               asbi_event_cb cb, void *payload)
{
    char *url = asbi_path(c, k, ns ? ns : "default", NULL, NULL), *fs = NULL, ts[32];
    if (!url)
        return ASB_ENOMEM;
    int r = asbi_url_add_query(&url, "watch", "true");
    if (r == ASB_OK && p->name) {
        if (asprintf(&fs, "metadata.name=%s", p->name) < 0)
            fs = NULL, r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        else
            r = asbi_url_add_query(&url, "fieldSelector", fs);
        free(fs);
    }
    if (r == ASB_OK && p->label_selector && *p->label_selector)
        r = asbi_url_add_query(&url, "labelSelector", p->label_selector);
    if (r == ASB_OK && p->resource_version && *p->resource_version)
        r = asbi_url_add_query(&url, "resourceVersion", p->resource_version);
    if (r == ASB_OK && p->allow_bookmarks)
        r = asbi_url_add_query(&url, "allowWatchBookmarks", "true");
    if (r == ASB_OK && p->timeout_ms > 0) {
        /* The server keeps the stream open past our deadline, so ours decides. */
        snprintf(ts, sizeof(ts), "%ld", p->timeout_ms / 1000 + 5);
        r = asbi_url_add_query(&url, "timeoutSeconds", ts);
    }
    char *lines[ASBI_MAX_HEADERS];
    size_t n_lines = 0;
    if (r == ASB_OK)
        r = asbi_headers(c, NULL, lines, &n_lines);
    if (r != ASB_OK) {
        free(url);
        return r;
    }
    watch_state w = {.c = c, .cb = cb, .payload = payload, .cancel = p->cancel};
    asbi_http_exchange x = {
        .method = "GET",
        .url = url,
        .headers = (const char *const *)lines,
        .n_headers = n_lines,
        .timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : 0,
        .connect_timeout_ms = c->connect_timeout_ms,
        .cancel = p->cancel,
        .on_body = watch_body,
        .payload = &w,
    };
    asbi_log(c, ASB_LOG_DEBUG, "WATCH %s", url);
    long status = 0;
    r = asbi_http_perform(c, &x, &status);
    asbi_headers_free(lines, n_lines);
    free(url);
    if (w.http == 0)
        w.http = status;
    if (w.stopped)
        r = w.result;
    else if (r != ASB_OK) /* the transport's error (set) */
        r = r == ASBI_HTTP_STOPPED ? asbi_error_set(ASB_ERROR, 0, NULL, "watch stopped") : r;
    else if (w.http < 200 || w.http > 299)
        r = asbi_error_from_reply((int)w.http, w.line.data, w.line.len);
    else {
        if (w.line.len > 0) /* a last event without its newline */
            (void)dispatch_line(&w, w.line.data, w.line.len);
        r = w.stopped ? w.result : ASB_OK;
    }
    buf_done(&w.line);
    return r;
}

typedef struct public_watch {
    asb_watch_cb cb;
    void *payload;
} public_watch;

static int public_event(const char *type, json_t *object, void *payload)
{
    public_watch *pw = payload;
    char *s = json_dumps(object, JSON_COMPACT);
    if (!s)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    int r = pw->cb(type, s, pw->payload);
    free(s);
    return r;
}

ASB_PUBLIC int asb_object_watch(asb_client *c, const char *kind, const char *ns,
                                const asb_watch_options *opts, asb_watch_cb cb, void *payload)
{
    const asb_kind *k;
    if (!c || !kind || !cb)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_object_watch: NULL argument");
    if (opts && (opts->version == 0 || opts->version > ASB_WATCH_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_watch_options: unknown version");
    int r = asb_kind_lookup(&k, kind);
    if (r != ASB_OK)
        return r;
    asbi_watch_params p = {0};
    if (opts) {
        p.name = opts->name;
        p.label_selector = opts->label_selector;
        p.resource_version = opts->resource_version;
        p.timeout_ms = opts->timeout_ms;
        p.allow_bookmarks = opts->allow_bookmarks;
        p.cancel = opts->cancel;
    }
    public_watch pw = {cb, payload};
    return asbi_watch(c, k, ns, &p, public_event, &pw);
}

/* ---- waits ---- */

int asbi_condition_met(const json_t *obj, const char *condition, const char *status)
{
    json_t *conds = json_object_get(json_object_get(obj, "status"), "conditions");
    json_t *gen = json_object_get(json_object_get(obj, "metadata"), "generation");
    for (size_t i = 0; i < json_array_size(conds); i++) {
        json_t *cd = json_array_get(conds, i);
        const char *t = json_string_value(json_object_get(cd, "type"));
        const char *s = json_string_value(json_object_get(cd, "status"));
        if (!t || strcasecmp(t, condition) != 0)
            continue;
        json_t *og = json_object_get(cd, "observedGeneration");
        if (json_is_integer(og) && json_is_integer(gen) &&
            json_integer_value(og) < json_integer_value(gen))
            return 0; /* about an older spec */
        return s && strcasecmp(s, status) == 0;
    }
    return 0;
}

typedef struct waiter waiter;
struct waiter {
    /* NULL: waiting for deletion; else true when obj satisfies what is waited for */
    bool (*met)(const json_t *obj, const waiter *wt);
    const char *condition, *status; /* condition type and status, or JSONPath and value */
    json_t *found;                  /* the object that satisfied the condition */
    asbi_wait_pred pred;            /* asbi_object_wait_until's predicate and its payload */
    void *pred_payload;
    const asb_kind *kind;
    char last[512]; /* the waited-for condition as last seen ("" when never), for a timeout */
    int stop_code;  /* a terminal condition seen: the error to return (reason/message below) */
    char stop_reason[128], stop_message[512];
};

static bool condition_met(const json_t *obj, const waiter *wt)
{
    return asbi_condition_met(obj, wt->condition, wt->status);
}

/* The value at a simple JSONPath as kubectl's --for=jsonpath takes it: "{.status.readyReplicas}"
 * (braces optional), dotted keys and [N] array indices. Borrowed; NULL when absent or malformed. */
static const json_t *jsonpath_value(const json_t *obj, const char *path)
{
    size_t n = strlen(path);
    if (n >= 2 && path[0] == '{' && path[n - 1] == '}') {
        path++;
        n -= 2;
    }
    const json_t *v = obj;
    size_t i = 0;
    if (i < n && path[i] == '.' && (i + 1 == n || path[i + 1] == '['))
        i++; /* "{.}" / "{.[0]}" */
    /* kubectl's relaxed form: "status.phase" is ".status.phase" */
    bool relaxed = n > 0 && path[0] != '.' && path[0] != '[';
    while (i < n && v) {
        if (path[i] == '.' || relaxed) {
            size_t j = relaxed ? i : ++i;
            relaxed = false;
            while (j < n && path[j] != '.' && path[j] != '[')
                j++;
            if (j == i)
                return NULL;
            char key[256];
            if (j - i >= sizeof(key))
                return NULL;
            memcpy(key, path + i, j - i);
            key[j - i] = '\0';
            v = json_object_get(v, key);
            i = j;
        } else if (path[i] == '[') {
            char *end = NULL;
            long idx = strtol(path + i + 1, &end, 10);
            if (end == path + i + 1 || (size_t)(end - path) >= n || *end != ']')
                return NULL;
            if (idx < 0)
                idx += (long)json_array_size(v);
            v = idx < 0 ? NULL : json_array_get(v, (size_t)idx);
            i = (size_t)(end - path) + 1;
        } else
            return NULL;
    }
    return i == n ? v : NULL;
}

/* True when the JSONPath exists and, with a value given, its scalar prints as that value. */
static bool jsonpath_met(const json_t *obj, const waiter *wt)
{
    const json_t *v = jsonpath_value(obj, wt->condition);
    if (!v)
        return false;
    if (!wt->status)
        return true;
    char num[64];
    const char *text = NULL;
    if (json_is_string(v))
        text = json_string_value(v);
    else if (json_is_integer(v))
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v)), text = num;
    else if (json_is_real(v))
        snprintf(num, sizeof(num), "%g", json_real_value(v)), text = num;
    else if (json_is_boolean(v))
        text = json_is_true(v) ? "true" : "false";
    return text && strcmp(text, wt->status) == 0;
}

enum { WAIT_MET = 1, WAIT_DELETED = 2, WAIT_TERMINAL = 3 };

const json_t *asbi_find_condition(const json_t *obj, const char *type)
{
    const json_t *c;
    size_t i;
    json_array_foreach (json_object_get(json_object_get(obj, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcasecmp(t, type) == 0)
            return c;
    }
    return NULL;
}

/* Notes the waited-for condition of obj (a condition wait) and whether it can no longer be met:
 * a Sandbox or SandboxClaim whose Ready is False, for its current spec, with a reason it does
 * not leave by itself (WAIT_TERMINAL, the error kept in wt), else 0. */
static int observe(const json_t *obj, waiter *wt)
{
    if (wt->met != condition_met)
        return 0;
    const json_t *c = asbi_find_condition(obj, wt->condition);
    const char *st = json_string_value(json_object_get(c, "status")),
               *reason = json_string_value(json_object_get(c, "reason")),
               *msg = json_string_value(json_object_get(c, "message"));
    if (c)
        snprintf(wt->last, sizeof(wt->last), "%s=%s%s%s%s%s", wt->condition, st ? st : "?",
                 reason && *reason ? " " : "", reason ? reason : "", msg && *msg ? ": " : "",
                 msg ? msg : "");
    bool claim = strcmp(wt->kind->kind, "SandboxClaim") == 0;
    if (strcasecmp(wt->condition, "Ready") != 0 || strcasecmp(wt->status, "True") != 0 ||
        !st || strcasecmp(st, "False") != 0 || asbi_condition_met(obj, "Ready", "False") != 1)
        return 0; /* asbi_condition_met: a condition about an older spec does not count */
    if (claim ? !asbi_claim_reason_terminal(reason)
              : strcmp(wt->kind->kind, "Sandbox") != 0 || !asbi_sandbox_reason_terminal(reason))
        return 0;
    wt->stop_code = claim ? ASB_ECLAIMFAILED : ASB_ETERMINAL;
    snprintf(wt->stop_reason, sizeof(wt->stop_reason), "%s", reason);
    snprintf(wt->stop_message, sizeof(wt->stop_message), "%s", msg ? msg : "");
    return WAIT_TERMINAL;
}

static int terminal_error(const waiter *wt, const char *name)
{
    return asbi_error_set(wt->stop_code, 0, wt->stop_reason,
                          "%s \"%s\" will not become %s: %s%s%s", wt->kind->kind, name,
                          wt->condition, wt->stop_reason, *wt->stop_message ? ": " : "",
                          wt->stop_message);
}

static int timeout_error(const waiter *wt, const char *name)
{
    return asbi_error_set(ASB_ETIMEOUT, 0, NULL, "timed out waiting for the condition on %s/%s%s%s",
                          wt->kind->plural, name, *wt->last ? "; last seen: " : "", wt->last);
}

static int wait_event(const char *type, json_t *object, void *payload)
{
    waiter *wt = payload;
    if (strcmp(type, "DELETED") == 0)
        return WAIT_DELETED;
    if (wt->met && (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)) {
        if (wt->met(object, wt)) {
            wt->found = json_incref(object);
            return WAIT_MET;
        }
        return observe(object, wt);
    }
    return 0;
}

static int wait_common(char **out, asb_client *c, const char *kind, const char *ns,
                       const char *name, waiter *wt, const asb_wait_options *opts)
{
    const asb_kind *k;
    if (!c || !kind || !name || !*name)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "wait: NULL client, kind or name");
    if (opts && (opts->version == 0 || opts->version > ASB_WAIT_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_wait_options: unknown version");
    int r = asb_kind_lookup(&k, kind);
    if (r != ASB_OK)
        return r;
    wt->kind = k;
    long timeout = opts ? opts->timeout_ms : 0;
    const volatile int *cancel = opts ? opts->cancel : NULL;
    long long deadline = timeout > 0 ? now_msec(CLOCK_MONOTONIC) + timeout : 0;
    for (;;) {
        if (cancel && *cancel)
            return asbi_error_set(ASB_ECANCELLED, 0, NULL, "cancelled");
        char *s = NULL;
        r = asb_object_get(&s, c, k->plural, ns, name);
        if (r == ASB_ENOTFOUND && !wt->met)
            return ASB_OK;
        if (r != ASB_OK)
            return r;
        json_t *obj = json_loads(s, 0, NULL);
        free(s);
        if (!obj)
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        if (wt->met && wt->met(obj, wt)) {
            r = ASB_OK;
            if (out && !(*out = json_dumps(obj, JSON_COMPACT)))
                r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
            json_decref(obj);
            return r;
        }
        if (observe(obj, wt) == WAIT_TERMINAL) {
            json_decref(obj);
            return terminal_error(wt, name);
        }
        const char *rv =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
        asbi_watch_params p = {.name = name, .resource_version = rv, .cancel = cancel};
        if (deadline) {
            p.timeout_ms = (long)(deadline - now_msec(CLOCK_MONOTONIC));
            if (p.timeout_ms <= 0) {
                json_decref(obj);
                return timeout_error(wt, name);
            }
        }
        r = asbi_watch(c, k, ns, &p, wait_event, wt);
        json_decref(obj);
        switch (r) {
        case WAIT_MET:
            r = ASB_OK;
            if (out && !(*out = json_dumps(wt->found, JSON_COMPACT)))
                r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
            json_decref(wt->found);
            wt->found = NULL;
            return r;
        case WAIT_DELETED:
            if (!wt->met)
                return ASB_OK;
            return asbi_error_set(ASB_ENOTFOUND, 0, "NotFound",
                                  "%s.%s \"%s\" was deleted while waiting", k->plural, k->group,
                                  name);
        case WAIT_TERMINAL:
            return terminal_error(wt, name);
        case ASB_ETIMEOUT:
            return timeout_error(wt, name);
        case ASB_OK:       /* the server ended the stream: look again and watch on */
        case ASB_EEXPIRED: /* our resourceVersion fell out of the window: the same */
            continue;
        default:
            return r;
        }
    }
}

ASB_PUBLIC int asb_object_wait_condition(char **out, asb_client *c, const char *kind,
                                         const char *ns, const char *name, const char *condition,
                                         const char *status, const asb_wait_options *opts)
{
    if (!condition || !*condition)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "wait: empty condition");
    waiter wt = {.met = condition_met, .condition = condition, .status = status ? status : "True"};
    return wait_common(out, c, kind, ns, name, &wt, opts);
}

ASB_PUBLIC int asb_object_wait_jsonpath(char **out, asb_client *c, const char *kind, const char *ns,
                                        const char *name, const char *path, const char *value,
                                        const asb_wait_options *opts)
{
    if (!path || !*path)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "wait: empty JSONPath");
    waiter wt = {.met = jsonpath_met, .condition = path, .status = value};
    return wait_common(out, c, kind, ns, name, &wt, opts);
}

static bool pred_met(const json_t *obj, const waiter *wt)
{
    return wt->pred(obj, wt->pred_payload);
}

int asbi_object_wait_until(char **out, asb_client *c, const char *kind, const char *ns,
                           const char *name, asbi_wait_pred pred, void *payload,
                           const asb_wait_options *opts)
{
    waiter wt = {.met = pred_met, .pred = pred, .pred_payload = payload};
    return wait_common(out, c, kind, ns, name, &wt, opts);
}

ASB_PUBLIC int asb_object_wait_deleted(asb_client *c, const char *kind, const char *ns,
                                       const char *name, const asb_wait_options *opts)
{
    waiter wt = {0};
    return wait_common(NULL, c, kind, ns, name, &wt, opts);
}
