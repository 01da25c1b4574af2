/* `asb top sandboxes [NAME...] [-A] [--no-headers]`: kubectl top pod for sandboxes. What each
 * running sandbox uses now, from its cgroups as `asb serve` reads them (asb_sandbox_usage(), the
 * PodMetrics of /apis/metrics.k8s.io): NAME, CPU(cores) in millicores, MEMORY(bytes) in Mi. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/parse-util.h"
#include "cli/asb-cli.h"
#include "cli/asb-table.h"
#include "cli/asb.h"

static void top_usage(FILE *f)
{
    fprintf(f, "Usage: asb top sandboxes [NAME...] [-A] [--no-headers]\n\n"
               "Show the CPU (cores) and memory (working set) each running sandbox uses now.\n\n"
               "Options:\n"
               "  -A, --all-namespaces  across namespaces\n"
               "      --no-headers      no header row\n"
               "  -h, --help            show this help\n" CLI_GLOBAL_HELP);
}

char *cli_usage_cell(const json_t *pm, const char *what)
{
    const json_t *u = json_object_get(
        json_object_get(json_array_get(json_object_get(pm, "containers"), 0), "usage"), what);
    long double v = 0;
    char *s = NULL;
    if (!json_is_string(u) || parse_quantity(json_string_value(u), &v) < 0)
        return strdup("<unknown>");
    int k = strcmp(what, "cpu") == 0 ? asprintf(&s, "%lldm", (long long)ceill(v * 1000))
                                     : asprintf(&s, "%lldMi", (long long)(v / (1024 * 1024)));
    return k < 0 ? NULL : s;
}

static void add_row(cli_table *t, const json_t *pm, bool all_ns)
{
    char *row[4];
    size_t n = 0;
    const json_t *md = json_object_get(pm, "metadata");
    if (all_ns)
        row[n++] = strdup(json_string_value(json_object_get(md, "namespace")) ?: "");
    row[n++] = strdup(json_string_value(json_object_get(md, "name")) ?: "");
    row[n++] = cli_usage_cell(pm, "cpu");
    row[n++] = cli_usage_cell(pm, "memory");
    cli_table_add(t, row);
}

static int cmp_name(const void *a, const void *b)
{
    const json_t *x = json_object_get(*(json_t *const *)a, "metadata");
    const json_t *y = json_object_get(*(json_t *const *)b, "metadata");
    int c = strcmp(json_string_value(json_object_get(x, "namespace")) ?: "",
                   json_string_value(json_object_get(y, "namespace")) ?: "");
    return c ? c
             : strcmp(json_string_value(json_object_get(x, "name")) ?: "",
                      json_string_value(json_object_get(y, "name")) ?: "");
}

/* The sandboxes' PodMetrics into items: the named ones (an error for each without one), or all. */
static int fetch(asb_client *cl, char **names, size_t n, bool all_ns, json_t *items)
{
    int ret = 0;
    for (size_t i = 0; i < (n ? n : 1); i++) {
        _cleanup_free_ char *s = NULL;
        const char *ns = all_ns ? NULL : cli_namespace();
        if (asb_sandbox_usage(&s, cl, ns, n ? names[i] : NULL) != ASB_OK) {
            if (n && asb_error_last() && asb_error_last()->code == ASB_ENOTFOUND)
                fprintf(stderr,
                        "error: metrics not available yet for sandbox %s/%s (it has no "
                        "running container)\n",
                        cli_namespace(), names[i]);
            else
                cli_print_error(NULL);
            ret = 1;
            continue;
        }
        json_t *doc = json_loads(s, 0, NULL);
        if (n)
            json_array_append(items, doc);
        else
            json_array_extend(items, json_object_get(doc, "items"));
        json_decref(doc);
    }
    return ret;
}

int asb_top(int argc, char **argv)
{
    enum { OPT_NO_HEADERS = 0x2001 };
    static const struct option opts[] = {{"all-namespaces", no_argument, NULL, 'A'},
                                         {"no-headers", no_argument, NULL, OPT_NO_HEADERS},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    bool all_ns = false, no_headers = false;
    int c;
    while ((c = getopt_long(argc, argv, "Ah" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c == 'A')
            all_ns = true;
        else if (c == OPT_NO_HEADERS)
            no_headers = true;
        else
            return cli_usage_option(c, argv, top_usage);
    }
    const asb_kind *k = NULL;
    if (optind >= argc) {
        fprintf(stderr, "error: you must specify the type of resource: asb top sandboxes\n");
        return 2;
    }
    if (asb_kind_lookup(&k, argv[optind]) != ASB_OK || strcmp(k->kind, "Sandbox") != 0) {
        fprintf(stderr, "error: asb top shows sandboxes, not \"%s\"\n", argv[optind]);
        return 2;
    }
    optind++;
    if (all_ns && optind < argc) {
        fprintf(stderr, "error: a resource cannot be retrieved by name across all namespaces\n");
        return 2;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    json_t *items = json_array();
    ret = items ? fetch(cl, argv + optind, (size_t)(argc - optind), all_ns, items) : 1;
    size_t n = json_array_size(items);
    _cleanup_free_ json_t **v = calloc(n + 1, sizeof(*v));
    for (size_t i = 0; v && i < n; i++)
        v[i] = json_array_get(items, i);
    if (v)
        qsort(v, n, sizeof(*v), cmp_name);
    if (n == 0 && ret == 0)
        fprintf(stderr, all_ns ? "No resources found\n" : "No resources found in %s namespace.\n",
                cli_namespace());
    if (n > 0 && v) {
        cli_table t = {.ncols = all_ns ? 4 : 3};
        char *hdr[4] = {NULL};
        size_t h = 0;
        if (all_ns)
            hdr[h++] = strdup("NAMESPACE");
        hdr[h++] = strdup("NAME");
        hdr[h++] = strdup("CPU(cores)");
        hdr[h++] = strdup("MEMORY(bytes)");
        if (no_headers)
            for (size_t i = 0; i < h; i++)
                free(hdr[i]);
        else
            cli_table_add(&t, hdr);
        for (size_t i = 0; i < n; i++)
            add_row(&t, v[i], all_ns);
        cli_table_print(&t);
    }
    json_decref(items);
    asb_client_free(cl);
    return ret;
}
