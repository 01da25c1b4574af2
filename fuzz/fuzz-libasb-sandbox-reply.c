/* What a (hostile) sandboxd can send the sandbox client: gRPC DATA bytes reassembled into
 * messages and decoded as StartResponse/ExecuteResponse, grpc-message percent-decoding, REST error
 * bodies. The first input byte picks how the rest is split into chunks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"
#include "process.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int decode(const uint8_t *msg, size_t len, void *payload)
{
    Process__V1__StartResponse *s = process__v1__start_response__unpack(NULL, len, msg);
    if (s)
        process__v1__start_response__free_unpacked(s, NULL);
    Process__V1__ExecuteResponse *e = process__v1__execute_response__unpack(NULL, len, msg);
    if (e)
        process__v1__execute_response__free_unpacked(e, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)data[0] % 17 + 1;
    data++;
    size--;
    asbi_grpc_reader r = {.max_message = 1 << 20};
    for (size_t off = 0; off < size; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        if (asbi_grpc_reader_feed(&r, data + off, n, decode, NULL) != 0)
            break;
    }
    asbi_grpc_reader_done(&r);
    free(asbi_grpc_message_decode((const char *)data, size));
    asbi_sandbox_error_from_rest(500, (const char *)data, size);
    asb_error_clear();
    return 0;
}
