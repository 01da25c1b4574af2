/* `asb get KIND [NAME...] [-o json|yaml|wide|name] [-l SELECTOR] [-A]`: kubectl's get. A table
 * by default with the printer columns of the kind's table (src/api/api-kind-*.c); -o json/yaml
 * of a collection prints a List. */
#include <ctype.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/api-field.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"

typedef enum output { OUT_TABLE, OUT_WIDE, OUT_JSON, OUT_YAML, OUT_NAME } output;

static void get_usage(FILE *f)
{
    fprintf(f,
            "Usage: asb get KIND[/NAME] [NAME...] [-o json|yaml|wide|name] [-l SELECTOR] [-A]\n\n"
            "Kinds: sandbox (sandboxes, sbx), sandboxtemplate (template), sandboxwarmpool\n"
            "(warmpool, swp), sandboxclaim (claim).\n\n"
            "Options:\n"
            "  -o, --output FORMAT   json, yaml, wide or name (default: a table)\n"
            "  -l, --selector SEL    label selector (a=b,c!=d,e in (x,y))\n"
            "  -A, --all-namespaces  list across namespaces\n"
            "  -h, --help            show this help\n" CLI_GLOBAL_HELP);
}

/* kubectl's duration.HumanDuration. */
static void human_duration(char *buf, size_t size, long long s)
{
    if (s < -1) {
        snprintf(buf, size, "<invalid>");
        return;
    }
    if (s < 0)
        s = 0;
    long long m = s / 60, h = s / 3600, d = h / 24, y = d / 365;
    if (s < 120)
        snprintf(buf, size, "%llds", s);
    else if (m < 10)
        s % 60 == 0 ? snprintf(buf, size, "%lldm", m)
                    : snprintf(buf, size, "%lldm%llds", m, s % 60);
    else if (m < 180)
        snprintf(buf, size, "%lldm", m);
    else if (h < 8)
        m % 60 == 0 ? snprintf(buf, size, "%lldh", h)
                    : snprintf(buf, size, "%lldh%lldm", h, m % 60);
    else if (h < 48)
        snprintf(buf, size, "%lldh", h);
    else if (h < 24 * 8)
        h % 24 == 0 ? snprintf(buf, size, "%lldd", d)
                    : snprintf(buf, size, "%lldd%lldh", d, h % 24);
    else if (h < 24 * 365 * 2)
        snprintf(buf, size, "%lldd", d);
    else if (h < 24 * 365 * 8)
        d % 365 == 0 ? snprintf(buf, size, "%lldy", y)
                     : snprintf(buf, size, "%lldy%lldd", y, d % 365);
    else
        snprintf(buf, size, "%lldy", y);
}

static void age(char *buf, size_t size, const json_t *obj)
{
    const char *ts = cli_meta(obj, "creationTimestamp");
    struct tm tm = {0};
    if (!ts || !strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(buf, size, "<unknown>");
        return;
    }
    human_duration(buf, size, (long long)(time(NULL) - timegm(&tm)));
}

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

#define MAX_COLS 10

typedef struct table {
    size_t ncols, nrows;
    char **cells; /* nrows * ncols */
} table;

static void table_add(table *t, char *row[])
{
    char **p = realloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(char *));
    if (!p) {
        for (size_t i = 0; i < t->ncols; i++)
            free(row[i]);
        return;
    }
    t->cells = p;
    for (size_t i = 0; i < t->ncols; i++)
        t->cells[t->nrows * t->ncols + i] = row[i] ? row[i] : strdup("");
    t->nrows++;
}

static void table_print(table *t)
{
    size_t w[MAX_COLS] = {0};
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            size_t l = s ? strlen(s) : 0;
            w[c] = l > w[c] ? l : w[c];
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            if (c + 1 < t->ncols)
                printf("%-*s   ", (int)w[c], s ? s : "");
            else
                printf("%s\n", s ? s : "");
        }
    }
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
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
        age(buf, sizeof(buf), obj);
        return strdup(buf);
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
static size_t columns(const asb_kind *k, bool wide, bool all_ns, const json_t *obj, char *row[])
{
    size_t n = 0;
    bool hdr = obj == NULL;
    const api_kind *ak = api_kind_by_name(k->kind);
#define COL(title, value) (row[n++] = hdr ? strdup(title) : (value))
    if (all_ns)
        COL("NAMESPACE", cell(path(obj, "metadata", "namespace", NULL)));
    COL("NAME", cell(path(obj, "metadata", "name", NULL)));
#undef COL
    for (const api_column *c = ak ? ak->columns : NULL; c && c->name && n < MAX_COLS; c++)
        if (wide || !c->wide)
            row[n++] = hdr ? column_header(c->name) : column_cell(c, obj);
    return n;
}

static int print_json_or_yaml(const json_t *v, output o)
{
    _cleanup_free_ char *s = json_dumps(v, JSON_INDENT(4) | JSON_SORT_KEYS);
    if (!s) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    if (o == OUT_JSON) {
        printf("%s\n", s);
        return 0;
    }
    _cleanup_free_ char *y = NULL;
    if (asb_manifest_to_yaml(&y, s) != ASB_OK)
        return cli_print_error(NULL);
    fputs(y, stdout);
    return 0;
}

