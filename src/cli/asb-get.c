/* `asb get KIND[,KIND...] [NAME...] [-o FORMAT] [-l SELECTOR] [-A] [-w] [--for KIND/NAME]`:
 * kubectl's get. A table by default with the printer columns of the kind's table
 * (src/api/api-kind-*.c, asb-get-columns.c) and kubectl's decorations (asb-get-print.c); events
 * folded and in time order (asb-events.c); -o json/yaml of a collection prints a List;
 * -o jsonpath=/custom-columns= take kubectl's templates (asb-jsonpath.h); --sort-by
 * (asb-get-sort.c); -w prints rows as objects change. */
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-events.h"
#include "cli/asb-get.h"
#include "cli/asb.h"

#define GET_MAX_KINDS 8

static void get_usage(FILE *f)
{
    fprintf(f, "Usage: asb get KIND[,KIND...][/NAME] [NAME...] [-o FORMAT] [-l SELECTOR] [-A]\n"
               "                 [-w] [--for KIND/NAME] [--sort-by PATH] [-L KEY] [--show-labels]\n"
               "                 [--no-headers]\n\n"
               "Kinds: sandbox (sandboxes, sbx), sandboxtemplate (template), sandboxwarmpool\n"
               "(warmpool, swp), sandboxclaim (claim), sandboxsnapshot (snapshot), event (events,\n"
               "ev); several separated by commas; all: every kind but events.\n\n"
               "Options:\n"
               "  -o, --output FORMAT   json, yaml, wide, name, jsonpath=TEMPLATE or\n"
               "                        custom-columns=HEADER:PATH[,...] (default: a table)\n"
               "  -l, --selector SEL    label selector (a=b,c!=d,e in (x,y))\n"
               "  -A, --all-namespaces  list across namespaces\n"
               "  -L, --label-columns KEY[,KEY...]  a column with each label's value\n"
               "      --show-labels     a LABELS column with every label\n"
               "      --no-headers      no header row\n"
               "      --sort-by PATH    sort by the value at a JSONPath ('{.metadata.name}')\n"
               "  -w, --watch           after the list, print objects as they change\n"
               "      --output-watch-events  with -w: an EVENT column (ADDED, MODIFIED, DELETED)\n"
               "      --for KIND/NAME   events: only those about this object\n"
               "  -h, --help            show this help\n" CLI_GLOBAL_HELP);
}

