#include "shared/json-util.h"

#include <stdlib.h>
#include <string.h>

char *json_dumps_line(const json_t *v, size_t flags, size_t *ret_len)
{
    char *s = json_dumps(v, flags);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    if (ret_len)
        *ret_len = n + 1;
    return line;
}
