#include "sandboxd/sandboxd-grpc-frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"

static size_t decoder_max(const grpc_frame_decoder *d)
{
    return d->max ? d->max : GRPC_MAX_RECV_MESSAGE;
}

int grpc_frame_decode(grpc_frame_decoder *d, const uint8_t *data, size_t len, grpc_frame_cb cb,
                      void *payload)
{
    while (len > 0 && d->error == 0) {
        if (d->hdr_len < GRPC_FRAME_HEADER) {
            size_t n = GRPC_FRAME_HEADER - d->hdr_len;
            if (n > len)
                n = len;
            memcpy(d->hdr + d->hdr_len, data, n);
            d->hdr_len += n;
            data += n;
            len -= n;
            if (d->hdr_len < GRPC_FRAME_HEADER)
                break;
            if (d->hdr[0] == 1) {
                d->error = -EPROTONOSUPPORT;
                break;
            }
            if (d->hdr[0] != 0) {
                d->error = -EBADMSG;
                break;
            }
            d->msg_len = (size_t)d->hdr[1] << 24 | (size_t)d->hdr[2] << 16 |
                         (size_t)d->hdr[3] << 8 | d->hdr[4];
            if (d->msg_len > decoder_max(d)) {
                d->error = -EMSGSIZE;
                break;
            }
            d->msg_have = 0;
            if (len < d->msg_len) {
                /* Grown as bytes arrive: a header claiming 4 MiB costs nothing by itself. */
                d->msg_cap = MIN(d->msg_len, MAX(len, (size_t)4096));
                d->msg = malloc(d->msg_cap);
                if (!d->msg) {
                    d->error = -ENOMEM;
                    break;
                }
            } else {
                /* Whole message available in the input (or empty): no copy. */
                d->hdr_len = 0;
                int r = cb(payload, data, d->msg_len);
                data += d->msg_len;
                len -= d->msg_len;
                if (r < 0)
                    d->error = r;
                continue;
            }
        }
        size_t n = d->msg_len - d->msg_have;
        if (n > len)
            n = len;
        if (d->msg_have + n > d->msg_cap) {
            size_t cap = MIN(d->msg_len, MAX(d->msg_cap * 2, d->msg_have + n));
            uint8_t *m = realloc(d->msg, cap);
            if (!m) {
                d->error = -ENOMEM;
                break;
            }
            d->msg = m;
            d->msg_cap = cap;
        }
        memcpy(d->msg + d->msg_have, data, n);
        d->msg_have += n;
        data += n;
        len -= n;
        if (d->msg_have == d->msg_len) {
            uint8_t *m = d->msg;
            d->msg = NULL;
            d->hdr_len = 0;
            int r = cb(payload, m, d->msg_len);
            free(m);
            if (r < 0)
                d->error = r;
        }
    }
    return d->error;
}

bool grpc_frame_decoder_idle(const grpc_frame_decoder *d)
{
    return d->hdr_len == 0 && !d->msg;
}

void grpc_frame_decoder_done(grpc_frame_decoder *d)
{
    free(d->msg);
    d->msg = NULL;
    d->hdr_len = 0;
}

void grpc_frame_header(uint8_t out[GRPC_FRAME_HEADER], size_t len)
{
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

int grpc_timeout_parse(const char *s, size_t len, usec_t *ret)
{
    if (len < 2 || len > 9)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < len - 1; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    uint64_t us;
    switch (s[len - 1]) {
    case 'H':
        us = v * 3600 * USEC_PER_SEC;
        break;
    case 'M':
        us = v * 60 * USEC_PER_SEC;
        break;
    case 'S':
        us = v * USEC_PER_SEC;
        break;
    case 'm':
        us = v * USEC_PER_MSEC;
        break;
    case 'u':
        us = v;
        break;
    case 'n':
        us = (v + 999) / 1000;
        break;
    default:
        return -EINVAL;
    }
    *ret = us ? us : 1;
    return 0;
}

char *grpc_message_encode(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(n * 3 + 1), *p = out;
    if (!out)
        return NULL;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c >= 0x20 && *c <= 0x7e && *c != '%') {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    *p = '\0';
    return out;
}
