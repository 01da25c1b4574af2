/* ?watch=true: newline-delimited {"type","object"} events streamed from the store's event window
 * as writes commit, with kube-apiserver semantics: no resourceVersion (or "0") starts with
 * synthetic ADDED events for the current state, an old one gets a 410 Expired ERROR event,
 * selector transitions become ADDED/DELETED, BOOKMARKs when allowed, timeoutSeconds ends it. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "local/apiserver/local-apiserver-internal.h"

#define WATCH_DEFAULT_TIMEOUT (30 * 60 * USEC_PER_SEC)
/* How often an idle watch checks whether its client hung up. Events never wait for this: they
 * wake the watch through the store's condition variable. */
#define WATCH_HANGUP_CHECK (5 * USEC_PER_SEC)

typedef struct watch {
    local_store *store;
    const api_kind *kind;
    char *ns;   /* NULL: all namespaces */
    char *name; /* watch of a single object (GET .../<name>?watch=true), else NULL */
    api_selector *labels, *fields;
    uint64_t after;
    int fd; /* the client connection, to notice a hang-up while idle; -1 if unknown */
    usec_t deadline, bookmark_interval, next_bookmark;
    bool bookmarks, done;
    bool initial_events_end; /* sendInitialEvents: mark the end of the initial ADDED events */
    json_t *initial;         /* synthetic ADDED objects still to send */
    buf out;                 /* events not yet handed to microhttpd */
    size_t off;              /* bytes of out already handed over */
} watch;

static void watch_free(void *cls)
{
    watch *w = cls;
    free(w->ns);
    free(w->name);
    api_selector_free(w->labels);
    api_selector_free(w->fields);
    json_decref(w->initial);
    buf_done(&w->out);
    free(w);
}

static int append(watch *w, const char *type, const char *object_json)
{
    return buf_appendf(&w->out, "{\"type\":\"%s\",\"object\":%s}\n", type, object_json);
}

static int append_json(watch *w, const char *type, json_t *obj)
{
    _cleanup_free_ char *s = json_dumps(obj, JSON_COMPACT);
    return s ? append(w, type, s) : -ENOMEM;
}

static bool matches(watch *w, const json_t *obj)
{
    if (!obj)
        return false;
    if (w->ns) {
        const char *ns = api_meta_string(obj, "namespace");
        if (!ns || strcmp(ns, w->ns) != 0)
            return false;
    }
    if (w->name) {
        const char *name = api_meta_string(obj, "name");
        if (!name || strcmp(name, w->name) != 0)
            return false;
    }
    return api_label_selector_matches(
               w->labels, json_object_get(json_object_get(obj, "metadata"), "labels")) &&
           api_field_selector_matches(w->fields, obj);
}

static int append_bookmark(watch *w, bool initial_events_end)
{
    char rv[32];
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)w->after);
    json_t *b = json_pack("{s:s,s:s,s:{s:s}}", "kind", w->kind->kind, "apiVersion",
                          w->kind->api_version, "metadata", "resourceVersion", rv);
    if (b && initial_events_end)
        json_object_set_new(json_object_get(b, "metadata"), "annotations",
                            json_pack("{s:s}", "k8s.io/initial-events-end", "true"));
    int r = b ? append_json(w, "BOOKMARK", b) : -ENOMEM;
    json_decref(b);
    return r;
}

static int append_expired(watch *w, uint64_t requested, uint64_t oldest)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "too old resource version: %llu (%llu)",
             (unsigned long long)requested, (unsigned long long)oldest);
    json_t *st = status_failure(KUBE_REASON_EXPIRED, msg, NULL, NULL);
    int r = st ? append_json(w, "ERROR", st) : -ENOMEM;
    json_decref(st);
    return r;
}

static int append_event(watch *w, const store_event *e)
{
    if (e->kind != w->kind)
        return 0;
    bool now = matches(w, e->object), before = matches(w, e->old_object);
    const char *type = NULL;
    switch (e->type) {
    case STORE_ADDED:
        type = now ? "ADDED" : NULL;
        break;
    case STORE_MODIFIED:
        type = now && before ? "MODIFIED" : now ? "ADDED" : before ? "DELETED" : NULL;
        break;
    case STORE_DELETED:
        type = now ? "DELETED" : NULL;
        break;
    }
    return type ? append(w, type, e->object_json) : 0;
}

