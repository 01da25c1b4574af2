/* The event recorder (local-events.h). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/random-util.h"
#include "basic/time-util.h"
#include "local/store/local-events.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The Event object (owned; NULL on ENOMEM). Its name is kube's: "<object>.<hex time>", made
 * unique within the process by a counter in the low bits. */
static json_t *event_new(const char *controller, const json_t *regarding, const char *type,
                         const char *reason, const char *action, const char *note, int64_t now)
{
    static atomic_uint_fast64_t seq;
    const char *name = api_meta_string(regarding, "name"),
               *ns = api_meta_string(regarding, "namespace");
    if (!name || !ns)
        return NULL;
    char uid[37], ts[40], micro[40];
    if (uuid_v4(uid) < 0)
        return NULL;
    reconcile_format_time(now, 0, ts);
    /* MicroTime is fixed-width ("...:05.000000Z"): string order is time order for pruning */
    snprintf(micro, sizeof(micro), "%.*s.%06lldZ", (int)strlen(ts) - 1, ts,
             (long long)(now % 1000000));
    uint64_t id = (uint64_t)now * 1000 + (atomic_fetch_add(&seq, 1) % 1000);
    _cleanup_free_ char *ev_name = NULL;
    if (asprintf(&ev_name, "%s.%016llx", name, (unsigned long long)id) < 0)
        return NULL;
    json_t *reg = json_pack("{s:s?,s:s?,s:s,s:s,s:s?}", "apiVersion", str(regarding, "apiVersion"),
                            "kind", str(regarding, "kind"), "name", name, "namespace", ns, "uid",
                            api_meta_string(regarding, "uid"));
    if (!reg)
        return NULL;
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:s,s:s,s:o,s:s,s:s}", "apiVersion",
                     api_event_kind.api_version, "kind", api_event_kind.kind, "metadata", "name",
                     ev_name, "namespace", ns, "uid", uid, "creationTimestamp", ts, "eventTime",
                     micro, "reportingController", controller, "reportingInstance", controller,
                     "action", action, "reason", reason, "regarding", reg, "note", note, "type",
                     type);
}

/* What keeps retention cheap: a process-wide index "ns/kind/name/uid" -> names of that object's
 * Events, oldest first, so that recording one Event trims its object's list with at most one
 * delete instead of listing the namespace. A full sweep (TTL, and the per-object bound for what
 * the index does not know: Events of an earlier run, or recorded while a sweep listed) runs at the
 * first record and then every LOCAL_EVENTS_SWEEP_USEC, and rebuilds the index. */
#define LOCAL_EVENTS_SWEEP_USEC (60LL * 1000000LL)

static pthread_mutex_t index_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *index_by_object; /* owned; NULL until the first sweep */
static int64_t last_sweep;

