/* The event recorder (local-events.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/random-util.h"
#include "basic/time-util.h"
#include "local/local-events.h"
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
    if (!api_meta_string(regarding, "name") || !api_meta_string(regarding, "namespace")) {
        log_warn("cannot record event: its object has no name or namespace", "reason", reason);
        return;
    }
    int64_t now = (int64_t)now_usec(CLOCK_REALTIME);
    json_t *ev = event_new(controller, regarding, type, reason, action, note, now);
    int r = ev ? local_store_create(s, &api_event_kind, ev) : -ENOMEM;
    json_decref(ev);
    if (r < 0) {
        log_warn("cannot record event", "reason", reason, "object",
                 api_meta_string(regarding, "name"), "error", strerror(-r));
        return;
    }
    r = local_events_prune(s, api_meta_string(regarding, "namespace"), now);
    if (r < 0)
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
    /* regarding uid -> events seen so far (newest first) */
    json_t *seen = json_object();
    if (!v || !seen) {
        json_decref(items);
        json_decref(seen);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(items, i);
    qsort(v, n, sizeof(*v), cmp_newest_first);
    for (size_t i = 0; i < n; i++) {
        const json_t *reg = json_object_get(v[i], "regarding");
        char key[600];
        snprintf(key, sizeof(key), "%s/%s/%s", str(reg, "kind") ?: "", str(reg, "name") ?: "",
                 str(reg, "uid") ?: "");
        json_int_t count = json_integer_value(json_object_get(seen, key)) + 1;
        json_object_set_new(seen, key, json_integer(count));
        if (count <= LOCAL_EVENTS_PER_OBJECT && !expired(v[i], now))
            continue;
        json_t *gone = NULL;
        r = local_store_delete(s, &api_event_kind, api_meta_string(v[i], "namespace"),
                               api_meta_string(v[i], "name"), &gone);
        json_decref(gone);
        if (r == 0)
            deleted++;
    }
    json_decref(seen);
    json_decref(items);
    return (int)deleted;
}
