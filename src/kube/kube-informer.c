/* Informers: list, then watch from the list's resourceVersion with allowWatchBookmarks; a
 * disconnect re-watches from the last seen resourceVersion (with backoff), 410 Gone re-lists and
 * reconciles the cache against the new list (DELETED for objects that vanished meanwhile). The
 * cache holds one immutable JSON object per "ns/name"; readers get references. */
#include "kube/kube.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "basic/macro.h"
#include "shared/log.h"

static char *cache_key(const json_t *obj)
{
    const char *ns = kube_str(obj, "metadata.namespace");
    const char *name = kube_str(obj, "metadata.name");
    char *k = NULL;
    if (!name || asprintf(&k, "%s/%s", ns ? ns : "", name) < 0)
        return NULL;
    return k;
}

/* List items of built-in kinds carry no kind/apiVersion: the cache always has them. */
static void stamp(kube_informer *inf, json_t *obj)
{
    /* Objects already in the cache are shared with readers: never touch them again. */
    const char *k = json_string_value(json_object_get(obj, "kind"));
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    if (k && av && strcmp(k, kube_resources[inf->res].kind) == 0 &&
        strcmp(av, kube_resources[inf->res].api_version) == 0)
        return;
    json_object_set_new(obj, "kind", json_string(kube_resources[inf->res].kind));
    json_object_set_new(obj, "apiVersion", json_string(kube_resources[inf->res].api_version));
}

static void apply(kube_informer *inf, kube_event_type t, json_t *obj)
{
    _cleanup_free_ char *key = cache_key(obj);
    if (!key)
        return;
    stamp(inf, obj);
    pthread_mutex_lock(&inf->lock);
    json_t *old = json_incref(json_object_get(inf->cache, key));
    if (t == KUBE_DELETED)
        json_object_del(inf->cache, key);
    else
        json_object_set(inf->cache, key, obj);
    pthread_mutex_unlock(&inf->lock);
    if (t != KUBE_DELETED && old)
        t = KUBE_MODIFIED;
    else if (t == KUBE_MODIFIED && !old)
        t = KUBE_ADDED;
    atomic_fetch_add(&inf->events, 1);
    if (inf->fn)
        inf->fn(inf->res, t, obj, old, inf->payload);
    json_decref(old);
}

static char *query(kube_informer *inf, bool watch)
{
    _cleanup_free_ char *sel = NULL;
    if (inf->label_selector) {
        /* Selectors here use only [a-z0-9./=-], which need no escaping except '/' (allowed). */
        if (asprintf(&sel, "&labelSelector=%s", inf->label_selector) < 0)
            return NULL;
    }
    char *q = NULL;
    int r;
    if (watch)
        /* The server ends a watch after timeoutSeconds; a jitter spreads the re-watches. */
        r = asprintf(&q,
                     "watch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d%s",
                     inf->rv, 240 + rand() % 120, sel ? sel : "");
    else
        r = asprintf(&q, "limit=0%s", sel ? sel : "");
    return r < 0 ? NULL : q;
}

static int do_list(kube_informer *inf)
{
    _cleanup_free_ char *q = query(inf, false);
    _cleanup_free_ char *path = kube_path(inf->res, NULL, NULL, NULL, q);
    json_t *ans = NULL;
    if (!path)
        return -ENOMEM;
    int r = kube_call(inf->client, "GET", path, NULL, NULL, &ans);
    if (r < 0) {
        log_warn("list failed", "resource", kube_resources[inf->res].plural, "error", strerror(-r));
        json_decref(ans);
        return r;
    }
    const char *rv = kube_str(ans, "metadata.resourceVersion");
    snprintf(inf->rv, sizeof inf->rv, "%s", rv ? rv : "");
    json_t *items = json_object_get(ans, "items");
    /* Objects gone since the last list: DELETED. */
    json_t *seen = json_object();
    size_t i;
    json_t *it;
    json_array_foreach (items, i, it) {
        char *k = cache_key(it);
        if (k)
            json_object_set_new(seen, k, json_true());
        free(k);
    }
    pthread_mutex_lock(&inf->lock);
    json_t *gone = json_array();
    const char *k;
    json_t *v;
    json_object_foreach (inf->cache, k, v) {
        if (!json_object_get(seen, k))
            json_array_append(gone, v);
    }
    pthread_mutex_unlock(&inf->lock);
    json_array_foreach (gone, i, it)
        apply(inf, KUBE_DELETED, it);
    json_array_foreach (items, i, it) {
        _cleanup_free_ char *key = cache_key(it);
        pthread_mutex_lock(&inf->lock);
        json_t *old = key ? json_object_get(inf->cache, key) : NULL;
        bool same =
            old && json_equal(json_object_get(old, "metadata"), json_object_get(it, "metadata"));
        pthread_mutex_unlock(&inf->lock);
        if (!same)
            apply(inf, KUBE_ADDED, it);
    }
    json_decref(gone);
    json_decref(seen);
    json_decref(ans);
    atomic_fetch_add(&inf->relists, 1);
    atomic_store(&inf->synced, true);
    return 0;
}

typedef struct watch_state {
    kube_informer *inf;
    bool gone;
} watch_state;

