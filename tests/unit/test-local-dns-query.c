/* The DNS forwarder's query check (local-dns-query.c): what is relayed, dropped, or answered
 * FORMERR/NOTIMP without asking the upstream. */
#include <stdint.h>
#include <string.h>

#include "local/net/local-dns-query.h"
#include "unit.h"

/* Builds a query for the dotted name (labels as given, so overlong ones can be made). */
static size_t build(uint8_t *out, const char *name, uint16_t flags, uint16_t qtype, uint16_t qclass)
{
    size_t p = 12;
    memset(out, 0, 12);
    out[0] = 0xab;
    out[1] = 0xcd;
    out[2] = (uint8_t)(flags >> 8);
    out[3] = (uint8_t)flags;
    out[5] = 1; /* QDCOUNT */
    for (const char *s = name; *s;) {
        size_t l = strcspn(s, ".");
        out[p++] = (uint8_t)l;
        memcpy(out + p, s, l);
        p += l;
        s += l;
        if (*s == '.')
            s++;
    }
    out[p++] = 0;
    out[p++] = (uint8_t)(qtype >> 8);
    out[p++] = (uint8_t)qtype;
    out[p++] = (uint8_t)(qclass >> 8);
    out[p++] = (uint8_t)qclass;
    return p;
}

/* Appends an OPT record with one option of `optlen` bytes; `rdlen_delta` corrupts RDLENGTH. */
static size_t add_opt(uint8_t *m, size_t len, size_t optlen, int rdlen_delta)
{
    size_t rdlen = 4 + optlen + (size_t)rdlen_delta;
    uint8_t rr[11] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, (uint8_t)(rdlen >> 8), (uint8_t)rdlen};
    memcpy(m + len, rr, sizeof(rr));
    len += sizeof(rr);
    m[len++] = 0;
    m[len++] = 10; /* COOKIE */
    m[len++] = (uint8_t)(optlen >> 8);
    m[len++] = (uint8_t)optlen;
    memset(m + len, 'c', optlen);
    m[11] = 1; /* ARCOUNT */
    return len + optlen;
}

TEST(well_formed_queries_relayed)
{
    uint8_t m[2048];
    size_t n = build(m, "www.example.com", 0x0100, 1, 1);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_RELAY);
    n = build(m, "", 0x0100, 2, 1); /* NS of the root */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_RELAY);
    n = build(m, "version.bind", 0x0000, 16, 3); /* TXT CH */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_RELAY);
    n = build(m, "example.org", 0x0120, 65, 1); /* HTTPS, RD+AD */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_RELAY);
    n = add_opt(m, build(m, "example.org", 0x0100, 28, 1), 8, 0);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_RELAY);
    n = build(m, "x.example", 0x0100, 257, 1); /* CAA */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_RELAY);
}

TEST(name_limits)
{
    uint8_t m[2048];
    char name[400];
    memset(name, 'a', 63);
    name[63] = '\0';
    size_t n = build(m, name, 0x0100, 1, 1);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_RELAY);
    memset(name, 'a', 64); /* a 64-byte label is a reserved label type */
    name[64] = '\0';
    n = build(m, name, 0x0100, 1, 1);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    /* 4 labels of 63 bytes: 4 * 64 + 1 = 257 bytes on the wire; 3 of 63 + one of 61: 255. */
    char *p = name;
    for (int i = 0; i < 4; i++) {
        memset(p, 'b', 63);
        p += 63;
        *p++ = '.';
    }
    p[-1] = '\0';
    n = build(m, name, 0x0100, 1, 1);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    name[3 * 64 + 61] = '\0';
    n = build(m, name, 0x0100, 1, 1);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_RELAY);
    name[3 * 64 + 61] = 'b';
    name[3 * 64 + 62] = '\0'; /* 256 bytes */
    n = build(m, name, 0x0100, 1, 1);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
}

