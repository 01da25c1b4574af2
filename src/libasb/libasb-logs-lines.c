/* See libasb-logs-lines.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-logs-lines.h"

void log_times_done(log_times *t)
{
    free(t->off);
    free(t->ns);
    *t = (log_times){0};
}

int log_times_load(log_times *t, const char *log_path)
{
    log_times_done(t);
    _cleanup_free_ char *p = NULL;
    if (asprintf(&p, "%s.times", log_path) < 0)
        return -ENOMEM;
    _cleanup_fclose_ FILE *f = fopen(p, "re");
    if (!f)
        return 0;
    size_t cap = 0;
    long long o, ns;
    while (fscanf(f, "%lld %lld\n", &o, &ns) == 2) {
        if (t->n == cap) {
            cap = cap ? cap * 2 : 256;
            off_t *a = realloc(t->off, cap * sizeof(*a));
            if (a)
                t->off = a;
            int64_t *b = a ? realloc(t->ns, cap * sizeof(*b)) : NULL;
            if (!b)
                return -ENOMEM;
            t->ns = b;
        }
        t->off[t->n] = (off_t)o;
        t->ns[t->n++] = ns;
    }
    return 0;
}

/* The time of the byte at pos: that of the last chunk starting at or before it (the first
 * chunk's for anything before), -1 without times. */
static int64_t time_at(const log_times *t, off_t pos)
{
    if (!t || t->n == 0)
        return -1;
    size_t lo = 0, hi = t->n; /* the first record after pos, by bisection */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->off[mid] <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return t->ns[lo ? lo - 1 : 0];
}

/* kubectl's --timestamps prefix: RFC 3339 with nanoseconds, UTC, and a space. */
static int add_stamp(buf *b, int64_t ns)
{
    time_t s = (time_t)(ns / 1000000000LL);
    struct tm tm;
    char when[32];
    if (!gmtime_r(&s, &tm) || !strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    return buf_appendf(b, "%s.%09lldZ ", when, (long long)(ns % 1000000000LL));
}

/* The line in l->line (with its newline, if any) to its destination: kept (collecting), or cb. */
static int deliver(log_lines *l)
{
    if (l->since_ns > 0 && l->line_ns >= 0 && l->line_ns < l->since_ns)
        return 0;
    _cleanup_buf_ buf one = BUF_INIT;
    buf *b = l->collecting ? &l->kept : &one;
    if ((l->timestamps && l->line_ns >= 0 && add_stamp(b, l->line_ns) < 0) ||
        buf_append(b, l->line.data ?: "", l->line.len) < 0)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    return l->collecting ? 0 : l->cb(one.data, one.len, l->payload);
}

static int emit(log_lines *l)
{
    int r = deliver(l);
    buf_reset(&l->line);
    l->line_ns = -1;
    return r;
}

int log_lines_feed(log_lines *l, const char *data, size_t len, off_t off, const log_times *t)
{
    size_t i = 0;
    while (i < len) {
        if (l->line.len == 0)
            l->line_ns = time_at(t, off + (off_t)i);
        const char *nl = memchr(data + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (data + i)) + 1 : len - i;
        if (buf_append(&l->line, data + i, n) < 0)
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        i += n;
        int r = nl ? emit(l) : 0;
        if (r)
            return r;
    }
    return 0;
}

int log_lines_flush(log_lines *l)
{
    return l->line.len ? emit(l) : 0;
}

int log_lines_end_collect(log_lines *l)
{
    if (!l->collecting)
        return 0;
    /* a last line without its newline yet is one of the lines: what follows it comes on its own */
    int r = log_lines_flush(l);
    if (r)
        return r;
    l->collecting = false;
    const char *s = l->kept.data ?: "";
    size_t n = l->kept.len, start = n;
    long long lines = 0;
    /* back to the start of the tail-th line from the end (a last line without its newline is
     * one) */
    for (size_t i = n; l->tail > 0 && i-- > 0;)
        if (i == 0 || s[i - 1] == '\n') {
            start = i;
            if (++lines == l->tail)
                break;
        }
    r = n > start ? l->cb(s + start, n - start, l->payload) : 0;
    buf_reset(&l->kept);
    return r;
}

void log_lines_done(log_lines *l)
{
    buf_done(&l->line);
    buf_done(&l->kept);
}
