/* `asb apply -f FILE|-`: create each object of a YAML/JSON manifest, or update it with the current
 * resourceVersion, printing `KIND.GROUP/NAME created|configured|unchanged` as kubectl does.
 * Unlike kubectl's three-way merge, the manifest replaces the object's user fields (spec, labels,
 * annotations); fields other writers own (status, finalizers, ownerReferences) are kept. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-manifest.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

#define MAX_FILES 64
#define CONFLICT_RETRIES 5

static void apply_usage(FILE *f)
{
    fprintf(f,
            "Usage: asb apply -f FILE|- [-f FILE...]\n\n"
            "Creates or updates the objects of YAML (multi-document, ---) or JSON manifests.\n\n"
            "Options:\n"
            "  -f, --filename FILE   manifest to apply, - for stdin (repeatable)\n"
            "      --validate=MODE   fields the kind does not declare: strict (or true) refuses\n"
            "                        the object, warn prints a warning for each, ignore (or\n"
            "                        false) drops them silently; default: the server's (warn)\n"
            "  -h, --help            show this help\n" CLI_GLOBAL_HELP);
}

/* The update body: the manifest, with the current resourceVersion and the metadata other writers
 * own. Owned reference. */
static json_t *update_body(const json_t *manifest, const json_t *current)
{
    json_t *body = json_deep_copy(manifest);
    if (!body)
        return NULL;
    json_t *md = json_object_get(body, "metadata");
    const json_t *cmd = json_object_get(current, "metadata");
    static const char *const kept[] = {"finalizers", "ownerReferences"};
    for (size_t i = 0; i < ELEMENTSOF(kept); i++)
        if (!json_object_get(md, kept[i]) && json_object_get(cmd, kept[i]))
            json_object_set(md, kept[i], json_object_get(cmd, kept[i]));
    /* Labels and annotations in the agents.x-k8s.io domain are the controllers' (the claim's
     * sandbox-name and first-observed/ready stamps, a pool member's labels): a manifest that does
     * not set them does not remove them (kubectl's three-way merge would not either). */
    static const char *const maps[] = {"labels", "annotations"};
    for (size_t i = 0; i < ELEMENTSOF(maps); i++) {
        json_t *cur = json_object_get(cmd, maps[i]);
        const char *key;
        json_t *v;
        json_object_foreach (cur, key, v) {
            const char *slash = strchr(key, '/');
            if (!slash)
                continue;
            size_t dl = (size_t)(slash - key), sl = strlen("agents.x-k8s.io");
            bool ours = (dl == sl && strncmp(key, "agents.x-k8s.io", sl) == 0) ||
                        (dl > sl && key[dl - sl - 1] == '.' &&
                         strncmp(key + dl - sl, "agents.x-k8s.io", sl) == 0);
            if (!ours)
                continue;
            json_t *m = json_object_get(md, maps[i]);
            if (!json_is_object(m)) {
                m = json_object();
                if (!m || json_object_set_new(md, maps[i], m) < 0)
                    continue;
            }
            if (!json_object_get(m, key))
                json_object_set(m, key, v);
        }
    }
    json_object_set(md, "resourceVersion", json_object_get(cmd, "resourceVersion"));
    return body;
}