TEST(compression_and_truncation_refused)
{
    uint8_t m[64] = {1, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c', 0xc0, 12, 0, 1, 0, 1};
    CHECK_INT_EQ(local_dns_query_check(m, 22), LOCAL_DNS_FORMERR);
    size_t n = build(m, "abc.de", 0x0100, 1, 1);
    for (size_t cut = 12; cut < n; cut++)
        CHECK_INT_EQ(local_dns_query_check(m, cut), LOCAL_DNS_FORMERR);
    m[12] = 0x40; /* extended label type */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
}

TEST(header_rules)
{
    uint8_t m[512];
    size_t n = build(m, "example.com", 0x8180, 1, 1); /* a response: never answered */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_DROP);
    CHECK_INT_EQ(local_dns_query_check(m, 11), LOCAL_DNS_DROP);
    CHECK_INT_EQ(local_dns_query_check(NULL, 0), LOCAL_DNS_DROP);
    n = build(m, "example.com", 0x2800, 6, 1); /* UPDATE */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_NOTIMP);
    n = build(m, "example.com", 0x0300, 1, 1); /* TC */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    n = build(m, "example.com", 0x0140, 1, 1); /* Z */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    n = build(m, "example.com", 0x0103, 1, 1); /* RCODE */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    n = build(m, "example.com", 0x0100, 1, 1);
    m[5] = 2; /* QDCOUNT 2 */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    m[5] = 1;
    m[7] = 1; /* ANCOUNT 1 */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    m[7] = 0;
    m[11] = 1; /* ARCOUNT 1 with nothing there */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
}

TEST(types_classes_and_trailing_bytes)
{
    uint8_t m[2048];
    static const uint16_t bad_types[] = {0, 41, 128, 250, 251, 252, 253, 254, 263, 65535};
    for (size_t i = 0; i < sizeof(bad_types) / sizeof(bad_types[0]); i++) {
        size_t n = build(m, "example.com", 0x0100, bad_types[i], 1);
        CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    }
    size_t n = build(m, "example.com", 0x0100, 1, 255);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    n = build(m, "example.com", 0x0100, 1, 1);
    m[n] = 'x';
    CHECK_INT_EQ(local_dns_query_check(m, n + 1), LOCAL_DNS_FORMERR);
    n = add_opt(m, build(m, "example.com", 0x0100, 1, 1), 8, 1);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    n = add_opt(m, build(m, "example.com", 0x0100, 1, 1), 8, 0);
    m[n] = 0;
    CHECK_INT_EQ(local_dns_query_check(m, n + 1), LOCAL_DNS_FORMERR);
    n = add_opt(m, build(m, "example.com", 0x0100, 1, 1), 8, 0);
    m[n - 8 - 4 - 11 + 2] = 1; /* the additional record is type 297, not OPT */
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR);
    n = add_opt(m, build(m, "example.com", 0x0100, 1, 1), LOCAL_DNS_QUERY_MAX, 0);
    CHECK_INT_EQ(local_dns_query_check(m, n), LOCAL_DNS_FORMERR); /* too large */
}

TEST(error_answer)
{
    uint8_t m[512], out[12];
    size_t n = build(m, "example.com", 0x0100, 1, 1);
    CHECK_INT_EQ(local_dns_query_error(out, m, n, 1), 12);
    CHECK(out[0] == 0xab && out[1] == 0xcd);
    CHECK_INT_EQ(out[2], 0x81); /* QR, opcode 0, RD */
    CHECK_INT_EQ(out[3], 1);
    for (int i = 4; i < 12; i++)
        CHECK_INT_EQ(out[i], 0);
    n = build(m, "example.com", 0x2800, 6, 1);
    CHECK_INT_EQ(local_dns_query_error(out, m, n, 4), 12);
    CHECK_INT_EQ(out[2], 0xa8);
    CHECK_INT_EQ(out[3], 4);
    CHECK_INT_EQ(local_dns_query_error(out, m, 11, 1), 0);
}
