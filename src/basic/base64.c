/* Base64 encoding and decoding (see base64.h). */
#include "basic/base64.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_encode(const void *data, size_t n, char **ret, size_t *ret_len)
{
    const unsigned char *in = data;
    if (n > (SIZE_MAX - 1) / 4 * 3 - 3)
        return -ENOMEM;
    size_t out_len = (n + 2) / 3 * 4;
    char *out = malloc(out_len + 1);
    if (!out)
        return -ENOMEM;
    char *p = out;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *p++ = alphabet[v >> 18 & 63];
        *p++ = alphabet[v >> 12 & 63];
        *p++ = alphabet[v >> 6 & 63];
        *p++ = alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        *p++ = alphabet[v >> 18 & 63];
        *p++ = alphabet[v >> 12 & 63];
        *p++ = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
        *p++ = '=';
    }
    *p = 0;
    *ret = out;
    if (ret_len)
        *ret_len = out_len;
    return 0;
}

static int value_of(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -EINVAL;
}

int base64_decode(const char *text, size_t n, char **ret, size_t *ret_len)
{
    char *out = malloc(n / 4 * 3 + 3 + 1);
    if (!out)
        return -ENOMEM;
    size_t len = 0, pad = 0;
    uint32_t acc = 0;
    unsigned int bits = 0;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = value_of(c);
        if (v < 0 || pad > 0) { /* data after padding is not base64 either */
            free(out);
            return -EINVAL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[len++] = (char)(acc >> bits & 0xff);
        }
    }
    /* 6 leftover bits mean a quantum of a single character: not a whole byte. */
    if (bits >= 6 || pad > 2) {
        free(out);
        return -EINVAL;
    }
    out[len] = 0;
    *ret = out;
    *ret_len = len;
    return 0;
}
