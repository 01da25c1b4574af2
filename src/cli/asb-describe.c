/* `asb describe KIND NAME...`: kubectl's describe. One object as a person reads it: identity,
 * owner and claim, pod IPs, limits, network policy state, a summary of its spec, its conditions
 * with reasons and messages, and its recent Events (events.k8s.io/v1, asb-serve's recorder). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-pod.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-events.h"
#include "cli/asb-table.h"
#include "cli/asb.h"

static void describe_usage(FILE *f)
{
    fprintf(f, "Usage: asb describe KIND NAME [NAME...]\n"
               "       asb describe KIND/NAME\n\n"
               "Shows one object: owner and claim, pod IPs, limits, network policy, spec,\n"
               "conditions with reasons and messages, and the object's recent events.\n\n"
               "Options:\n"
               "  -h, --help            show this help\n" CLI_GLOBAL_HELP);
}

#define FIELD "%-16s"

static const json_t *at(const json_t *o, const char *a, const char *b, const char *c)
{
    const json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    if (c)
        v = json_object_get(v, c);
    return v;
}

/* "k=v" lines of a string map, the first on the field's line, the others aligned under it. */
static void print_map(const char *title, const json_t *map)
{
    printf(FIELD, title);
    if (json_object_size(map) == 0) {
        printf("<none>\n");
        return;
    }
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach ((json_t *)map, k, v) {
        printf("%*s%s=%s\n", first ? 0 : 16, "", k, json_string_value(v) ?: "");
        first = false;
    }
}

/* The controlling owner (kind/name), and the claim a Sandbox belongs to. */
static void print_owner(const json_t *obj, const char *kind)
{
    const json_t *refs = at(obj, "metadata", "ownerReferences", NULL);
    const char *claim = NULL;
    size_t i;
    json_t *ref;
    printf(FIELD, "Controlled By:");
    bool any = false;
    json_array_foreach ((json_t *)refs, i, ref) {
        const char *k = json_string_value(json_object_get(ref, "kind")) ?: "";
        const char *n = json_string_value(json_object_get(ref, "name")) ?: "";
        if (!json_is_true(json_object_get(ref, "controller")))
            continue;
        printf("%s%s/%s", any ? ", " : "", k, n);
        any = true;
        if (strcmp(k, "SandboxClaim") == 0)
            claim = n;
    }
    printf("%s\n", any ? "" : "<none>");
    if (strcmp(kind, "Sandbox") == 0)
        printf(FIELD "%s\n", "Claim:", claim ?: "<none>");
    if (strcmp(kind, "SandboxClaim") == 0) {
        const char *sb = json_string_value(at(obj, "status", "sandbox", "name"));
        printf(FIELD "%s\n", "Sandbox:", sb ?: "<none>");
    }
}