static bool client_gone(watch *w)
{
    struct pollfd p = {.fd = w->fd, .events = POLLRDHUP};
    return w->fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Fills w->out with the next events, blocking until there are some. */
static void fill(watch *w)
{
    if (w->initial) {
        size_t i;
        json_t *o;
        json_array_foreach (w->initial, i, o) {
            if (append_json(w, "ADDED", o) < 0)
                w->done = true;
        }
        w->initial = (json_decref(w->initial), NULL);
        if (w->initial_events_end && append_bookmark(w, true) < 0)
            w->done = true;
        if (w->out.len > 0)
            return;
    }
    while (!w->done && w->out.len == 0) {
        usec_t until = w->deadline;
        if (w->bookmarks)
            until = MIN(until, w->next_bookmark);
        if (w->fd >= 0)
            until = MIN(until, now_usec(CLOCK_MONOTONIC) + WATCH_HANGUP_CHECK);
        store_event **ev = NULL;
        int n = local_store_wait(w->store, w->after, until, &ev);
        if (n == -ESTALE) {
            uint64_t oldest = 0;
            local_store_watch_check(w->store, w->after, &oldest);
            append_expired(w, w->after, oldest);
            w->done = true;
        } else if (n < 0) {
            w->done = true;
        } else if (n == 0) {
            if (client_gone(w)) {
                w->done = true;
                break;
            }
            usec_t t = now_usec(CLOCK_MONOTONIC);
            if (w->bookmarks && (t >= w->next_bookmark || t >= w->deadline)) {
                append_bookmark(w, false);
                w->next_bookmark = t + w->bookmark_interval;
            }
            if (t >= w->deadline)
                w->done = true;
        } else {
            for (int i = 0; i < n; i++) {
                if (append_event(w, ev[i]) < 0)
                    w->done = true;
                w->after = ev[i]->rv;
            }
            store_events_free(ev, (size_t)n);
        }
    }
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
    watch *w = cls;
    if (w->off == w->out.len) {
        w->off = 0;
        buf_reset(&w->out);
        fill(w);
        if (w->out.len == 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = MIN(max, w->out.len - w->off);
    memcpy(out, w->out.data + w->off, n);
    w->off += n;
    return (ssize_t)n;
}

enum MHD_Result apiserver_watch(api_request *rq)
{
    watch *w = calloc(1, sizeof(*w));
    if (!w)
        return MHD_NO;
    w->store = rq->srv->store;
    w->kind = rq->kind;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    w->fd = ci ? ci->connect_fd : -1;
    w->bookmarks = query_bool(rq->conn, "allowWatchBookmarks");
    w->bookmark_interval = rq->srv->bookmark_interval;
    if ((rq->ns && !(w->ns = strdup(rq->ns))) || (rq->name && !(w->name = strdup(rq->name)))) {
        watch_free(w);
        return MHD_NO;
    }
    _cleanup_free_ char *err = NULL;
    if (api_label_selector_parse(query(rq->conn, "labelSelector"), &w->labels, &err) < 0 ||
        api_field_selector_parse(query(rq->conn, "fieldSelector"), &w->fields, &err) < 0) {
        watch_free(w);
        return reply_status(rq->conn, KUBE_REASON_BAD_REQUEST, NULL, NULL, "%s",
                            err ? err : "out of memory");
    }
    usec_t timeout = WATCH_DEFAULT_TIMEOUT;
    const char *ts = query(rq->conn, "timeoutSeconds");
    int64_t secs;
    if (ts && *ts) {
        if (parse_go_int(ts, &secs) < 0 || secs < 0 || secs > 24 * 3600) {
            watch_free(w);
            return reply_status(rq->conn, KUBE_REASON_BAD_REQUEST, NULL, NULL,
                                "invalid timeoutSeconds \"%s\"", ts);
        }
        if (secs > 0)
            timeout = (usec_t)secs * USEC_PER_SEC;
    }
    usec_t t = now_usec(CLOCK_MONOTONIC);
    w->deadline = t + timeout;
    w->next_bookmark = t + w->bookmark_interval;

    const char *rvs = query(rq->conn, "resourceVersion");
    int64_t rv = 0;
    if (rvs && *rvs && (parse_go_int(rvs, &rv) < 0 || rv < 0)) {
        watch_free(w);
        return reply_status(rq->conn, KUBE_REASON_BAD_REQUEST, NULL, NULL,
                            "invalid resourceVersion \"%s\"", rvs);
    }
    /* sendInitialEvents=true (the WatchList protocol): the current state first, whatever the
     * resourceVersion, then a bookmark annotated k8s.io/initial-events-end. */
    bool send_initial = query_bool(rq->conn, "sendInitialEvents");
    w->initial_events_end = send_initial && w->bookmarks;
    if (rv == 0 || send_initial) {
        /* Current state as ADDED events, then changes after the list's resourceVersion. */
        json_t *all = NULL;
        if (local_store_list(w->store, w->kind, w->ns, &all, &w->after) < 0) {
            watch_free(w);
            return reply_status(rq->conn, KUBE_REASON_INTERNAL_ERROR, NULL, NULL,
                                "cannot read the store");
        }
        w->initial = json_array();
        size_t i;
        json_t *o;
        json_array_foreach (all, i, o) {
            if (matches(w, o))
                json_array_append(w->initial, o);
        }
        json_decref(all);
    } else {
        uint64_t oldest = 0;
        w->after = (uint64_t)rv;
        if (local_store_watch_check(w->store, w->after, &oldest) == -ESTALE) {
            append_expired(w, w->after, oldest);
            w->done = true;
        }
    }
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, w, watch_free);
    if (!resp) {
        watch_free(w);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache, private");
    enum MHD_Result ret = MHD_queue_response(rq->conn, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}