static int on_line(const char *line, size_t len, void *payload)
{
    watch_state *ws = payload;
    kube_informer *inf = ws->inf;
    _cleanup_json_ json_t *ev = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    if (!type || !json_is_object(obj))
        return 0;
    if (strcmp(type, "ERROR") == 0) {
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        log_info("watch error", "resource", kube_resources[inf->res].plural, "message",
                 json_string_value(json_object_get(obj, "message")));
        if (code == 410)
            ws->gone = true;
        return code == 410 ? -ESTALE : -EIO; /* the watch ends */
    }
    const char *rv = kube_str(obj, "metadata.resourceVersion");
    if (rv)
        snprintf(inf->rv, sizeof inf->rv, "%s", rv);
    if (strcmp(type, "BOOKMARK") == 0)
        return 0;
    kube_event_type t = strcmp(type, "ADDED") == 0      ? KUBE_ADDED
                        : strcmp(type, "MODIFIED") == 0 ? KUBE_MODIFIED
                        : strcmp(type, "DELETED") == 0  ? KUBE_DELETED
                                                        : (kube_event_type)-1;
    if ((int)t < 0)
        return 0;
    apply(inf, t, obj);
    return 0;
}

static void nap(kube_informer *inf, int64_t usec)
{
    while (usec > 0 && !atomic_load(inf->stop)) {
        int64_t step = MIN(usec, 100000);
        struct timespec ts = {step / 1000000, (step % 1000000) * 1000};
        nanosleep(&ts, NULL);
        usec -= step;
    }
}

static void *informer_thread(void *arg)
{
    kube_informer *inf = arg;
    int64_t backoff = 100000;
    bool need_list = true;
    while (!atomic_load(inf->stop)) {
        if (need_list) {
            if (do_list(inf) < 0) {
                nap(inf, backoff);
                backoff = MIN(backoff * 2, 5000000);
                continue;
            }
            need_list = false;
        }
        _cleanup_free_ char *q = query(inf, true);
        _cleanup_free_ char *path = kube_path(inf->res, NULL, NULL, NULL, q);
        watch_state ws = {.inf = inf};
        long status = 0;
        atomic_fetch_add(&inf->watches, 1);
        int r = kube_stream(inf->client, path, on_line, &ws, inf->stop, &status);
        if (atomic_load(inf->stop))
            break;
        if (ws.gone || status == 410) {
            log_info("resourceVersion expired: re-listing", "resource",
                     kube_resources[inf->res].plural);
            need_list = true;
            backoff = 100000;
            continue;
        }
        if (r < 0 || status != 200) {
            char st[16];
            snprintf(st, sizeof st, "%ld", status);
            log_warn("watch failed", "resource", kube_resources[inf->res].plural, "status", st);
            nap(inf, backoff);
            backoff = MIN(backoff * 2, 5000000);
            if (status >= 400)
                need_list = true;
            continue;
        }
        backoff = 100000; /* server ended the watch (timeout or disconnect): re-watch */
    }
    return NULL;
}

int kube_informer_start(kube_informer *inf, kube_client *c, kube_res r, const char *selector,
                        kube_event_fn fn, void *payload, atomic_bool *stop)
{
    inf->client = c;
    inf->res = r;
    inf->label_selector = selector ? strdup(selector) : NULL;
    inf->cache = json_object();
    inf->fn = fn;
    inf->payload = payload;
    inf->stop = stop;
    pthread_mutex_init(&inf->lock, NULL);
    if (!inf->cache)
        return -ENOMEM;
    int e = pthread_create(&inf->thread, NULL, informer_thread, inf);
    if (e)
        return -e;
    inf->started = true;
    return 0;
}

void kube_informer_join(kube_informer *inf)
{
    if (inf->started)
        pthread_join(inf->thread, NULL);
    inf->started = false;
    json_decref(inf->cache);
    inf->cache = NULL;
    free(inf->label_selector);
    inf->label_selector = NULL;
}

json_t *kube_informer_get(kube_informer *inf, const char *ns, const char *name)
{
    if (!name || !inf->cache)
        return NULL;
    _cleanup_free_ char *k = NULL;
    if (asprintf(&k, "%s/%s", ns ? ns : "", name) < 0)
        return NULL;
    pthread_mutex_lock(&inf->lock);
    json_t *o = json_incref(json_object_get(inf->cache, k));
    pthread_mutex_unlock(&inf->lock);
    return o;
}

json_t *kube_informer_list(kube_informer *inf, const char *ns, const char *key, const char *value)
{
    json_t *out = json_array();
    if (!out || !inf->cache)
        return out;
    pthread_mutex_lock(&inf->lock);
    const char *k;
    json_t *v;
    json_object_foreach (inf->cache, k, v) {
        if (ns) {
            const char *ons = kube_str(v, "metadata.namespace");
            if (!ons || strcmp(ons, ns) != 0)
                continue;
        }
        if (key) {
            const char *lv = json_string_value(
                json_object_get(json_object_get(json_object_get(v, "metadata"), "labels"), key));
            if (!lv || (value && strcmp(lv, value) != 0))
                continue;
        }
        json_array_append(out, v);
    }
    pthread_mutex_unlock(&inf->lock);
    return out;
}

size_t kube_informer_size(kube_informer *inf)
{
    if (!inf->cache)
        return 0;
    pthread_mutex_lock(&inf->lock);
    size_t n = json_object_size(inf->cache);
    pthread_mutex_unlock(&inf->lock);
    return n;
}
