/* `asb label` and `asb annotate`: KEY=VALUE sets, KEY- removes, on objects named as kubectl names
 * them (KIND NAME..., KIND/NAME..., KIND --all, KIND -l SEL), with kubectl's --overwrite rule and
 * words (`sandbox.agents.x-k8s.io/NAME labeled|unlabeled|not labeled`, `... annotated`). Each
 * object gets one merge patch of metadata.labels or metadata.annotations, with its
 * resourceVersion as a precondition when --resource-version is given. */
#include <ctype.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-targets.h"
#include "cli/asb.h"

/* What differs between the two verbs. */
typedef struct map_verb {
    const char *verb;  /* "label" */
    const char *field; /* "labels" */
    bool labels;
} map_verb;

static const map_verb label_verb = {"label", "labels", true};
static const map_verb annotate_verb = {"annotate", "annotations", false};

static const map_verb *current;

static void map_usage(FILE *f)
{
    const char *v = current->verb;
    fprintf(
        f,
        "Usage: asb %s KIND NAME...|KIND/NAME...|KIND --all|KIND -l SEL KEY=VALUE... KEY-...\n\n"
        "Sets (KEY=VALUE) or removes (KEY-) %s of objects.\n\n"
        "Options:\n"
        "      --overwrite           change a key that already has a value (otherwise an\n"
        "                            error, as kubectl)\n"
        "      --all                 every object of KIND in the namespace\n"
        "  -l, --selector SEL        the objects of KIND with these labels\n"
        "      --resource-version RV only if the object is still at this resourceVersion\n"
        "                            (one object)\n"
        "  -o, --output name         print KIND.GROUP/NAME only\n"
        "  -h, --help                show this help\n" CLI_GLOBAL_HELP,
        v, current->field);
}

/* The updates: sets (key, value) and removals (key, NULL), in the order given. */
typedef struct update {
    char *key;
    const char *value;
} update;

static void updates_free(update *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(u[i].key);
    free(u);
}

/* A label value as kubectl checks it before sending: at most 63 characters, empty or alphanumeric
 * at both ends with '-', '_' and '.' between. */
static bool label_value_valid(const char *v)
{
    size_t n = strlen(v);
    if (n == 0)
        return true;
    if (n > 63 || !isalnum((unsigned char)v[0]) || !isalnum((unsigned char)v[n - 1]))
        return false;
    return strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n;
}

/* Splits the operands into object operands (kept in args, *ret_nargs) and updates. Prints
 * kubectl's message and returns 1 on a bad one. */
static int parse_updates(char **args, size_t n, size_t *ret_nargs, update **ret, size_t *ret_n)
{
    update *u = calloc(n + 1, sizeof(*u));
    size_t nu = 0, na = 0;
    if (!u)
        return 1;
    for (size_t i = 0; i < n; i++) {
        const char *a = args[i], *eq = strchr(a, '=');
        size_t len = strlen(a);
        if (!eq && (len < 2 || a[len - 1] != '-')) {
            args[na++] = args[i];
            continue;
        }
        if (eq == a || (eq && current->labels && strchr(eq + 1, '='))) {
            fprintf(stderr, "error: invalid %s spec: %s\n",
                    current->labels ? "label" : "annotation", a);
            updates_free(u, nu);
            return 1;
        }
        if (eq && current->labels && !label_value_valid(eq + 1)) {
            fprintf(stderr, "error: invalid label value: \"%s\": %s\n", a,
                    strlen(eq + 1) > 63 ? "must be no more than 63 characters"
                                        : "a valid label must be an empty string or consist of "
                                          "alphanumeric characters, '-', '_' or '.', and must "
                                          "start and end with an alphanumeric character (e.g. "
                                          "'MyValue',  or 'my_value',  or '12345', regex used "
                                          "for validation is "
                                          "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
            updates_free(u, nu);
            return 1;
        }
        u[nu].key = eq ? strndup(a, (size_t)(eq - a)) : strndup(a, len - 1);
        u[nu].value = eq ? eq + 1 : NULL;
        if (!u[nu++].key) {
            updates_free(u, nu);
            return 1;
        }
    }
    for (size_t i = 0; i < nu; i++)
        for (size_t j = 0; j < nu; j++)
            if (strcmp(u[i].key, u[j].key) == 0 && u[i].value && !u[j].value) {
                if (current->labels)
                    fprintf(stderr, "error: can not both modify and remove a label in the same "
                                    "command\n");
                else
                    fprintf(stderr,
                            "error: can not both modify and remove the following "
                            "annotation(s) in the same command: %s\n",
                            u[i].key);
                updates_free(u, nu);
                return 1;
            }
    if (nu == 0) {
        fprintf(stderr, "error: at least one %s update is required\n",
                current->labels ? "label" : "annotation");
        updates_free(u, nu);
        return 1;
    }
    *ret_nargs = na;
    *ret = u;
    *ret_n = nu;
    return 0;
}

typedef struct map_opts {
    bool overwrite, name_only;
    const char *resource_version;
} map_opts;

/* Without --overwrite, a key that already has a value is an error (whatever the value), as
 * kubectl's validateNoOverwrites. Returns 1 after printing it. */
static int check_overwrites(const json_t *cur, const update *u, size_t n)
{
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const char *v = u[i].value ? json_string_value(json_object_get(cur, u[i].key)) : NULL;
        if (!v)
            continue;
        if (current->labels) {
            fprintf(stderr, "error: '%s' already has a value (%s), and --overwrite is false\n",
                    u[i].key, v);
            return 1;
        }
        fprintf(stderr, "%s'%s' already has a value (%s)",
                first ? "error: --overwrite is false but found the following declared "
                        "annotation(s): "
                      : "; ",
                u[i].key, v);
        first = false;
    }
    if (!first)
        fputc('\n', stderr);
    return first ? 0 : 1;
}

