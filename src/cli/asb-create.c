/* `asb create -f FILE` (POST each object: one that exists is an AlreadyExists error, unlike apply)
 * and `asb replace -f FILE` (PUT each object whole: one that does not exist is a NotFound error;
 * a resourceVersion in the manifest is a precondition, none replaces whatever is stored), printing
 * `KIND.GROUP/NAME created|replaced` as kubectl does. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-manifest.h"
#include "cli/asb.h"

#define MAX_FILES 64

typedef struct write_verb {
    const char *verb; /* "create" */
    const char *done; /* "created" */
    const char *ctx;  /* "creating": the error's context */
    bool replace;
} write_verb;

static const write_verb create_verb = {"create", "created", "creating", false};
static const write_verb replace_verb = {"replace", "replaced", "replacing", true};
static const write_verb *current;

static void write_usage(FILE *f)
{
    fprintf(f,
            "Usage: asb %s -f FILE|- [-f FILE...]\n\n"
            "%s\n\n"
            "Options:\n"
            "  -f, --filename FILE   manifest (YAML, multi-document, or JSON), - for stdin\n"
            "                        (repeatable)\n"
            "      --validate=MODE   fields the kind does not declare: strict (or true),\n"
            "                        warn, ignore (or false); default: the server's (warn)\n"
            "  -o, --output name     print KIND.GROUP/NAME only\n"
            "  -h, --help            show this help\n" CLI_GLOBAL_HELP,
            current->verb,
            current->replace
                ? "Replaces each object of the manifests whole (PUT). An object that does not\n"
                  "exist is an error; a resourceVersion in the manifest must be the stored one."
                : "Creates each object of the manifests. An object that exists is an error\n"
                  "(asb apply updates it instead).");
}

static int write_one(asb_client *cl, const char *file, json_t *obj, bool name_only)
{
    const asb_kind *k;
    const char *ns;
    if (cli_manifest_object(obj, file, current->replace ? "replacing" : "creating", &k, &ns))
        return 1;
    /* As kubectl's replace: a manifest without a resourceVersion replaces what is stored now. */
    if (current->replace && !cli_meta(obj, "resourceVersion")) {
        _cleanup_free_ char *cur = NULL;
        if (asb_object_get(&cur, cl, k->plural, ns, cli_meta(obj, "name")) != ASB_OK) {
            char ctx[1024];
            snprintf(ctx, sizeof(ctx), "error when replacing \"%s\"", file);
            return cli_print_error(ctx);
        }
        json_t *c = json_loads(cur, 0, NULL);
        json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion",
                            json_string(cli_meta(c, "resourceVersion")));
        json_decref(c);
    }
    _cleanup_free_ char *body = json_dumps(obj, JSON_COMPACT);
    int r = !body              ? ASB_ENOMEM
            : current->replace ? asb_object_update(NULL, cl, k->plural, ns, body)
                               : asb_object_create(NULL, cl, k->plural, ns, body);
    if (r != ASB_OK) {
        char ctx[1024];
        snprintf(ctx, sizeof(ctx), "error when %s \"%s\"", current->ctx, file);
        return cli_print_error(ctx);
    }
    char ref[600];
    cli_ref(ref, sizeof(ref), k, cli_meta(obj, "name"));
    printf("%s%s%s\n", ref, name_only ? "" : " ", name_only ? "" : current->done);
    return 0;
}

static int write_main(const write_verb *wv, int argc, char **argv)
{
    static const struct option opts[] = {{"filename", required_argument, NULL, 'f'},
                                         {"validate", required_argument, NULL, 'V'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    current = wv;
    const char *files[MAX_FILES];
    size_t nfiles = 0;
    const char *validate = NULL;
    bool name_only = false;
    int c;
    while ((c = getopt_long(argc, argv, "f:o:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'f':
            if (nfiles == MAX_FILES) {
                fprintf(stderr, "error: too many -f options\n");
                return 1;
            }
            files[nfiles++] = optarg;
            break;
        case 'V':
            if (!(validate = cli_validate_arg(optarg)))
                return 1;
            break;
        case 'o':
            if (!cli_output_name_arg(optarg))
                return 1;
            name_only = true;
            break;
        default:
            return cli_usage_option(c, argv, write_usage);
        }
    }
    if (nfiles == 0) {
        fprintf(stderr, "error: must specify one of -f and -k\n");
        return 1;
    }
    if (optind < argc) {
        fprintf(stderr, "error: unexpected args: [%s%s]\n", argv[optind],
                optind + 1 < argc ? " ..." : "");
        return 1;
    }
    json_t *docs[MAX_FILES];
    int ret = cli_manifests_load(docs, files, nfiles);
    asb_client *cl = NULL;
    if (ret == 0)
        ret = cli_client_validating(&cl, validate);
    size_t seen = 0;
    bool failed = false;
    for (size_t i = 0; ret == 0 && i < nfiles; i++)
        for (size_t j = 0; j < json_array_size(docs[i]); j++, seen++)
            if (write_one(cl, cli_manifest_name(files[i]), json_array_get(docs[i], j), name_only))
                failed = true;
    if (ret == 0 && seen == 0) {
        fprintf(stderr, "error: no objects passed to %s\n", current->verb);
        ret = 1;
    }
    asb_client_free(cl);
    for (size_t i = 0; i < nfiles; i++)
        json_decref(docs[i]);
    return ret | failed;
}

int asb_create(int argc, char **argv)
{
    return write_main(&create_verb, argc, argv);
}

int asb_replace(int argc, char **argv)
{
    return write_main(&replace_verb, argc, argv);
}
