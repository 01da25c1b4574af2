/* What the DNS forwarder of local sandboxes (local-dns.c) relays: a strict check of a query
 * message from a sandbox, done before anything reaches the upstream resolver. Pure functions,
 * no state; fuzzed by fuzz/fuzz-dns-query.c. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Largest query relayed (UDP or TCP): a question (at most 12 + 255 + 4 bytes) plus an EDNS OPT
 * record with options (cookies, padding to a 468-byte block). */
#define LOCAL_DNS_QUERY_MAX 1232

typedef enum local_dns_verdict {
    LOCAL_DNS_RELAY = 0,   /* a well-formed query: relay it */
    LOCAL_DNS_DROP = -1,   /* not a query at all (too short, a response): say nothing */
    LOCAL_DNS_FORMERR = 1, /* a query header, malformed otherwise: answer FORMERR (RCODE 1) */
    LOCAL_DNS_NOTIMP = 4,  /* an opcode other than QUERY: answer NOTIMP (RCODE 4) */
} local_dns_verdict;

/* Checks one DNS message (without the TCP length prefix). Relayed only when: at most
 * LOCAL_DNS_QUERY_MAX bytes; QR=0, opcode QUERY, TC=0, Z=0, RCODE=0; QDCOUNT=1, ANCOUNT=0,
 * NSCOUNT=0, ARCOUNT 0 or 1; the question name is uncompressed labels of 1..63 bytes, at most
 * 255 bytes on the wire; QTYPE is a data type (1..127 except 41 OPT) or ANY/URI/CAA and their
 * neighbours (255..262), TA or DLV (32768, 32769); QCLASS is IN, CH or HS; the additional record,
 * when there is one, is an EDNS OPT (root name, type 41) whose options fill its RDATA exactly; no
 * byte follows. */
local_dns_verdict local_dns_query_check(const uint8_t *msg, size_t len);

/* Writes the header-only answer with `rcode` (FORMERR, NOTIMP) to the query msg[0..len) (at
 * least 12 bytes) into out[12]: the query's ID and opcode and RD, QR=1, every count 0. Returns
 * 12, or 0 when msg is shorter than a header. */
size_t local_dns_query_error(uint8_t out[12], const uint8_t *msg, size_t len, int rcode);
