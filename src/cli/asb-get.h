/* `asb get`'s pieces shared by its files: the options (asb-get.c), printing (asb-get-print.c),
 * sorting (asb-get-sort.c) and the events table (asb-get-events.c). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "asb/asb.h"
#include "cli/asb-table.h"

typedef enum get_output {
    OUT_TABLE,
    OUT_WIDE,
    OUT_JSON,
    OUT_YAML,
    OUT_NAME,
    OUT_JSONPATH,
    OUT_CUSTOM_COLUMNS,
} get_output;

#define GET_MAX_LABEL_COLS 8

typedef struct get_opts {
    get_output o;
    const char *template; /* OUT_JSONPATH: the template; OUT_CUSTOM_COLUMNS: the spec */
    const char *selector;
    const char *for_ref; /* events only: "KIND/NAME" */
    const char *sort_by; /* --sort-by JSONPATH, as given */
    bool all_ns, watch, show_labels, no_headers, watch_events;
    bool with_kind; /* several kinds: NAME is kind.group/name, as kubectl prints them */
    char *label_cols[GET_MAX_LABEL_COLS]; /* -L keys, owned */
    size_t n_label_cols;
} get_opts;

/* Whether the output is one document (json, yaml, jsonpath) rather than rows. */
static inline bool get_output_is_document(get_output o)
{
    return o == OUT_JSON || o == OUT_YAML || o == OUT_JSONPATH;
}

/* Prints items of kind k: a table (its header unless only_rows or --no-headers; rows in t so that
 * a watch keeps the widths), names, or custom columns. event_type: a watch event's type for
 * --output-watch-events (NULL otherwise). 0, or the exit code after printing the error. */
int get_print_rows(const asb_kind *k, const get_opts *g, json_t *items, cli_table *t,
                   bool only_rows, const char *event_type);
/* json/yaml/jsonpath of one object (single) or of a List of items. 0 or exit code. */
int get_print_document(const get_opts *g, json_t *items, bool single);

/* --sort-by: sorts items in place by the value at path (kubectl's order: numbers as numbers,
 * strings, timestamps as strings; objects without the field first). 0, or exit code 1 after
 * kubectl's error when no object has the field. */
int get_sort_items(json_t *items, const char *path);
