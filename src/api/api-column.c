/* The small JSONPath subset that printer columns use (api-field.h). */
#include <stdlib.h>
#include <string.h>

#include "api/api-field.h"

/* [N] or [?(@.key=="value")] applied to an array; *p is just past the '['. */
static const json_t *subscript(const json_t *a, const char **p)
{
    const char *s = *p;
    if (s[0] == '?') {
        const char *key = s + 4; /* ?(@. */
        const char *eq = strstr(s, "==\"");
        const char *end = eq ? strchr(eq + 3, '"') : NULL;
        if (strncmp(s, "?(@.", 4) != 0 || !end || strncmp(end, "\")]", 3) != 0)
            return NULL;
        *p = end + 3;
        size_t klen = (size_t)(eq - key), vlen = (size_t)(end - (eq + 3));
        for (size_t i = 0; i < json_array_size(a); i++) {
            const json_t *item = json_array_get(a, i);
            const char *k;
            json_t *v;
            json_object_foreach ((json_t *)item, k, v)
                if (strlen(k) == klen && strncmp(k, key, klen) == 0 && json_is_string(v) &&
                    json_string_length(v) == vlen &&
                    strncmp(json_string_value(v), eq + 3, vlen) == 0)
                    return item;
        }
        return NULL;
    }
    char *end;
    unsigned long i = strtoul(s, &end, 10);
    if (end == s || *end != ']')
        return NULL;
    *p = end + 1;
    return json_array_get(a, i);
}

const json_t *api_json_path(const json_t *obj, const char *path)
{
    const json_t *v = obj;
    const char *p = path;
    while (v && *p) {
        if (*p == '.') {
            p++;
            size_t n = strcspn(p, ".[");
            const char *k;
            json_t *child;
            const json_t *next = NULL;
            json_object_foreach ((json_t *)v, k, child)
                if (strlen(k) == n && strncmp(k, p, n) == 0)
                    next = child;
            v = next;
            p += n;
        } else if (*p == '[') {
            p++;
            v = subscript(v, &p);
        } else
            return NULL;
    }
    return v;
}
