/* `asb get --sort-by=JSONPATH` (asb-get.h): kubectl's SortingPrinter. The path is taken as
 * kubectl massages it ("a.b", ".a.b" and "{.a.b}" are one path); numbers sort as numbers, strings
 * in natural order (kubectl's sortorder.NaturalLess: digit runs compare as numbers), objects
 * without the field first, and equal ones keep their order. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-get.h"
#include "cli/asb-jsonpath.h"

typedef struct sort_entry {
    json_t *obj;
    const json_t *key; /* the first value at the path, NULL when it has none */
    size_t pos;
} sort_entry;

/* Natural order: runs of digits compare by value, the rest byte by byte. */
static int natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0')
                a++;
            while (*b == '0')
                b++;
            size_t la = strspn(a, "0123456789"), lb = strspn(b, "0123456789");
            if (la != lb)
                return la < lb ? -1 : 1;
            int c = strncmp(a, b, la);
            if (c)
                return c;
            a += la;
            b += lb;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int value_cmp(const json_t *a, const json_t *b)
{
    if (!a || !b)
        return !a && !b ? 0 : !a ? -1 : 1;
    if (json_is_number(a) && json_is_number(b)) {
        double x = json_number_value(a), y = json_number_value(b);
        return x < y ? -1 : x > y;
    }
    if (json_is_string(a) && json_is_string(b))
        return natural_cmp(json_string_value(a), json_string_value(b));
    _cleanup_free_ char *x = json_dumps(a, JSON_ENCODE_ANY | JSON_COMPACT);
    _cleanup_free_ char *y = json_dumps(b, JSON_ENCODE_ANY | JSON_COMPACT);
    return strcmp(x ?: "", y ?: "");
}

static int entry_cmp(const void *pa, const void *pb)
{
    const sort_entry *a = pa, *b = pb;
    int c = value_cmp(a->key, b->key);
    return c ? c : a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* kubectl's form of the path: "{.a.b}". Owned. */
static char *massage(const char *path)
{
    size_t l = strlen(path);
    if (l >= 2 && path[0] == '{' && path[l - 1] == '}')
        return strdup(path);
    char *s = NULL;
    return asprintf(&s, "{%s%s}", path[0] == '.' ? "" : ".", path) < 0 ? NULL : s;
}

int get_sort_items(json_t *items, const char *path)
{
    size_t n = json_array_size(items);
    _cleanup_free_ char *field = massage(path);
    json_t *vals = json_array();
    _cleanup_free_ sort_entry *v = calloc(n + 1, sizeof(*v));
    if (!field || !vals || !v) {
        json_decref(vals);
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    /* the expression inside the braces */
    _cleanup_free_ char *expr = strndup(field + 1, strlen(field) - 2);
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        v[i].obj = json_array_get(items, i);
        v[i].pos = i;
        json_array_clear(vals);
        int r = expr ? cli_jsonpath_values(v[i].obj, expr, vals) : -ENOMEM;
        if (r < 0) {
            json_decref(vals);
            fprintf(stderr, "error: error parsing jsonpath %s, %s\n", field,
                    r == -EINVAL ? "invalid expression" : "out of memory");
            return 1;
        }
        /* kept alive by the object it points into */
        v[i].key = json_array_get(vals, 0);
        found = found || v[i].key;
    }
    json_decref(vals);
    if (n > 0 && !found) {
        fprintf(stderr, "error: couldn't find any field with path \"%s\" in the list of objects\n",
                field);
        return 1;
    }
    qsort(v, n, sizeof(*v), entry_cmp);
    /* rebuild the array in the new order, keeping each object alive meanwhile */
    for (size_t i = 0; i < n; i++)
        json_incref(v[i].obj);
    json_array_clear(items);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, v[i].obj);
    return 0;
}
