#include "basic/strv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

char **strv_free(char **v)
{
    if (v)
        for (char **p = v; *p; p++)
            free(*p);
    free(v);
    return NULL;
}

int strv_push(strv *s, char *x)
{
    if (!x)
        return -ENOMEM;
    char **t = realloc(s->v, (s->n + 2) * sizeof(char *));
    if (!t) {
        free(x);
        return -ENOMEM;
    }
    s->v = t;
    s->v[s->n++] = x;
    s->v[s->n] = NULL;
    return 0;
}

int strv_add_unique(strv *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], x) == 0)
            return 0;
    return strv_push(s, strdup(x));
}

void strv_done(strv *s)
{
    strv_free(s->v);
    *s = (strv)STRV_INIT;
}