static int print_items(const asb_kind *k, json_t *items, output o, bool single, bool all_ns)
{
    if (o == OUT_JSON || o == OUT_YAML) {
        if (single)
            return print_json_or_yaml(json_array_get(items, 0), o);
        json_t *list = json_pack("{s:s,s:O,s:s,s:{s:s}}", "apiVersion", "v1", "items", items,
                                 "kind", "List", "metadata", "resourceVersion", "");
        int r = list ? print_json_or_yaml(list, o) : 1;
        json_decref(list);
        return r;
    }
    if (o == OUT_NAME) {
        char ref[600];
        for (size_t i = 0; i < json_array_size(items); i++)
            printf("%s\n",
                   cli_ref(ref, sizeof(ref), k, cli_meta(json_array_get(items, i), "name")));
        return 0;
    }
    table t = {0};
    char *row[MAX_COLS];
    t.ncols = columns(k, o == OUT_WIDE, all_ns, NULL, row);
    table_add(&t, row);
    for (size_t i = 0; i < json_array_size(items); i++) {
        columns(k, o == OUT_WIDE, all_ns, json_array_get(items, i), row);
        table_add(&t, row);
    }
    table_print(&t);
    return 0;
}

int asb_get(int argc, char **argv)
{
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"selector", required_argument, NULL, 'l'},
                                         {"all-namespaces", no_argument, NULL, 'A'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    output o = OUT_TABLE;
    const char *selector = NULL;
    bool all_ns = false;
    int c;
    while ((c = getopt_long(argc, argv, "o:l:Ah" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'o':
            if (strcmp(optarg, "json") == 0)
                o = OUT_JSON;
            else if (strcmp(optarg, "yaml") == 0)
                o = OUT_YAML;
            else if (strcmp(optarg, "wide") == 0)
                o = OUT_WIDE;
            else if (strcmp(optarg, "name") == 0)
                o = OUT_NAME;
            else {
                fprintf(stderr,
                        "error: unable to match a printer suitable for the output format "
                        "\"%s\", allowed formats are: json,name,wide,yaml\n",
                        optarg);
                return 2;
            }
            break;
        case 'l':
            selector = optarg;
            break;
        case 'A':
            all_ns = true;
            break;
        case 'h':
            get_usage(stdout);
            return 0;
        default:
            get_usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "error: you must specify the type of resource to get\n");
        get_usage(stderr);
        return 2;
    }
    /* KIND, KIND NAME..., or KIND/NAME */
    _cleanup_free_ char *kind_arg = strdup(argv[optind++]);
    if (!kind_arg)
        return 1;
    char *slash = strchr(kind_arg, '/');
    const char *slash_name = NULL;
    if (slash) {
        *slash = '\0';
        slash_name = slash + 1;
    }
    const asb_kind *k = cli_kind(kind_arg);
    if (!k)
        return 2;
    size_t nnames = (size_t)(argc - optind) + (slash_name ? 1 : 0);
    if (nnames > 0 && (selector || all_ns)) {
        fprintf(stderr, "error: a resource cannot be retrieved by name %s\n",
                all_ns ? "across all namespaces" : "with a selector");
        return 2;
    }
    asb_client *cl = NULL;
    int r = cli_client(&cl);
    if (r)
        return r;
    json_t *items = json_array();
    int ret = 0;
    if (nnames == 0) {
        asb_list_options lo = ASB_LIST_OPTIONS_INIT;
        lo.label_selector = selector;
        lo.all_namespaces = all_ns;
        _cleanup_free_ char *s = NULL;
        if (asb_object_list(&s, cl, k->plural, cli_namespace(), &lo) != ASB_OK) {
            ret = cli_print_error(NULL);
            goto out;
        }
        json_t *list = json_loads(s, 0, NULL);
        json_array_extend(items, json_object_get(list, "items"));
        json_decref(list);
        if (json_array_size(items) == 0 && o != OUT_JSON && o != OUT_YAML) {
            if (all_ns)
                fprintf(stderr, "No resources found\n");
            else
                fprintf(stderr, "No resources found in %s namespace.\n", cli_namespace());
            goto out;
        }
    } else {
        for (size_t i = 0; i < nnames; i++) {
            const char *name = slash_name && i == 0 ? slash_name : argv[optind++];
            _cleanup_free_ char *s = NULL;
            if (asb_object_get(&s, cl, k->plural, cli_namespace(), name) != ASB_OK) {
                ret = cli_print_error(NULL);
                continue;
            }
            json_array_append_new(items, json_loads(s, 0, NULL));
        }
        if (json_array_size(items) == 0)
            goto out;
    }
    if (print_items(k, items, o, nnames == 1, all_ns))
        ret = 1;
out:
    json_decref(items);
    asb_client_free(cl);
    return ret;
}
