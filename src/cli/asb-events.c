/* See asb-events.h. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-events.h"
#include "cli/asb-table.h"

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* When the event happened: eventTime (fixed-width MicroTime), else its creationTimestamp. */
static const char *event_time(const json_t *ev)
{
    return str(ev, "eventTime") ?: str(json_object_get(ev, "metadata"), "creationTimestamp") ?: "";
}

/* When it was last seen: series.lastObservedTime of a folded one, else its time. */
static const char *last_time(const json_t *ev)
{
    return str(json_object_get(ev, "series"), "lastObservedTime") ?: event_time(ev);
}

static int cmp_last(const void *a, const void *b)
{
    return strcmp(last_time(*(json_t *const *)a), last_time(*(json_t *const *)b));
}

/* Two events are one repeated event when all of these are equal. */
static bool same_event(const json_t *a, const json_t *b)
{
    static const char *const keys[] = {"type", "reason", "note", "reportingController"};
    for (size_t i = 0; i < ELEMENTSOF(keys); i++)
        if (strcmp(str(a, keys[i]) ?: "", str(b, keys[i]) ?: "") != 0)
            return false;
    const json_t *ra = json_object_get(a, "regarding"), *rb = json_object_get(b, "regarding");
    static const char *const rkeys[] = {"kind", "namespace", "name", "uid"};
    for (size_t i = 0; i < ELEMENTSOF(rkeys); i++)
        if (strcmp(str(ra, rkeys[i]) ?: "", str(rb, rkeys[i]) ?: "") != 0)
            return false;
    return true;
}

/* The folded entry of the events v[0..n) (in time order): a copy of the newest. Owned. */
static json_t *folded(json_t *const *v, size_t n)
{
    json_t *e = json_deep_copy(v[n - 1]);
    if (!e || json_object_set_new(e, "deprecatedFirstTimestamp", json_string(event_time(v[0]))))
        goto fail;
    if (n > 1 && json_object_set_new(e, "series",
                                     json_pack("{s:I,s:s}", "count", (json_int_t)n,
                                               "lastObservedTime", event_time(v[n - 1]))) < 0)
        goto fail;
    return e;
fail:
    json_decref(e);
    return NULL;
}

int cli_events_fold(json_t *items)
{
    size_t n = json_array_size(items);
    if (n == 0)
        return 0;
    _cleanup_free_ json_t **v = calloc(n, sizeof(*v));
    _cleanup_free_ bool *taken = calloc(n, sizeof(*taken));
    _cleanup_free_ json_t **group = calloc(n, sizeof(*group));
    json_t *out = json_array();
    if (!v || !taken || !group || !out) {
        json_decref(out);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(items, i);
    qsort(v, n, sizeof(*v), cmp_last);
    for (size_t i = 0; i < n; i++) {
        if (taken[i])
            continue;
        size_t g = 0;
        for (size_t j = i; j < n; j++)
            if (!taken[j] && same_event(v[i], v[j])) {
                taken[j] = true;
                group[g++] = v[j];
            }
        if (json_array_append_new(out, folded(group, g)) < 0) {
            json_decref(out);
            return -ENOMEM;
        }
    }
    /* a folded entry is as recent as its last repeat */
    size_t m = json_array_size(out);
    for (size_t i = 0; i < m; i++)
        v[i] = json_array_get(out, i);
    qsort(v, m, sizeof(*v), cmp_last);
    json_array_clear(items);
    for (size_t i = 0; i < m; i++)
        json_array_append(items, v[i]);
    json_decref(out);
    return 0;
}

void cli_event_last_seen(char *buf, size_t size, const json_t *ev)
{
    char last[32], first[32];
    cli_age(last, sizeof(last), last_time(ev));
    json_int_t count = json_integer_value(json_object_get(json_object_get(ev, "series"), "count"));
    if (count <= 1) {
        snprintf(buf, size, "%s", last);
        return;
    }
    cli_age(first, sizeof(first), str(ev, "deprecatedFirstTimestamp") ?: event_time(ev));
    snprintf(buf, size, "%s (x%lld over %s)", last, (long long)count, first);
}

/* kubectl's OBJECT: kind/name, the kind in lower case. Owned. */
static char *object_cell(const json_t *ev)
{
    const json_t *reg = json_object_get(ev, "regarding");
    char *s = NULL;
    if (asprintf(&s, "%s/%s", str(reg, "kind") ?: "", str(reg, "name") ?: "") < 0)
        return NULL;
    for (char *p = s; *p && *p != '/'; p++)
        *p = (char)tolower((unsigned char)*p);
    return s;
}

size_t cli_events_columns(bool wide, bool all_ns, const json_t *ev, char *row[])
{
    size_t n = 0;
    bool hdr = ev == NULL;
    char buf[96] = "";
#define COL(title, value) (row[n++] = hdr ? strdup(title) : (value))
    if (all_ns)
        COL("NAMESPACE", strdup(str(json_object_get(ev, "metadata"), "namespace") ?: ""));
    if (!hdr)
        cli_event_last_seen(buf, sizeof(buf), ev);
    COL("LAST SEEN", strdup(buf));
    COL("TYPE", strdup(str(ev, "type") ?: ""));
    COL("REASON", strdup(str(ev, "reason") ?: ""));
    COL("OBJECT", object_cell(ev));
    if (wide)
        COL("SOURCE", strdup(str(ev, "reportingController") ?: ""));
    COL("MESSAGE", strdup(str(ev, "note") ?: ""));
    if (wide) {
        if (!hdr)
            cli_age(buf, sizeof(buf), str(ev, "deprecatedFirstTimestamp") ?: event_time(ev));
        COL("FIRST SEEN", strdup(buf));
        json_int_t c = json_integer_value(json_object_get(json_object_get(ev, "series"), "count"));
        if (!hdr)
            snprintf(buf, sizeof(buf), "%lld", (long long)(c > 1 ? c : 1));
        COL("COUNT", strdup(buf));
        COL("NAME", strdup(str(json_object_get(ev, "metadata"), "name") ?: ""));
    }
#undef COL
    return n;
}
