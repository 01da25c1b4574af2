/* `asb get KIND [NAME...] [-o FORMAT] [-l SELECTOR] [-A] [-w] [--for KIND/NAME]`: kubectl's get.
 * A table by default with the printer columns of the kind's table (src/api/api-kind-*.c,
 * asb-get-columns.c); -o json/yaml of a collection prints a List; -o jsonpath=/custom-columns=
 * take kubectl's templates (asb-jsonpath.h); -w prints rows as objects change. */
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-jsonpath.h"
#include "cli/asb-table.h"
#include "cli/asb.h"

typedef enum output {
    OUT_TABLE,
    OUT_WIDE,
    OUT_JSON,
    OUT_YAML,
    OUT_NAME,
    OUT_JSONPATH,
    OUT_CUSTOM_COLUMNS,
} output;

typedef struct get_opts {
    output o;
    const char *template; /* OUT_JSONPATH: the template; OUT_CUSTOM_COLUMNS: the spec */
    const char *selector;
    const char *for_ref; /* events only: "KIND/NAME" */
    bool all_ns, watch;
} get_opts;

static void get_usage(FILE *f)
{
    fprintf(f, "Usage: asb get KIND[/NAME] [NAME...] [-o json|yaml|wide|name] [-l SELECTOR] [-A]\n"
               "                 [-w] [--for KIND/NAME]\n\n"
               "Kinds: sandbox (sandboxes, sbx), sandboxtemplate (template), sandboxwarmpool\n"
               "(warmpool, swp), sandboxclaim (claim), event (events, ev).\n\n"
               "Options:\n"
               "  -o, --output FORMAT   json, yaml, wide, name, jsonpath=TEMPLATE or\n"
               "                        custom-columns=HEADER:PATH[,...] (default: a table)\n"
               "  -l, --selector SEL    label selector (a=b,c!=d,e in (x,y))\n"
               "  -A, --all-namespaces  list across namespaces\n"
               "  -w, --watch           after the list, print objects as they change\n"
               "      --for KIND/NAME   events: only those about this object\n"
               "  -h, --help            show this help\n" CLI_GLOBAL_HELP);
}

