/* `asb api-resources`: the kinds the server serves, read from its discovery documents (/apis, then
 * /apis/GROUP/VERSION of each group's preferred version), in kubectl's columns NAME SHORTNAMES
 * APIVERSION NAMESPACED KIND (-o wide adds VERBS and CATEGORIES; -o name prints
 * PLURAL.GROUP), sorted by group then name as kubectl does. Subresources (sandboxes/status) are
 * not kinds and are left out. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-table.h"
#include "cli/asb.h"

static void api_resources_usage(FILE *f)
{
    fprintf(f, "Usage: asb api-resources [-o wide|name] [--no-headers] [--api-group GROUP]\n"
               "                         [--namespaced=true|false] [--verbs VERB,...]\n"
               "                         [--sort-by name|kind]\n\n"
               "Prints the kinds the server serves (from its discovery documents).\n\n"
               "Options:\n"
               "  -o, --output FORMAT     wide (adds VERBS and CATEGORIES) or name\n"
               "      --no-headers        no header line\n"
               "      --api-group GROUP   only this group (\"\" for the core group)\n"
               "      --namespaced BOOL   only namespaced (true) or cluster-wide (false) kinds\n"
               "      --verbs VERBS       only kinds that support all these verbs\n"
               "      --sort-by FIELD     name or kind (default: group, then name)\n"
               "  -h, --help              show this help\n" CLI_GLOBAL_HELP);
}

typedef struct ar_opts {
    bool wide, name_only, no_headers;
    const char *group; /* NULL: every group */
    int namespaced;    /* -1: both */
    const char *verbs; /* comma-separated, NULL: any */
    const char *sort_by;
} ar_opts;

/* One resource of the listing, borrowing from the discovery documents. */
typedef struct ar_row {
    const char *group, *group_version;
    const json_t *res;
} ar_row;

static const char *sort_by;

static const char *res_str(const ar_row *r, const char *field)
{
    const char *s = json_string_value(json_object_get(r->res, field));
    return s ? s : "";
}

static int row_cmp(const void *a, const void *b)
{
    const ar_row *x = a, *y = b;
    int c;
    if (sort_by && strcmp(sort_by, "kind") == 0)
        c = strcmp(res_str(x, "kind"), res_str(y, "kind"));
    else if (sort_by && strcmp(sort_by, "name") == 0)
        c = strcmp(res_str(x, "name"), res_str(y, "name"));
    else
        c = strcmp(x->group, y->group);
    return c ? c : strcmp(res_str(x, "name"), res_str(y, "name"));
}

/* The strings of a JSON array joined with commas (owned; "" when empty). */
static char *joined(const json_t *arr)
{
    _cleanup_buf_ buf b = BUF_INIT;
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v)
        if (buf_appendf(&b, "%s%s", i ? "," : "", json_string_value(v) ?: "") < 0)
            return NULL;
    return buf_steal(&b, NULL) ?: strdup("");
}

static bool has_verbs(const json_t *res, const char *want)
{
    if (!want)
        return true;
    _cleanup_free_ char *copy = strdup(want);
    char *save = NULL;
    for (char *v = copy ? strtok_r(copy, ",", &save) : NULL; v; v = strtok_r(NULL, ",", &save)) {
        bool found = false;
        size_t i;
        json_t *x;
        json_array_foreach (json_object_get(res, "verbs"), i, x)
            found |= json_string_value(x) && strcmp(json_string_value(x), v) == 0;
        if (!found)
            return false;
    }
    return copy != NULL;
}

static bool wanted(const ar_opts *o, const char *group, const json_t *res)
{
    const char *name = json_string_value(json_object_get(res, "name"));
    if (!name || strchr(name, '/'))
        return false;
    if (o->group && strcmp(o->group, group) != 0)
        return false;
    if (o->namespaced >= 0 && json_is_true(json_object_get(res, "namespaced")) != o->namespaced)
        return false;
    return has_verbs(res, o->verbs);
}

