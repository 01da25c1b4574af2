/* `asb scale sandboxwarmpool/NAME --replicas N`: sets spec.replicas through the object's scale
 * subresource (a merge patch of the autoscaling/v1 Scale at .../NAME/scale, as an HPA or kubectl
 * scale does), printing `KIND.GROUP/NAME scaled`. A kind without the subresource is refused by the
 * server (404), as kube-apiserver does. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-targets.h"
#include "cli/asb.h"

static void scale_usage(FILE *f)
{
    fprintf(f, "Usage: asb scale KIND NAME...|KIND/NAME...|KIND --all|KIND -l SEL --replicas N\n\n"
               "Sets the number of replicas (spec.replicas of a SandboxWarmPool) through the\n"
               "scale subresource.\n\n"
               "Options:\n"
               "      --replicas N           the new number of replicas (required)\n"
               "      --current-replicas N   only if the object has N replicas now\n"
               "      --all                  every object of KIND in the namespace\n"
               "  -l, --selector SEL         the objects of KIND with these labels\n"
               "  -o, --output name          print KIND.GROUP/NAME only\n"
               "  -h, --help                 show this help\n" CLI_GLOBAL_HELP);
}

/* A count >= 0, or -1. */
static long long parse_count(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return *s && !*end && errno == 0 && v >= 0 && v <= INT32_MAX ? v : -1;
}

static int scale_one(asb_client *cl, const cli_target *t, long long replicas, long long current,
                     bool name_only)
{
    _cleanup_free_ char *text = NULL;
    if (asb_object_get(&text, cl, t->kind->plural, cli_namespace(), t->name) != ASB_OK) {
        const asb_error *e = asb_error_last();
        if (e && e->code == ASB_ENOTFOUND) {
            fprintf(stderr, "error: no objects passed to scale %s\n", e->message);
            return 1;
        }
        return cli_print_error(NULL);
    }
    if (current >= 0) {
        json_t *o = json_loads(text, 0, NULL);
        json_t *r = json_object_get(json_object_get(o, "spec"), "replicas");
        long long have = json_is_integer(r) ? json_integer_value(r) : 0;
        json_decref(o);
        if (have != current) {
            fprintf(stderr, "error: Expected replicas to be %lld, was %lld\n", current, have);
            return 1;
        }
    }
    char patch[64];
    snprintf(patch, sizeof(patch), "{\"spec\":{\"replicas\":%lld}}", replicas);
    asb_patch_options po = ASB_PATCH_OPTIONS_INIT;
    po.subresource = "scale";
    if (asb_object_patch_typed(NULL, cl, t->kind->plural, cli_namespace(), t->name, patch, &po) !=
        ASB_OK)
        return cli_print_error(NULL);
    char ref[600];
    cli_ref(ref, sizeof(ref), t->kind, t->name);
    printf("%s%s\n", ref, name_only ? "" : " scaled");
    return 0;
}

int asb_scale(int argc, char **argv)
{
    enum { OPT_REPLICAS = 0x2001, OPT_CURRENT, OPT_ALL };
    static const struct option opts[] = {{"replicas", required_argument, NULL, OPT_REPLICAS},
                                         {"current-replicas", required_argument, NULL, OPT_CURRENT},
                                         {"all", no_argument, NULL, OPT_ALL},
                                         {"selector", required_argument, NULL, 'l'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    const char *replicas_arg = NULL, *current_arg = NULL, *selector = NULL;
    bool all = false, name_only = false;
    int c;
    while ((c = getopt_long(argc, argv, "l:o:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case OPT_REPLICAS:
            replicas_arg = optarg;
            break;
        case OPT_CURRENT:
            current_arg = optarg;
            break;
        case OPT_ALL:
            all = true;
            break;
        case 'l':
            selector = optarg;
            break;
        case 'o':
            if (!cli_output_name_arg(optarg))
                return 1;
            name_only = true;
            break;
        default:
            return cli_usage_option(c, argv, scale_usage);
        }
    }
    if (!replicas_arg) {
        fprintf(stderr, "error: required flag(s) \"replicas\" not set\n");
        return 1;
    }
    long long replicas = parse_count(replicas_arg), current = -1;
    if (replicas < 0) {
        fprintf(stderr, "error: The --replicas=COUNT flag is required, and COUNT must be greater "
                        "than or equal to 0\n");
        return 1;
    }
    if (current_arg && (current = parse_count(current_arg)) < 0) {
        fprintf(stderr, "error: invalid argument \"%s\" for \"--current-replicas\" flag\n",
                current_arg);
        return 1;
    }
    cli_targets t;
    if (cli_targets_parse(&t, argv + optind, (size_t)(argc - optind), all, selector))
        return 1;
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret == 0)
        ret = cli_targets_list(&t, cl, selector);
    for (size_t i = 0; ret == 0 && i < t.n; i++)
        if (scale_one(cl, &t.v[i], replicas, current, name_only))
            t.failed = true;
    ret |= t.failed;
    asb_client_free(cl);
    cli_targets_done(&t);
    return ret;
}
