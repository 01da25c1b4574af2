/* Table printing and ages for `asb get` and `asb describe` (asb-table.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/asb-table.h"

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

void cli_age(char *buf, size_t size, const char *ts)
{
    struct tm tm = {0};
    if (!ts || !strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(buf, size, "<unknown>");
        return;
    }
    human_duration(buf, size, (long long)(time(NULL) - timegm(&tm)));
}

void cli_table_add(cli_table *t, char *row[])
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

static void print_cells(const cli_table *t, char *const *cells)
{
    for (size_t c = 0; c < t->ncols; c++) {
        const char *s = cells[c];
        if (c + 1 < t->ncols)
            printf("%-*s   ", (int)t->width[c], s ? s : "");
        else
            printf("%s\n", s ? s : "");
    }
}

static void widen(cli_table *t, char *const *cells)
{
    for (size_t c = 0; c < t->ncols; c++) {
        size_t l = cells[c] ? strlen(cells[c]) : 0;
        t->width[c] = l > t->width[c] ? l : t->width[c];
    }
}

void cli_table_print(cli_table *t)
{
    for (size_t r = 0; r < t->nrows; r++)
        widen(t, &t->cells[r * t->ncols]);
    for (size_t r = 0; r < t->nrows; r++)
        print_cells(t, &t->cells[r * t->ncols]);
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    t->cells = NULL;
    t->nrows = 0;
}

void cli_table_print_row(cli_table *t, char *row[])
{
    /* Each cell starts where its column does (the widths printed so far are kept, so every row
     * lines up under the header); a cell wider than its column pushes only the rest of its own
     * line, by the usual three spaces. */
    size_t pos = 0, col = 0;
    for (size_t c = 0; c < t->ncols; c++) {
        const char *s = row[c] ? row[c] : "";
        if (c > 0) {
            size_t pad = col > pos + 3 ? col - pos : 3;
            printf("%*s", (int)pad, "");
            pos += pad;
        }
        fputs(s, stdout);
        pos += strlen(s);
        col += t->width[c] + 3;
    }
    printf("\n");
    for (size_t c = 0; c < t->ncols; c++)
        free(row[c]);
}
