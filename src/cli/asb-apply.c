/* `asb apply -f FILE|-`: create each object of a YAML/JSON manifest, or update it with the current
 * resourceVersion, printing `KIND.GROUP/NAME created|configured|unchanged` as kubectl does;
 * --dry-run=server sends the same requests with dryRun=All (every server check, nothing stored),
 * --dry-run=client sends no write at all.
 * Unlike kubectl's three-way merge, the manifest replaces the object's user fields (spec, labels,
 * annotations); fields other writers own (status, finalizers, ownerReferences) are kept. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-manifest.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

#define MAX_FILES 64
#define CONFLICT_RETRIES 5

static void apply_usage(FILE *f)
{
    fprintf(f, "Usage: asb apply -f FILE|- [-f FILE...]\n\n"
               "Creates or updates the objects of YAML (multi-document, ---) or JSON manifests.\n\n"
               "Options:\n"
               "  -f, --filename FILE   manifest to apply, - for stdin (repeatable)\n"
               "      --dry-run=MODE    none (default); server: the server checks and answers\n"
               "                        what it would store, storing nothing; client: only print\n"
               "                        what would be sent\n"
               "      --validate[=MODE] fields the kind does not declare: strict (or true, or no\n"
               "                        MODE) refuses the object, warn prints a warning for each,\n"
               "                        ignore (or false) drops them silently; default: the\n"
               "                        server's (warn)\n"
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

typedef enum dry_run_mode { DRY_RUN_NONE, DRY_RUN_CLIENT, DRY_RUN_SERVER } dry_run_mode;

/* kubectl's suffix of a dry run's line. */
static const char *dry_suffix(dry_run_mode dry)
{
    return dry == DRY_RUN_SERVER ? " (server dry run)" : dry == DRY_RUN_CLIENT ? " (dry run)" : "";
}

/* Whether what a user applies (spec, labels, annotations) differs between two objects: a dry
 * run's update cannot tell by the resourceVersion, which it never bumps. */
static bool user_fields_differ(const json_t *a, const json_t *b)
{
    static const char *const md_fields[] = {"labels", "annotations"};
    if (!json_equal(json_object_get(a, "spec"), json_object_get(b, "spec")))
        return true;
    const json_t *ma = json_object_get(a, "metadata"), *mb = json_object_get(b, "metadata");
    for (size_t i = 0; i < ELEMENTSOF(md_fields); i++) {
        const json_t *x = json_object_get(ma, md_fields[i]), *y = json_object_get(mb, md_fields[i]);
        if ((x || y) && !json_equal(x, y) &&
            !(json_object_size(x) == 0 && json_object_size(y) == 0))
            return true;
    }
    return false;
}

/* Applies one object. Returns 0 or 1 (error printed). */
static int apply_one(asb_client *cl, const char *file, json_t *obj, dry_run_mode dry)
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
        if (r == ASB_ENOTFOUND && dry == DRY_RUN_CLIENT) {
            printf("%s created%s\n", ref, dry_suffix(dry));
            return 0;
        }
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
            printf("%s created%s\n", ref, dry_suffix(dry));
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
        json_t *upd = NULL;
        if (dry == DRY_RUN_CLIENT) {
            /* What the server would store: the manifest with the kind's defaults. */
            r = body ? ASB_OK : ASB_ENOMEM;
            upd = json_incref(body);
            if (api_kind_by_name(k->kind))
                api_default(api_kind_by_name(k->kind), upd);
        } else {
            r = body_s ? asb_object_update(&out, cl, k->plural, ns, body_s) : ASB_ENOMEM;
            upd = r == ASB_OK ? json_loads(out, 0, NULL) : NULL;
        }
        const char *new_rv = cli_meta(upd, "resourceVersion");
        bool same = dry != DRY_RUN_NONE ? !user_fields_differ(cur, upd)
                                        : old_rv && new_rv && strcmp(old_rv, new_rv) == 0;
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
        printf("%s %s%s\n", ref, same ? "unchanged" : "configured", dry_suffix(dry));
        return 0;
    }
}

int asb_apply(int argc, char **argv)
{
    static const struct option opts[] = {{"filename", required_argument, NULL, 'f'},
                                         {"validate", optional_argument, NULL, 'V'},
                                         {"dry-run", required_argument, NULL, 'D'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    const char *files[MAX_FILES];
    size_t nfiles = 0;
    const char *validate = NULL;
    dry_run_mode dry = DRY_RUN_NONE;
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
        case 'D':
            if (strcmp(optarg, "none") == 0)
                dry = DRY_RUN_NONE;
            else if (strcmp(optarg, "client") == 0)
                dry = DRY_RUN_CLIENT;
            else if (strcmp(optarg, "server") == 0)
                dry = DRY_RUN_SERVER;
            else {
                fprintf(stderr,
                        "error: Invalid dry-run value (%s). Must be \"none\", \"server\", or "
                        "\"client\".\n",
                        optarg);
                return 1;
            }
            break;
        case 'V':
            /* kubectl's --validate values, as the server's fieldValidation. */
            if (!(validate = cli_validate_arg(optarg)))
                return 2;
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
    ret = cli_client_writing(&cl, validate, dry == DRY_RUN_SERVER);
    if (ret)
        goto out;
    size_t applied = 0;
    for (size_t i = 0; i < nfiles; i++) {
        for (size_t j = 0; j < json_array_size(docs[i]); j++, applied++)
            if (apply_one(cl, cli_manifest_name(files[i]), json_array_get(docs[i], j), dry))
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
