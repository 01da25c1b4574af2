/* Object operands in kubectl's forms (asb-targets.h), with kubectl's messages for bad forms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-targets.h"

static int add(cli_targets *t, const asb_kind *k, const char *name, size_t len)
{
    cli_target *v = realloc(t->v, (t->n + 1) * sizeof(*v));
    if (!v)
        return -1;
    t->v = v;
    if (!(v[t->n].name = strndup(name, len)))
        return -1;
    v[t->n++].kind = k;
    return 0;
}

/* `KIND/NAME`: one kind and one name, both present. */
static int add_slashed(cli_targets *t, const char *arg)
{
    const char *s = strchr(arg, '/');
    if (s == arg || !s[1] || strchr(s + 1, '/')) {
        fprintf(stderr, "error: arguments in resource/name form must have a single resource and "
                        "name\n");
        return 1;
    }
    _cleanup_free_ char *kind = strndup(arg, (size_t)(s - arg));
    if (!kind)
        return 1;
    const asb_kind *k = cli_kind(kind);
    if (!k)
        return 1;
    return add(t, k, s + 1, strlen(s + 1)) < 0 ? 1 : 0;
}

int cli_targets_parse(cli_targets *ret, char **args, size_t n, bool all, const char *selector)
{
    *ret = (cli_targets){0};
    if (n == 0) {
        fprintf(stderr, "error: You must provide one or more resources by argument or filename.\n"
                        "Example resource specifications include:\n"
                        "   '<resource> <name>'\n"
                        "   '<resource>/<name>'\n"
                        "   '<resource> --all' or '<resource> -l <selector>'\n");
        return 1;
    }
    if (all && selector) {
        fprintf(stderr, "error: cannot set --all and --selector at the same time\n");
        return 1;
    }
    bool slashed = strchr(args[0], '/') != NULL;
    for (size_t i = 1; i < n; i++)
        if ((strchr(args[i], '/') != NULL) != slashed) {
            fprintf(stderr,
                    "error: there is no need to specify a resource type as a separate argument "
                    "when passing arguments in resource/name form (e.g. 'asb get "
                    "resource/<resource_name>' instead of 'asb get resource "
                    "resource/<resource_name>'\n");
            return 1;
        }
    if ((all || selector) && (slashed || n > 1)) {
        fprintf(stderr, "error: name cannot be provided when a selector is specified\n");
        return 1;
    }
    if (slashed) {
        for (size_t i = 0; i < n; i++)
            if (add_slashed(ret, args[i])) {
                cli_targets_done(ret);
                return 1;
            }
        return 0;
    }
    const asb_kind *k = cli_kind(args[0]);
    if (!k)
        return 1;
    if (all || selector) {
        ret->kind = k;
        return 0;
    }
    if (n == 1) {
        fprintf(stderr, "error: resource(s) were provided, but no name was specified\n");
        return 1;
    }
    for (size_t i = 1; i < n; i++)
        if (add(ret, k, args[i], strlen(args[i])) < 0) {
            cli_targets_done(ret);
            return 1;
        }
    return 0;
}

int cli_targets_list(cli_targets *t, asb_client *cl, const char *selector)
{
    if (!t->kind)
        return 0;
    asb_list_options lo = ASB_LIST_OPTIONS_INIT;
    lo.label_selector = selector;
    _cleanup_free_ char *s = NULL;
    if (asb_object_list(&s, cl, t->kind->plural, cli_namespace(), &lo) != ASB_OK)
        return cli_print_error(NULL);
    json_t *list = json_loads(s, 0, NULL);
    size_t i;
    json_t *o;
    int ret = 0;
    json_array_foreach (json_object_get(list, "items"), i, o) {
        const char *name = cli_meta(o, "name");
        if (name && add(t, t->kind, name, strlen(name)) < 0)
            ret = 1;
    }
    json_decref(list);
    return ret;
}

void cli_targets_done(cli_targets *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].name);
    free(t->v);
    *t = (cli_targets){0};
}
