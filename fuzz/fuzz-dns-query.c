/* libFuzzer: a DNS message from a sandbox, checked by the forwarder before anything reaches the
 * upstream resolver (local-dns-query.c). Checks that a relayed message has exactly the shape the
 * check promises (one question, a name of short labels, nothing trailing beyond an OPT record)
 * by walking it again independently, and that an error answer echoes the ID only. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "local/net/local-dns-query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    local_dns_verdict v = local_dns_query_check(data, size);
    uint8_t err[12];
    if (v == LOCAL_DNS_DROP)
        return 0;
    if (size < 12 || (data[2] & 0x80))
        abort(); /* a response or a short message must never be answered */
    if (local_dns_query_error(err, data, size, 1) != 12 || err[0] != data[0] || err[1] != data[1] ||
        !(err[2] & 0x80) || err[4] || err[5] || err[11])
        abort();
    if (v != LOCAL_DNS_RELAY)
        return 0;
    if (size > LOCAL_DNS_QUERY_MAX || data[4] != 0 || data[5] != 1)
        abort();
    size_t p = 12, wire = 0;
    while (data[p] != 0) { /* within bounds, or the check was wrong (ASan reports it) */
        if (data[p] > 63)
            abort();
        wire += 1u + data[p];
        p += 1u + data[p];
    }
    if (wire + 1 > 255)
        abort();
    p += 5;
    if (data[11] == 0 ? p != size : (p + 11 > size || data[p] != 0))
        abort();
    return 0;
}
