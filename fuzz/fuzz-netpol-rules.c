/* libFuzzer: an untrusted template's NetworkPolicy rule list (JSON) turned into nft rule text
 * (local-net.c). Checks that no byte of the input other than digits, dots, slashes and the fixed
 * keywords can reach the output: the text must only contain the generator's own alphabet. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "local/net/local-net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!j)
        return 0;
    for (int egress = 0; egress < 2; egress++) {
        char *out = NULL, *note = NULL;
        if (local_net_policy_rules(j, egress, "accept", &out, &note) == 0) {
            if (strspn(out, "abcdefghijklmnopqrstuvwxyz0123456789./-,!={} \n") != strlen(out))
                abort();
            free(out);
            free(note);
        }
    }
    json_decref(j);
    return 0;
}
