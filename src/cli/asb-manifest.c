/* Manifest files and objects for apply, create and replace (asb-manifest.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-manifest.h"

const char *cli_manifest_name(const char *file)
{
    return strcmp(file, "-") == 0 ? "STDIN" : file;
}

int cli_manifests_load(json_t **docs, const char *const *files, size_t n)
{
    for (size_t i = 0; i < n; i++)
        docs[i] = NULL;
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *data = NULL, *arr = NULL;
        size_t len;
        int r = cli_read_file(files[i], &data, &len);
        if (r < 0) {
            fprintf(stderr, "error: the path \"%s\" cannot be read: %s\n", files[i], strerror(-r));
            return 1;
        }
        if (asb_manifest_parse(&arr, data, len) != ASB_OK) {
            fprintf(stderr, "error: error parsing %s: %s\n", cli_manifest_name(files[i]),
                    asb_error_last()->message);
            return 1;
        }
        if (!(docs[i] = json_loads(arr, 0, NULL)))
            return 1;
    }
    return 0;
}

int cli_manifest_object(json_t *obj, const char *file, const char *verb_ctx,
                        const asb_kind **ret_kind, const char **ret_ns)
{
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const char *api_version = json_string_value(json_object_get(obj, "apiVersion"));
    const char *name = cli_meta(obj, "name");
    const char *ns = cli_meta(obj, "namespace");
    if (!kind || !*kind || !api_version || !*api_version) {
        fprintf(stderr, "error: error validating \"%s\": error validating data: %s not set\n", file,
                !kind || !*kind ? "kind" : "apiVersion");
        return 1;
    }
    const asb_kind *k;
    if (asb_kind_lookup(&k, kind) != ASB_OK || strcmp(k->kind, kind) != 0 ||
        strcmp(k->api_version, api_version) != 0) {
        fprintf(stderr,
                "error: resource mapping not found for name: \"%s\" namespace: \"%s\" from "
                "\"%s\": no matches for kind \"%s\" in version \"%s\"\n",
                name ? name : "", ns ? ns : "", file, kind, api_version);
        return 1;
    }
    if (!name || !*name) {
        fprintf(stderr, "error: error when %s %s from \"%s\": resource name may not be empty\n",
                verb_ctx, k->kind, file);
        return 1;
    }
    if (ns && *ns && cli_global.ns_given && strcmp(ns, cli_namespace()) != 0) {
        fprintf(stderr,
                "error: the namespace from the provided object \"%s\" does not match the "
                "namespace \"%s\". You must pass '--namespace=%s' to perform this operation.\n",
                ns, cli_namespace(), ns);
        return 1;
    }
    if (!ns || !*ns) {
        json_t *md = json_object_get(obj, "metadata");
        if (json_object_set_new(md, "namespace", json_string(cli_namespace())) < 0)
            return 1;
        ns = cli_meta(obj, "namespace");
    }
    *ret_kind = k;
    *ret_ns = ns;
    return 0;
}
