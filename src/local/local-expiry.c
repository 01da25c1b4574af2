/* Sandbox expiry decision (UPSTREAM.md §2.4.6), kept free of I/O for unit tests. */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "basic/time-util.h"
#include "local/local-expiry.h"

static const char *ready_reason(const json_t *sb)
{
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(json_object_get(sb, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, "Ready") == 0)
            return json_string_value(json_object_get(c, "reason"));
    }
    return NULL;
}

expiry_action local_expiry_decide(const json_t *sb, int64_t now_usec, int64_t *ret_requeue)
{
    const json_t *spec = json_object_get(sb, "spec");
    int64_t when;
    *ret_requeue = 0;
    if (parse_rfc3339(json_string_value(json_object_get(spec, "shutdownTime")), &when) < 0)
        return EXPIRY_NEVER;
    if (now_usec < when) {
        int64_t left = when - now_usec;
        *ret_requeue = left > EXPIRY_MIN_REQUEUE_USEC ? left : EXPIRY_MIN_REQUEUE_USEC;
        return EXPIRY_PENDING;
    }
    const char *reason = ready_reason(sb);
    if (!reason || strcmp(reason, "SandboxExpired") != 0) {
        *ret_requeue = EXPIRY_MARK_REQUEUE_USEC;
        return EXPIRY_MARK;
    }
    const char *policy = json_string_value(json_object_get(spec, "shutdownPolicy"));
    /* nil is Retain (the CRD default); DeleteForeground is a claim policy, treated as Delete. */
    if (policy && (strcmp(policy, "Delete") == 0 || strcmp(policy, "DeleteForeground") == 0))
        return EXPIRY_DELETE;
    return EXPIRY_RETAIN;
}

const char *local_expiry_action_name(expiry_action a)
{
    static const char *const names[] = {"never", "pending", "mark", "delete", "retain"};
    return (unsigned)a < sizeof(names) / sizeof(names[0]) ? names[a] : "?";
}