static const json_t *condition(const json_t *obj, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach (at(obj, "status", "conditions", NULL), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

static bool defaulted(const json_t *res, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach (json_object_get(res, "defaulted"), i, d)
        if (json_is_string(d) && strcmp(json_string_value(d), name) == 0)
            return true;
    return false;
}

/* The limits the sandbox runs with: status.resources (what asb serve applied, defaults marked),
 * else the containers' resources.limits as asked. */
static void print_limits(const json_t *obj)
{
    printf(FIELD, "Limits:");
    bool any = false;
    const json_t *res = at(obj, "status", "resources", NULL);
    const char *k;
    json_t *v;
    json_object_foreach (json_object_get(res, "limits"), k, v) {
        printf("%s%s=%s%s", any ? ", " : "", k, json_string_value(v) ?: "",
               defaulted(res, k) ? " (default)" : "");
        any = true;
    }
    if (any) {
        printf("\n");
        return;
    }
    size_t i;
    json_t *ctr;
    /* Every limit as written, so from the JSON (api_pod types three resources only). */
    json_array_foreach (json_object_get(api_pod_spec_of(obj), "containers"), i, ctr) {
        json_object_foreach (json_object_get(json_object_get(ctr, "resources"), "limits"), k, v) {
            _cleanup_free_ char *t =
                json_is_string(v) ? strdup(json_string_value(v)) : json_dumps(v, JSON_ENCODE_ANY);
            printf("%s%s=%s", any ? ", " : "", k, t ? t : "");
            any = true;
        }
    }
    printf("%s\n", any ? "" : "<none> (asb serve's defaults)");
}

/* Pod IPs, limits and network policy: what runs (Sandbox, and a claim's sandbox status). */
static void print_runtime(const json_t *obj, const char *kind)
{
    const json_t *ips = strcmp(kind, "SandboxClaim") == 0 ? at(obj, "status", "sandbox", "podIPs")
                                                          : at(obj, "status", "podIPs", NULL);
    printf(FIELD, "Pod IPs:");
    size_t i;
    json_t *ip;
    json_array_foreach ((json_t *)ips, i, ip) {
        const json_t *s = json_is_object(ip) ? json_object_get(ip, "ip") : ip;
        printf("%s%s", i ? ", " : "", json_string_value(s) ?: "");
    }
    printf("%s\n", json_array_size(ips) ? "" : "<none>");
    if (strcmp(kind, "Sandbox") != 0)
        return;
    print_limits(obj);
    const json_t *np = condition(obj, "NetworkPolicyEnforced");
    const char *st = json_string_value(json_object_get(np, "status"));
    printf(FIELD, "Network Policy:");
    if (!np)
        printf("loopback-only\n");
    else {
        printf("%s (%s)", json_string_value(json_object_get(np, "reason")) ?: "",
               st && strcmp(st, "True") == 0 ? "enforced" : "not enforced");
        const json_t *b = at(obj, "status", "blockedConnections", NULL);
        if (json_is_integer(b))
            printf(", %lld blocked connections", (long long)json_integer_value(b));
        printf("\n");
    }
}

/* What it uses now (asb top's figures), when its container runs. */
static void print_usage(asb_client *cl, const json_t *obj)
{
    _cleanup_free_ char *s = NULL;
    printf(FIELD, "Usage:");
    if (asb_sandbox_usage(&s, cl, cli_meta(obj, "namespace") ?: cli_namespace(),
                          cli_meta(obj, "name") ?: "") != ASB_OK) {
        printf("<none>\n");
        return;
    }
    json_t *pm = json_loads(s, 0, NULL);
    _cleanup_free_ char *cpu = cli_usage_cell(pm, "cpu"), *mem = cli_usage_cell(pm, "memory");
    printf("cpu=%s, memory=%s\n", cpu ?: "", mem ?: "");
    json_decref(pm);
}

/* The spec as YAML, indented under "Spec:". */
static void print_spec(const json_t *obj)
{
    const json_t *spec = json_object_get(obj, "spec");
    if (!spec)
        return;
    _cleanup_free_ char *s = json_dumps(spec, JSON_SORT_KEYS);
    _cleanup_free_ char *y = NULL;
    printf("Spec:\n");
    if (!s || asb_manifest_to_yaml(&y, s) != ASB_OK)
        return;
    for (char *line = y, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        printf("  %.*s\n", nl ? (int)(nl - line) : (int)strlen(line), line);
    }
}

static void print_conditions(const json_t *obj)
{
    const json_t *conds = at(obj, "status", "conditions", NULL);
    printf("Conditions:");
    if (json_array_size(conds) == 0) {
        printf("\n  <none>\n");
        return;
    }
    printf("\n");
    cli_table t = {.ncols = 5};
    char *row[5] = {strdup("  Type"), strdup("Status"), strdup("Reason"), strdup("Age"),
                    strdup("Message")};
    cli_table_add(&t, row);
    size_t i;
    json_t *c;
    json_array_foreach ((json_t *)conds, i, c) {
        char age[32];
        cli_age(age, sizeof(age), json_string_value(json_object_get(c, "lastTransitionTime")));
        const char *type = json_string_value(json_object_get(c, "type")) ?: "";
        char *cells[5] = {NULL};
        if (asprintf(&cells[0], "  %s", type) < 0)
            cells[0] = NULL;
        cells[1] = strdup(json_string_value(json_object_get(c, "status")) ?: "");
        cells[2] = strdup(json_string_value(json_object_get(c, "reason")) ?: "");
        cells[3] = strdup(age);
        cells[4] = strdup(json_string_value(json_object_get(c, "message")) ?: "");
        cli_table_add(&t, cells);
    }
    cli_table_print(&t);
}

/* The object's Events, oldest first; "<none>" when there are none (or events are not served).
 * Those of an earlier object of the same name (another uid) are not its. */
static void print_events(asb_client *cl, const char *kind, const char *name, const char *uid)
{
    _cleanup_free_ char *s = NULL;
    json_t *list = NULL;
    if (asb_object_list(&s, cl, "events", cli_namespace(), NULL) == ASB_OK)
        list = json_loads(s, 0, NULL);
    json_t *items = json_object_get(list, "items");
    size_t i;
    json_t *mine = json_array();
    json_t *ev;
    json_array_foreach (items, i, ev) {
        const json_t *reg = json_object_get(ev, "regarding");
        const char *rk = json_string_value(json_object_get(reg, "kind"));
        const char *rn = json_string_value(json_object_get(reg, "name"));
        const char *ru = json_string_value(json_object_get(reg, "uid"));
        if (mine && rk && rn && strcmp(rk, kind) == 0 && strcmp(rn, name) == 0 &&
            (!uid || !ru || strcmp(ru, uid) == 0))
            json_array_append(mine, ev);
    }
    if (json_array_size(mine) == 0 || cli_events_fold(mine) < 0) {
        printf("Events:         <none>\n");
        json_decref(mine);
        json_decref(list);
        return;
    }
    printf("Events:\n");
    cli_table t = {.ncols = 5};
    char *hdr[5] = {strdup("  Type"), strdup("Reason"), strdup("Age"), strdup("From"),
                    strdup("Message")};
    cli_table_add(&t, hdr);
    json_array_foreach (mine, i, ev) {
        char age[96];
        cli_event_last_seen(age, sizeof(age), ev);
        char *cells[5] = {NULL};
        if (asprintf(&cells[0], "  %s", json_string_value(json_object_get(ev, "type")) ?: "") < 0)
            cells[0] = NULL;
        cells[1] = strdup(json_string_value(json_object_get(ev, "reason")) ?: "");
        cells[2] = strdup(age);
        cells[3] = strdup(json_string_value(json_object_get(ev, "reportingController")) ?: "");
        cells[4] = strdup(json_string_value(json_object_get(ev, "note")) ?: "");
        cli_table_add(&t, cells);
    }
    cli_table_print(&t);
    json_decref(mine);
    json_decref(list);
}

static void describe_one(asb_client *cl, const json_t *obj)
{
    const char *kind = json_string_value(json_object_get(obj, "kind")) ?: "";
    char age[32];
    cli_age(age, sizeof(age), cli_meta(obj, "creationTimestamp"));
    printf(FIELD "%s\n", "Name:", cli_meta(obj, "name") ?: "");
    printf(FIELD "%s\n", "Namespace:", cli_meta(obj, "namespace") ?: "");
    printf(FIELD "%s\n", "Kind:", kind);
    printf(FIELD "%s\n",
           "API Version:", json_string_value(json_object_get(obj, "apiVersion")) ?: "");
    print_map("Labels:", at(obj, "metadata", "labels", NULL));
    print_map("Annotations:", at(obj, "metadata", "annotations", NULL));
    printf(FIELD "%s (%s ago)\n", "Created:", cli_meta(obj, "creationTimestamp") ?: "<unknown>",
           age);
    if (cli_meta(obj, "deletionTimestamp"))
        printf(FIELD "%s\n", "Deleting Since:", cli_meta(obj, "deletionTimestamp"));
    print_owner(obj, kind);
    print_runtime(obj, kind);
    if (strcmp(kind, "Sandbox") == 0)
        print_usage(cl, obj);
    print_spec(obj);
    print_conditions(obj);
    print_events(cl, kind, cli_meta(obj, "name") ?: "", cli_meta(obj, "uid"));
}

int asb_describe(int argc, char **argv)
{
    int r = cli_parse_global_only(argc, argv, describe_usage);
    if (r >= 0)
        return r;
    if (optind >= argc) {
        fprintf(stderr, "error: you must specify the type of resource to describe\n");
        describe_usage(stderr);
        return 2;
    }
    _cleanup_free_ char *kind_arg = strdup(argv[optind++]);
    if (!kind_arg)
        return 1;
    char *slash = strchr(kind_arg, '/');
    if (slash)
        *slash++ = '\0';
    const asb_kind *k = cli_kind(kind_arg);
    if (!k)
        return 2;
    if (!slash && optind >= argc) {
        fprintf(stderr, "error: you must specify the name of the %s to describe\n", k->singular);
        return 2;
    }
    asb_client *cl = NULL;
    if ((r = cli_client(&cl)))
        return r;
    int ret = 0;
    for (int i = slash ? optind - 1 : optind; i < argc; i++) {
        const char *name = slash && i == optind - 1 ? slash : argv[i];
        _cleanup_free_ char *s = NULL;
        if (asb_object_get(&s, cl, k->plural, cli_namespace(), name) != ASB_OK) {
            ret = cli_print_error(NULL);
            continue;
        }
        json_t *obj = json_loads(s, 0, NULL);
        if (!obj) {
            ret = 1;
            continue;
        }
        if (i > (slash ? optind - 1 : optind))
            printf("\n\n");
        describe_one(cl, obj);
        json_decref(obj);
    }
    asb_client_free(cl);
    return ret;
}