static int parse_output(get_opts *g, const char *arg)
{
    static const struct {
        const char *name;
        output o;
    } plain[] = {{"json", OUT_JSON}, {"yaml", OUT_YAML}, {"wide", OUT_WIDE}, {"name", OUT_NAME}};
    for (size_t i = 0; i < ELEMENTSOF(plain); i++)
        if (strcmp(arg, plain[i].name) == 0) {
            g->o = plain[i].o;
            return 0;
        }
    if (strncmp(arg, "jsonpath=", 9) == 0) {
        g->o = OUT_JSONPATH;
        g->template = arg + 9;
        return 0;
    }
    if (strncmp(arg, "custom-columns=", 15) == 0 && arg[15]) {
        g->o = OUT_CUSTOM_COLUMNS;
        g->template = arg + 15;
        return 0;
    }
    fprintf(stderr,
            "error: unable to match a printer suitable for the output format \"%s\", allowed "
            "formats are: custom-columns,json,jsonpath,name,wide,yaml\n",
            arg);
    return -EINVAL;
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

static int print_jsonpath(const char *template, const json_t *root)
{
    _cleanup_buf_ buf out = BUF_INIT;
    const char *err = NULL;
    int r = cli_jsonpath_render(&out, template, root, &err);
    if (r < 0) {
        fprintf(stderr, "error: error parsing jsonpath %s, %s\n", template,
                r == -EINVAL && err ? err : "out of memory");
        return 1;
    }
    fwrite(out.data ? out.data : "", 1, out.len, stdout);
    return 0;
}

/* custom-columns=HEADER:PATH,...: the header row (obj NULL) or an object's cells, each the
 * values at PATH joined by ',' ("<none>" when there is none). Returns the number of columns, or
 * -EINVAL when the spec is not HEADER:PATH pairs. */
static int custom_row(const char *spec, const json_t *obj, char *row[])
{
    _cleanup_free_ char *copy = strdup(spec);
    if (!copy)
        return -ENOMEM;
    int n = 0;
    for (char *save = NULL, *col = strtok_r(copy, ",", &save); col;
         col = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(col, ':');
        if (!colon || colon == col || !colon[1] || n == CLI_TABLE_MAX_COLS) {
            for (int i = 0; i < n; i++)
                free(row[i]);
            return -EINVAL;
        }
        *colon = '\0';
        if (!obj) {
            row[n++] = strdup(col);
            continue;
        }
        /* kubectl takes ".a.b" or "{.a.b}" */
        char *p = colon + 1;
        size_t pl = strlen(p);
        if (p[0] == '{' && pl > 1 && p[pl - 1] == '}') {
            p[pl - 1] = '\0';
            p++;
        }
        _cleanup_buf_ buf cell = BUF_INIT;
        json_t *vals = json_array();
        if (vals && cli_jsonpath_values(obj, p, vals) == 0) {
            size_t i;
            json_t *v;
            json_array_foreach (vals, i, v) {
                _cleanup_free_ char *t = cli_jsonpath_text(v);
                if (i > 0)
                    buf_append_byte(&cell, ',');
                buf_append_str(&cell, t ? t : "");
            }
        }
        json_decref(vals);
        row[n++] = cell.len ? buf_steal(&cell, NULL) : strdup("<none>");
    }
    return n;
}

/* The rows of items: a table (header unless only_rows), names, or custom columns. */
static int print_rows(const asb_kind *k, const get_opts *g, json_t *items, cli_table *t,
                      bool only_rows)
{
    char *row[CLI_TABLE_MAX_COLS];
    if (g->o == OUT_NAME) {
        char ref[600];
        for (size_t i = 0; i < json_array_size(items); i++)
            printf("%s\n",
                   cli_ref(ref, sizeof(ref), k, cli_meta(json_array_get(items, i), "name")));
        return 0;
    }
    if (g->o == OUT_CUSTOM_COLUMNS) {
        int n = custom_row(g->template, NULL, row);
        if (n < 0) {
            fprintf(stderr, "error: custom-columns format specified but no custom columns given "
                            "as HEADER:PATH\n");
            return 1;
        }
        t->ncols = (size_t)n;
    } else
        t->ncols = cli_columns(k, g->o == OUT_WIDE, g->all_ns, NULL, row);
    if (only_rows)
        for (size_t c = 0; c < t->ncols; c++)
            free(row[c]);
    else
        cli_table_add(t, row);
    for (size_t i = 0; i < json_array_size(items); i++) {
        const json_t *obj = json_array_get(items, i);
        if (g->o == OUT_CUSTOM_COLUMNS)
            custom_row(g->template, obj, row);
        else
            cli_columns(k, g->o == OUT_WIDE, g->all_ns, obj, row);
        cli_table_add(t, row);
    }
    cli_table_print(t);
    return 0;
}

static int print_items(const asb_kind *k, const get_opts *g, json_t *items, bool single,
                       cli_table *t)
{
    if (g->o == OUT_JSON || g->o == OUT_YAML || g->o == OUT_JSONPATH) {
        if (single)
            return g->o == OUT_JSONPATH ? print_jsonpath(g->template, json_array_get(items, 0))
                                        : print_json_or_yaml(json_array_get(items, 0), g->o);
        json_t *list = json_pack("{s:s,s:O,s:s,s:{s:s}}", "apiVersion", "v1", "items", items,
                                 "kind", "List", "metadata", "resourceVersion", "");
        int r = !list                  ? 1
                : g->o == OUT_JSONPATH ? print_jsonpath(g->template, list)
                                       : print_json_or_yaml(list, g->o);
        json_decref(list);
        return r;
    }
    return print_rows(k, g, items, t, false);
}

/* --for KIND/NAME on events: keeps the events whose .regarding is that object. */
static int filter_for(json_t *items, const char *ref)
{
    const char *slash = strchr(ref, '/');
    _cleanup_free_ char *kind_name = slash ? strndup(ref, (size_t)(slash - ref)) : NULL;
    const asb_kind *rk = kind_name ? cli_kind(kind_name) : NULL;
    if (!slash || !slash[1] || !rk) {
        if (!slash || !slash[1])
            fprintf(stderr, "error: --for takes KIND/NAME, not \"%s\"\n", ref);
        return -EINVAL;
    }
    for (size_t i = json_array_size(items); i-- > 0;) {
        const json_t *reg = json_object_get(json_array_get(items, i), "regarding");
        const char *kind = json_string_value(json_object_get(reg, "kind"));
        const char *name = json_string_value(json_object_get(reg, "name"));
        if (!kind || !name || strcmp(kind, rk->kind) != 0 || strcmp(name, slash + 1) != 0)
            json_array_remove(items, i);
    }
    return 0;
}

typedef struct watch_ctx {
    const asb_kind *k;
    const get_opts *g;
    cli_table *t;
    bool need_header; /* the list was empty: the first row comes with the header */
    char rv[32];      /* the last resourceVersion seen: a resumed watch starts after it */
} watch_ctx;

static volatile int interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* One watch event: the object's row (as it is now; a deleted one's last state), or its JSON. */
static int on_watch_event(const char *type, const char *object_json, void *payload)
{
    watch_ctx *w = payload;
    json_t *items = json_array();
    if (!items || json_array_append_new(items, json_loads(object_json, 0, NULL)) < 0 ||
        !json_is_object(json_array_get(items, 0))) {
        json_decref(items);
        return 0;
    }
    const char *rv = cli_meta(json_array_get(items, 0), "resourceVersion");
    if (rv && strlen(rv) < sizeof(w->rv))
        strcpy(w->rv, rv);
    if (strcmp(type, "BOOKMARK") == 0) {
        json_decref(items);
        return 0;
    }
    if (w->g->for_ref && filter_for(items, w->g->for_ref) < 0) {
        json_decref(items);
        return 1;
    }
    int r = 0;
    if (json_array_size(items) > 0)
        r = w->g->o == OUT_JSON || w->g->o == OUT_YAML || w->g->o == OUT_JSONPATH
                ? print_items(w->k, w->g, items, true, w->t)
                : print_rows(w->k, w->g, items, w->t, !w->need_header);
    if (json_array_size(items) > 0)
        w->need_header = false;
    json_decref(items);
    fflush(stdout);
    return r;
}