/* Applies one object. Returns 0 or 1 (error printed). */
static int apply_one(asb_client *cl, const char *file, json_t *obj)
{
    const asb_kind *k;
    const char *ns;
    if (cli_manifest_object(obj, file, "retrieving current configuration of", &k, &ns))
        return 1;
    const char *name = cli_meta(obj, "name");
    char ref[600];
    cli_ref(ref, sizeof(ref), k, name);
    for (int attempt = 0;; attempt++) {
        _cleanup_free_ char *cur_s = NULL, *out = NULL;
        int r = asb_object_get(&cur_s, cl, k->plural, ns, name);
        if (r == ASB_ENOTFOUND) {
            _cleanup_free_ char *body = json_dumps(obj, JSON_COMPACT);
            r = body ? asb_object_create(NULL, cl, k->plural, ns, body) : ASB_ENOMEM;
            if (r == ASB_EEXISTS && attempt < CONFLICT_RETRIES)
                continue; /* created meanwhile: update it */
            if (r != ASB_OK) {
                char ctx[1024];
                snprintf(ctx, sizeof(ctx), "error when creating \"%s\"", file);
                return cli_print_error(ctx);
            }
            printf("%s created\n", ref);
            return 0;
        }
        if (r != ASB_OK) {
            char ctx[1024];
            snprintf(ctx, sizeof(ctx),
                     "error when retrieving current configuration of %s from \"%s\"", ref, file);
            return cli_print_error(ctx);
        }
        json_t *cur = json_loads(cur_s, 0, NULL);
        json_t *body = update_body(obj, cur);
        _cleanup_free_ char *body_s = body ? json_dumps(body, JSON_COMPACT) : NULL;
        const char *old_rv = cli_meta(cur, "resourceVersion");
        r = body_s ? asb_object_update(&out, cl, k->plural, ns, body_s) : ASB_ENOMEM;
        json_t *upd = r == ASB_OK ? json_loads(out, 0, NULL) : NULL;
        const char *new_rv = cli_meta(upd, "resourceVersion");
        bool same = old_rv && new_rv && strcmp(old_rv, new_rv) == 0;
        json_decref(upd);
        json_decref(body);
        json_decref(cur);
        if (r == ASB_ECONFLICT && attempt < CONFLICT_RETRIES)
            continue;
        if (r != ASB_OK) {
            char ctx[1024];
            snprintf(ctx, sizeof(ctx), "error when applying patch to %s from \"%s\"", ref, file);
            return cli_print_error(ctx);
        }
        printf("%s %s\n", ref, same ? "unchanged" : "configured");
        return 0;
    }
}

int asb_apply(int argc, char **argv)
{
    static const struct option opts[] = {{"filename", required_argument, NULL, 'f'},
                                         {"validate", required_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    const char *files[MAX_FILES];
    size_t nfiles = 0;
    const char *validate = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "f:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'f':
            if (nfiles == MAX_FILES) {
                fprintf(stderr, "error: too many -f options\n");
                return 2;
            }
            files[nfiles++] = optarg;
            break;
        case 'V':
            /* kubectl's --validate values, as the server's fieldValidation. */
            if (strcmp(optarg, "strict") == 0 || strcmp(optarg, "true") == 0)
                validate = "Strict";
            else if (strcmp(optarg, "warn") == 0)
                validate = "Warn";
            else if (strcmp(optarg, "ignore") == 0 || strcmp(optarg, "false") == 0)
                validate = "Ignore";
            else {
                fprintf(stderr,
                        "error: invalid - validate option \"%s\"; must be one of: strict (or "
                        "true), warn, ignore (or false)\n",
                        optarg);
                return 2;
            }
            break;
        default:
            return cli_usage_option(c, argv, apply_usage);
        }
    }
    if (nfiles == 0 || optind < argc) {
        fprintf(stderr, "error: %s\n",
                nfiles == 0 ? "must specify one of -f and -k" : "unexpected arguments");
        return main_usage_error(apply_usage);
    }
    /* Parse every manifest before touching the server: a bad file applies nothing. */
    json_t *docs[MAX_FILES] = {0};
    int ret = cli_manifests_load(docs, files, nfiles);
    if (ret)
        goto out;
    asb_client *cl = NULL;
    ret = cli_client_validating(&cl, validate);
    if (ret)
        goto out;
    size_t applied = 0;
    for (size_t i = 0; i < nfiles; i++) {
        for (size_t j = 0; j < json_array_size(docs[i]); j++, applied++)
            if (apply_one(cl, cli_manifest_name(files[i]), json_array_get(docs[i], j)))
                ret = 1;
    }
    if (applied == 0) {
        fprintf(stderr, "error: no objects passed to apply\n");
        ret = 1;
    }
    asb_client_free(cl);
out:
    for (size_t i = 0; i < nfiles; i++)
        json_decref(docs[i]);
    return ret;
}
