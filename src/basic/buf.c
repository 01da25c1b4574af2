#include "basic/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int buf_reserve(buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len - 1)
        return -ENOMEM;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int buf_append(buf *b, const void *data, size_t n)
{
    int r = buf_reserve(b, n);
    if (r < 0)
        return r;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int buf_append_str(buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_append_byte(buf *b, char c)
{
    return buf_append(b, &c, 1);
}

int buf_appendv(buf *b, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        return -EINVAL;
    int r = buf_reserve(b, (size_t)n);
    if (r < 0)
        return r;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int buf_appendf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = buf_appendv(b, fmt, ap);
    va_end(ap);
    return r;
}

int buf_append_fd(buf *b, int fd)
{
    for (;;) {
        int r = buf_reserve(b, 4096);
        if (r < 0)
            return r;
        ssize_t n = read(fd, b->data + b->len, b->cap - b->len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return 0;
        b->len += (size_t)n;
        b->data[b->len] = '\0';
    }
}

char *strdup_printf(const char *fmt, ...)
{
    buf b = BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    int r = buf_appendv(&b, fmt, ap);
    va_end(ap);
    if (r < 0) {
        buf_done(&b);
        return NULL;
    }
    return buf_steal(&b, NULL);
}

void buf_consume(buf *b, size_t n)
{
    if (n >= b->len) {
        buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

void buf_reset(buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

char *buf_steal(buf *b, size_t *ret_len)
{
    if (!b->data && buf_reserve(b, 0) < 0)
        return NULL;
    b->data[b->len] = '\0';
    char *p = b->data;
    if (ret_len)
        *ret_len = b->len;
    *b = (buf)BUF_INIT;
    return p;
}

void buf_done(buf *b)
{
    free(b->data);
    *b = (buf)BUF_INIT;
}