/* -w: changes after resource version rv, until interrupted (Ctrl-C ends it with status 0). */
static int watch(asb_client *cl, const asb_kind *k, const get_opts *g, const char *name,
                 const char *rv, cli_table *t, bool need_header)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    asb_watch_options wo = ASB_WATCH_OPTIONS_INIT;
    wo.name = name;
    wo.label_selector = g->selector;
    wo.allow_bookmarks = 1; /* keeps w.rv current while nothing changes */
    wo.cancel = &interrupted;
    watch_ctx w = {k, g, t, need_header, ""};
    if (rv && strlen(rv) < sizeof(w.rv))
        strcpy(w.rv, rv);
    const char *ns = g->all_ns ? NULL : cli_namespace();
    for (;;) {
        wo.resource_version = w.rv[0] ? w.rv : NULL;
        int r = asb_object_watch(cl, k->plural, ns, &wo, on_watch_event, &w);
        if (r == ASB_ECANCELLED)
            return 0;
        if (r == ASB_OK) /* the server ended the stream: go on after the last version seen */
            continue;
        return r > 0 ? 1 : cli_print_error(NULL);
    }
}

static int parse_args(int argc, char **argv, get_opts *g)
{
    enum { OPT_FOR = 0x2001 };
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"selector", required_argument, NULL, 'l'},
                                         {"all-namespaces", no_argument, NULL, 'A'},
                                         {"watch", no_argument, NULL, 'w'},
                                         {"for", required_argument, NULL, OPT_FOR},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    int c;
    while ((c = getopt_long(argc, argv, "o:l:Awh" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'o':
            if (parse_output(g, optarg) < 0)
                return 2;
            break;
        case 'l':
            g->selector = optarg;
            break;
        case 'A':
            g->all_ns = true;
            break;
        case 'w':
            g->watch = true;
            break;
        case OPT_FOR:
            g->for_ref = optarg;
            break;
        case 'h':
            get_usage(stdout);
            return 0;
        default:
            return cli_usage_option(c, argv, get_usage);
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "error: you must specify the type of resource to get\n");
        get_usage(stderr);
        return 2;
    }
    return -1;
}

