/* libFuzzer: kubeconfig files through asb-controller's loader (YAML via libasb's manifest parser,
 * contexts/clusters/users lookup, base64 of the *-data fields). The first line of the input, if
 * it starts with '#ctx:', names the context to select. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char *ctx = NULL;
    if (size > 5 && memcmp(text, "#ctx:", 5) == 0) {
        size_t n = strcspn(text + 5, "\n");
        ctx = strndup(text + 5, n);
    }
    kube_client *c = NULL;
    api_error err = API_ERROR_INIT;
    if (kube_client_from_kubeconfig_text(text, size, "fuzz", ctx, &c, &err) == 0)
        kube_client_free(c);
    api_error_clear(&err);
    free(ctx);
    free(text);
    return 0;
}
