/* `asb delete KIND NAME... | KIND/NAME | -f FILE`: delete objects, printing
 * `KIND.GROUP "NAME" deleted` as kubectl does. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"

static void delete_usage(FILE *f)
{
    fprintf(f, "Usage: asb delete KIND NAME... | KIND/NAME... | -f FILE\n\n"
               "Options:\n"
               "  -f, --filename FILE      delete the objects of a manifest (- for stdin)\n"
               "      --ignore-not-found   a missing object is not an error\n"
               "  -h, --help               show this help\n" CLI_GLOBAL_HELP);
}

static int delete_one(asb_client *cl, const asb_kind *k, const char *ns, const char *name,
                      bool ignore_not_found)
{
    int r = asb_object_delete(NULL, cl, k->plural, ns, name);
    if (r == ASB_ENOTFOUND && ignore_not_found)
        return 0;
    if (r != ASB_OK)
        return cli_print_error(NULL);
    printf("%s.%s \"%s\" deleted\n", k->singular, k->group, name);
    return 0;
}

static int delete_file(asb_client *cl, const char *file, bool ignore_not_found)
{
    _cleanup_free_ char *data = NULL, *arr = NULL;
    size_t len;
    int r = cli_read_file(file, &data, &len);
    if (r < 0) {
        fprintf(stderr, "error: the path \"%s\" cannot be read: %s\n", file, strerror(-r));
        return 1;
    }
    if (asb_manifest_parse(&arr, data, len) != ASB_OK) {
        fprintf(stderr, "error: error parsing %s: %s\n", file, asb_error_last()->message);
        return 1;
    }
    json_t *docs = json_loads(arr, 0, NULL);
    int ret = 0;
    for (size_t i = 0; i < json_array_size(docs); i++) {
        json_t *o = json_array_get(docs, i);
        const asb_kind *k;
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *name = cli_meta(o, "name"), *ns = cli_meta(o, "namespace");
        if (!kind || asb_kind_lookup(&k, kind) != ASB_OK || !name) {
            fprintf(stderr, "error: %s: object %zu has no known kind or no name\n", file, i + 1);
            ret = 1;
            continue;
        }
        ret |= delete_one(cl, k, ns && *ns ? ns : cli_namespace(), name, ignore_not_found);
    }
    json_decref(docs);
    return ret;
}

int asb_delete(int argc, char **argv)
{
    static const struct option opts[] = {{"filename", required_argument, NULL, 'f'},
                                         {"ignore-not-found", no_argument, NULL, 'I'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    const char *file = NULL;
    bool ignore = false;
    int c;
    while ((c = getopt_long(argc, argv, "f:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'f':
            file = optarg;
            break;
        case 'I':
            ignore = true;
            break;
        case 'h':
            delete_usage(stdout);
            return 0;
        default:
            delete_usage(stderr);
            return 2;
        }
    }
    if (!file && optind >= argc) {
        fprintf(stderr, "error: you must provide one or more resources by argument or filename\n");
        delete_usage(stderr);
        return 2;
    }
    /* Check the arguments before deleting anything. */
    const asb_kind *k = NULL;
    if (!file && !strchr(argv[optind], '/')) {
        if (!(k = cli_kind(argv[optind])))
            return 2;
        if (optind + 1 >= argc) {
            fprintf(stderr, "error: resource(s) were provided, but no name was specified\n");
            return 2;
        }
        optind++;
    } else {
        for (int i = optind; i < argc; i++) {
            _cleanup_free_ char *a = strdup(argv[i]);
            char *s = a ? strchr(a, '/') : NULL;
            if (!s || !s[1]) {
                fprintf(stderr, "error: there is no need to specify a resource type as a separate "
                                "argument when passing arguments in resource/name form\n");
                return 2;
            }
            *s = '\0';
            if (!cli_kind(a))
                return 2;
        }
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    if (file)
        ret |= delete_file(cl, file, ignore);
    for (int i = optind; i < argc; i++) {
        if (k) {
            ret |= delete_one(cl, k, cli_namespace(), argv[i], ignore);
            continue;
        }
        _cleanup_free_ char *a = strdup(argv[i]);
        if (!a)
            return 1;
        char *s = strchr(a, '/');
        *s = '\0';
        ret |= delete_one(cl, cli_kind(a), cli_namespace(), s + 1, ignore);
    }
    asb_client_free(cl);
    return ret;
}
