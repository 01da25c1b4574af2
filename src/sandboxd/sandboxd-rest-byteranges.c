/* multipart/byteranges bodies for Range requests naming several ranges, laid out as Go's
 * http.ServeContent does, streamed from the file with pread (memory stays flat). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-rest-internal.h"

typedef struct segment {
    char *lit;           /* owned literal text, or NULL for a file range */
    uint64_t start, len; /* position in the body; length */
    int64_t file_off;    /* for file ranges */
} segment;

typedef struct byteranges {
    int fd;
    segment *seg;
    size_t n, cur;
} byteranges;

static void byteranges_free(void *cls)
{
    byteranges *b = cls;
    if (!b)
        return;
    if (b->fd >= 0)
        close(b->fd);
    for (size_t i = 0; i < b->n; i++)
        free(b->seg[i].lit);
    free(b->seg);
    free(b);
}

static ssize_t byteranges_read(void *cls, uint64_t pos, char *out, size_t max)
{
    byteranges *b = cls;
    if (b->cur >= b->n || pos < b->seg[b->cur].start)
        b->cur = 0;
    while (b->cur < b->n && pos >= b->seg[b->cur].start + b->seg[b->cur].len)
        b->cur++;
    if (b->cur >= b->n)
        return MHD_CONTENT_READER_END_OF_STREAM;
    const segment *s = &b->seg[b->cur];
    uint64_t in = pos - s->start;
    size_t n = (size_t)MIN((uint64_t)max, s->len - in);
    if (s->lit) {
        memcpy(out, s->lit + in, n);
        return (ssize_t)n;
    }
    ssize_t r;
    do
        r = pread(b->fd, out, n, s->file_off + (int64_t)in);
    while (r < 0 && errno == EINTR);
    if (r <= 0) /* read error, or the file shrank under us */
        return MHD_CONTENT_READER_END_WITH_ERROR;
    return r;
}

static int add_segment(byteranges *b, char *lit, uint64_t len, int64_t file_off, uint64_t *pos)
{
    segment *nv = realloc(b->seg, (b->n + 1) * sizeof(*nv));
    if (!nv) {
        free(lit);
        return -ENOMEM;
    }
    b->seg = nv;
    b->seg[b->n++] = (segment){.lit = lit, .start = *pos, .len = len, .file_off = file_off};
    *pos += len;
    return 0;
}

struct MHD_Response *rest_byteranges_response(int fd, const rest_range *ranges, size_t n,
                                              int64_t size, char **ret_content_type)
{
    unsigned char rnd[16];
    char boundary[33];
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
        return NULL;
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(boundary + 2 * i, 3, "%02x", rnd[i]);
    byteranges *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->fd = -1;
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        char *h = NULL;
        int l = asprintf(&h,
                         "%s--%s\r\nContent-Range: bytes %" PRId64 "-%" PRId64 "/%" PRId64
                         "\r\nContent-Type: application/octet-stream\r\n\r\n",
                         i ? "\r\n" : "", boundary, ranges[i].start,
                         ranges[i].start + ranges[i].length - 1, size);
        if (l < 0 || add_segment(b, h, (uint64_t)l, 0, &pos) < 0 ||
            add_segment(b, NULL, (uint64_t)ranges[i].length, ranges[i].start, &pos) < 0)
            goto fail;
    }
    char *tail = NULL;
    int l = asprintf(&tail, "\r\n--%s--\r\n", boundary);
    if (l < 0 || add_segment(b, tail, (uint64_t)l, 0, &pos) < 0)
        goto fail;
    if (asprintf(ret_content_type, "multipart/byteranges; boundary=%s", boundary) < 0)
        goto fail;
    b->fd = fd;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(pos, 64 * 1024, byteranges_read, b, byteranges_free);
    if (!resp) {
        b->fd = -1; /* the caller still owns fd */
        byteranges_free(b);
        free(*ret_content_type);
        *ret_content_type = NULL;
    }
    return resp;
fail:
    byteranges_free(b);
    return NULL;
}
