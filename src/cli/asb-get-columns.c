/* The cells of `asb get`'s table: NAME, then a kind's printer columns (src/api/api-kind-*.c),
 * computed as api-field.h's api_column_value says (asb-table.h). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/api-field.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-table.h"

static const json_t *condition(const json_t *obj, const char *type)
{
    json_t *conds = json_object_get(json_object_get(obj, "status"), "conditions");
    for (size_t i = 0; i < json_array_size(conds); i++) {
        const char *t = json_string_value(json_object_get(json_array_get(conds, i), "type"));
        if (t && strcmp(t, type) == 0)
            return json_array_get(conds, i);
    }
    return NULL;
}

/* A cell: strings as they are, numbers printed, missing "<none>". Owned. */
static char *cell(const json_t *v)
{
    char *s = NULL;
    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (json_is_integer(v) && asprintf(&s, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) >= 0)
        return s;
    if (json_is_boolean(v))
        return strdup(json_is_true(v) ? "true" : "false");
    return strdup("<none>");
}

static const json_t *path(const json_t *obj, const char *a, const char *b, const char *c)
{
    const json_t *v = json_object_get(obj, a);
    if (b)
        v = json_object_get(v, b);
    if (c)
        v = json_object_get(v, c);
    return v;
}

/* RFC3339 with optional fraction ("2026-01-02T03:04:05.123456789Z") -> seconds; -1 if not. */
static double rfc3339_seconds(const char *ts)
{
    struct tm tm = {0};
    const char *p = ts ? strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!p)
        return -1;
    double frac = 0, scale = 0.1;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
            frac += (*p - '0') * scale;
    if (*p != 'Z')
        return -1;
    return (double)timegm(&tm) + frac;
}

static const char *annotation(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(path(obj, "metadata", "annotations", NULL), key));
}

/* A claim's latency: first Ready (claim-first-ready-at, else the Ready condition's transition)
 * minus the first request (client-first-requested-at, else controller-first-observed-at, else
 * creationTimestamp). "<none>" until Ready. Owned. */
static char *claim_latency(const json_t *obj, const json_t *ready)
{
    double end = rfc3339_seconds(annotation(obj, "agents.x-k8s.io/claim-first-ready-at"));
    const char *st = json_string_value(json_object_get(ready, "status"));
    if (end < 0 && st && strcmp(st, "True") == 0)
        end = rfc3339_seconds(json_string_value(json_object_get(ready, "lastTransitionTime")));
    double start = rfc3339_seconds(annotation(obj, "agents.x-k8s.io/client-first-requested-at"));
    if (start < 0)
        start = rfc3339_seconds(annotation(obj, "agents.x-k8s.io/controller-first-observed-at"));
    if (start < 0)
        start = rfc3339_seconds(cli_meta(obj, "creationTimestamp"));
    char *s = NULL;
    double d = end - start;
    if (end < 0 || start < 0 || d < 0)
        return strdup("<none>");
    if (d < 1 && asprintf(&s, "%.1fms", d * 1000) >= 0)
        return s;
    if (asprintf(&s, "%.2fs", d) >= 0)
        return s;
    return NULL;
}

/* What a sandbox can reach. Until network policy is enforced locally a sandbox has a loopback
 * interface only, whatever its template's networkPolicy says; a NetworkPolicyEnforced condition
 * (when enforcement exists) says otherwise. */
static char *network_cell(const json_t *obj)
{
    const json_t *c = condition(obj, "NetworkPolicyEnforced");
    const char *st = json_string_value(json_object_get(c, "status"));
    if (st && strcmp(st, "True") == 0)
        return cell(json_object_get(c, "reason"));
    return strdup("loopback-only");
}

/* A column's cell (owned): the value its table entry names (api-field.h). */
static char *column_cell(const api_column *c, const json_t *obj)
{
    char buf[64];
    switch (c->value) {
    case API_COLUMN_AGE:
        cli_age(buf, sizeof(buf), cli_meta(obj, "creationTimestamp"));
        return strdup(buf);
    case API_COLUMN_REGARDING: {
        /* kubectl's OBJECT column of events: kind/name, the kind in lower case */
        const json_t *reg = json_object_get(obj, "regarding");
        _cleanup_free_ char *kind = cell(json_object_get(reg, "kind"));
        for (char *p = kind; p && *p; p++)
            *p = (char)tolower((unsigned char)*p);
        char *s = NULL;
        if (!kind ||
            asprintf(&s, "%s/%s", kind, json_string_value(json_object_get(reg, "name")) ?: "") < 0)
            return NULL;
        return s;
    }
    case API_COLUMN_CLAIM_LATENCY:
        return claim_latency(obj, condition(obj, "Ready"));
    case API_COLUMN_NETWORK:
        return network_cell(obj);
    case API_COLUMN_BLOCKED: {
        /* Blocked connections: status.blockedConnections while a policy is enforced, else the
         * NetworkPolicyEnforced condition's reason. */
        const json_t *np = condition(obj, "NetworkPolicyEnforced");
        const json_t *b = path(obj, "status", "blockedConnections", NULL);
        if (json_is_integer(b))
            snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(b));
        else
            snprintf(buf, sizeof(buf), "%s",
                     np && json_string_value(json_object_get(np, "reason"))
                         ? json_string_value(json_object_get(np, "reason"))
                         : "<none>");
        return strdup(buf);
    }
    case API_COLUMN_FIRST_POD_IP: {
        const json_t *ip = api_json_path(obj, c->json_path);
        return cell(json_is_object(ip) ? json_object_get(ip, "ip") : ip);
    }
    case API_COLUMN_PATH:
        break;
    }
    const json_t *v = api_json_path(obj, c->json_path);
    return !v && c->missing ? strdup(c->missing) : cell(v);
}

/* kubectl's header: the column's name in upper case. Owned. */
static char *column_header(const char *name)
{
    char *h = strdup(name);
    for (char *p = h; p && *p; p++)
        *p = (char)toupper((unsigned char)*p);
    return h;
}

/* Column headers (obj NULL) or values of one row: NAME (after NAMESPACE with -A), then the
 * kind's printer columns (upstream's additionalPrinterColumns, plus wide ones). */
size_t cli_columns(const asb_kind *k, bool wide, bool all_ns, const json_t *obj, char *row[])
{
    size_t n = 0;
    bool hdr = obj == NULL;
    const api_kind *ak = api_kind_by_name(k->kind);
#define COL(title, value) (row[n++] = hdr ? strdup(title) : (value))
    if (all_ns)
        COL("NAMESPACE", cell(path(obj, "metadata", "namespace", NULL)));
    COL("NAME", cell(path(obj, "metadata", "name", NULL)));
#undef COL
    for (const api_column *c = ak ? ak->columns : NULL; c && c->name && n < CLI_TABLE_MAX_COLS; c++)
        if (wide || !c->wide)
            row[n++] = hdr ? column_header(c->name) : column_cell(c, obj);
    return n;
}