static int parse_output(get_opts *g, const char *arg)
{
    static const struct {
        const char *name;
        get_output o;
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

/* -L a,b -L c: every key, in order. */
static int add_label_cols(get_opts *g, const char *arg)
{
    _cleanup_free_ char *copy = strdup(arg);
    if (!copy)
        return -ENOMEM;
    for (char *save = NULL, *k = strtok_r(copy, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        if (g->n_label_cols == GET_MAX_LABEL_COLS) {
            fprintf(stderr, "error: at most %d label columns\n", GET_MAX_LABEL_COLS);
            return -E2BIG;
        }
        if (!(g->label_cols[g->n_label_cols] = strdup(k)))
            return -ENOMEM;
        g->n_label_cols++;
    }
    return 0;
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
    if (json_array_size(items) > 0) {
        r = get_output_is_document(w->g->o)
                ? get_print_document(w->g, items, true)
                : get_print_rows(w->k, w->g, items, w->t, !w->need_header, type);
        w->need_header = false;
    }
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
    enum {
        OPT_FOR = 0x2001,
        OPT_SHOW_LABELS,
        OPT_NO_HEADERS,
        OPT_SORT_BY,
        OPT_WATCH_EVENTS,
    };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"selector", required_argument, NULL, 'l'},
        {"all-namespaces", no_argument, NULL, 'A'},
        {"watch", no_argument, NULL, 'w'},
        {"for", required_argument, NULL, OPT_FOR},
        {"label-columns", required_argument, NULL, 'L'},
        {"show-labels", no_argument, NULL, OPT_SHOW_LABELS},
        {"no-headers", no_argument, NULL, OPT_NO_HEADERS},
        {"sort-by", required_argument, NULL, OPT_SORT_BY},
        {"output-watch-events", no_argument, NULL, OPT_WATCH_EVENTS},
        {"help", no_argument, NULL, 'h'},
        CLI_GLOBAL_LONG,
        {0}};
    int c;
    while ((c = getopt_long(argc, argv, "o:l:AwL:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
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
        case 'L':
            if (add_label_cols(g, optarg) < 0)
                return 2;
            break;
        case OPT_SHOW_LABELS:
            g->show_labels = true;
            break;
        case OPT_NO_HEADERS:
            g->no_headers = true;
            break;
        case OPT_SORT_BY:
            g->sort_by = optarg;
            break;
        case OPT_WATCH_EVENTS:
            g->watch_events = true;
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

/* kubectl's `all` category for our kinds (asb delete's too, in the order get prints them). */
static const char *const all_kinds[] = {"sandboxes", "sandboxclaims", "sandboxwarmpools",
                                        "sandboxtemplates", "sandboxsnapshots"};

/* KIND[,KIND...] ("all" expanded) into kinds; returns their number, 0 after an error. */
static size_t parse_kinds(char *arg, const asb_kind *kinds[GET_MAX_KINDS])
{
    size_t n = 0;
    for (char *save = NULL, *name = strtok_r(arg, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        bool all = strcmp(name, "all") == 0;
        for (size_t i = 0; i < (all ? ELEMENTSOF(all_kinds) : 1); i++) {
            const asb_kind *k = NULL;
            if (all ? asb_kind_lookup(&k, all_kinds[i]) != ASB_OK : !(k = cli_kind(name)))
                return 0;
            bool dup = false;
            for (size_t j = 0; j < n; j++)
                dup = dup || kinds[j] == k;
            if (dup)
                continue;
            if (n == GET_MAX_KINDS) {
                fprintf(stderr, "error: too many resource types\n");
                return 0;
            }
            kinds[n++] = k;
        }
    }
    if (n == 0)
        fprintf(stderr, "error: you must specify the type of resource to get\n");
    return n;
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
    if (ret_rv)
        *ret_rv = rv ? strdup(rv) : NULL;
    json_decref(list);
    if (g->for_ref && filter_for(items, g->for_ref) < 0)
        return 2;
    return 0;
}

/* The named objects (NotFound errors printed, *ret_failed set), appended to items. */
static void get_named(asb_client *cl, const asb_kind *k, char **names, size_t n, json_t *items,
                      int *ret_failed)
{
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *s = NULL;
        if (asb_object_get(&s, cl, k->plural, cli_namespace(), names[i]) != ASB_OK) {
            *ret_failed = cli_print_error(NULL);
            continue;
        }
        json_array_append_new(items, json_loads(s, 0, NULL));
    }
}

static void no_resources(const get_opts *g)
{
    if (g->all_ns)
        fprintf(stderr, "No resources found\n");
    else
        fprintf(stderr, "No resources found in %s namespace.\n", cli_namespace());
}

/* Events in a table: folded and in time order, as kubectl prints them; then --sort-by. */
static int prepare_items(const asb_kind *k, const get_opts *g, json_t *items)
{
    if (strcmp(k->kind, "Event") == 0 && (g->o == OUT_TABLE || g->o == OUT_WIDE) &&
        cli_events_fold(items) < 0) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    return g->sort_by ? get_sort_items(items, g->sort_by) : 0;
}

/* Several kinds (or `all`): one table per kind that has objects, a blank line between, names
 * kind-prefixed; one List for json/yaml/jsonpath; names for -o name. */
static int get_kinds(asb_client *cl, const asb_kind **kinds, size_t nkinds, get_opts *g,
                     char **names, size_t nnames)
{
    json_t *all = json_array();
    int ret = 0;
    size_t printed = 0;
    g->with_kind = true;
    for (size_t i = 0; all && i < nkinds; i++) {
        json_t *items = json_array();
        cli_table t = {0};
        int r = !items   ? 1
                : nnames ? (get_named(cl, kinds[i], names, nnames, items, &ret), 0)
                         : list_objects(cl, kinds[i], g, items, NULL);
        if (r || (r = prepare_items(kinds[i], g, items))) {
            ret = r;
        } else if (get_output_is_document(g->o)) {
            json_array_extend(all, items);
        } else if (json_array_size(items) > 0) {
            if (printed++ && g->o != OUT_NAME)
                printf("\n");
            if (get_print_rows(kinds[i], g, items, &t, false, NULL))
                ret = 1;
        }
        json_decref(items);
    }
    if (!all)
        ret = 1;
    else if (get_output_is_document(g->o))
        ret = get_print_document(g, all, false) ?: ret;
    else if (printed == 0 && nnames == 0 && ret == 0)
        no_resources(g);
    json_decref(all);
    return ret;
}

/* One kind: the list or the named objects, then -w's changes. */
static int get_kind(asb_client *cl, const asb_kind *k, const get_opts *g, char **names,
                    size_t nnames)
{
    json_t *items = json_array();
    _cleanup_free_ char *rv = NULL;
    cli_table t = {0};
    int ret = 0;
    if (!items)
        return 1;
    if (nnames == 0) {
        if ((ret = list_objects(cl, k, g, items, &rv)))
            goto out;
        if (json_array_size(items) == 0 && !get_output_is_document(g->o)) {
            no_resources(g);
            if (g->watch)
                ret = watch(cl, k, g, NULL, rv, &t, true);
            goto out;
        }
    } else {
        get_named(cl, k, names, nnames, items, &ret);
        if (json_array_size(items) == 0)
            goto out;
        if (g->watch) {
            const char *orv = cli_meta(json_array_get(items, 0), "resourceVersion");
            rv = orv ? strdup(orv) : NULL;
        }
    }
    if ((ret = prepare_items(k, g, items)))
        goto out;
    if (get_output_is_document(g->o) ? get_print_document(g, items, nnames == 1)
                                     : get_print_rows(k, g, items, &t, false, NULL))
        ret = 1;
    else if (g->watch) {
        fflush(stdout);
        ret = watch(cl, k, g, nnames ? names[0] : NULL, rv, &t, false);
    }
out:
    json_decref(items);
    return ret;
}

static int run_get(get_opts *g, int argc, char **argv)
{
    /* KIND[,KIND], KIND NAME..., or KIND/NAME */
    _cleanup_free_ char *kind_arg = strdup(argv[optind++]);
    if (!kind_arg)
        return 1;
    char *slash = strchr(kind_arg, '/');
    char *names[argc + 1];
    size_t nnames = 0;
    if (slash) {
        *slash = '\0';
        names[nnames++] = slash + 1;
    }
    while (optind < argc)
        names[nnames++] = argv[optind++];
    const asb_kind *kinds[GET_MAX_KINDS];
    size_t nkinds = parse_kinds(kind_arg, kinds);
    if (nkinds == 0)
        return 2;
    if (nnames > 0 && (g->selector || g->all_ns)) {
        fprintf(stderr, "error: a resource cannot be retrieved by name %s\n",
                g->all_ns ? "across all namespaces" : "with a selector");
        return 2;
    }
    if (g->for_ref && (nkinds > 1 || strcmp(kinds[0]->kind, "Event") != 0)) {
        fprintf(stderr, "error: --for selects events: asb get events --for KIND/NAME\n");
        return 2;
    }
    if (g->watch && nkinds > 1) {
        fprintf(stderr,
                "error: watch is only supported on individual resources and resource "
                "collections, but %zu resource types were given\n",
                nkinds);
        return 2;
    }
    if (g->watch && nnames > 1) {
        fprintf(stderr, "error: you may only specify a single resource type and name to watch\n");
        return 2;
    }
    if (g->watch_events && !g->watch) {
        fprintf(stderr, "error: --output-watch-events takes -w/--watch\n");
        return 2;
    }
    asb_client *cl = NULL;
    int r = cli_client(&cl);
    if (r)
        return r;
    r = nkinds > 1 ? get_kinds(cl, kinds, nkinds, g, names, nnames)
                   : get_kind(cl, kinds[0], g, names, nnames);
    asb_client_free(cl);
    return r;
}

int asb_get(int argc, char **argv)
{
    get_opts g = {.o = OUT_TABLE};
    int r = parse_args(argc, argv, &g);
    if (r < 0)
        r = run_get(&g, argc, argv);
    for (size_t i = 0; i < g.n_label_cols; i++)
        free(g.label_cols[i]);
    return r;
}