/* kubectl's wording: "not labeled" when nothing changes; "unlabeled" when the object got shorter
 * without --overwrite; "labeled" otherwise. Annotations are always "annotated". */
static const char *outcome(const json_t *before, const json_t *after, bool overwrite)
{
    if (!current->labels)
        return "annotated";
    if (json_equal((json_t *)before, (json_t *)after))
        return "not labeled";
    _cleanup_free_ char *b = json_dumps(before, JSON_COMPACT | JSON_SORT_KEYS);
    _cleanup_free_ char *a = json_dumps(after, JSON_COMPACT | JSON_SORT_KEYS);
    if (!overwrite && a && b && strlen(a) < strlen(b))
        return "unlabeled";
    return "labeled";
}

/* The merge patch of the updates to the map cur (text, owned; NULL on ENOMEM) and what kubectl
 * would say of the change (*ret_said). */
static char *build_patch(const json_t *cur, const update *u, size_t n, const map_opts *o,
                         const char **ret_said)
{
    json_t *next = json_is_object(cur) ? json_copy((json_t *)cur) : json_object();
    json_t *patch_map = json_object();
    json_t *patch = json_pack("{s:{s:o}}", "metadata", current->field, patch_map);
    char *text = NULL;
    if (next && patch) {
        for (size_t i = 0; i < n; i++) {
            if (u[i].value) {
                json_object_set_new(next, u[i].key, json_string(u[i].value));
                json_object_set_new(patch_map, u[i].key, json_string(u[i].value));
            } else if (json_object_get(next, u[i].key)) {
                json_object_del(next, u[i].key);
                json_object_set_new(patch_map, u[i].key, json_null());
            } else if (current->labels)
                printf("label \"%s\" not found.\n", u[i].key);
        }
        if (o->resource_version)
            json_object_set_new(json_object_get(patch, "metadata"), "resourceVersion",
                                json_string(o->resource_version));
        json_t *before = json_is_object(cur) ? json_incref((json_t *)cur) : json_object();
        *ret_said = outcome(before, next, o->overwrite);
        json_decref(before);
        text = json_dumps(patch, JSON_COMPACT);
    }
    json_decref(next);
    json_decref(patch);
    return text;
}

static int update_one(asb_client *cl, const cli_target *t, const update *u, size_t n,
                      const map_opts *o)
{
    _cleanup_free_ char *text = NULL, *ps = NULL;
    if (asb_object_get(&text, cl, t->kind->plural, cli_namespace(), t->name) != ASB_OK)
        return cli_print_error(NULL);
    json_t *obj = json_loads(text, 0, NULL);
    const json_t *cur = json_object_get(json_object_get(obj, "metadata"), current->field);
    const char *said = NULL;
    if (!o->overwrite && check_overwrites(cur, u, n)) {
        json_decref(obj);
        return 1;
    }
    ps = build_patch(cur, u, n, o, &said);
    json_decref(obj);
    if (!ps)
        return 1;
    if (asb_object_patch(NULL, cl, t->kind->plural, cli_namespace(), t->name, ps, 0) != ASB_OK)
        return cli_print_error(NULL);
    char ref[600];
    cli_ref(ref, sizeof(ref), t->kind, t->name);
    if (o->name_only)
        printf("%s\n", ref);
    else
        printf("%s %s\n", ref, said);
    return 0;
}

static int map_main(const map_verb *mv, int argc, char **argv)
{
    enum { OPT_OVERWRITE = 0x2001, OPT_ALL, OPT_RV };
    static const struct option opts[] = {{"overwrite", no_argument, NULL, OPT_OVERWRITE},
                                         {"all", no_argument, NULL, OPT_ALL},
                                         {"selector", required_argument, NULL, 'l'},
                                         {"resource-version", required_argument, NULL, OPT_RV},
                                         {"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    current = mv;
    map_opts o = {0};
    bool all = false;
    const char *selector = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "l:o:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case OPT_OVERWRITE:
            o.overwrite = true;
            break;
        case OPT_ALL:
            all = true;
            break;
        case 'l':
            selector = optarg;
            break;
        case OPT_RV:
            o.resource_version = optarg;
            break;
        case 'o':
            if (!cli_output_name_arg(optarg))
                return 1;
            o.name_only = true;
            break;
        default:
            return cli_usage_option(c, argv, map_usage);
        }
    }
    update *u = NULL;
    size_t nu = 0, nargs = 0;
    if (parse_updates(argv + optind, (size_t)(argc - optind), &nargs, &u, &nu))
        return 1;
    cli_targets t;
    int ret = cli_targets_parse(&t, argv + optind, nargs, all, selector);
    if (ret == 0 && o.resource_version && (t.kind || t.n != 1)) {
        fprintf(stderr, "error: --resource-version may only be used with a single resource\n");
        ret = 1;
    }
    asb_client *cl = NULL;
    if (ret == 0)
        ret = cli_client(&cl);
    if (ret == 0)
        ret = cli_targets_list(&t, cl, selector);
    for (size_t i = 0; cl && ret == 0 && i < t.n; i++) /* every object, then the exit code */
        if (update_one(cl, &t.v[i], u, nu, &o))
            t.failed = true;
    ret |= t.failed;
    asb_client_free(cl);
    cli_targets_done(&t);
    updates_free(u, nu);
    return ret;
}

int asb_label(int argc, char **argv)
{
    return map_main(&label_verb, argc, argv);
}

int asb_annotate(int argc, char **argv)
{
    return map_main(&annotate_verb, argc, argv);
}
