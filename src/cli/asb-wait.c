/* `asb wait --for=condition=Ready[=VALUE] KIND/NAME [--timeout 30s]`, `--for=jsonpath='{.a.b}'=V`
 * and `--for=delete`: block on a watch until the condition holds (no polling interval), as
 * kubectl wait. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void wait_usage(FILE *f)
{
    fprintf(f, "Usage: asb wait --for=condition=COND[=VALUE]|--for=jsonpath='{PATH}'[=VALUE]|\n"
               "                --for=delete KIND/NAME|KIND NAME [--timeout DURATION]\n\n"
               "Options:\n"
               "  --for=condition=COND[=VALUE]  until status.conditions has COND with status\n"
               "                                VALUE (default true, any case)\n"
               "  --for=jsonpath='{PATH}'[=VALUE]\n"
               "                                until the field at PATH (.status.readyReplicas,\n"
               "                                .items[0].x) exists, or equals VALUE\n"
               "  --for=delete                  until the object is gone\n"
               "  --timeout DURATION            give up after this long (default 30s; 0: check\n"
               "                                once; negative: a week)\n"
               "  -h, --help                    show this help\n" CLI_GLOBAL_HELP);
}

int asb_wait(int argc, char **argv)
{
    static const struct option opts[] = {{"for", required_argument, NULL, 'F'},
                                         {"timeout", required_argument, NULL, 'T'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    const char *for_arg = NULL, *timeout_arg = "30s";
    int c;
    while ((c = getopt_long(argc, argv, "h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'F':
            for_arg = optarg;
            break;
        case 'T':
            timeout_arg = optarg;
            break;
        default:
            return cli_usage_option(c, argv, wait_usage);
        }
    }
    if (!for_arg) {
        fprintf(stderr, "error: --for must be specified\n");
        return 2;
    }
    _cleanup_free_ char *cond = NULL;
    const char *value = "true";
    bool del = strcmp(for_arg, "delete") == 0;
    bool jsonpath = strncmp(for_arg, "jsonpath=", 9) == 0;
    if (jsonpath) {
        /* PATH[=VALUE]: the path ends at its closing brace when braced, else at the first '=' */
        cond = strdup(for_arg + 9);
        if (!cond)
            return 1;
        char *end = cond[0] == '{' ? strchr(cond, '}') : NULL;
        char *eq = strchr(end ? end : cond, '=');
        value = NULL;
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        }
        if (!*cond || (cond[0] == '{' && !end) || (value && !*value)) {
            fprintf(stderr, "error: unrecognized JSONPath: \"%s\"\n", for_arg);
            return 2;
        }
    } else if (!del) {
        if (strncmp(for_arg, "condition=", 10) != 0 || !for_arg[10]) {
            fprintf(stderr, "error: unrecognized condition: \"%s\"\n", for_arg);
            return 2;
        }
        cond = strdup(for_arg + 10);
        if (!cond)
            return 1;
        char *eq = strchr(cond, '=');
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        }
        if (!*cond || !*value) {
            fprintf(stderr, "error: unrecognized condition: \"%s\"\n", for_arg);
            return 2;
        }
    }
    long long timeout_ms;
    if (timeout_arg[0] == '-')
        timeout_ms = 7LL * 24 * 3600 * 1000;
    else if ((timeout_ms = cli_parse_timeout(timeout_arg)) < 0) {
        fprintf(stderr, "error: invalid --timeout \"%s\"\n", timeout_arg);
        return 2;
    }
    if (timeout_ms == 0)
        timeout_ms = 1; /* 0: check once */
    /* KIND/NAME or KIND NAME */
    _cleanup_free_ char *kind_arg = NULL;
    const char *name = NULL;
    if (optind < argc && strchr(argv[optind], '/') && optind + 1 == argc) {
        kind_arg = strdup(argv[optind]);
        if (!kind_arg)
            return 1;
        char *s = strchr(kind_arg, '/');
        *s = '\0';
        name = s + 1;
    } else if (optind + 2 == argc) {
        kind_arg = strdup(argv[optind]);
        name = argv[optind + 1];
        if (!kind_arg)
            return 1;
    } else {
        fprintf(stderr, "error: expected one resource as KIND/NAME or KIND NAME\n");
        return main_usage_error(wait_usage);
    }
    const asb_kind *k = cli_kind(kind_arg);
    if (!k)
        return 2;
    if (!*name) {
        fprintf(stderr, "error: resource name may not be empty\n");
        return 2;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    asb_wait_options wo = ASB_WAIT_OPTIONS_INIT;
    wo.timeout_ms = (long)timeout_ms;
    int r = del        ? asb_object_wait_deleted(cl, k->plural, cli_namespace(), name, &wo)
            : jsonpath ? asb_object_wait_jsonpath(NULL, cl, k->plural, cli_namespace(), name, cond,
                                                  value, &wo)
                       : asb_object_wait_condition(NULL, cl, k->plural, cli_namespace(), name, cond,
                                                   value, &wo);
    char ref[600];
    if (r == ASB_OK) {
        printf("%s condition met\n", cli_ref(ref, sizeof(ref), k, name));
    } else if (r == ASB_ETIMEOUT) {
        /* libasb's words: they add the condition as last seen */
        const asb_error *e = asb_error_last();
        if (e && *e->message)
            fprintf(stderr, "error: %s\n", e->message);
        else
            fprintf(stderr, "error: timed out waiting for the condition on %s/%s\n", k->plural,
                    name);
        ret = 1;
    } else {
        ret = cli_print_error(NULL);
    }
    asb_client_free(cl);
    return ret;
}
