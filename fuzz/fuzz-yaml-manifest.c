/* libFuzzer: untrusted manifests through libasb's YAML/JSON loader. Whatever parses must give a
 * JSON array of objects, and every object must survive JSON -> YAML -> JSON unchanged. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "asb/asb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *out = NULL;
    if (asb_manifest_parse(&out, (const char *)data, size) != ASB_OK) {
        if (!asb_error_last() || !asb_error_last()->message)
            abort();
        return 0;
    }
    json_t *arr = json_loads(out, 0, NULL);
    if (!json_is_array(arr))
        abort();
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *obj = json_array_get(arr, i);
        if (!json_is_object(obj))
            abort();
        char *s = json_dumps(obj, JSON_COMPACT), *y = NULL, *back = NULL;
        if (s && asb_manifest_to_yaml(&y, s) == ASB_OK) {
            size_t n = 0;
            while (y[n])
                n++;
            if (asb_manifest_parse(&back, y, n) != ASB_OK)
                abort();
            json_t *b = json_loads(back, 0, NULL);
            if (!json_equal(json_array_get(b, 0), obj) || json_array_size(b) != 1)
                abort();
            json_decref(b);
        }
        free(s);
        asb_free(y);
        asb_free(back);
    }
    json_decref(arr);
    asb_free(out);
    return 0;
}
