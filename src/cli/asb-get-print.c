/* The printers of `asb get` (asb-get.h): tables with kubectl's decorations (-L label columns,
 * --show-labels, kind-prefixed names for several kinds, --no-headers, the EVENT column of
 * --output-watch-events), names, custom columns, and json/yaml/jsonpath documents. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-events.h"
#include "cli/asb-get.h"
#include "cli/asb-jsonpath.h"

static int print_json_or_yaml(const json_t *v, get_output o)
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
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    int r = cli_jsonpath_render(&out, template, root, &err);
    if (r < 0) {
        fprintf(stderr, "error: error parsing jsonpath %s, %s\n", template,
                r == -EINVAL && err.message ? err.message : "out of memory");
        return 1;
    }
    fwrite(out.data ? out.data : "", 1, out.len, stdout);
    return 0;
}

int get_print_document(const get_opts *g, json_t *items, bool single)
{
    if (single)
        return g->o == OUT_JSONPATH ? print_jsonpath(g->template, json_array_get(items, 0))
                                    : print_json_or_yaml(json_array_get(items, 0), g->o);
    json_t *list = json_pack("{s:s,s:O,s:s,s:{s:s}}", "apiVersion", "v1", "items", items, "kind",
                             "List", "metadata", "resourceVersion", "");
    int r = !list                  ? 1
            : g->o == OUT_JSONPATH ? print_jsonpath(g->template, list)
                                   : print_json_or_yaml(list, g->o);
    json_decref(list);
    return r;
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* kubectl's labels.FormatLabels: "k=v,..." sorted by key, "<none>" without labels. Owned. */
static char *format_labels(const json_t *labels)
{
    size_t n = json_object_size(labels);
    if (n == 0)
        return strdup("<none>");
    _cleanup_free_ const char **keys = calloc(n, sizeof(*keys));
    if (!keys)
        return NULL;
    size_t i = 0;
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)labels, key, v)
        keys[i++] = key;
    qsort(keys, n, sizeof(*keys), cmp_str);
    _cleanup_buf_ buf b = BUF_INIT;
    for (i = 0; i < n; i++) {
        if (i > 0)
            buf_append_byte(&b, ',');
        buf_append_str(&b, keys[i]);
        buf_append_byte(&b, '=');
        buf_append_str(&b, json_string_value(json_object_get(labels, keys[i])) ?: "");
    }
    return buf_steal(&b, NULL);
}

/* kubectl's header of a -L column: the key's last '/' segment, upper case. Owned. */
static char *label_header(const char *key)
{
    const char *slash = strrchr(key, '/');
    char *h = strdup(slash ? slash + 1 : key);
    for (char *p = h; p && *p; p++)
        *p = (char)toupper((unsigned char)*p);
    return h;
}

/* The row's decorations after its n cells: -L columns, then LABELS. Returns the new count. */
static size_t decorate(const get_opts *g, const json_t *obj, char *row[], size_t n)
{
    bool hdr = obj == NULL;
    const json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    for (size_t i = 0; i < g->n_label_cols && n < CLI_TABLE_MAX_COLS; i++)
        row[n++] = hdr ? label_header(g->label_cols[i])
                       : strdup(json_string_value(json_object_get(labels, g->label_cols[i])) ?: "");
    if (g->show_labels && n < CLI_TABLE_MAX_COLS)
        row[n++] = hdr ? strdup("LABELS") : format_labels(labels);
    return n;
}

/* The cells of one object (obj NULL: the header) in the table formats. Returns the count, or
 * -EINVAL for a custom-columns spec that is not HEADER:PATH pairs. */
static int table_row(const asb_kind *k, const get_opts *g, const json_t *obj,
                     const char *event_type, char *row[])
{
    char *cells[CLI_TABLE_MAX_COLS];
    size_t n = 0, first = 0;
    if (g->watch_events) {
        row[n++] = strdup(obj ? event_type ?: "ADDED" : "EVENT");
        first = 1;
    }
    if (g->o == OUT_CUSTOM_COLUMNS) {
        int c = custom_row(g->template, obj, cells);
        if (c < 0) {
            if (first)
                free(row[0]);
            return c;
        }
        for (int i = 0; i < c; i++) {
            if (n < CLI_TABLE_MAX_COLS)
                row[n++] = cells[i];
            else
                free(cells[i]);
        }
        return (int)n;
    }
    bool events = strcmp(k->kind, "Event") == 0;
    size_t c = events ? cli_events_columns(g->o == OUT_WIDE, g->all_ns, obj, cells)
                      : cli_columns(k, g->o == OUT_WIDE, g->all_ns, obj, cells);
    for (size_t i = 0; i < c; i++) {
        if (n == CLI_TABLE_MAX_COLS - 1) {
            free(cells[i]);
            continue;
        }
        row[n++] = cells[i];
    }
    /* kubectl names objects kind.group/name when several kinds are printed */
    size_t name_col = first + (g->all_ns ? 1 : 0);
    if (obj && g->with_kind && !events && name_col < n) { /* events: OBJECT names it */
        char ref[600];
        free(row[name_col]);
        row[name_col] = strdup(cli_ref(ref, sizeof(ref), k, cli_meta(obj, "name") ?: ""));
    }
    return (int)decorate(g, obj, row, n);
}

int get_print_rows(const asb_kind *k, const get_opts *g, json_t *items, cli_table *t,
                   bool only_rows, const char *event_type)
{
    char *row[CLI_TABLE_MAX_COLS];
    if (g->o == OUT_NAME) {
        char ref[600];
        for (size_t i = 0; i < json_array_size(items); i++)
            printf("%s\n",
                   cli_ref(ref, sizeof(ref), k, cli_meta(json_array_get(items, i), "name")));
        return 0;
    }
    int n = table_row(k, g, NULL, NULL, row);
    if (n < 0) {
        fprintf(stderr, "error: custom-columns format specified but no custom columns given "
                        "as HEADER:PATH\n");
        return 1;
    }
    t->ncols = (size_t)n;
    /* EVENT: as wide as its widest value, so that the watch rows after it line up */
    if (g->watch_events && t->width[0] < strlen("MODIFIED"))
        t->width[0] = strlen("MODIFIED");
    if (only_rows || g->no_headers)
        for (int c = 0; c < n; c++)
            free(row[c]);
    else
        cli_table_add(t, row);
    for (size_t i = 0; i < json_array_size(items); i++) {
        if (table_row(k, g, json_array_get(items, i), event_type, row) < 0)
            return 1;
        if (only_rows)
            cli_table_print_row(t, row);
        else
            cli_table_add(t, row);
    }
    if (!only_rows)
        cli_table_print(t);
    return 0;
}
