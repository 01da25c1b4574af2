/* Helpers of the reconcile core: NameHash, times, owner references, conditions. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "basic/hash.h"
#include "basic/time-util.h"
#include "reconcile/reconcile-internal.h"

void reconcile_name_hash(const char *s, char out[9])
{
    snprintf(out, 9, "%08" PRIx32, fnv1a32_str(s ? s : ""));
}

int reconcile_parse_time(const char *s, int64_t *ret_usec)
{
    return parse_rfc3339(s, ret_usec);
}

void reconcile_format_time(int64_t usec, int digits_wanted, char out[40])
{
    time_t t = (time_t)(usec / 1000000);
    int64_t frac = usec % 1000000;
    if (frac < 0) {
        frac += 1000000;
        t--;
    }
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    if (digits_wanted > 0 && frac > 0) {
        char f[16];
        snprintf(f, sizeof(f), digits_wanted >= 9 ? "%06lld000" : "%06lld", (long long)frac);
        size_t l = strlen(f);
        while (l > 0 && f[l - 1] == '0')
            f[--l] = '\0';
        n += (size_t)snprintf(out + n, 40 - n, ".%s", f);
    }
    snprintf(out + n, 40 - n, "Z");
}

const json_t *reconcile_controller_ref(const json_t *obj)
{
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), i, r)
        if (json_is_true(json_object_get(r, "controller")))
            return r;
    return NULL;
}

bool reconcile_controlled_by(const json_t *obj, const json_t *owner)
{
    const json_t *ref = reconcile_controller_ref(obj);
    const char *uid = json_string_value(json_object_get(ref, "uid"));
    const char *ouid = api_meta_string(owner, "uid");
    return uid && ouid && strcmp(uid, ouid) == 0;
}

json_t *reconcile_owner_ref(const json_t *owner)
{
    const char *av = json_string_value(json_object_get(owner, "apiVersion"));
    const char *kind = json_string_value(json_object_get(owner, "kind"));
    const char *name = api_meta_string(owner, "name"), *uid = api_meta_string(owner, "uid");
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "apiVersion", av ? av : "", "kind",
                     kind ? kind : "", "name", name ? name : "", "uid", uid ? uid : "",
                     "controller", 1, "blockOwnerDeletion", 1);
}

const json_t *reconcile_condition(const json_t *obj, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(json_object_get(obj, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

bool reconcile_sandbox_ready(const json_t *sandbox)
{
    const char *s =
        json_string_value(json_object_get(reconcile_condition(sandbox, "Ready"), "status"));
    return s && strcmp(s, "True") == 0;
}

bool reconcile_deleting(const json_t *obj)
{
    return json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp") != NULL;
}

const char *rc_label(const json_t *obj, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), key));
}

const char *rc_annotation(const json_t *obj, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), key));
}

json_t *rc_object(json_t *parent, const char *key)
{
    json_t *o = json_object_get(parent, key);
    if (json_is_object(o))
        return o;
    o = json_object();
    if (json_object_set_new(parent, key, o) < 0)
        return NULL;
    return o;
}

int64_t rc_creation_time(const json_t *obj)
{
    int64_t t = 0;
    if (reconcile_parse_time(api_meta_string(obj, "creationTimestamp"), &t) < 0)
        return 0;
    return t;
}

/* Older first; ties by name, so "oldest" is deterministic with second-precision timestamps. */
int rc_cmp_age(const json_t *a, const json_t *b)
{
    int64_t ta = rc_creation_time(a), tb = rc_creation_time(b);
    if (ta != tb)
        return ta < tb ? -1 : 1;
    const char *na = api_meta_string(a, "name"), *nb = api_meta_string(b, "name");
    return strcmp(na ? na : "", nb ? nb : "");
}

json_t *reconcile_make_condition(const json_t *old_obj, const char *type, const char *status,
                                 const char *reason, const char *message, json_int_t generation,
                                 int64_t now)
{
    const json_t *old = reconcile_condition(old_obj, type);
    const char *os = json_string_value(json_object_get(old, "status"));
    const char *ltt = json_string_value(json_object_get(old, "lastTransitionTime"));
    char ts[40];
    reconcile_format_time(now, 0, ts);
    if (!(os && ltt && strcmp(os, status) == 0))
        ltt = ts;
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "type", type, "status", status, "reason",
                     reason, "message", message ? message : "", "lastTransitionTime", ltt,
                     "observedGeneration", generation);
}

/* Canonical serialisation for hashing: sorted keys, compact. */
void rc_hash_json(const json_t *v, char out[9])
{
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
    reconcile_name_hash(s ? s : "null", out);
    free(s);
}

int reconcile_fail(reconcile_failure *f, const char *reason, bool seen, int err, const char *fmt,
                   ...)
{
    va_list ap;
    f->reason = reason;
    f->seen = seen;
    va_start(ap, fmt);
    api_error_setv(&f->error, status_from_errno(err < 0 ? err : -EINVAL), fmt, ap);
    va_end(ap);
    f->error.err = err < 0 ? err : -EINVAL;
    f->error.reason = kube_reason_from_errno(f->error.err);
    return f->error.err;
}

char *reconcile_error_seen(const char *message)
{
    char *s = NULL;
    if (asprintf(&s, "Error seen: %s", message) < 0)
        return NULL;
    return s;
}

char *reconcile_failure_message(const reconcile_failure *f)
{
    if (!f->error.message)
        return NULL;
    return f->seen ? reconcile_error_seen(f->error.message) : strdup(f->error.message);
}

void reconcile_failure_clear(reconcile_failure *f)
{
    api_error_clear(&f->error);
    f->reason = NULL;
    f->seen = false;
}
