#include "sandboxd/sandboxd-grpc-descriptors.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct pb_field {
    uint32_t num;
    int wt;
    uint64_t v;  /* varint / fixed value */
    pb_bytes b;  /* length-delimited payload */
} pb_field;

static bool pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t c = *(*p)++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *ret = v;
            return true;
        }
    }
    return false;
}

/* Reads the next field; returns false at the end or on malformed input (*bad set). */
static bool pb_next(const uint8_t **p, const uint8_t *end, pb_field *f, bool *bad)
{
    if (*p >= end)
        return false;
    uint64_t key;
    if (!pb_varint(p, end, &key))
        goto fail;
    f->num = (uint32_t)(key >> 3);
    f->wt = (int)(key & 7);
    switch (f->wt) {
    case 0:
        if (!pb_varint(p, end, &f->v))
            goto fail;
        return true;
    case 1:
    case 5: {
        size_t n = f->wt == 1 ? 8 : 4;
        if ((size_t)(end - *p) < n)
            goto fail;
        *p += n;
        return true;
    }
    case 2: {
        uint64_t len;
        if (!pb_varint(p, end, &len) || len > (uint64_t)(end - *p))
            goto fail;
        f->b = (pb_bytes){*p, (size_t)len};
        *p += len;
        return true;
    }
    default:
        goto fail;
    }
fail:
    *bad = true;
    return false;
}

static bool bytes_eq(pb_bytes b, const char *s, size_t n)
{
    return b.len == n && memcmp(b.data, s, n) == 0;
}

int desc_files_parse(desc_files *ret, const uint8_t *set, size_t len)
{
    ret->n = 0;
    const uint8_t *p = set, *end = set + len;
    pb_field f;
    bool bad = false;
    while (pb_next(&p, end, &f, &bad))
        if (f.num == 1 && f.wt == 2 && ret->n < DESC_MAX_FILES)
            ret->file[ret->n++] = f.b;
    return bad ? -EBADMSG : 0;
}

/* First length-delimited field `num` of a message. */
static pb_bytes pb_get(pb_bytes msg, uint32_t num)
{
    const uint8_t *p = msg.data, *end = msg.data + msg.len;
    pb_field f;
    bool bad = false;
    while (pb_next(&p, end, &f, &bad))
        if (f.num == num && f.wt == 2)
            return f.b;
    return (pb_bytes){NULL, 0};
}

int desc_find_file(const desc_files *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (bytes_eq(pb_get(f->file[i], 1), name, strlen(name)))
            return (int)i;
    return -ENOENT;
}

enum { SYM_ANY, SYM_MESSAGE };

/* Does `msg` (a DescriptorProto / EnumDescriptorProto / ServiceDescriptorProto of kind
 * `field_in_parent`) define `rest` (the symbol below the enclosing scope)? */
static bool scope_has(pb_bytes scope, uint32_t kind, const char *rest, int want);

static bool name_matches(pb_bytes def, const char *rest, const char **after)
{
    pb_bytes name = pb_get(def, 1);
    size_t n = name.len;
    if (n == 0 || strncmp(rest, (const char *)name.data, n) != 0)
        return false;
    if (rest[n] != '\0' && rest[n] != '.')
        return false;
    *after = rest[n] ? rest + n + 1 : NULL;
    return true;
}

static bool scope_has(pb_bytes def, uint32_t kind, const char *rest, int want)
{
    const char *after;
    if (!name_matches(def, rest, &after))
        return false;
    if (!after)
        return want == SYM_ANY || kind == 4 || kind == 3; /* message_type or nested_type */
    if (want == SYM_MESSAGE && kind != 4 && kind != 3)
        return false;
    const uint8_t *p = def.data, *end = def.data + def.len;
    pb_field f;
    bool bad = false;
    while (pb_next(&p, end, &f, &bad)) {
        if (f.wt != 2)
            continue;
        if ((kind == 4 || kind == 3) && (f.num == 3 || f.num == 4)) {
            /* nested_type = 3, enum_type = 4 */
            if (scope_has(f.b, f.num == 3 ? 3 : 5, after, want))
                return true;
        } else if (kind == 6 && f.num == 2 && want == SYM_ANY) {
            const char *x;
            if (name_matches(f.b, after, &x) && !x)
                return true; /* a method */
        }
    }
    return false;
}

static int find_symbol(const desc_files *f, const char *symbol, int want)
{
    for (size_t i = 0; i < f->n; i++) {
        pb_bytes pkg = pb_get(f->file[i], 2);
        const char *rest = symbol;
        if (pkg.len) {
            if (strncmp(symbol, (const char *)pkg.data, pkg.len) != 0 || symbol[pkg.len] != '.')
                continue;
            rest = symbol + pkg.len + 1;
        }
        const uint8_t *p = f->file[i].data, *end = p + f->file[i].len;
        pb_field fl;
        bool bad = false;
        while (pb_next(&p, end, &fl, &bad))
            if (fl.wt == 2 && (fl.num == 4 || fl.num == 5 || fl.num == 6) &&
                scope_has(fl.b, fl.num, rest, want))
                return (int)i;
    }
    return -ENOENT;
}

int desc_find_symbol(const desc_files *f, const char *symbol)
{
    return find_symbol(f, symbol, SYM_ANY);
}

bool desc_is_message(const desc_files *f, const char *symbol)
{
    return find_symbol(f, symbol, SYM_MESSAGE) >= 0;
}

void desc_with_deps(const desc_files *f, int idx, int *out, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        if (out[i] == idx)
            return;
    if (*n >= DESC_MAX_FILES)
        return;
    out[(*n)++] = idx;
    const uint8_t *p = f->file[idx].data, *end = p + f->file[idx].len;
    pb_field fl;
    bool bad = false;
    while (pb_next(&p, end, &fl, &bad)) {
        if (fl.num != 3 || fl.wt != 2)
            continue;
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)fl.b.len, (const char *)fl.b.data);
        int d = desc_find_file(f, name);
        if (d >= 0)
            desc_with_deps(f, d, out, n);
    }
}

void desc_each_service(const desc_files *f, void (*cb)(void *payload, const char *name),
                       void *payload)
{
    for (size_t i = 0; i < f->n; i++) {
        pb_bytes pkg = pb_get(f->file[i], 2);
        const uint8_t *p = f->file[i].data, *end = p + f->file[i].len;
        pb_field fl;
        bool bad = false;
        while (pb_next(&p, end, &fl, &bad)) {
            if (fl.num != 6 || fl.wt != 2)
                continue;
            pb_bytes name = pb_get(fl.b, 1);
            char buf[512];
            if (pkg.len)
                snprintf(buf, sizeof(buf), "%.*s.%.*s", (int)pkg.len, (const char *)pkg.data,
                         (int)name.len, (const char *)name.data);
            else
                snprintf(buf, sizeof(buf), "%.*s", (int)name.len, (const char *)name.data);
            cb(payload, buf);
        }
    }
}