static int index_key(char *out, size_t size, const json_t *reg, const char *ns)
{
    int n = snprintf(out, size, "%s/%s/%s/%s", ns ?: "", str(reg, "kind") ?: "",
                     str(reg, "name") ?: "", str(reg, "uid") ?: "");
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* Appends the new Event's name to its object's list; *ret_drop gets the names beyond the bound
 * (owned array, oldest first). *ret_sweep: a full sweep is due (the caller runs it): the first
 * one, which builds the index, always; the periodic ones only when may_sweep. Takes the lock. */
static void index_add(const json_t *ev, int64_t now, bool may_sweep, json_t **ret_drop,
                      bool *ret_sweep)
{
    char key[1024];
    *ret_drop = NULL;
    pthread_mutex_lock(&index_lock);
    *ret_sweep = !index_by_object || (may_sweep && now - last_sweep >= LOCAL_EVENTS_SWEEP_USEC);
    if (*ret_sweep)
        last_sweep = now;
    json_t *names = index_by_object && index_key(key, sizeof(key), json_object_get(ev, "regarding"),
                                                 api_meta_string(ev, "namespace")) == 0
                        ? json_object_get(index_by_object, key)
                        : NULL;
    if (index_by_object && !names && json_object_set_new(index_by_object, key, json_array()) == 0)
        names = json_object_get(index_by_object, key);
    if (names && json_array_append_new(names, json_string(api_meta_string(ev, "name"))) == 0 &&
        json_array_size(names) > LOCAL_EVENTS_PER_OBJECT && (*ret_drop = json_array())) {
        while (json_array_size(names) > LOCAL_EVENTS_PER_OBJECT) {
            json_array_append(*ret_drop, json_array_get(names, 0));
            json_array_remove(names, 0);
        }
    }
    pthread_mutex_unlock(&index_lock);
}

void local_event_record(local_store *s, const char *controller, const json_t *regarding,
                        const char *type, const char *reason, const char *action,
                        const char *note_fmt, ...)
{
    _cleanup_free_ char *note = NULL;
    va_list ap;
    va_start(ap, note_fmt);
    int n = vasprintf(&note, note_fmt, ap);
    va_end(ap);
    if (n < 0) {
        note = NULL;
        log_warn("cannot record event", "reason", reason, "error", strerror(ENOMEM));
        return;
    }
    const char *ns = api_meta_string(regarding, "namespace");
    if (!api_meta_string(regarding, "name") || !ns) {
        log_warn("cannot record event: its object has no name or namespace", "reason", reason);
        return;
    }
    int64_t now = (int64_t)now_usec(CLOCK_REALTIME);
    json_t *ev = event_new(controller, regarding, type, reason, action, note, now);
    int r = ev ? local_store_create(s, &api_event_kind, ev) : -ENOMEM;
    if (r < 0) {
        json_decref(ev);
        log_warn("cannot record event", "reason", reason, "object",
                 api_meta_string(regarding, "name"), "error", strerror(-r));
        return;
    }
    json_t *drop = NULL;
    bool sweep = false;
    /* The periodic sweep not inside a store batch (a claim's create adopting a member): it lists
     * every Event and would hold the store's lock, and every other create, for its whole length.
     * The first one, which builds the per-object index the bound needs, runs wherever it falls. */
    index_add(ev, now, !local_store_in_batch(s), &drop, &sweep);
    json_decref(ev);
    size_t i;
    json_t *name;
    json_array_foreach (drop, i, name) {
        json_t *gone = NULL;
        r = local_store_delete(s, &api_event_kind, ns, json_string_value(name), &gone);
        json_decref(gone);
        if (r < 0 && r != -ENOENT)
            log_warn("cannot delete an old event", "event", json_string_value(name), "error",
                     strerror(-r));
    }
    json_decref(drop);
    if (sweep && (r = local_events_prune(s, NULL, now)) < 0)
        log_warn("cannot prune events", "error", strerror(-r));
}

/* Newest first by eventTime (fixed-width RFC 3339: string order is time order), then name. */
static int cmp_newest_first(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    int k = strcmp(str(y, "eventTime") ?: "", str(x, "eventTime") ?: "");
    return k ? k : strcmp(api_meta_string(y, "name") ?: "", api_meta_string(x, "name") ?: "");
}

static bool expired(const json_t *ev, int64_t now)
{
    int64_t t;
    return reconcile_parse_time(str(ev, "eventTime"), &t) == 0 && now - t > LOCAL_EVENTS_TTL_USEC;
}

int local_events_prune(local_store *s, const char *ns, int64_t now)
{
    json_t *items = NULL;
    uint64_t rv;
    int r = local_store_list(s, &api_event_kind, ns, &items, &rv);
    if (r < 0)
        return r;
    size_t n = json_array_size(items), deleted = 0;
    _cleanup_free_ const json_t **v = calloc(n ? n : 1, sizeof(*v));
    /* key -> names kept, newest first (the new index when ns is NULL) */
    json_t *kept = json_object();
    if (!v || !kept) {
        json_decref(items);
        json_decref(kept);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(items, i);
    qsort(v, n, sizeof(*v), cmp_newest_first);
    for (size_t i = 0; i < n; i++) {
        char key[1024];
        const char *ns_i = api_meta_string(v[i], "namespace"),
                   *name = api_meta_string(v[i], "name");
        if (index_key(key, sizeof(key), json_object_get(v[i], "regarding"), ns_i) < 0)
            continue;
        json_t *names = json_object_get(kept, key);
        if (!names && json_object_set_new(kept, key, json_array()) == 0)
            names = json_object_get(kept, key);
        if (json_array_size(names) < LOCAL_EVENTS_PER_OBJECT && !expired(v[i], now)) {
            json_array_insert_new(names, 0, json_string(name)); /* oldest first */
            continue;
        }
        json_t *gone = NULL;
        r = local_store_delete(s, &api_event_kind, ns_i, name, &gone);
        json_decref(gone);
        if (r == 0)
            deleted++;
    }
    json_decref(items);
    if (!ns) {
        pthread_mutex_lock(&index_lock);
        json_decref(index_by_object);
        index_by_object = kept;
        last_sweep = now > last_sweep ? now : last_sweep;
        pthread_mutex_unlock(&index_lock);
    } else
        json_decref(kept);
    return (int)deleted;
}
