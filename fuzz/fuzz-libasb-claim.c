/* What a (hostile) API server can send the claim client: claim objects from watch events through
 * the readiness rules (conditions, status.sandbox, the sandbox-name annotation, terminal
 * reasons), and router URLs through their parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libasb/libasb-claim-internal.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (j) {
        char *sn = NULL, last[512];
        asbi_claim_check(j, &sn, last, sizeof(last));
        free(sn);
        asbi_claim_bound_sandbox(j);
        json_decref(j);
    }
    char *s = strndup((const char *)data, size), *h = NULL, *p = NULL;
    if (s && asbi_router_url_split(s, &h, &p) == ASB_OK) {
        free(h);
        free(p);
    }
    free(s);
    return 0;
}
