/* `asb patch KIND NAME|KIND/NAME -p PATCH|--patch-file FILE [--type strategic|merge|json]`: one
 * PATCH per object, printing `KIND.GROUP/NAME patched` or `patched (no change)` (the
 * resourceVersion stayed) as kubectl does. The default type is kubectl's, strategic, which a
 * custom resource refuses (415) on asb serve as on kube-apiserver: the error says to use merge. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-targets.h"
#include "cli/asb.h"

static void patch_usage(FILE *f)
{
    fprintf(f, "Usage: asb patch KIND NAME...|KIND/NAME... (-p PATCH | --patch-file FILE)\n"
               "                 [--type strategic|merge|json]\n\n"
               "Updates fields of objects with a patch.\n\n"
               "Options:\n"
               "  -p, --patch PATCH         the patch (JSON, or YAML)\n"
               "      --patch-file FILE     read the patch from FILE (- for stdin)\n"
               "      --type TYPE           merge (RFC 7386), json (RFC 6902) or strategic\n"
               "                            (kubectl's default; custom resources refuse it:\n"
               "                            use merge)\n"
               "      --subresource NAME    patch the status or scale subresource\n"
               "  -o, --output name         print KIND.GROUP/NAME only\n"
               "  -h, --help                show this help\n" CLI_GLOBAL_HELP);
}

static const char *const type_names[] = {
    [ASB_PATCH_MERGE] = "merge", [ASB_PATCH_JSON] = "json", [ASB_PATCH_STRATEGIC] = "strategic"};
static const char *const media_types[] = {[ASB_PATCH_MERGE] = "application/merge-patch+json",
                                          [ASB_PATCH_JSON] = "application/json-patch+json",
                                          [ASB_PATCH_STRATEGIC] =
                                              "application/strategic-merge-patch+json"};

/* A patch written as YAML (`-p 'spec: {replicas: 2}'`), as kubectl takes it, as JSON text (owned);
 * NULL when the text is JSON already or no YAML mapping either (then it is sent as it is and the
 * server says what is wrong with it). */
static char *yaml_patch(const char *text)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    json_decref(j);
    _cleanup_free_ char *arr = NULL;
    if (j || asb_manifest_parse(&arr, text, strlen(text)) != ASB_OK)
        return NULL;
    json_t *docs = json_loads(arr, 0, NULL);
    char *out =
        json_array_size(docs) == 1 ? json_dumps(json_array_get(docs, 0), JSON_COMPACT) : NULL;
    json_decref(docs);
    return out;
}

static int patch_one(asb_client *cl, const cli_target *t, const char *patch,
                     const asb_patch_options *po, bool name_only)
{
    json_t *before = NULL, *after = NULL;
    _cleanup_free_ char *b = NULL, *a = NULL;
    if (asb_object_get(&b, cl, t->kind->plural, cli_namespace(), t->name) != ASB_OK)
        return cli_print_error(NULL);
    if (asb_object_patch_typed(&a, cl, t->kind->plural, cli_namespace(), t->name, patch, po) !=
        ASB_OK) {
        const asb_error *e = asb_error_last();
        if (e && e->reason && strcmp(e->reason, "UnsupportedMediaType") == 0) {
            fprintf(stderr, "error: %s is not supported by %s, Kind=%s: %s\n",
                    media_types[po->type], t->kind->api_version, t->kind->kind, e->message);
            return 1;
        }
        return cli_print_error(NULL);
    }
    before = json_loads(b, 0, NULL);
    after = json_loads(a, 0, NULL);
    const char *rv0 = cli_meta(before, "resourceVersion"),
               *rv1 = cli_meta(after, "resourceVersion");
    /* a /scale reply is a Scale: its resourceVersion is the object's */
    bool same = rv0 && rv1 && strcmp(rv0, rv1) == 0;
    char ref[600];
    cli_ref(ref, sizeof(ref), t->kind, t->name);
    if (name_only)
        printf("%s\n", ref);
    else
        printf("%s patched%s\n", ref, same ? " (no change)" : "");
    json_decref(before);
    json_decref(after);
    return 0;
}

int asb_patch(int argc, char **argv)
{
    enum { OPT_TYPE = 0x2001, OPT_FILE, OPT_SUB };
    static const struct option opts[] = {{"patch", required_argument, NULL, 'p'},
                                         {"patch-file", required_argument, NULL, OPT_FILE},
                                         {"type", required_argument, NULL, OPT_TYPE},
                                         {"subresource", required_argument, NULL, OPT_SUB},
                                         {"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    asb_patch_options po = ASB_PATCH_OPTIONS_INIT;
    po.type = ASB_PATCH_STRATEGIC;
    const char *patch_arg = NULL, *file = NULL;
    bool name_only = false;
    int c;
    while ((c = getopt_long(argc, argv, "p:o:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'p':
            patch_arg = optarg;
            break;
        case OPT_FILE:
            file = optarg;
            break;
        case OPT_TYPE: {
            size_t i = 0;
            while (i < ELEMENTSOF(type_names) && strcmp(optarg, type_names[i]) != 0)
                i++;
            if (i == ELEMENTSOF(type_names)) {
                fprintf(stderr, "error: --type must be one of [json merge strategic], not \"%s\"\n",
                        optarg);
                return 1;
            }
            po.type = (int)i;
            break;
        }
        case OPT_SUB:
            if (strcmp(optarg, "status") != 0 && strcmp(optarg, "scale") != 0) {
                fprintf(stderr,
                        "error: invalid subresource value: \"%s\". Must be one of "
                        "[status scale]\n",
                        optarg);
                return 1;
            }
            po.subresource = optarg;
            break;
        case 'o':
            if (!cli_output_name_arg(optarg))
                return 1;
            name_only = true;
            break;
        default:
            return cli_usage_option(c, argv, patch_usage);
        }
    }
    if (patch_arg && file) {
        fprintf(stderr, "error: cannot specify --patch and --patch-file together\n");
        return 1;
    }
    if (!patch_arg && !file) {
        fprintf(stderr, "error: must specify --patch or --patch-file containing the contents of "
                        "the patch\n");
        return 1;
    }
    _cleanup_free_ char *data = NULL;
    if (file) {
        size_t len;
        int r = cli_read_file(file, &data, &len);
        if (r < 0) {
            fprintf(stderr, "error: unable to read patch file: open %s: %s\n", file, strerror(-r));
            return 1;
        }
        patch_arg = data;
    }
    _cleanup_free_ char *from_yaml = yaml_patch(patch_arg);
    if (from_yaml)
        patch_arg = from_yaml;
    cli_targets t;
    if (cli_targets_parse(&t, argv + optind, (size_t)(argc - optind), false, NULL))
        return 1;
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    for (size_t i = 0; ret == 0 && i < t.n; i++)
        if (patch_one(cl, &t.v[i], patch_arg, &po, name_only))
            t.failed = true;
    ret |= t.failed;
    asb_client_free(cl);
    cli_targets_done(&t);
    return ret;
}
