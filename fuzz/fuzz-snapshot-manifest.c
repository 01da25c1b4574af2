/* libFuzzer: a stored snapshot manifest (untrusted: it sits in the state directory and decides
 * which paths a restore writes) through snap_manifest_check. Invariants: an accepted manifest
 * has only safe relative paths (no "." or ".." component, no leading "/"), and every file's
 * extents are sorted, inside its size and backed by an object when they hold data. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "local/snapshot/local-snapshot-manifest.h"
#include "local/snapshot/local-snapshot-store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_path(const char *p)
{
    if (p[0] == '/' || strstr(p, "//"))
        abort();
    for (const char *c = p; *c;) {
        size_t n = strcspn(c, "/");
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            abort();
        c += n + (c[n] == '/');
    }
}

static void check_entry(const json_t *e)
{
    check_path(json_string_value(json_object_get(e, "path")));
    if (strcmp(json_string_value(json_object_get(e, "type")), "file") != 0)
        return;
    uint64_t *ext = NULL, size = (uint64_t)json_integer_value(json_object_get(e, "size")), end = 0,
             data = 0;
    size_t n = 0;
    if (snap_manifest_extents(e, &ext, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (ext[2 * i] < end || ext[2 * i + 1] == 0 || ext[2 * i] + ext[2 * i + 1] > size)
            abort();
        end = ext[2 * i] + ext[2 * i + 1];
        data += ext[2 * i + 1];
    }
    if (!ext && !json_object_get(e, "extents"))
        data = size;
    if (data > 0 && !snap_hash_valid(json_string_value(json_object_get(e, "object"))))
        abort();
    free(ext);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *m = json_loadb((const char *)data, size, 0, NULL);
    if (!m)
        return 0;
    char *err = NULL;
    if (snap_manifest_check(m, &err) == 0) {
        const json_t *r, *e;
        size_t i, j;
        json_array_foreach (json_object_get(m, "roots"), i, r)
            json_array_foreach (json_object_get(r, "entries"), j, e)
                check_entry(e);
    } else if (!err)
        abort(); /* a refusal always says why */
    free(err);
    json_decref(m);
    return 0;
}
