/* Label selectors (k8s.io/apimachinery/pkg/labels syntax) and the metadata.name /
 * metadata.namespace field selectors that custom resources support. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"

api_selector *api_selector_free(api_selector *s)
{
    if (!s)
        return NULL;
    for (size_t i = 0; i < s->n; i++) {
        free(s->reqs[i].key);
        for (size_t j = 0; j < s->reqs[i].n_values; j++)
            free(s->reqs[i].values[j]);
        free(s->reqs[i].values);
    }
    free(s->reqs);
    free(s);
    return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(api_selector *, api_selector_free)

typedef struct parser {
    const char *s;
    size_t i;
    api_error *err; /* the first failure's words */
    bool failed;
    bool oom;
} parser;

static int fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser *p, const char *fmt, ...)
{
    if (!p->failed) {
        va_list ap;
        va_start(ap, fmt);
        api_error_setv(p->err, STATUS_INVALID_ARGUMENT, fmt, ap);
        va_end(ap);
        p->failed = true;
    }
    return -EINVAL;
}

static void skip_ws(parser *p)
{
    while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')
        p->i++;
}

static bool special(char c)
{
    return c == '\0' || c == '!' || c == '=' || c == ',' || c == '(' || c == ')' || c == '<' ||
           c == '>' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Reads an identifier (possibly empty). Owned result or NULL on ENOMEM. */
static char *ident(parser *p)
{
    size_t start = p->i;
    while (!special(p->s[p->i]))
        p->i++;
    char *r = strndup(p->s + start, p->i - start);
    if (!r)
        p->oom = true;
    return r;
}

static int add_value(parser *p, struct api_requirement *r, char *v)
{
    if (!v)
        return -ENOMEM;
    char **nv = realloc(r->values, (r->n_values + 1) * sizeof(char *));
    if (!nv) {
        free(v);
        return -ENOMEM;
    }
    r->values = nv;
    r->values[r->n_values++] = v;
    if (!api_is_label_value(v))
        return fail(p,
                    "invalid label value: \"%s\": at key: \"%s\": a valid label must be an "
                    "empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                    "must start and end with an alphanumeric character",
                    v, r->key);
    return 0;
}

static bool is_integer(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

static int parse_set(parser *p, struct api_requirement *r)
{
    skip_ws(p);
    if (p->s[p->i] != '(')
        return fail(p, "found '%c', expected: '(' after 'in'/'notin'",
                    p->s[p->i] ? p->s[p->i] : ' ');
    p->i++;
    for (;;) {
        skip_ws(p);
        int k = add_value(p, r, ident(p));
        if (k < 0)
            return k;
        skip_ws(p);
        if (p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->s[p->i] == ')') {
            p->i++;
            break;
        }
        return fail(p, "found '%c', expected: ',' or ')'", p->s[p->i] ? p->s[p->i] : ' ');
    }
    if (r->n_values == 1 && r->values[0][0] == '\0')
        return fail(p, "for 'in', 'notin' operators, values set can't be empty");
    return 0;
}

static int parse_requirement(parser *p, struct api_requirement *r)
{
    skip_ws(p);
    bool negated = false;
    if (p->s[p->i] == '!') {
        negated = true;
        p->i++;
        skip_ws(p);
    }
    r->key = ident(p);
    if (!r->key)
        return -ENOMEM;
    if (!r->key[0])
        return fail(p, "found '%c', expected: identifier", p->s[p->i] ? p->s[p->i] : ' ');
    if (!api_is_qualified_name(r->key))
        return fail(p,
                    "key: Invalid value: \"%s\": name part must consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an "
                    "alphanumeric character",
                    r->key);
    skip_ws(p);
    char c = p->s[p->i];
    if (negated) {
        r->op = API_SEL_NOT_EXISTS;
        return 0;
    }
    if (c == '\0' || c == ',') {
        r->op = API_SEL_EXISTS;
        return 0;
    }
    if (c == '!' && p->s[p->i + 1] == '=') {
        r->op = API_SEL_NEQ;
        p->i += 2;
    } else if (c == '=') {
        r->op = API_SEL_EQ;
        p->i += p->s[p->i + 1] == '=' ? 2 : 1;
    } else if (c == '>' || c == '<') {
        r->op = c == '>' ? API_SEL_GT : API_SEL_LT;
        p->i++;
    } else {
        _cleanup_free_ char *op = ident(p);
        if (!op)
            return -ENOMEM;
        if (strcmp(op, "in") == 0)
            r->op = API_SEL_IN;
        else if (strcmp(op, "notin") == 0)
            r->op = API_SEL_NOTIN;
        else
            return fail(p, "found '%s', expected: in, notin, =, ==, !=, gt, lt", op);
        return parse_set(p, r);
    }
    skip_ws(p);
    int k = add_value(p, r, ident(p));
    if (k < 0)
        return k;
    if ((r->op == API_SEL_GT || r->op == API_SEL_LT) && !is_integer(r->values[0]))
        return fail(p, "for 'Gt', 'Lt' operators, the value must be an integer");
    return 0;
}

int api_label_selector_parse(const char *s, api_selector **ret, api_error *err)
{
    _cleanup_(api_selector_freep) api_selector *sel = calloc(1, sizeof(*sel));
    if (!sel)
        return -ENOMEM;
    parser p = {.s = s ? s : "", .err = err};
    skip_ws(&p);
    while (p.s[p.i]) {
        struct api_requirement *nr = realloc(sel->reqs, (sel->n + 1) * sizeof(*nr));
        if (!nr)
            return -ENOMEM;
        sel->reqs = nr;
        sel->reqs[sel->n++] = (struct api_requirement){0};
        int r = parse_requirement(&p, &sel->reqs[sel->n - 1]);
        if (r >= 0) {
            skip_ws(&p);
            if (p.s[p.i] == ',') {
                p.i++;
                skip_ws(&p);
                if (!p.s[p.i])
                    r = fail(&p, "found '', expected: identifier after ','");
            } else if (p.s[p.i])
                r = fail(&p, "found '%c', expected: ','", p.s[p.i]);
        }
        if (r < 0 || p.oom) {
            if (p.oom || r == -ENOMEM || !err->message)
                return -ENOMEM;
            return r;
        }
    }
    *ret = TAKE_PTR(sel);
    return 0;
}

static bool value_in(const struct api_requirement *r, const char *v)
{
    for (size_t i = 0; i < r->n_values; i++)
        if (strcmp(r->values[i], v) == 0)
            return true;
    return false;
}

static bool requirement_matches(const struct api_requirement *r, const char *v)
{
    switch (r->op) {
    case API_SEL_EQ:
    case API_SEL_IN:
        return v && value_in(r, v);
    case API_SEL_NEQ:
    case API_SEL_NOTIN:
        return !v || !value_in(r, v);
    case API_SEL_EXISTS:
        return v != NULL;
    case API_SEL_NOT_EXISTS:
        return v == NULL;
    case API_SEL_GT:
    case API_SEL_LT: {
        if (!v || !is_integer(v))
            return false;
        long long a = strtoll(v, NULL, 10), b = strtoll(r->values[0], NULL, 10);
        return r->op == API_SEL_GT ? a > b : a < b;
    }
    }
    return false;
}

bool api_label_selector_matches(const api_selector *s, const json_t *labels)
{
    for (size_t i = 0; s && i < s->n; i++) {
        json_t *v = json_is_object(labels) ? json_object_get(labels, s->reqs[i].key) : NULL;
        if (!requirement_matches(&s->reqs[i], json_is_string(v) ? json_string_value(v) : NULL))
            return false;
    }
    return true;
}

/* Field selector terms: key(=|==|!=)value, ',' separated; '\' escapes ',', '=' and '!'. */
int api_field_selector_parse(const char *s, api_selector **ret, api_error *err)
{
    _cleanup_(api_selector_freep) api_selector *sel = calloc(1, sizeof(*sel));
    if (!sel)
        return -ENOMEM;
    const char *p = s ? s : "";
    while (*p) {
        size_t n = 0;
        while (p[n] && p[n] != ',') {
            if (p[n] == '\\' && p[n + 1])
                n++;
            n++;
        }
        _cleanup_free_ char *term = strndup(p, n);
        if (!term)
            return -ENOMEM;
        p += n;
        if (*p == ',')
            p++;
        if (!term[0])
            continue;
        char *op = strstr(term, "!=");
        api_sel_op kind = API_SEL_NEQ;
        size_t oplen = 2;
        if (!op) {
            op = strchr(term, '=');
            kind = API_SEL_EQ;
            oplen = op && op[1] == '=' ? 2 : 1;
        }
        if (!op) {
            api_error_set(err, STATUS_INVALID_ARGUMENT,
                          "invalid selector: '%s'; can't understand '%s'", s, term);
            return err->message ? -EINVAL : -ENOMEM;
        }
        *op = '\0';
        const char *key = term, *raw = op + oplen;
        if (strcmp(key, "metadata.name") != 0 && strcmp(key, "metadata.namespace") != 0) {
            api_error_set(err, STATUS_INVALID_ARGUMENT,
                          "field label not supported: %s (only \"metadata.name\" and "
                          "\"metadata.namespace\" are supported)",
                          key);
            return err->message ? -EINVAL : -ENOMEM;
        }
        char *val = malloc(strlen(raw) + 1), *w = val;
        if (!val)
            return -ENOMEM;
        for (const char *c = raw; *c; c++) {
            if (*c == '\\' && c[1])
                c++;
            *w++ = *c;
        }
        *w = '\0';
        struct api_requirement *nr = realloc(sel->reqs, (sel->n + 1) * sizeof(*nr));
        char **vals = malloc(sizeof(char *));
        char *k = strdup(key);
        if (!nr || !vals || !k) {
            if (nr)
                sel->reqs = nr;
            free(vals);
            free(k);
            free(val);
            return -ENOMEM;
        }
        sel->reqs = nr;
        vals[0] = val;
        sel->reqs[sel->n++] = (struct api_requirement){k, kind, 1, vals};
    }
    *ret = TAKE_PTR(sel);
    return 0;
}

bool api_field_selector_matches(const api_selector *s, const json_t *obj)
{
    for (size_t i = 0; s && i < s->n; i++) {
        const char *field = s->reqs[i].key + strlen("metadata.");
        const char *v = api_meta_string(obj, field);
        if (!requirement_matches(&s->reqs[i], v ? v : ""))
            return false;
    }
    return true;
}