static void print_rows(const ar_opts *o, ar_row *rows, size_t n)
{
    sort_by = o->sort_by;
    if (n > 0)
        qsort(rows, n, sizeof(*rows), row_cmp);
    if (o->name_only) {
        for (size_t i = 0; i < n; i++)
            printf("%s%s%s\n", res_str(&rows[i], "name"), *rows[i].group ? "." : "", rows[i].group);
        return;
    }
    cli_table t = {.ncols = o->wide ? 7 : 5};
    if (!o->no_headers) {
        char *h[] = {strdup("NAME"),       strdup("SHORTNAMES"), strdup("APIVERSION"),
                     strdup("NAMESPACED"), strdup("KIND"),       strdup("VERBS"),
                     strdup("CATEGORIES")};
        cli_table_add(&t, h);
        for (size_t i = t.ncols; i < ELEMENTSOF(h); i++)
            free(h[i]);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *r = rows[i].res;
        char *row[] = {strdup(res_str(&rows[i], "name")),
                       joined(json_object_get(r, "shortNames")),
                       strdup(rows[i].group_version),
                       strdup(json_is_true(json_object_get(r, "namespaced")) ? "true" : "false"),
                       strdup(res_str(&rows[i], "kind")),
                       o->wide ? joined(json_object_get(r, "verbs")) : NULL,
                       o->wide ? joined(json_object_get(r, "categories")) : NULL};
        cli_table_add(&t, row);
    }
    cli_table_print(&t);
}

/* Lists every group's resources. Returns the exit code. */
static int list_resources(asb_client *cl, const ar_opts *o)
{
    _cleanup_free_ char *groups_s = NULL;
    if (asb_server_discovery(&groups_s, cl, NULL) != ASB_OK)
        return cli_print_error(NULL);
    json_t *groups = json_loads(groups_s, 0, NULL);
    json_t *lists = json_array();
    ar_row *rows = NULL;
    size_t n = 0, i, j;
    json_t *g, *res;
    int ret = lists ? 0 : 1;
    json_array_foreach (json_object_get(groups, "groups"), i, g) {
        const char *gv = json_string_value(
            json_object_get(json_object_get(g, "preferredVersion"), "groupVersion"));
        _cleanup_free_ char *list_s = NULL;
        if (ret || !gv)
            continue;
        if (asb_server_discovery(&list_s, cl, gv) != ASB_OK) {
            ret = cli_print_error(NULL);
            continue;
        }
        json_t *list = json_loads(list_s, 0, NULL);
        if (json_array_append_new(lists, list) < 0) {
            ret = 1;
            continue;
        }
        const char *group = json_string_value(json_object_get(g, "name")) ?: "";
        json_array_foreach (json_object_get(list, "resources"), j, res) {
            if (!wanted(o, group, res))
                continue;
            ar_row *v = realloc(rows, (n + 1) * sizeof(*v));
            if (!v) {
                ret = 1;
                break;
            }
            rows = v;
            rows[n++] = (ar_row){
                group, json_string_value(json_object_get(list, "groupVersion")) ?: "", res};
        }
    }
    if (ret == 0)
        print_rows(o, rows, n);
    free(rows);
    json_decref(lists);
    json_decref(groups);
    return ret;
}

int asb_api_resources(int argc, char **argv)
{
    enum { OPT_NO_HEADERS = 0x2001, OPT_GROUP, OPT_NAMESPACED, OPT_VERBS, OPT_SORT };
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"no-headers", no_argument, NULL, OPT_NO_HEADERS},
                                         {"api-group", required_argument, NULL, OPT_GROUP},
                                         {"namespaced", required_argument, NULL, OPT_NAMESPACED},
                                         {"verbs", required_argument, NULL, OPT_VERBS},
                                         {"sort-by", required_argument, NULL, OPT_SORT},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    ar_opts o = {.namespaced = -1};
    int c;
    while ((c = getopt_long(argc, argv, "o:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'o':
            if (strcmp(optarg, "wide") == 0)
                o.wide = true;
            else if (strcmp(optarg, "name") == 0)
                o.name_only = true;
            else {
                fprintf(stderr, "error: --output %s is not available\n", optarg);
                return 1;
            }
            break;
        case OPT_NO_HEADERS:
            o.no_headers = true;
            break;
        case OPT_GROUP:
            o.group = optarg;
            break;
        case OPT_NAMESPACED:
            if (strcmp(optarg, "true") != 0 && strcmp(optarg, "false") != 0) {
                fprintf(stderr,
                        "error: invalid argument \"%s\" for \"--namespaced\" flag: "
                        "strconv.ParseBool: parsing \"%s\": invalid syntax\n",
                        optarg, optarg);
                return 1;
            }
            o.namespaced = strcmp(optarg, "true") == 0;
            break;
        case OPT_VERBS:
            o.verbs = optarg;
            break;
        case OPT_SORT:
            if (strcmp(optarg, "name") != 0 && strcmp(optarg, "kind") != 0) {
                fprintf(stderr, "error: --sort-by accepts only name or kind\n");
                return 1;
            }
            o.sort_by = optarg;
            break;
        default:
            return cli_usage_option(c, argv, api_resources_usage);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "error: unexpected arguments: %s\n", argv[optind]);
        return 1;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret == 0)
        ret = list_resources(cl, &o);
    asb_client_free(cl);
    return ret;
}
