/* The query check of the DNS forwarder: see local-dns-query.h. */
#include <stdbool.h>
#include <string.h>

#include "local/net/local-dns-query.h"

#define DNS_HEADER 12
#define DNS_TYPE_OPT 41

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* The question name from msg[*pos]: labels of 1..63 bytes ending with the root, at most 255
 * bytes on the wire, no compression pointer and no extended label type. Advances *pos. */
static bool name_ok(const uint8_t *msg, size_t len, size_t *pos)
{
    size_t p = *pos;
    for (;;) {
        if (p >= len)
            return false;
        uint8_t l = msg[p];
        if (l & 0xc0) /* a pointer (0xc0) or an extended/unknown label type (0x40, 0x80) */
            return false;
        p += 1u + l;
        if (p - *pos > 255)
            return false;
        if (l == 0)
            break;
    }
    *pos = p;
    return true;
}

static bool qtype_ok(uint16_t t)
{
    return (t >= 1 && t <= 127 && t != DNS_TYPE_OPT) || (t >= 255 && t <= 262) || t == 32768 ||
           t == 32769;
}

static bool qclass_ok(uint16_t c)
{
    return c == 1 /* IN */ || c == 3 /* CH */ || c == 4 /* HS */;
}

/* The EDNS OPT record at msg[p..len): root name, type 41, class (UDP size) and TTL (extended
 * RCODE, version, flags) free, RDATA options filling RDLENGTH exactly, nothing after it. */
static bool opt_ok(const uint8_t *msg, size_t len, size_t p)
{
    if (len - p < 11 || msg[p] != 0 || get16(msg + p + 1) != DNS_TYPE_OPT)
        return false;
    size_t rdlen = get16(msg + p + 9);
    p += 11;
    if (len - p != rdlen)
        return false;
    while (p < len) {
        if (len - p < 4)
            return false;
        size_t ol = get16(msg + p + 2);
        p += 4;
        if (len - p < ol)
            return false;
        p += ol;
    }
    return true;
}

local_dns_verdict local_dns_query_check(const uint8_t *msg, size_t len)
{
    if (!msg || len < DNS_HEADER || (msg[2] & 0x80)) /* no header, or a response */
        return LOCAL_DNS_DROP;
    unsigned opcode = (msg[2] >> 3) & 0xf;
    if (opcode != 0)
        return LOCAL_DNS_NOTIMP;
    /* TC set, the Z bit, a nonzero RCODE: not what a stub resolver sends. */
    if (len > LOCAL_DNS_QUERY_MAX || (msg[2] & 0x02) || (msg[3] & 0x40) || (msg[3] & 0x0f))
        return LOCAL_DNS_FORMERR;
    uint16_t qd = get16(msg + 4), an = get16(msg + 6), ns = get16(msg + 8), ar = get16(msg + 10);
    if (qd != 1 || an != 0 || ns != 0 || ar > 1)
        return LOCAL_DNS_FORMERR;
    size_t p = DNS_HEADER;
    if (!name_ok(msg, len, &p) || len - p < 4 || !qtype_ok(get16(msg + p)) ||
        !qclass_ok(get16(msg + p + 2)))
        return LOCAL_DNS_FORMERR;
    p += 4;
    if (ar == 0)
        return p == len ? LOCAL_DNS_RELAY : LOCAL_DNS_FORMERR;
    return opt_ok(msg, len, p) ? LOCAL_DNS_RELAY : LOCAL_DNS_FORMERR;
}

size_t local_dns_query_error(uint8_t out[12], const uint8_t *msg, size_t len, int rcode)
{
    if (!msg || len < DNS_HEADER)
        return 0;
    memset(out, 0, DNS_HEADER);
    out[0] = msg[0];
    out[1] = msg[1];
    out[2] = (uint8_t)(0x80 | (msg[2] & 0x78) | (msg[2] & 0x01)); /* QR, opcode, RD */
    out[3] = (uint8_t)(rcode & 0x0f);
    return DNS_HEADER;
}
