/* asb-gen-crds [--k8s-refs]: a build tool, not a user interface. Prints one JSON object mapping
 * each deploy/crds file name (without .yaml) to the CustomResourceDefinition that the kind tables
 * of src/api produce; scripts/gen-crds.py writes the files from it. With --k8s-refs, fields that
 * hold a Kubernetes type are marked for scripts/gen-crds.py to expand from the pinned schema. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"

int main(int argc, char **argv)
{
    bool k8s_refs = argc == 2 && strcmp(argv[1], "--k8s-refs") == 0;
    if (argc > 2 || (argc == 2 && !k8s_refs)) {
        fprintf(stderr, "usage: %s [--k8s-refs]\n", argv[0]);
        return 2;
    }
    json_t *out = json_object();
    if (!out)
        goto oom;
    for (size_t i = 0; i < api_n_kinds; i++) {
        const api_kind *k = &api_kinds[i];
        char name[256];
        snprintf(name, sizeof(name), "%s_%s", k->group, k->plural);
        json_t *crd = api_crd(k, k8s_refs);
        if (!crd || json_object_set_new(out, name, crd) < 0)
            goto oom;
    }
    if (json_dumpf(out, stdout, JSON_INDENT(2)) < 0 || fputc('\n', stdout) == EOF ||
        fflush(stdout) != 0) {
        json_decref(out);
        perror("asb-gen-crds: write");
        return 1;
    }
    json_decref(out);
    return 0;
oom:
    json_decref(out);
    fprintf(stderr, "asb-gen-crds: out of memory\n");
    return 1;
}
