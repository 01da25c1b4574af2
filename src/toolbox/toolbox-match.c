/* Glob matching with '**' segments and '{a,b}' alternatives, on top of fnmatch(3). */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/strv.h"
#include "toolbox/toolbox.h"

#define BRACE_MAX 1024

typedef struct expansion {
    strv s;
    bool overflow; /* more than BRACE_MAX alternatives, or out of memory */
} expansion;

static void push(expansion *e, char *x)
{
    if (e->s.n >= BRACE_MAX) {
        free(x);
        e->overflow = true;
    } else if (strv_push(&e->s, x) < 0)
        e->overflow = true;
}

/* Expands the first top-level {...} group with a comma, recursively. */
static void expand(const char *p, expansion *out, int depth)
{
    if (out->overflow)
        return;
    const char *open = NULL, *close = NULL;
    int level = 0;
    bool comma = false;
    for (const char *c = p; *c; c++) {
        if (*c == '\\' && c[1]) {
            c++;
            continue;
        }
        if (*c == '{') {
            if (level == 0) {
                open = c;
                comma = false;
            }
            level++;
        } else if (*c == '}' && level > 0) {
            level--;
            if (level == 0 && comma) {
                close = c;
                break;
            }
        } else if (*c == ',' && level == 1) {
            comma = true;
        }
    }
    if (!open || !close || depth > 16) {
        push(out, strdup(p));
        return;
    }
    size_t pre = (size_t)(open - p);
    const char *alt = open + 1;
    level = 0;
    for (const char *c = open + 1; c <= close; c++) {
        if (*c == '\\' && c + 1 < close) {
            c++;
            continue;
        }
        if (*c == '{')
            level++;
        else if (*c == '}' && level > 0 && c != close)
            level--;
        else if ((*c == ',' && level == 0) || c == close) {
            size_t alen = (size_t)(c - alt);
            size_t n = pre + alen + strlen(close + 1) + 1;
            char *s = malloc(n);
            if (!s) {
                out->overflow = true;
                return;
            }
            memcpy(s, p, pre);
            memcpy(s + pre, alt, alen);
            strcpy(s + pre + alen, close + 1);
            expand(s, out, depth + 1);
            free(s);
            alt = c + 1;
        }
    }
}

char **toolbox_brace_expand(const char *pattern)
{
    expansion out = {STRV_INIT, false};
    expand(pattern, &out, 0);
    if (!out.s.v) {
        out.s.v = calloc(2, sizeof(char *));
        if (out.s.v)
            out.s.v[0] = strdup(pattern);
    }
    return out.s.v;
}

/* Segment-wise matching: p and s point at the start of a segment. */
/* scratch: room for the longest segment of p or s plus a NUL. */
static bool match_segments(const char *p, const char *s, int flags, long *budget, char *scratch)
{
    if (--*budget <= 0)
        return false; /* pathological '**' nesting: give up rather than spin */
    for (;;) {
        const char *pe = strchrnul(p, '/');
        size_t plen = (size_t)(pe - p);
        if (plen == 2 && p[0] == '*' && p[1] == '*') {
            const char *rest = *pe ? pe + 1 : NULL;
            if (!rest)
                return true; /* trailing ** matches everything below */
            /* ** matches zero or more whole segments */
            const char *t = s;
            for (;;) {
                if (match_segments(rest, t, flags, budget, scratch))
                    return true;
                const char *slash = strchr(t, '/');
                if (!slash)
                    return false;
                t = slash + 1;
            }
        }
        const char *se = strchrnul(s, '/');
        size_t slen = (size_t)(se - s);
        char *pseg = scratch, *sseg = scratch + plen + 1;
        memcpy(pseg, p, plen);
        pseg[plen] = '\0';
        memcpy(sseg, s, slen);
        sseg[slen] = '\0';
        if (fnmatch(pseg, sseg, flags) != 0)
            return false;
        if (!*pe && !*se)
            return true;
        if (!*pe || !*se)
            return false;
        p = pe + 1;
        s = se + 1;
    }
}

bool toolbox_glob_match(const char *pattern, const char *path, bool casefold)
{
    char **alts = toolbox_brace_expand(pattern);
    if (!alts)
        return false;
    int flags = casefold ? FNM_CASEFOLD : 0;
    bool ok = false;
    for (char **a = alts; *a && !ok; a++) {
        const char *p = *a;
        while (p[0] == '.' && p[1] == '/')
            p += 2;
        char *scratch = malloc(strlen(p) + strlen(path) + 2);
        if (!scratch)
            break;
        long budget = 100000;
        ok = match_segments(p, path, flags, &budget, scratch);
        free(scratch);
    }
    strv_free(alts);
    return ok;
}