/* The list's objects (appended to items); *ret_rv its resourceVersion (owned). */
static int list_objects(asb_client *cl, const asb_kind *k, const get_opts *g, json_t *items,
                        char **ret_rv)
{
    asb_list_options lo = ASB_LIST_OPTIONS_INIT;
    lo.label_selector = g->selector;
    lo.all_namespaces = g->all_ns;
    _cleanup_free_ char *s = NULL;
    if (asb_object_list(&s, cl, k->plural, cli_namespace(), &lo) != ASB_OK)
        return cli_print_error(NULL);
    json_t *list = json_loads(s, 0, NULL);
    json_array_extend(items, json_object_get(list, "items"));
    const char *rv =
        json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
    *ret_rv = rv ? strdup(rv) : NULL;
    json_decref(list);
    if (g->for_ref && filter_for(items, g->for_ref) < 0)
        return 2;
    return 0;
}

int asb_get(int argc, char **argv)
{
    get_opts g = {.o = OUT_TABLE};
    int r = parse_args(argc, argv, &g);
    if (r >= 0)
        return r;
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
    if (nnames > 0 && (g.selector || g.all_ns)) {
        fprintf(stderr, "error: a resource cannot be retrieved by name %s\n",
                g.all_ns ? "across all namespaces" : "with a selector");
        return 2;
    }
    if (g.for_ref && strcmp(k->kind, "Event") != 0) {
        fprintf(stderr, "error: --for selects events: asb get events --for KIND/NAME\n");
        return 2;
    }
    if (g.watch && nnames > 1) {
        fprintf(stderr, "error: you may only specify a single resource type and name to watch\n");
        return 2;
    }
    asb_client *cl = NULL;
    r = cli_client(&cl);
    if (r)
        return r;
    json_t *items = json_array();
    _cleanup_free_ char *rv = NULL, *watch_name = NULL;
    cli_table t = {0};
    int ret = 0;
    if (!items) {
        ret = 1;
        goto out;
    }
    if (nnames == 0) {
        if ((ret = list_objects(cl, k, &g, items, &rv)))
            goto out;
        if (json_array_size(items) == 0 && g.o != OUT_JSON && g.o != OUT_YAML &&
            g.o != OUT_JSONPATH) {
            if (g.all_ns)
                fprintf(stderr, "No resources found\n");
            else
                fprintf(stderr, "No resources found in %s namespace.\n", cli_namespace());
            if (g.watch)
                ret = watch(cl, k, &g, NULL, rv, &t, true);
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
            json_t *obj = json_loads(s, 0, NULL);
            if (g.watch && !watch_name) {
                watch_name = strdup(name);
                const char *orv = cli_meta(obj, "resourceVersion");
                rv = orv ? strdup(orv) : NULL;
            }
            json_array_append_new(items, obj);
        }
        if (json_array_size(items) == 0)
            goto out;
    }
    if (print_items(k, &g, items, nnames == 1, &t))
        ret = 1;
    else if (g.watch) {
        fflush(stdout);
        ret = watch(cl, k, &g, watch_name, rv, &t, false);
    }
out:
    json_decref(items);
    asb_client_free(cl);
    return ret;
}
