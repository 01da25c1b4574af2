/* kubectl's table printing for `asb get` and `asb describe`: columns separated by three spaces,
 * each as wide as its widest cell, the last one unpadded. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "asb/asb.h"

#define CLI_TABLE_MAX_COLS 16

typedef struct cli_table {
    size_t ncols, nrows;
    char **cells; /* nrows * ncols, owned */
    size_t width[CLI_TABLE_MAX_COLS];
} cli_table;

/* Appends a row of t->ncols owned cells (NULL cells print empty); takes them even on ENOMEM. */
void cli_table_add(cli_table *t, char *row[]);
/* Prints every row added so far and frees them; the widths are kept for cli_table_print_row. */
void cli_table_print(cli_table *t);
/* Prints one row at once (a watch): each cell at its column's place of the widths printed so far
 * (which stay as they are); a wider cell shifts only the rest of its line. Takes the cells. */
void cli_table_print_row(cli_table *t, char *row[]);

/* kubectl's age of an RFC 3339 timestamp ("<unknown>" when it is not one) into buf. */
void cli_age(char *buf, size_t size, const char *timestamp);

/* The row of an object in `asb get` (obj NULL: the headers): NAME (after NAMESPACE with all_ns),
 * then the kind's printer columns (api-kind-*.c), wide ones only when wide. Cells owned; returns
 * the number of columns. */
size_t cli_columns(const asb_kind *k, bool wide, bool all_ns, const json_t *obj, char *row[]);
