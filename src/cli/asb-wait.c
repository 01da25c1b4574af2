/* `asb wait --for=condition=Ready[=VALUE] KIND/NAME... [--timeout 30s]`,
 * `--for=jsonpath='{.a.b}'=V` and `--for=delete`, on objects named as kubectl names them (KIND
 * NAME..., KIND/NAME..., KIND --all, KIND -l SEL): block on a watch until the condition holds (no
 * polling interval), one object after the other within one --timeout, as kubectl wait. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "cli/asb-cli.h"
#include "cli/asb-targets.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void wait_usage(FILE *f)
{
    fprintf(f, "Usage: asb wait --for=condition=COND[=VALUE]|--for=jsonpath='{PATH}'[=VALUE]|\n"
               "                --for=delete KIND/NAME...|KIND NAME...|KIND --all|KIND -l SEL\n"
               "                [--timeout DURATION]\n\n"
               "Options:\n"
               "  --for=condition=COND[=VALUE]  until status.conditions has COND with status\n"
               "                                VALUE (default true, any case)\n"
               "  --for=jsonpath='{PATH}'[=VALUE]\n"
               "                                until the field at PATH (.status.readyReplicas,\n"
               "                                .items[0].x) exists, or equals VALUE\n"
               "  --for=delete                  until the object is gone\n"
               "  --all                         every object of KIND in the namespace\n"
               "  -l, --selector SEL            the objects of KIND with these labels\n"
               "  --timeout DURATION            give up after this long (default 30s; 0: check\n"
               "                                once; negative: a week)\n"
               "  -h, --help                    show this help\n" CLI_GLOBAL_HELP);
}

/* Waits for one object; 0, or 1 after printing why not. */
static int wait_one(asb_client *cl, const cli_target *t, bool del, bool jsonpath, const char *cond,
                    const char *value, long long timeout_ms)
{
    const asb_kind *k = t->kind;
    const char *name = t->name;
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
        fflush(stdout);
        return 0;
    }
    if (r == ASB_ETIMEOUT) {
        /* libasb's words: they add the condition as last seen */
        const asb_error *e = asb_error_last();
        if (e && *e->message)
            fprintf(stderr, "error: %s\n", e->message);
        else
            fprintf(stderr, "error: timed out waiting for the condition on %s/%s\n", k->plural,
                    name);
        return 1;
    }
    return cli_print_error(NULL);
}

/* What --for asks: delete, condition=NAME[=VALUE] or jsonpath=PATH[=VALUE]. */
typedef struct wait_for {
    bool del, jsonpath;
    char *cond;        /* owned: the condition's name or the JSONPath; NULL for delete */
    const char *value; /* into cond, or "true"; NULL: a JSONPath that only has to exist */
} wait_for;

static void wait_for_done(wait_for *w)
{
    free(w->cond);
}

/* -1 when for_arg is good (w filled), else the exit code after saying why not. */
static int parse_for(const char *for_arg, wait_for *w)
{
    w->del = strcmp(for_arg, "delete") == 0;
    w->jsonpath = strncmp(for_arg, "jsonpath=", 9) == 0;
    if (w->jsonpath) {
        /* PATH[=VALUE]: the path ends at its closing brace when braced, else at the first '=' */
        if (!(w->cond = strdup(for_arg + 9)))
            return 1;
        char *end = w->cond[0] == '{' ? strchr(w->cond, '}') : NULL;
        char *eq = strchr(end ? end : w->cond, '=');
        w->value = NULL;
        if (eq) {
            *eq = '\0';
            w->value = eq + 1;
        }
        if (!*w->cond || (w->cond[0] == '{' && !end) || (w->value && !*w->value)) {
            fprintf(stderr, "error: unrecognized JSONPath: \"%s\"\n", for_arg);
            return 2;
        }
    } else if (!w->del) {
        if (strncmp(for_arg, "condition=", 10) != 0 || !for_arg[10]) {
            fprintf(stderr, "error: unrecognized condition: \"%s\"\n", for_arg);
            return 2;
        }
        if (!(w->cond = strdup(for_arg + 10)))
            return 1;
        char *eq = strchr(w->cond, '=');
        if (eq) {
            *eq = '\0';
            w->value = eq + 1;
        }
        if (!*w->cond || !*w->value) {
            fprintf(stderr, "error: unrecognized condition: \"%s\"\n", for_arg);
            return 2;
        }
    }
    return -1;
}

int asb_wait(int argc, char **argv)
{
    static const struct option opts[] = {{"for", required_argument, NULL, 'F'},
                                         {"all", no_argument, NULL, 'a'},
                                         {"selector", required_argument, NULL, 'l'},
                                         {"timeout", required_argument, NULL, 'T'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    const char *for_arg = NULL, *timeout_arg = "30s", *selector = NULL;
    bool all = false;
    int c;
    while ((c = getopt_long(argc, argv, "l:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'F':
            for_arg = optarg;
            break;
        case 'T':
            timeout_arg = optarg;
            break;
        case 'a':
            all = true;
            break;
        case 'l':
            selector = optarg;
            break;
        default:
            return cli_usage_option(c, argv, wait_usage);
        }
    }
    if (!for_arg) {
        fprintf(stderr, "error: --for must be specified\n");
        return 2;
    }
    _cleanup_(wait_for_done) wait_for wf = {.value = "true"};
    int bad = parse_for(for_arg, &wf);
    if (bad >= 0)
        return bad;
    long long timeout_ms;
    if (timeout_arg[0] == '-')
        timeout_ms = 7LL * 24 * 3600 * 1000;
    else if ((timeout_ms = cli_parse_timeout(timeout_arg)) < 0) {
        fprintf(stderr, "error: invalid --timeout \"%s\"\n", timeout_arg);
        return 2;
    }
    if (timeout_ms == 0)
        timeout_ms = 1; /* 0: check once */
    cli_targets t;
    if (cli_targets_parse(&t, argv + optind, (size_t)(argc - optind), all, selector))
        return 2; /* a usage error, as wait's others */
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret == 0)
        ret = cli_targets_list(&t, cl, selector);
    if (ret == 0 && t.n == 0 && !wf.del) {
        fprintf(stderr, "error: no matching resources found\n");
        ret = 1;
    }
    long long deadline = now_msec(CLOCK_MONOTONIC) + timeout_ms;
    for (size_t i = 0; ret == 0 && i < t.n; i++) {
        long long left = deadline - now_msec(CLOCK_MONOTONIC);
        if (wait_one(cl, &t.v[i], wf.del, wf.jsonpath, wf.cond, wf.value, left > 0 ? left : 1))
            t.failed = true;
    }
    ret |= t.failed;
    asb_client_free(cl);
    cli_targets_done(&t);
    return ret;
}
